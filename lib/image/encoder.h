// Encoding images to JPEG and PNG: the samples use it to make input folders, the tests to
// make fixtures. libjpeg and libpng errors are caught (setjmp confined to small functions
// with trivially destructible locals) and returned as Status.
#ifndef SHARDPACK_IMAGE_ENCODER_H_
#define SHARDPACK_IMAGE_ENCODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shardpack/status.h"

namespace shardpack::image {

struct JpegEncodeOptions {
  int quality = 95;
  bool progressive = false;
  // Chroma subsampling of colour images: 444, 422 or 420.
  int subsampling = 420;
};

// HWC pixels, 1 (gray) or 3 (RGB) channels.
StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int height, int width, int channels,
                                 const JpegEncodeOptions& options = {});

// libpng's (and zlib's) default compression level.
inline constexpr int kPngDefaultCompression = 6;

struct PngEncodeOptions {
  // zlib's level for the image data, 0 (stored) .. 9 (smallest). Filters stay libpng's
  // choice (adaptive per row for 8-bit images), so the default writes libpng's default
  // bytes.
  int compression_level = kPngDefaultCompression;
};

// HWC 8-bit pixels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA. InvalidArgument for a
// compression level outside 0..9.
StatusOr<std::string> EncodePng(const uint8_t* pixels, int height, int width, int channels,
                                const PngEncodeOptions& options = {});

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_ENCODER_H_
