#include "image/image.h"

#include <cstdio>
#include <cstring>
#include <string>

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

}  // namespace shardpack::image
