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
#include <vector>

#include "shardpack/status.h"

namespace shardpack::image {

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
  uint64_t max_pixels = 89478485;      // width * height (Pillow's MAX_IMAGE_PIXELS)
  int max_dimension = 65500;           // either side (libjpeg's JPEG_MAX_DIMENSION)
  int max_scans = 500;                 // progressive JPEG scans (TJFLAG_LIMITSCANS)
  uint64_t max_memory_bytes = 1ull << 30;  // libjpeg max_memory_to_use, per decode
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

enum class Format { kUnknown, kJpeg, kPng };

// Decides the format from the first bytes, never from a file name.
Format Sniff(const uint8_t* data, size_t size);

// Decodes by Sniff(); NotSupported ("not a JPEG or PNG file") for anything else.
StatusOr<Image> Decode(const uint8_t* data, size_t size, const DecodeOptions& options);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_IMAGE_H_
