#include "image/orientation.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <utility>

namespace shardpack::image {
namespace {

// kC > 0: the channel count is known at compile time (1 and 3, the decoders' outputs), so
// the copies below become plain loads and stores. kC == 0: any count, given at run time.
template <int kC>
inline void CopyPixel(uint8_t* dst, const uint8_t* src, int channels) {
  if constexpr (kC > 0) {
    for (int c = 0; c < kC; ++c) dst[c] = src[c];
  } else {
    std::memcpy(dst, src, static_cast<size_t>(channels));
  }
}

template <int kC>
inline void SwapPixels(uint8_t* a, uint8_t* b, int channels) {
  const int n = kC > 0 ? kC : channels;
  for (int c = 0; c < n; ++c) std::swap(a[c], b[c]);
}

template <int kC>
void MirrorRows(Image& img) {
  const int c = img.channels;
  for (int y = 0; y < img.height; ++y) {
    uint8_t* left = img.row(y);
    uint8_t* right = left + static_cast<size_t>(img.width - 1) * c;
    for (; left < right; left += c, right -= c) SwapPixels<kC>(left, right, c);
  }
}

// Rotating by 180 degrees reverses the order of the pixels in the buffer.
template <int kC>
void ReversePixels(Image& img) {
  const int c = img.channels;
  if (img.pixels.empty()) return;
  uint8_t* first = img.pixels.data();
  uint8_t* last = first + img.pixels.size() - c;
  for (; first < last; first += c, last -= c) SwapPixels<kC>(first, last, c);
}

void MirrorColumns(Image& img) {
  const size_t stride = static_cast<size_t>(img.width) * img.channels;
  for (int top = 0, bottom = img.height - 1; top < bottom; ++top, --bottom) {
    std::swap_ranges(img.row(top), img.row(top) + stride, img.row(bottom));
  }
}

// Orientations 5..8: the result is in.width rows of in.height pixels, and its pixel (x, y)
// comes from in(flip_x ? W-1-y : y, flip_y ? H-1-x : x). One of the two images is walked
// down a column, so the work goes in square tiles that keep both sides in cache.
template <int kC>
void TransposeInto(const Image& in, bool flip_x, bool flip_y, Image& out) {
  constexpr int kTile = 32;
  const int c = in.channels;
  const int h = in.height;
  const int w = in.width;
  for (int y0 = 0; y0 < w; y0 += kTile) {
    const int y1 = std::min(y0 + kTile, w);
    for (int x0 = 0; x0 < h; x0 += kTile) {
      const int x1 = std::min(x0 + kTile, h);
      for (int y = y0; y < y1; ++y) {
        const int sx = flip_x ? w - 1 - y : y;
        uint8_t* dst = out.row(y) + static_cast<size_t>(x0) * c;
        for (int x = x0; x < x1; ++x, dst += c) {
          const int sy = flip_y ? h - 1 - x : x;
          CopyPixel<kC>(dst, in.row(sy) + static_cast<size_t>(sx) * c, c);
        }
      }
    }
  }
}

template <int kC>
Image Orient(Image img, int orientation) {
  switch (orientation) {
    case 2:
      MirrorRows<kC>(img);
      return img;
    case 3:
      ReversePixels<kC>(img);
      return img;
    case 4:
      MirrorColumns(img);
      return img;
    default:
      break;
  }
  Image out;
  out.height = img.width;
  out.width = img.height;
  out.channels = img.channels;
  out.pixels.resize(img.pixels.size());
  const bool flip_x = orientation == 7 || orientation == 8;
  const bool flip_y = orientation == 6 || orientation == 7;
  TransposeInto<kC>(img, flip_x, flip_y, out);
  return out;
}

}  // namespace

Image ApplyOrientation(Image img, int orientation) {
  if (orientation < 2 || orientation > 8) return img;
  const bool well_formed =
      img.height >= 0 && img.width >= 0 && img.channels >= 1 &&
      img.pixels.size() == static_cast<size_t>(img.height) * img.width * img.channels;
  assert(well_formed && "ApplyOrientation: pixels.size() != height * width * channels");
  if (!well_formed) return img;
  switch (img.channels) {
    case 1:
      return Orient<1>(std::move(img), orientation);
    case 3:
      return Orient<3>(std::move(img), orientation);
    default:
      return Orient<0>(std::move(img), orientation);
  }
}

int TiffOrientation(const uint8_t* tiff, size_t size) {
  if (tiff == nullptr || size < 8) return 1;
  bool big_endian;
  if (tiff[0] == 'M' && tiff[1] == 'M') {
    big_endian = true;
  } else if (tiff[0] == 'I' && tiff[1] == 'I') {
    big_endian = false;
  } else {
    return 1;
  }
  auto u16 = [&](uint64_t at) -> uint32_t {
    return big_endian ? (uint32_t{tiff[at]} << 8 | tiff[at + 1])
                      : (uint32_t{tiff[at + 1]} << 8 | tiff[at]);
  };
  auto u32 = [&](uint64_t at) -> uint32_t {
    return big_endian ? (u16(at) << 16 | u16(at + 2)) : (u16(at + 2) << 16 | u16(at));
  };
  if (u16(2) != 42) return 1;
  // Offsets are relative to the TIFF header; IFD0 cannot overlap the 8-byte header.
  const uint64_t ifd = u32(4);
  if (ifd < 8 || ifd > size || size - ifd < 2) return 1;
  const uint64_t entries = u16(ifd);
  constexpr uint32_t kOrientationTag = 0x0112;
  constexpr uint32_t kShortType = 3;
  for (uint64_t i = 0; i < entries; ++i) {
    const uint64_t entry = ifd + 2 + 12 * i;
    if (entry + 12 > size) return 1;
    if (u16(entry) != kOrientationTag) continue;
    if (u16(entry + 2) != kShortType || u32(entry + 4) != 1) return 1;
    const uint32_t value = u16(entry + 8);  // a single SHORT sits at the field's start
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 1;
  }
  return 1;
}

}  // namespace shardpack::image
