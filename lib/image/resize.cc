#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

namespace shardpack::image {
namespace {

// The kernels are written exactly as in Pillow's Resample.c, comparisons included: a
// weight that differs in the last bit can round to a different fixed-point coefficient.
double BoxKernel(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double TriangleKernel(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double CubicKernel(double x) {
  constexpr double kA = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((kA + 2.0) * x - (kA + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * kA;
  return 0.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}

double Lanczos3Kernel(double x) {
  if (-3.0 <= x && x < 3.0) return Sinc(x) * Sinc(x / 3);
  return 0.0;
}

struct Kernel {
  double (*weight)(double x);
  double support;
};

Kernel KernelFor(Filter filter) {
  switch (filter) {
    case Filter::kArea:
      return {BoxKernel, 0.5};
    case Filter::kBilinear:
      return {TriangleKernel, 1.0};
    case Filter::kBicubic:
      return {CubicKernel, 2.0};
    case Filter::kLanczos3:
      break;
  }
  return {Lanczos3Kernel, 3.0};
}

// The two passes get an AVX2 clone besides the baseline one, and the loader picks one by
// the CPU (target_clones, an ifunc): about 1.5x faster where AVX2 exists. Both compute the
// same exact integer sums, so the bytes do not depend on the CPU. Clang refuses
// target_clones on templates, hence plain functions over always-inlined templates. A
// build may define SHARDPACK_RESIZE_KERNEL empty to get the baseline only.
#ifndef SHARDPACK_RESIZE_KERNEL
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SHARDPACK_RESIZE_KERNEL __attribute__((target_clones("avx2", "default")))
#endif
#endif
#endif
#ifndef SHARDPACK_RESIZE_KERNEL
#define SHARDPACK_RESIZE_KERNEL
#endif

// Fixed point of the weights: 8 bits of sample, 2 bits of headroom for kernels whose
// partial sums leave 0..1 (negative lobes), 22 bits of fraction. Pillow's PRECISION_BITS.
constexpr int kPrecisionBits = 32 - 8 - 2;
constexpr int32_t kRoundingHalf = 1 << (kPrecisionBits - 1);

inline uint8_t Clip8(int32_t sum) {
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// The weights of one axis: output index i reads `count[i]` source samples starting at
// `first[i]`, weighted by weights[i * ksize ...].
struct AxisWeights {
  int ksize = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for the source interval [in0, in1)
// of an axis of in_size samples mapped onto out_size samples.
AxisWeights ComputeAxisWeights(int in_size, float in0, float in1, int out_size,
                               const Kernel& kernel) {
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = kernel.support * filter_scale;
  const double inv_filter_scale = 1.0 / filter_scale;

  AxisWeights axis;
  axis.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  axis.first.resize(out_size);
  axis.count.resize(out_size);
  axis.weights.assign(static_cast<size_t>(out_size) * axis.ksize, 0);
  std::vector<double> w(axis.ksize);
  for (int i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    // Truncation, not floor, as in Pillow; it differs only below 0, which is clamped.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings): Pillow's rounding, kept on purpose.
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = hi - lo;
    double sum = 0.0;
    for (int t = 0; t < n; ++t) {
      w[t] = kernel.weight((t + lo - center + 0.5) * inv_filter_scale);
      sum += w[t];
    }
    int32_t* fixed = &axis.weights[static_cast<size_t>(i) * axis.ksize];
    for (int t = 0; t < n; ++t) {
      const double v = (sum != 0.0 ? w[t] / sum : w[t]) * (1 << kPrecisionBits);
      fixed[t] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
    axis.first[i] = lo;
    axis.count[i] = n;
  }
  return axis;
}

// Horizontal pass, one row at a time: each of `rows` rows of `in` (kC samples per pixel)
// becomes a row of axis.first.size() pixels in `out`. For the last rows of a block and
// for short images. The channel sums are named scalars, not an array: at -O2 GCC keeps a
// small array in memory, which made this loop 1.4x slower.
template <int kC>
void ResampleRowsScalar(const uint8_t* in, size_t in_stride, int rows, const AxisWeights& axis,
                        uint8_t* out, size_t out_stride) {
  static_assert(kC == 1 || kC == 3);
  const int out_width = static_cast<int>(axis.first.size());
  for (int r = 0; r < rows; ++r) {
    const uint8_t* src = in + r * in_stride;
    uint8_t* dst = out + r * out_stride;
    for (int x = 0; x < out_width; ++x, dst += kC) {
      const int32_t* k = &axis.weights[static_cast<size_t>(x) * axis.ksize];
      const uint8_t* p = src + static_cast<size_t>(axis.first[x]) * kC;
      const int n = axis.count[x];
      int32_t s0 = kRoundingHalf;
      if constexpr (kC == 1) {
        for (int t = 0; t < n; ++t) s0 += p[t] * k[t];
        dst[0] = Clip8(s0);
      } else {
        int32_t s1 = kRoundingHalf;
        int32_t s2 = kRoundingHalf;
        for (int t = 0; t < n; ++t, p += 3) {
          s0 += p[0] * k[t];
          s1 += p[1] * k[t];
          s2 += p[2] * k[t];
        }
        dst[0] = Clip8(s0);
        dst[1] = Clip8(s1);
        dst[2] = Clip8(s2);
      }
    }
  }
}

// Horizontal pass, kRowBlock rows at a time. The taps of one output pixel are adjacent
// in a row, so a row-wise sum cannot use vector code; across kRowBlock rows the same taps
// can. The block is first transposed so that pixel x of all its rows is contiguous:
// columns[(x * kRowBlock + r) * kC + c]. Every tap then is kRowBlock * kC identical
// multiply-adds on contiguous bytes, which the compiler vectorises at -O2. Same integer
// arithmetic as ResampleRowsScalar, so the same bytes.
constexpr int kRowBlock = 16;

template <int kC>
[[gnu::always_inline]] inline void ResampleRows(const uint8_t* in, size_t in_stride, int in_width,
                                                int rows, const AxisWeights& axis, uint8_t* out,
                                                size_t out_stride) {
  constexpr int kLanes = kRowBlock * kC;
  const int out_width = static_cast<int>(axis.first.size());
  std::vector<uint8_t> columns(rows >= kRowBlock ? static_cast<size_t>(in_width) * kLanes : 0);
  int r0 = 0;
  for (; r0 + kRowBlock <= rows; r0 += kRowBlock) {
    const uint8_t* block = in + r0 * in_stride;
    for (int r = 0; r < kRowBlock; ++r) {
      const uint8_t* src = block + r * in_stride;
      uint8_t* dst = columns.data() + static_cast<size_t>(r) * kC;
      for (int x = 0; x < in_width; ++x, src += kC, dst += kLanes) {
        for (int c = 0; c < kC; ++c) dst[c] = src[c];
      }
    }
    uint8_t* dst = out + r0 * out_stride;
    for (int x = 0; x < out_width; ++x, dst += kC) {
      const int32_t* k = &axis.weights[static_cast<size_t>(x) * axis.ksize];
      const uint8_t* q = columns.data() + static_cast<size_t>(axis.first[x]) * kLanes;
      const int n = axis.count[x];
      int32_t sum[kLanes];
      for (int j = 0; j < kLanes; ++j) sum[j] = kRoundingHalf;
      for (int t = 0; t < n; ++t, q += kLanes) {
        const int32_t w = k[t];
        for (int j = 0; j < kLanes; ++j) sum[j] += q[j] * w;
      }
      uint8_t clipped[kLanes];
      for (int j = 0; j < kLanes; ++j) clipped[j] = Clip8(sum[j]);
      for (int r = 0; r < kRowBlock; ++r) {
        for (int c = 0; c < kC; ++c) dst[r * out_stride + c] = clipped[r * kC + c];
      }
    }
  }
  ResampleRowsScalar<kC>(in + r0 * in_stride, in_stride, rows - r0, axis, out + r0 * out_stride,
                         out_stride);
}

// Vertical pass: output row y is the weighted sum of source rows first[y]..+count[y].
// Rows are summed whole, in blocks of kBlock samples: every sample of a block is the same
// operation on contiguous bytes, which the compiler turns into vector code even at -O2.
SHARDPACK_RESIZE_KERNEL void ResampleColumns(const uint8_t* in, size_t in_stride, size_t row_bytes,
                                             const AxisWeights& axis, uint8_t* out,
                                             size_t out_stride) {
  constexpr size_t kBlock = 32;
  const int out_height = static_cast<int>(axis.first.size());
  for (int y = 0; y < out_height; ++y) {
    const int32_t* k = &axis.weights[static_cast<size_t>(y) * axis.ksize];
    const uint8_t* src = in + static_cast<size_t>(axis.first[y]) * in_stride;
    const int n = axis.count[y];
    uint8_t* dst = out + y * out_stride;
    size_t i = 0;
    for (; i + kBlock <= row_bytes; i += kBlock) {
      int32_t sum[kBlock];
      for (size_t j = 0; j < kBlock; ++j) sum[j] = kRoundingHalf;
      for (int t = 0; t < n; ++t) {
        const uint8_t* p = src + t * in_stride + i;
        const int32_t w = k[t];
        for (size_t j = 0; j < kBlock; ++j) sum[j] += p[j] * w;
      }
      for (size_t j = 0; j < kBlock; ++j) dst[i + j] = Clip8(sum[j]);
    }
    for (; i < row_bytes; ++i) {
      int32_t sum = kRoundingHalf;
      for (int t = 0; t < n; ++t) sum += src[t * in_stride + i] * k[t];
      dst[i] = Clip8(sum);
    }
  }
}

SHARDPACK_RESIZE_KERNEL void ResampleRowsAnyChannels(int channels, const uint8_t* in,
                                                     size_t in_stride, int in_width, int rows,
                                                     const AxisWeights& axis, uint8_t* out,
                                                     size_t out_stride) {
  if (channels == 1) {
    ResampleRows<1>(in, in_stride, in_width, rows, axis, out, out_stride);
  } else {
    ResampleRows<3>(in, in_stride, in_width, rows, axis, out, out_stride);
  }
}

Image NewImage(int height, int width, int channels) {
  Image img;
  img.height = height;
  img.width = width;
  img.channels = channels;
  img.pixels.resize(static_cast<size_t>(height) * width * channels);
  return img;
}

// A source region [x0, x1) x [y0, y1) in pixels, fractions allowed. Single precision, as
// Pillow's resize(box=...) receives it: where a filter centre lands exactly on the edge
// of a kernel (kArea upscaling a fractional crop), the same source pixel wins as in
// Pillow.
struct Box {
  float x0, y0, x1, y1;
};

Box WholeImage(const Image& src) {
  return {0.0f, 0.0f, static_cast<float>(src.width), static_cast<float>(src.height)};
}

// Pillow's ImagingResampleInner: resamples `box` of `src` to out_height x out_width.
// Arguments are already validated.
Image ResampleRegion(const Image& src, const Box& box, int out_height, int out_width,
                     Filter filter) {
  const Kernel kernel = KernelFor(filter);
  const int c = src.channels;
  const bool need_horizontal =
      out_width != src.width || box.x0 != 0.0f || box.x1 != static_cast<float>(src.width);
  const bool need_vertical =
      out_height != src.height || box.y0 != 0.0f || box.y1 != static_cast<float>(src.height);
  if (!need_horizontal && !need_vertical) return src;
  // Pillow's choice (and so ours, as the rounding between passes depends on it): when the
  // height shrinks by more than twice as many pixels as the width, the vertical pass goes
  // first so that the horizontal one has fewer rows to do.
  const int height_loss = src.height - out_height;
  const bool horizontal_first = !(height_loss > 0 && height_loss > (src.width - out_width) * 2);

  const size_t src_stride = static_cast<size_t>(src.width) * c;
  const size_t out_stride = static_cast<size_t>(out_width) * c;
  Image out = NewImage(out_height, out_width, c);
  Image temp;

  AxisWeights vertical;
  if (need_vertical) {
    vertical = ComputeAxisWeights(src.height, box.y0, box.y1, out_height, kernel);
  }
  AxisWeights horizontal;
  if (need_horizontal) {
    horizontal = ComputeAxisWeights(src.width, box.x0, box.x1, out_width, kernel);
  }

  if (horizontal_first) {
    // Only the source rows the vertical pass reads are resampled horizontally.
    int row_first = 0;
    int row_last = src.height;
    if (need_vertical) {
      row_first = src.height;
      row_last = 0;
      for (int y = 0; y < out_height; ++y) {
        row_first = std::min(row_first, vertical.first[y]);
        row_last = std::max(row_last, vertical.first[y] + vertical.count[y]);
      }
    }
    const uint8_t* rows = src.pixels.data();
    size_t rows_stride = src_stride;
    if (need_horizontal) {
      uint8_t* dst = out.pixels.data();
      if (need_vertical) {
        temp = NewImage(row_last - row_first, out_width, c);
        dst = temp.pixels.data();
        for (int& first : vertical.first) first -= row_first;
        rows = dst;
        rows_stride = out_stride;
      }
      ResampleRowsAnyChannels(c, src.row(row_first), src_stride, src.width, row_last - row_first,
                              horizontal, dst, out_stride);
    }
    if (need_vertical) {
      ResampleColumns(rows, rows_stride, out_stride, vertical, out.pixels.data(), out_stride);
    }
  } else {
    // need_vertical holds here: the height changes.
    uint8_t* dst = out.pixels.data();
    if (need_horizontal) {
      temp = NewImage(out_height, src.width, c);
      dst = temp.pixels.data();
    }
    ResampleColumns(src.pixels.data(), src_stride, src_stride, vertical, dst, src_stride);
    if (need_horizontal) {
      ResampleRowsAnyChannels(c, temp.pixels.data(), src_stride, src.width, out_height, horizontal,
                              out.pixels.data(), out_stride);
    }
  }
  return out;
}

std::string SizeText(int height, int width) {
  return std::to_string(height) + "x" + std::to_string(width) + " (height x width)";
}

Status CheckSource(const Image& src) {
  if (src.channels != 1 && src.channels != 3) {
    return InvalidArgumentError("resize: source has " + std::to_string(src.channels) +
                                " channels, expected 1 or 3");
  }
  if (src.height <= 0 || src.width <= 0) {
    return InvalidArgumentError("resize: source size " + SizeText(src.height, src.width) +
                                " must be positive");
  }
  const uint64_t expected = static_cast<uint64_t>(src.height) * src.width * src.channels;
  if (src.pixels.size() != expected) {
    return InvalidArgumentError(
        "resize: source of " + std::to_string(src.height) + "x" + std::to_string(src.width) + "x" +
        std::to_string(src.channels) + " (height x width x channels) holds " +
        std::to_string(src.pixels.size()) + " bytes, expected " + std::to_string(expected));
  }
  return Status::Ok();
}

Status CheckOutputSize(int height, int width) {
  if (height <= 0 || width <= 0 || height > kMaxResizeSide || width > kMaxResizeSide) {
    return InvalidArgumentError("resize: output size " + SizeText(height, width) +
                                " must be in 1.." + std::to_string(kMaxResizeSide));
  }
  return Status::Ok();
}

// round(num / den) with halves rounded up, for positive operands; at least 1.
int RoundHalfUpDiv(int64_t num, int64_t den) {
  return static_cast<int>(std::max<int64_t>((2 * num + den) / (2 * den), 1));
}

}  // namespace

StatusOr<Image> Resize(const Image& src, int out_height, int out_width, Filter filter) {
  SHARDPACK_RETURN_IF_ERROR(CheckSource(src));
  SHARDPACK_RETURN_IF_ERROR(CheckOutputSize(out_height, out_width));
  return ResampleRegion(src, WholeImage(src), out_height, out_width, filter);
}

StatusOr<Image> ResizeFit(const Image& src, int out_height, int out_width, Fit fit, Filter filter,
                          const uint8_t pad_rgb[3]) {
  SHARDPACK_RETURN_IF_ERROR(CheckSource(src));
  SHARDPACK_RETURN_IF_ERROR(CheckOutputSize(out_height, out_width));
  if (fit == Fit::kPad && pad_rgb == nullptr) {
    return InvalidArgumentError("resize: Fit::kPad needs a pad colour, got null");
  }
  // Compare the aspect ratios exactly: src is relatively wider when W/H > out_W/out_H.
  const int64_t src_cross = static_cast<int64_t>(src.width) * out_height;
  const int64_t out_cross = static_cast<int64_t>(src.height) * out_width;
  if (fit == Fit::kStretch || src_cross == out_cross) {
    return ResampleRegion(src, WholeImage(src), out_height, out_width, filter);
  }
  const bool wider = src_cross > out_cross;

  if (fit == Fit::kCrop) {
    // The centred box as ImageOps.fit computes it, in double, then handed over in single
    // precision as Python hands it to Pillow's C code.
    const double out_ratio = static_cast<double>(out_width) / out_height;
    double x0 = 0.0, y0 = 0.0, crop_width = src.width, crop_height = src.height;
    if (wider) {
      crop_width = out_ratio * src.height;
      x0 = (src.width - crop_width) * 0.5;
    } else {
      crop_height = src.width / out_ratio;
      y0 = (src.height - crop_height) * 0.5;
    }
    const Box box = {static_cast<float>(x0), static_cast<float>(y0),
                     static_cast<float>(x0 + crop_width), static_cast<float>(y0 + crop_height)};
    return ResampleRegion(src, box, out_height, out_width, filter);
  }

  int inner_height = out_height;
  int inner_width = out_width;
  if (wider) {
    inner_height = std::min(RoundHalfUpDiv(static_cast<int64_t>(src.height) * out_width, src.width),
                            out_height);
  } else {
    inner_width = std::min(RoundHalfUpDiv(static_cast<int64_t>(src.width) * out_height, src.height),
                           out_width);
  }
  const Image inner = ResampleRegion(src, WholeImage(src), inner_height, inner_width, filter);

  const int c = src.channels;
  Image out = NewImage(out_height, out_width, c);
  if (c == 1) {
    const uint8_t luma = static_cast<uint8_t>(
        (19595 * pad_rgb[0] + 38470 * pad_rgb[1] + 7471 * pad_rgb[2] + 32768) >> 16);
    std::fill(out.pixels.begin(), out.pixels.end(), luma);
  } else {
    for (size_t i = 0; i < out.pixels.size(); i += 3) {
      std::copy(pad_rgb, pad_rgb + 3, out.pixels.begin() + i);
    }
  }
  const int top = (out_height - inner_height) / 2;
  const int left = (out_width - inner_width) / 2;
  const size_t inner_stride = static_cast<size_t>(inner_width) * c;
  for (int y = 0; y < inner_height; ++y) {
    std::copy(inner.row(y), inner.row(y) + inner_stride,
              out.row(top + y) + static_cast<size_t>(left) * c);
  }
  return out;
}

StatusOr<Image> ResizeMaxSide(const Image& src, int max_side, Filter filter) {
  SHARDPACK_RETURN_IF_ERROR(CheckSource(src));
  if (max_side <= 0) {
    return InvalidArgumentError("resize: max side " + std::to_string(max_side) +
                                " must be positive");
  }
  const int longer = std::max(src.height, src.width);
  if (longer <= max_side) return src;
  SHARDPACK_RETURN_IF_ERROR(CheckOutputSize(max_side, max_side));
  const int shorter =
      RoundHalfUpDiv(static_cast<int64_t>(std::min(src.height, src.width)) * max_side, longer);
  const int out_height = src.height >= src.width ? max_side : shorter;
  const int out_width = src.height >= src.width ? shorter : max_side;
  return ResampleRegion(src, WholeImage(src), out_height, out_width, filter);
}

}  // namespace shardpack::image
