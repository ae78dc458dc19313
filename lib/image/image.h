// Decoded images and the decoding contract shared by the JPEG and PNG decoders, the
// orientation and colour steps and the resampler (lib/image/).
//
// Input is hostile: every decoder enforces DecodeLimits before allocating pixel memory,
// treats truncated or corrupt data as an error (never a half-grey image), and never
// lets a longjmp cross a C++ frame. Errors are Status values: Corruption for data that
// is not a valid image, ResourceExhausted for a limit hit, NotSupported for a valid
// image this build cannot handle; messages say what and where (byte offset, scan,
// chunk) but not the file name, which the caller adds.
//
// Thread-safety: every function is reentrant; no global state.
#ifndef SHARDPACK_IMAGE_IMAGE_H_
#define SHARDPACK_IMAGE_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "shardpack/limits.h"
#include "shardpack/status.h"

namespace shardpack::image {

// ITU-R BT.601 luma with libjpeg's 16-bit fixed-point weights (jdcolor.c
// rgb_gray_convert): every RGB -> gray conversion in shardpack (decoders, TFRecord inputs,
// padding colours, the preview's text) computes this one, so that they agree bit for bit.
constexpr uint8_t Luma601(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
}

// HWC uint8 pixels, row-major, no padding: pixels.size() == height * width * channels.
// channels is 1 (gray) or 3 (RGB).
struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;
  uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * channels; }
  const uint8_t* row(int y) const {
    return pixels.data() + static_cast<size_t>(y) * width * channels;
  }
};

// Defaults from ../shared/reference/reliability.md section 3.
struct DecodeLimits {
  uint64_t max_pixels = kMaxImagePixels;    // width * height (Pillow's MAX_IMAGE_PIXELS)
  int max_dimension = kMaxImageSide;        // either side (libjpeg's JPEG_MAX_DIMENSION)
  int max_scans = 500;                      // progressive JPEG scans (TJFLAG_LIMITSCANS)
  uint64_t max_memory_bytes = 1ull << 30;   // libjpeg max_memory_to_use, per decode
  uint64_t png_chunk_malloc_max = 8000000;  // libpng default
  uint32_t png_chunk_cache_max = 1000;      // libpng default
};

struct DecodeOptions {
  DecodeLimits limits;
  // Output channels: 3 (RGB) or 1 (gray, ITU-R BT.601 luma as libjpeg computes it).
  int channels = 3;
  // Apply the EXIF orientation tag (JPEG APP1 Exif, PNG eXIf): the returned image is
  // upright. Off: pixels as stored.
  bool apply_orientation = true;
  // Alpha (PNG, tRNS) is composited over this colour (RGB; gray uses its luma).
  uint8_t background[3] = {255, 255, 255};
  // JPEG DCT scaling: the decoder may return the image downscaled by 1/2, 1/4 or 1/8
  // (the largest reduction) as long as the result, after orientation, is still at least
  // min_height x min_width. 0 x 0: full size. The resampler finishes the job.
  int min_height = 0;
  int min_width = 0;
};

// Columns [x0, x1) and rows [y0, y1) of an image.
struct Region {
  int x0 = 0;
  int y0 = 0;
  int x1 = 0;
  int y1 = 0;
};

// Part of a decoded image: rows [top, top + height) and columns [left, left + width) of a
// full_height x full_width image, each pixel exactly as the decode of the whole image has
// it. They sit in `image` from row y0, column x0 on. A decoder keeps what it decoded around
// the window rather than copy the window out (a cropped JPEG decode is whole iMCUs wide; an
// image decoded whole is cut without a copy): image's other pixels need not match the whole
// decode.
struct ImageWindow {
  Image image;
  int x0 = 0;
  int y0 = 0;
  int height = 0;
  int width = 0;
  int left = 0;
  int top = 0;
  int full_height = 0;
  int full_width = 0;
  // Row y of the window (0 <= y < height): `width` pixels, image.width pixels apart.
  const uint8_t* row(int y) const {
    return image.row(y0 + y) + static_cast<size_t>(x0) * image.channels;
  }
};

// Given the size of the decoded image (upright, after DCT scaling), the region of it
// that a caller will read.
using NeededRegion = std::function<Region(int height, int width)>;

enum class Format { kUnknown, kJpeg, kPng };

// Decides the format from the first bytes, never from a file name.
Format Sniff(const uint8_t* data, size_t size);

// OK when `data` is a file of the format its record declares (`declared_jpeg`: a JPEG,
// else a PNG); Corruption otherwise, naming both ("the record says JPEG, but the file is a
// PNG"): a decode, which goes by Sniff(), would read it all the same, so the lie is caught
// here, before any consumer trusts the record's word (a GPU JPEG decoder, a tool that
// counts formats).
Status CheckDeclaredFormat(const uint8_t* data, size_t size, bool declared_jpeg);

// Decodes by Sniff(); NotSupported ("not a JPEG or PNG file") for anything else.
StatusOr<Image> Decode(const uint8_t* data, size_t size, const DecodeOptions& options);

// Decodes a JPEG or PNG that must be exactly height x width as stored (no orientation,
// no scaling) into `dst`, height * width * channels bytes of HWC pixels. The declared size
// bounds the work: an image of another size fails right after its header, before any pixel
// is decoded (Corruption "JPEG: AxB in its header, the record says HxW", or "PNG: ...").
// Other errors as Decode.
Status DecodeExact(const uint8_t* data, size_t size, int height, int width, int channels,
                   uint8_t* dst);

// A side of `side` pixels decoded at 1/denominator by DCT scaling: ceil(side / denominator),
// libjpeg's rounding.
inline int ScaledSide(int side, int denominator) { return (side + denominator - 1) / denominator; }

// As DecodeExact, at 1/scale_denom of the stored size (1, 2, 4 or 8), into
// ScaledSide(height, scale_denom) x ScaledSide(width, scale_denom) x channels bytes: a JPEG
// through libjpeg's DCT scaling (the same entropy decoding, a smaller inverse DCT, less
// colour conversion and upsampling). A PNG has no scaled decode: InvalidArgument unless
// scale_denom is 1.
Status DecodeExactScaled(const uint8_t* data, size_t size, int height, int width, int channels,
                         int scale_denom, uint8_t* dst);

// `r` clamped to a height x width image; the whole image when the result is empty.
Region ClampRegion(Region r, int height, int width);

// The window of a whole image that `needed` names (clamped; the whole image when
// `needed` is empty), in the image itself: nothing is copied.
ImageWindow CutWindow(Image image, const NeededRegion& needed);

// As Decode, for a caller that reads only part of the image: `needed` (called once the
// size is known) names that part, and *window holds exactly it, clamped to the image
// (the whole image when `needed` is empty, or names an empty region). A sequential JPEG
// stored upright (EXIF orientation 1, or orientation not applied) is then decoded only in the
// iMCU columns and the rows the region covers (libjpeg-turbo's jpeg_crop_scanline and
// jpeg_skip_scanlines; a margin of one pixel is decoded and dropped where the cropped
// decode's edge pixels would differ from the whole decode's). Skipped rows are still
// entropy-decoded, so truncated or corrupt data fails the decode as it would the whole
// decode. Other JPEGs (rotated, progressive) and PNGs are decoded whole, then cut. Errors as
// Decode. The window's pixels' memory is reused: a caller decoding image after image keeps
// one window, so that the pixels are not allocated and zero-filled anew for each (the
// zero-fill alone was 1% of a conversion).
Status DecodeWindow(const uint8_t* data, size_t size, const DecodeOptions& options,
                    const NeededRegion& needed, ImageWindow* window);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_IMAGE_H_
