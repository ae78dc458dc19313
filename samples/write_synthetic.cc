// Writes a synthetic dataset with the ShardWriter API: every class has its own colour
// gradient, every sample its own noise, so that the pixels are realistic in size and
// distinct per sample. Used by the quick start and by bench/verify_bench.
//
//   write_synthetic out/synth --samples 1000 --size 64x64 --classes 10 --backend tfrecord
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <vector>

#include "shardpack/shard_writer.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a synthetic shardpack dataset through the ShardWriter API"};
  std::string dst, size = "64x64", backend = "tfrecord";
  uint64_t samples = 1000, shard_bytes = 64ull << 20, seed = 1;
  int classes = 10, channels = 3;
  app.add_option("DST", dst, "Output directory")->required();
  app.add_option("--samples", samples, "Number of samples");
  app.add_option("--size", size, "HEIGHTxWIDTH of every sample");
  app.add_option("--classes", classes, "Number of classes")->check(CLI::PositiveNumber);
  app.add_option("--channels", channels, "1 or 3")->check(CLI::IsMember({1, 3}));
  app.add_option("--backend", backend, "tfrecord or lmdb")
      ->check(CLI::IsMember({"tfrecord", "lmdb"}));
  app.add_option("--shard-size", shard_bytes, "Shard size limit in bytes");
  app.add_option("--seed", seed, "Seed of the noise");
  CLI11_PARSE(app, argc, argv);

  int h = 0, w = 0;
  if (std::sscanf(size.c_str(), "%dx%d", &h, &w) != 2 || h < 1 || w < 1) {
    std::fprintf(stderr, "write_synthetic: --size %s: expected HEIGHTxWIDTH\n", size.c_str());
    return 2;
  }
  shardpack::ShardWriterOptions o;
  o.backend = backend == "lmdb" ? shardpack::Backend::kLmdb : shardpack::Backend::kTfrecord;
  o.max_shard_bytes = shard_bytes;
  o.image = {.channels = channels, .height = h, .width = w};
  o.seed = seed;
  o.options_json = R"({"generator":"samples/write_synthetic"})";
  for (int c = 0; c < classes; ++c) o.class_names.push_back("synthetic-" + std::to_string(c));
  auto writer = shardpack::ShardWriter::Create(dst, o);
  if (!writer.ok()) {
    std::fprintf(stderr, "write_synthetic: %s\n", writer.status().message().c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * channels);
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + 1;
  for (uint64_t i = 0; i < samples; ++i) {
    const int label = static_cast<int>(i % classes);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int c = 0; c < channels; ++c) {
          state ^= state << 13;
          state ^= state >> 7;
          state ^= state << 17;
          int base = (x * 255 / w) * ((label + c) % 3) / 2 + (y * 255 / h) * ((label + c + 1) % 2);
          px[(static_cast<size_t>(y) * w + x) * channels + c] =
              static_cast<uint8_t>((base + static_cast<int>(state & 31)) & 0xff);
        }
      }
    }
    std::string name = "synthetic/" + std::to_string(label) + "/" + std::to_string(i) + ".png";
    shardpack::Status s = (*writer)->Add({.pixels = px,
                                          .height = h,
                                          .width = w,
                                          .channels = channels,
                                          .label = label,
                                          .filename = name});
    if (!s.ok()) {
      std::fprintf(stderr, "write_synthetic: %s\n", s.message().c_str());
      return 1;
    }
  }
  auto manifest = (*writer)->Finish();
  if (!manifest.ok()) {
    std::fprintf(stderr, "write_synthetic: %s\n", manifest.status().message().c_str());
    return 1;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %llu samples of %dx%dx%d in %zu %s shards to %s (%.2f s)\n",
              static_cast<unsigned long long>(samples), h, w, channels, manifest->shards.size(),
              backend.c_str(), dst.c_str(), secs);
  return 0;
}
