#include "image/image.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "image/jpeg_decoder.h"
#include "image/png_decoder.h"

namespace shardpack::image {
namespace {

bool StartsWith(const uint8_t* d, size_t n, const char* magic, size_t m) {
  return n >= m && std::memcmp(d, magic, m) == 0;
}

// Names formats we do not decode, so that a reject says what the file is.
const char* OtherFormat(const uint8_t* d, size_t n) {
  if (StartsWith(d, n, "GIF87a", 6) || StartsWith(d, n, "GIF89a", 6)) return "a GIF image";
  if (StartsWith(d, n, "BM", 2)) return "a BMP image";
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) {
    return "a WebP image";
  }
  if (StartsWith(d, n, "II*\0", 4) || StartsWith(d, n, "MM\0*", 4)) return "a TIFF image";
  if (n >= 12 && std::memcmp(d + 4, "ftyp", 4) == 0) return "an ISO media file (HEIC/AVIF/MP4)";
  if (StartsWith(d, n, "%PDF", 4)) return "a PDF document";
  if (StartsWith(d, n, "\xff\xd8", 2)) return "a truncated JPEG (no marker after SOI)";
  return nullptr;
}

}  // namespace

Format Sniff(const uint8_t* data, size_t size) {
  if (StartsWith(data, size, "\xff\xd8\xff", 3)) return Format::kJpeg;
  if (StartsWith(data, size, "\x89PNG\r\n\x1a\n", 8)) return Format::kPng;
  return Format::kUnknown;
}

Status CheckDeclaredFormat(const uint8_t* data, size_t size, bool declared_jpeg) {
  const Format is = Sniff(data, size);
  if (is == (declared_jpeg ? Format::kJpeg : Format::kPng)) return Status::Ok();
  return CorruptionError(std::string("the record says ") + (declared_jpeg ? "JPEG" : "PNG") +
                         ", but the file is " +
                         (is == Format::kJpeg  ? "a JPEG"
                          : is == Format::kPng ? "a PNG"
                                               : "neither JPEG nor PNG"));
}

Status DecodeExactScaled(const uint8_t* data, size_t size, int height, int width, int channels,
                         int scale_denom, uint8_t* dst) {
  if (Sniff(data, size) == Format::kJpeg) {
    return DecodeJpegExact(data, size, height, width, channels, scale_denom, dst);
  }
  if (scale_denom != 1) {
    return InvalidArgumentError("a scaled decode (1/" + std::to_string(scale_denom) +
                                ") needs a JPEG");
  }
  return DecodeExact(data, size, height, width, channels, dst);
}

Status DecodeExact(const uint8_t* data, size_t size, int height, int width, int channels,
                   uint8_t* dst) {
  const Format format = Sniff(data, size);
  if (format == Format::kJpeg) return DecodeJpegExact(data, size, height, width, channels, 1, dst);
  // Decode names what anything else is.
  if (format != Format::kPng) return Decode(data, size, DecodeOptions{}).status();
  DecodeOptions o;
  o.channels = channels;
  o.apply_orientation = false;
  o.limits.max_dimension = std::max(height, width);
  o.limits.max_pixels = static_cast<uint64_t>(height) * static_cast<uint64_t>(width);
  return DecodePngExact(data, size, o, height, width, dst);
}

StatusOr<Image> Decode(const uint8_t* data, size_t size, const DecodeOptions& options) {
  switch (Sniff(data, size)) {
    case Format::kJpeg:
      return DecodeJpeg(data, size, options);
    case Format::kPng:
      return DecodePng(data, size, options);
    case Format::kUnknown:
      break;
  }
  if (size == 0) return CorruptionError("empty file (0 bytes)");
  if (const char* what = OtherFormat(data, size)) {
    return NotSupportedError(std::string("not a JPEG or PNG file: ") + what);
  }
  char head[40];
  std::snprintf(head, sizeof head, "%02x %02x %02x %02x", data[0], size > 1 ? data[1] : 0,
                size > 2 ? data[2] : 0, size > 3 ? data[3] : 0);
  return NotSupportedError(std::string("not a JPEG or PNG file (starts with ") + head + ")");
}

Region ClampRegion(Region r, int height, int width) {
  r.x0 = std::clamp(r.x0, 0, width);
  r.x1 = std::clamp(r.x1, 0, width);
  r.y0 = std::clamp(r.y0, 0, height);
  r.y1 = std::clamp(r.y1, 0, height);
  if (r.x0 >= r.x1 || r.y0 >= r.y1) return Region{0, 0, width, height};
  return r;
}

ImageWindow CutWindow(Image image, const NeededRegion& needed) {
  ImageWindow window;
  window.full_height = image.height;
  window.full_width = image.width;
  const Region r = needed
                       ? ClampRegion(needed(image.height, image.width), image.height, image.width)
                       : Region{0, 0, image.width, image.height};
  window.left = window.x0 = r.x0;
  window.top = window.y0 = r.y0;
  window.width = r.x1 - r.x0;
  window.height = r.y1 - r.y0;
  window.image = std::move(image);
  return window;
}

Status DecodeWindow(const uint8_t* data, size_t size, const DecodeOptions& options,
                    const NeededRegion& needed, ImageWindow* window) {
  if (Sniff(data, size) == Format::kJpeg)
    return DecodeJpegWindow(data, size, options, needed, window);
  SHARDPACK_ASSIGN_OR_RETURN(Image image, Decode(data, size, options));
  *window = CutWindow(std::move(image), needed);
  return Status::Ok();
}

}  // namespace shardpack::image
