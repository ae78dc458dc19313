// Reads every sample of a dataset through the Dataset API (zero-copy views into the
// mapped shards), in a seeded random order, checking each record's checksums, and prints
// per-class statistics and the read rate.
//
//   read_dataset out/synth
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "shardpack/dataset.h"

int main(int argc, char** argv) {
  CLI::App app{"Read every sample of a shardpack dataset"};
  std::string dir;
  uint64_t seed = 0;
  app.add_option("DST", dir, "Dataset directory")->required();
  app.add_option("--seed", seed, "Seed of the random read order");
  CLI11_PARSE(app, argc, argv);

  auto ds = shardpack::Dataset::Open(dir);
  if (!ds.ok()) {
    std::fprintf(stderr, "read_dataset: %s\n", ds.status().message().c_str());
    return 2;
  }
  const auto& manifest = (*ds)->manifest();
  std::vector<uint64_t> order((*ds)->size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  std::vector<double> sum(manifest.classes.size(), 0);
  std::vector<uint64_t> count(manifest.classes.size(), 0);
  uint64_t bytes = 0;
  std::vector<uint8_t> pixels;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t i : order) {
    shardpack::SampleView s;
    shardpack::Status st = (*ds)->Get(i, &s);
    if (st.ok() && s.encoding != shardpack::ImageEncoding::kRaw) {
      // An encoded image (convert --encoding jpeg|png): decoded into a buffer of ours.
      pixels.resize(static_cast<size_t>(s.height) * s.width * s.channels);
      st = (*ds)->GetPixels(i, pixels, &s);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "read_dataset: %s\n", st.message().c_str());
      return 1;
    }
    // The label indexes the per-class tables: Get refuses a record whose label the
    // manifest does not list (a damaged or hostile record: its checksums are the writer's,
    // not a proof), so every label it returns is a class index.
    uint64_t total = 0;
    for (uint8_t p : s.pixels) total += p;
    sum[static_cast<size_t>(s.label)] += static_cast<double>(total) / s.pixels.size();
    ++count[static_cast<size_t>(s.label)];
    bytes += s.pixels.size();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("read %zu samples (%.1f MB of pixels) in random order in %.3f s: %.0f samples/s\n",
              order.size(), bytes / 1e6, secs, secs > 0 ? order.size() / secs : 0.0);
  for (size_t c = 0; c < sum.size() && c < 10; ++c) {
    std::printf("  class %zu %-20s %6llu samples, mean pixel %.1f\n", c,
                manifest.classes[c].name.c_str(), static_cast<unsigned long long>(count[c]),
                count[c] ? sum[c] / count[c] : 0.0);
  }
  return 0;
}
