// Arbitrary bytes as a JPEG file (DecodeJpeg, lib/image/jpeg_decoder.h), with the
// limits libjpeg-turbo's own fuzzers use: at most 1,048,576 pixels and 100 progressive
// scans (../shared/reference/reliability.md §3). Each input is decoded three times: to
// RGB at full size, to gray with the largest DCT scaling, so that both output paths and
// the scaled IDCTs run, and a window of it (DecodeJpegWindow: cropped columns, skipped
// rows), whose pixels must be exactly the full decode's; EXIF orientation is applied each
// time. An image that comes back has the promised layout, and all its bytes are read
// (ASan/MSan see any that were never written). The scaled decode, as stored, must equal
// libjpeg's decode of the whole stream where both succeed (a progressive file at 1/8
// skips the AC scans its pixels do not read).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_check.h"
#include "image/image.h"
#include "image/jpeg_decoder.h"

namespace {

shardpack::image::DecodeOptions FuzzOptions() {
  shardpack::image::DecodeOptions o;
  o.limits.max_pixels = 1u << 20;
  o.limits.max_scans = 100;
  o.limits.max_memory_bytes = 256u << 20;
  return o;
}

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
  shardpack::image::DecodeOptions rgb = FuzzOptions();
  auto full = shardpack::image::DecodeJpeg(data, size, rgb);
  if (!full.ok()) return 0;
  Touch(*full, 3);
  FUZZ_CHECK(static_cast<uint64_t>(full->height) * full->width <= rgb.limits.max_pixels);

  // A window whose corners come from the input's length, so that the corpus covers
  // regions at every offset: it must hold exactly the full decode's pixels.
  const int w = full->width, h = full->height;
  const shardpack::image::Region region = {
      static_cast<int>(size % 7) * w / 9, static_cast<int>(size % 5) * h / 7,
      w - static_cast<int>(size % 3) * w / 11, h - static_cast<int>(size % 4) * h / 13};
  auto window =
      shardpack::image::DecodeJpegWindow(data, size, rgb, [&](int, int) { return region; });
  if (window.ok()) {
    const shardpack::image::Region r = shardpack::image::ClampRegion(region, h, w);
    FUZZ_CHECK(window->left == r.x0 && window->top == r.y0 && window->full_width == w &&
               window->full_height == h);
    FUZZ_CHECK(window->width == r.x1 - r.x0 && window->height == r.y1 - r.y0);
    FUZZ_CHECK(window->x0 >= 0 && window->y0 >= 0 &&
               window->x0 + window->width <= window->image.width &&
               window->y0 + window->height <= window->image.height);
    Touch(window->image, 3);
    for (int y = r.y0; y < r.y1; ++y) {
      FUZZ_CHECK(std::equal(full->row(y) + static_cast<size_t>(r.x0) * 3,
                            full->row(y) + static_cast<size_t>(r.x1) * 3, window->row(y - r.y0)));
    }
  }

  shardpack::image::DecodeOptions gray = FuzzOptions();
  gray.channels = 1;
  gray.min_height = 8;
  gray.min_width = 8;
  auto scaled = shardpack::image::DecodeJpeg(data, size, gray);
  if (!scaled.ok()) return 0;
  Touch(*scaled, 1);
  // DCT scaling only ever shrinks, and never below the minimum the image allows.
  FUZZ_CHECK(scaled->height <= full->height && scaled->width <= full->width);
  FUZZ_CHECK(scaled->height >= std::min(8, full->height) &&
             scaled->width >= std::min(8, full->width));

  // As stored (no orientation), the scaled decode's pixels are libjpeg's decode of the
  // whole stream (DecodeJpegExact), which a progressive file at 1/8 does not read whole:
  // where both succeed, they agree.
  gray.apply_orientation = false;
  int orientation = 1;
  auto stored = shardpack::image::DecodeJpegRaw(data, size, gray, &orientation);
  if (!stored.ok()) return 0;
  rgb.apply_orientation = false;
  auto whole = shardpack::image::DecodeJpegRaw(data, size, rgb, &orientation);
  if (!whole.ok()) return 0;
  const int denom =
      shardpack::image::ChooseJpegScaleDenominator(whole->width, whole->height, false, 8, 8);
  std::vector<uint8_t> exact(stored->pixels.size());
  FUZZ_CHECK(shardpack::image::ScaledSide(whole->height, denom) == stored->height &&
             shardpack::image::ScaledSide(whole->width, denom) == stored->width);
  if (shardpack::image::DecodeJpegExact(data, size, whole->height, whole->width, 1, denom,
                                        exact.data())
          .ok()) {
    FUZZ_CHECK(exact == stored->pixels);
  }
  return 0;
}
