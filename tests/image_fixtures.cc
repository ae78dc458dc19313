#include "image_fixtures.h"

#include <algorithm>
#include <cstdlib>

#include "image/encoder.h"

namespace shardpack::testing {

std::vector<uint8_t> Pattern(int height, int width, int channels, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(height) * width * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        int v = (x * 255 / std::max(1, width - 1)) * (c % 3 == 0) +
                (y * 255 / std::max(1, height - 1)) * (c % 3 == 1) +
                ((x + y) * 128 / std::max(1, width + height)) * (c % 3 == 2) + seed * 37;
        px[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(v & 0xff);
      }
    }
  }
  return px;
}

std::string EncodeJpeg(const std::vector<uint8_t>& pixels, int height, int width, int channels,
                       int quality, bool progressive) {
  auto r = image::EncodeJpeg(pixels.data(), height, width, channels,
                             {.quality = quality, .progressive = progressive});
  if (!r.ok()) std::abort();  // a fixture that cannot be made is a broken test
  return *r;
}

std::string PatternJpeg(int height, int width, int seed) {
  return EncodeJpeg(Pattern(height, width, 3, seed), height, width, 3);
}

std::string EncodePng(const std::vector<uint8_t>& pixels, int height, int width, int channels) {
  auto r = image::EncodePng(pixels.data(), height, width, channels);
  if (!r.ok()) std::abort();
  return *r;
}

}  // namespace shardpack::testing
