// Writes a small image-folder dataset in the Caltech-256 layout (SRC/NNN.class/NNNN.ext)
// for the quick start and for demonstrations: photo-like pictures (gradients, shapes,
// noise) in the formats real folders mix: baseline and progressive JPEG (4:2:0, 4:4:4),
// gray JPEG, RGB and RGBA PNG, of varied sizes, with upper- and lower-case extensions and
// one PNG named .JPEG; plus two broken files (a truncated JPEG, a text file) that a
// conversion must reject and report.
//
//   make_images out/images --classes 5 --per-class 40
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "image/encoder.h"
#include "shardpack/status.h"

namespace {

std::vector<uint8_t> Picture(int h, int w, int channels, int label, std::mt19937& rng) {
  std::vector<uint8_t> px(static_cast<size_t>(h) * w * channels);
  std::uniform_real_distribution<double> u(0, 1);
  const double cx = u(rng) * w, cy = u(rng) * h, r = (0.15 + 0.3 * u(rng)) * std::min(h, w);
  const double hue = (label * 0.61803398875) - std::floor(label * 0.61803398875);
  const double base[3] = {128 + 100 * std::sin(6.283 * hue),
                          128 + 100 * std::sin(6.283 * (hue + 0.33)),
                          128 + 100 * std::sin(6.283 * (hue + 0.66))};
  std::normal_distribution<double> noise(0, 6);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      const bool inside = (x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r;
      const double shade = 0.6 + 0.4 * y / h;
      for (int c = 0; c < channels; ++c) {
        double v = inside ? 255 - base[c % 3] : base[c % 3] * shade + 40.0 * x / w;
        if (channels == 4 && c == 3) v = inside ? 255 : 160;  // alpha
        px[(static_cast<size_t>(y) * w + x) * channels + c] =
            static_cast<uint8_t>(std::clamp(v + noise(rng), 0.0, 255.0));
      }
    }
  }
  return px;
}

bool Write(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return out.good();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Write a small Caltech-style image folder (JPEG and PNG) for demonstrations"};
  std::string dst;
  int classes = 5, per_class = 40;
  uint64_t seed = 1;
  app.add_option("DST", dst, "Output folder")->required();
  app.add_option("--classes", classes, "Number of class folders")->check(CLI::Range(1, 999));
  app.add_option("--per-class", per_class, "Images per class")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "Seed");
  CLI11_PARSE(app, argc, argv);

  namespace fs = std::filesystem;
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int> side(160, 520);
  int written = 0;
  for (int c = 0; c < classes; ++c) {
    char name[32];
    std::snprintf(name, sizeof name, "%03d.class-%d", c + 1, c + 1);
    const fs::path dir = fs::path(dst) / name;
    fs::create_directories(dir);
    for (int i = 0; i < per_class; ++i) {
      const int h = side(rng), w = side(rng), kind = i % 8;
      const int channels = kind == 5 ? 1 : kind == 6 ? 4 : 3;
      std::vector<uint8_t> px = Picture(h, w, channels, c, rng);
      char file[32];
      shardpack::StatusOr<std::string> bytes = std::string();
      if (kind == 4 || kind == 6) {
        bytes = shardpack::image::EncodePng(px.data(), h, w, channels);
        std::snprintf(file, sizeof file, kind == 4 ? "%04d.JPEG" : "%04d.png",
                      i);  // a PNG named .JPEG
      } else {
        shardpack::image::JpegEncodeOptions o;
        o.quality = 85 + i % 10;
        o.progressive = kind == 2;
        o.subsampling = kind == 3 ? 444 : 420;
        bytes = shardpack::image::EncodeJpeg(px.data(), h, w, channels, o);
        std::snprintf(file, sizeof file, kind == 7 ? "%04d.JPG" : "%04d.jpg", i);
      }
      if (!bytes.ok() || !Write(dir / file, *bytes)) {
        std::fprintf(stderr, "make_images: %s: %s\n", (dir / file).c_str(),
                     bytes.ok() ? "write failed" : bytes.status().message().c_str());
        return 1;
      }
      ++written;
      if (c == 0 && i == 0) {  // the broken files every real folder seems to have
        Write(dir / "broken.jpg", bytes->substr(0, bytes->size() / 3));
        Write(dir / "notes.txt", "downloaded 2024-01-01\n");
      }
    }
  }
  std::printf("wrote %d images in %d class folders to %s, plus 2 broken files\n", written, classes,
              dst.c_str());
  return 0;
}
