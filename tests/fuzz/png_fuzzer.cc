// Arbitrary bytes as a PNG file (DecodePng, lib/image/png_decoder.h), with a pixel cap
// of 1,048,576 like libjpeg-turbo's fuzzers (libpng's own harness skips images over
// 1e8 / width rows for the same reason) and libpng's default chunk limits. Each input is
// decoded to RGB and to gray, EXIF orientation applied; an image that comes back has the
// promised layout and all its bytes are read.
#include <cstddef>
#include <cstdint>

#include "fuzz_check.h"
#include "image/image.h"
#include "image/png_decoder.h"

namespace {

void Touch(const shardpack::image::Image& img, int channels) {
  FUZZ_CHECK(img.height >= 1 && img.width >= 1 && img.channels == channels);
  FUZZ_CHECK(img.pixels.size() == static_cast<size_t>(img.height) * img.width * channels);
  unsigned sum = 0;
  for (uint8_t v : img.pixels) sum += v;
  volatile unsigned sink = sum;
  (void)sink;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardpack::image::DecodeOptions o;
  o.limits.max_pixels = 1u << 20;
  o.limits.max_memory_bytes = 64u << 20;
  auto rgb = shardpack::image::DecodePng(data, size, o);
  if (!rgb.ok()) return 0;
  Touch(*rgb, 3);

  o.channels = 1;
  auto gray = shardpack::image::DecodePng(data, size, o);
  // The same file either decodes both ways or neither.
  FUZZ_CHECK(gray.ok());
  Touch(*gray, 1);
  FUZZ_CHECK(gray->height == rgb->height && gray->width == rgb->width);
  return 0;
}
