// Real JPEG and PNG files for tests, encoded here with libjpeg and libpng.
#ifndef SHARDPACK_TESTS_IMAGE_FIXTURES_H_
#define SHARDPACK_TESTS_IMAGE_FIXTURES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace shardpack::testing {

// A smooth, asymmetric RGB (or gray) test pattern; `seed` shifts it.
std::vector<uint8_t> Pattern(int height, int width, int channels, int seed);

// Encodes HWC pixels (1 or 3 channels) as a baseline (or progressive) JPEG.
std::string EncodeJpeg(const std::vector<uint8_t>& pixels, int height, int width, int channels,
                       int quality = 95, bool progressive = false);

// Pattern(height, width, 3, seed) as a quality-95 baseline JPEG.
std::string PatternJpeg(int height, int width, int seed);

// Encodes HWC pixels as an 8-bit PNG: 1 = gray, 2 = gray+alpha, 3 = RGB, 4 = RGBA.
std::string EncodePng(const std::vector<uint8_t>& pixels, int height, int width, int channels);

}  // namespace shardpack::testing

#endif  // SHARDPACK_TESTS_IMAGE_FIXTURES_H_
