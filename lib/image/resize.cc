#include "image/resize.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "image/resize_kernels.h"
#include "util/cpu.h"

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

Kernel KernelFor(ResizeFilter filter) {
  switch (filter) {
    case ResizeFilter::kArea:
      return {BoxKernel, 0.5};
    case ResizeFilter::kBilinear:
      return {TriangleKernel, 1.0};
    case ResizeFilter::kBicubic:
      return {CubicKernel, 2.0};
    case ResizeFilter::kLanczos3:
      break;
  }
  return {Lanczos3Kernel, 3.0};
}

// The two passes get an AVX2 clone besides the baseline one, and the loader picks one by
// the CPU (target_clones, an ifunc): about 1.5x faster where AVX2 exists. Both compute the
// same exact integer sums, so the bytes do not depend on the CPU. Clang refuses
// target_clones on templates, hence plain functions over always-inlined templates. A
// build may define SHARDPACK_RESIZE_KERNEL empty to get the baseline only. Sanitizer
// builds get the baseline: an ifunc resolver runs while the program is relocated, before
// the sanitizer's runtime is set up, and its instrumented code crashes there.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SHARDPACK_RESIZE_KERNEL
#endif
#if defined(__has_feature)  // clang 14 defines no __SANITIZE_*__ macros
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SHARDPACK_RESIZE_KERNEL
#endif
#endif
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

using internal::kPrecisionBits;
constexpr int32_t kRoundingHalf = 1 << (kPrecisionBits - 1);

inline uint8_t Clip8(int32_t sum) {
  return static_cast<uint8_t>(std::clamp(sum >> kPrecisionBits, 0, 255));
}

// The weights of one axis: output index i reads `count[i]` source samples starting at
// `first[i]`, weighted by weights[i * ksize ...]. Reused across calls: sizes only grow.
struct AxisWeights {
  int ksize = 0;
  int out_size = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<int32_t> weights;
  // The weights split for the AVX2 passes (resize_kernels.h), when they run: packed for
  // the horizontal one, pair_weights for the vertical one.
  std::vector<int16_t> packed;
  std::vector<int32_t> pair_weights;
  // The same cut into digits for the AVX-512 kernel (PackDigitWeights), when it runs on
  // this axis (use_quads).
  std::vector<int32_t> digit_weights;
  bool use_quads = false;
  // Each output sample's tap positions (the kernel's arguments x, ksize apart), with the
  // kernel and the filter scale's inverse they were weighed with: another axis whose
  // sample has the same ones has the same weights (ComputeAxisWeights). kernel is null
  // until the axis is complete.
  std::vector<double> positions;
  double (*kernel)(double) = nullptr;
  double inv_filter_scale = 0.0;

  internal::AxisTaps Taps() const {
    internal::AxisTaps taps;
    taps.out_size = out_size;
    taps.ksize = ksize;
    taps.first = first.data();
    taps.count = count.data();
    taps.weights = weights.data();
    return taps;
  }
  // Taps() with the weights packed for the vertical kernel (PackForColumns): digits where
  // use_quads, else pairs; internal::ResampleColumnsVector picks its kernel by them.
  internal::AxisTaps ColumnTaps() const {
    internal::AxisTaps taps = Taps();
    if (use_quads) {
      taps.quads = internal::TapQuads(ksize);
      taps.digit_weights = digit_weights.data();
    } else {
      taps.pairs = internal::VerticalPairs(ksize);
      taps.pair_weights = pair_weights.data();
    }
    return taps;
  }
};

// ComputeAxisWeights' working values per tap: the kernel values, and for Lanczos four
// tables of sines and cosines.
constexpr size_t kKernelValueRows = 5;

// The AVX2 forms where they are built and `avx2` asks for them, else the portable ones.
void LanczosValuesFor([[maybe_unused]] bool avx2, const internal::LanczosTaps& taps, double* w) {
#if defined(SHARDPACK_RESIZE_AVX2)  // resize_avx2.cc is built only for x86-64
  if (avx2) {
    internal::LanczosValuesAvx2(taps, w);
    return;
  }
#endif
  internal::LanczosValues(taps, w);
}

void FixedWeightsFor([[maybe_unused]] bool avx2, int n, const double* w, double sum,
                     int32_t* fixed) {
#if defined(SHARDPACK_RESIZE_AVX2)
  if (avx2) {
    internal::FixedWeightsAvx2(n, w, sum, fixed);
    return;
  }
#endif
  internal::FixedWeights(n, w, sum, fixed);
}

// True when output sample i of `other` (a complete axis) has taps at the positions x[0..n)
// weighed with the same kernel and filter scale: its fixed-point weights are then the ones
// ComputeAxisWeights would compute, as they are a function of exactly these.
bool SameTaps(const AxisWeights& other, int i, double (*kernel)(double), double inv_filter_scale,
              const double* x, int n) {
  return other.kernel == kernel && other.inv_filter_scale == inv_filter_scale &&
         i < other.out_size && other.count[i] == n &&
         std::memcmp(&other.positions[static_cast<size_t>(i) * other.ksize], x,
                     static_cast<size_t>(n) * sizeof(double)) == 0;
}

// Pillow's precompute_coeffs + normalize_coeffs_8bpc, for the source interval [in0, in1)
// of an axis of in_size samples mapped onto out_size samples. `values` holds one pixel's
// kernel values in double before they are normalised. A sample whose taps sit where those
// of `other`'s sample of the same index do (not null: the other axis of the same resize,
// or of an earlier one) takes that sample's weights: a square crop that starts on a whole
// pixel (a photo whose sides differ by an even number) has the same taps on both axes but
// at the clamped ends.
void ComputeAxisWeights(int in_size, float in0, float in1, int out_size, const Kernel& kernel,
                        bool avx2, const AxisWeights* other, AxisWeights* axis,
                        std::vector<double>* values) {
  const double scale = static_cast<double>(in1 - in0) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = kernel.support * filter_scale;
  const double inv_filter_scale = 1.0 / filter_scale;

  axis->kernel = nullptr;
  axis->ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  axis->out_size = out_size;
  axis->inv_filter_scale = inv_filter_scale;
  // Within capacity, resize and assign do not allocate.
  axis->first.resize(out_size);
  axis->count.resize(out_size);
  axis->weights.assign(static_cast<size_t>(out_size) * axis->ksize, 0);
  const size_t ksize = static_cast<size_t>(axis->ksize);
  axis->positions.resize(static_cast<size_t>(out_size) * ksize);
  if (values->size() < kKernelValueRows * ksize) values->resize(kKernelValueRows * ksize);
  double* w = values->data();
  // Lanczos needs sin(pi x) and sin(pi x / 3) at every tap x_t = x_0 + t * s (s =
  // inv_filter_scale). Two libm sin calls per tap were 7% of a conversion; instead, by
  // angle addition, sin(pi x_t) = sin(pi x_0) cos(pi t s) + cos(pi x_0) sin(pi t s): one
  // sin and cos of x_0 per output pixel and a table per axis. It agrees with the direct
  // sin to a few units in the last place, so a fixed-point weight could differ only if
  // its exact value lay within about 1e-9 of a rounding tie (no weight of the test
  // fixtures or of 3,000 real photos does). Everything else (the support test, the
  // x == 0 case, the divisor) is Pillow's expression on Pillow's x_t. With AVX2 the taps
  // and the fixed-point weights are computed four at a time (three divisions per tap were
  // most of this function's time), with the same doubles (resize_kernels.h).
  const bool lanczos = kernel.weight == Lanczos3Kernel;
  double* sin_t = w + ksize;
  double* cos_t = sin_t + ksize;
  double* sin_t3 = cos_t + ksize;
  double* cos_t3 = sin_t3 + ksize;
  internal::LanczosTaps taps;
  taps.sin_t = sin_t;
  taps.cos_t = cos_t;
  taps.sin_t3 = sin_t3;
  taps.cos_t3 = cos_t3;
  bool tables = false;  // filled when the first sample needs them
  for (int i = 0; i < out_size; ++i) {
    const double center = in0 + (i + 0.5) * scale;
    // Truncation, not floor, as in Pillow; it differs only below 0, which is clamped.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings): Pillow's rounding, kept on purpose.
    const int lo = std::max(static_cast<int>(center - support + 0.5), 0);
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    const int hi = std::min(static_cast<int>(center + support + 0.5), in_size);
    const int n = hi - lo;
    double* x = &axis->positions[static_cast<size_t>(i) * ksize];
    for (int t = 0; t < n; ++t) x[t] = (t + lo - center + 0.5) * inv_filter_scale;
    axis->first[i] = lo;
    axis->count[i] = n;
    int32_t* fixed = &axis->weights[static_cast<size_t>(i) * ksize];
    if (other != nullptr && SameTaps(*other, i, kernel.weight, inv_filter_scale, x, n)) {
      std::copy_n(&other->weights[static_cast<size_t>(i) * other->ksize], n, fixed);
      continue;
    }
    if (lanczos) {
      if (!tables) {
        for (size_t t = 0; t < ksize; ++t) {
          const double angle = static_cast<double>(t) * inv_filter_scale * std::numbers::pi;
          sin_t[t] = std::sin(angle);
          cos_t[t] = std::cos(angle);
          sin_t3[t] = std::sin(angle / 3);
          cos_t3[t] = std::cos(angle / 3);
        }
        tables = true;
      }
      const double x0 = (lo - center + 0.5) * inv_filter_scale;
      taps.n = n;
      taps.x = x;
      taps.sin0 = std::sin(x0 * std::numbers::pi);
      taps.cos0 = std::cos(x0 * std::numbers::pi);
      taps.sin03 = std::sin(x0 / 3 * std::numbers::pi);
      taps.cos03 = std::cos(x0 / 3 * std::numbers::pi);
      LanczosValuesFor(avx2, taps, w);
    } else {
      for (int t = 0; t < n; ++t) w[t] = kernel.weight(x[t]);
    }
    double sum = 0.0;
    for (int t = 0; t < n; ++t) sum += w[t];
    FixedWeightsFor(avx2, n, w, sum, fixed);
  }
  axis->kernel = kernel.weight;
}

// The source samples [*begin, *end) that the weights read, and `first` made relative to
// *begin, so a pass can skip what it would not read.
void ReadRange(AxisWeights* axis, int* begin, int* end) {
  *begin = axis->first[0];
  *end = 0;
  for (int i = 0; i < axis->out_size; ++i) {
    *begin = std::min(*begin, axis->first[i]);
    *end = std::max(*end, axis->first[i] + axis->count[i]);
  }
  for (int i = 0; i < axis->out_size; ++i) axis->first[i] -= *begin;
}

// Horizontal pass, one row at a time: each of `rows` rows of `in` (kC samples per pixel)
// becomes a row of axis.first.size() pixels in `out`. For the last rows of a block and
// for short images. The channel sums are named scalars, not an array: at -O2 GCC keeps a
// small array in memory, which made this loop 1.4x slower.
template <int kC>
void ResampleRowsScalar(const uint8_t* in, size_t in_stride, int rows, const AxisWeights& axis,
                        uint8_t* out, size_t out_stride) {
  static_assert(kC == 1 || kC == 3);
  const int out_width = axis.out_size;
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
// arithmetic as ResampleRowsScalar, so the same bytes. `columns` holds in_width * kRowBlock
// * kC bytes when rows >= kRowBlock (ColumnsBytes).
constexpr int kRowBlock = 16;

size_t ColumnsBytes(int in_width, int rows, int channels) {
  return rows >= kRowBlock ? static_cast<size_t>(in_width) * kRowBlock * channels : 0;
}

template <int kC>
[[gnu::always_inline]] inline void ResampleRows(const uint8_t* in, size_t in_stride, int in_width,
                                                int rows, const AxisWeights& axis, uint8_t* out,
                                                size_t out_stride, uint8_t* columns) {
  constexpr int kLanes = kRowBlock * kC;
  const int out_width = axis.out_size;
  int r0 = 0;
  for (; r0 + kRowBlock <= rows; r0 += kRowBlock) {
    const uint8_t* block = in + r0 * in_stride;
    for (int r = 0; r < kRowBlock; ++r) {
      const uint8_t* src = block + r * in_stride;
      uint8_t* dst = columns + static_cast<size_t>(r) * kC;
      for (int x = 0; x < in_width; ++x, src += kC, dst += kLanes) {
        for (int c = 0; c < kC; ++c) dst[c] = src[c];
      }
    }
    uint8_t* dst = out + r0 * out_stride;
    for (int x = 0; x < out_width; ++x, dst += kC) {
      const int32_t* k = &axis.weights[static_cast<size_t>(x) * axis.ksize];
      const uint8_t* q = columns + static_cast<size_t>(axis.first[x]) * kLanes;
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
  const int out_height = axis.out_size;
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
                                                     size_t out_stride, uint8_t* columns) {
  if (channels == 1) {
    ResampleRows<1>(in, in_stride, in_width, rows, axis, out, out_stride, columns);
  } else {
    ResampleRows<3>(in, in_stride, in_width, rows, axis, out, out_stride, columns);
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

Box WholeBox(int height, int width) {
  return {0.0f, 0.0f, static_cast<float>(width), static_cast<float>(height)};
}

// True when [in0, in1) is a whole-pixel window of out_size samples: the axis is then a
// plain offset. At scale 1 with integer offsets, every kernel's taps sit at integer
// distances from the centre, where all four kernels are 1 at 0 and 0 (or, for Lanczos,
// about 1e-16, which rounds to 0 in fixed point) elsewhere: the weights are exactly
// {1 << 22} and the pass would copy. Pillow skips a pass only for the whole image.
bool IsWholePixelWindow(float in0, float in1, int out_size) {
  return in0 == std::floor(in0) && static_cast<double>(in1) - in0 == out_size;
}

// The vector kernels a resize may use: the best this CPU runs, unless the environment
// variable SHARDPACK_RESIZE_KERNELS caps them ("portable", "avx2" or "avx512"), so that
// one machine can compare them in one run. Every level gives the same bytes.
enum class Kernels { kPortable, kAvx2, kAvx512 };

struct KernelChoice {
  Kernels kernels = Kernels::kPortable;
  Status status;  // not ok when the variable names no level, or one this CPU lacks
};

const KernelChoice& ChosenKernels() {
  static const KernelChoice choice = [] {
    KernelChoice c;
    c.kernels = internal::HaveAvx512Vnni() ? Kernels::kAvx512
                : internal::HaveAvx2()     ? Kernels::kAvx2
                                           : Kernels::kPortable;
    const char* v = std::getenv("SHARDPACK_RESIZE_KERNELS");
    if (v == nullptr || *v == '\0') return c;
    const std::string text(v);
    if (text != "portable" && text != "avx2" && text != "avx512") {
      c.status = InvalidArgumentError("SHARDPACK_RESIZE_KERNELS: \"" + text +
                                      "\" is none of portable, avx2, avx512");
      return c;
    }
    const Kernels asked = text == "portable" ? Kernels::kPortable
                          : text == "avx2"   ? Kernels::kAvx2
                                             : Kernels::kAvx512;
    if (asked > c.kernels) {
      c.status =
          InvalidArgumentError("SHARDPACK_RESIZE_KERNELS: this CPU (or build) lacks " +
                               std::string(asked == Kernels::kAvx512 ? "AVX-512 VNNI" : "AVX2") +
                               " for \"" + text + "\"");
    } else {
      c.kernels = asked;
    }
    return c;
  }();
  return choice;
}

}  // namespace

struct ResizeScratch::Buffers {
  // The AVX2 passes where the CPU has them, and the AVX-512 vertical kernel where it has
  // that too, with the AVX-512 transposes of the horizontal pass where it also has VBMI
  // (same bytes every way).
  bool avx2 = ChosenKernels().kernels >= Kernels::kAvx2;
  bool avx512 = ChosenKernels().kernels >= Kernels::kAvx512;
  bool vbmi = ChosenKernels().kernels >= Kernels::kAvx512 && internal::HaveAvx512Vbmi();
  // An axis's output samples take the other axis's weights where the taps are the same.
  bool share_weights = true;
  AxisWeights horizontal;
  AxisWeights vertical;
  std::vector<double> kernel_values;
  std::vector<uint8_t> temp;     // the image between the passes
  std::vector<uint8_t> columns;  // ResampleRows' transposed block

  uint8_t* Temp(size_t bytes) { return Grow(&temp, bytes); }
  uint8_t* Columns(size_t bytes) { return Grow(&columns, bytes); }

  static uint8_t* Grow(std::vector<uint8_t>* v, size_t bytes) {
    // Grow only: shrinking and regrowing would zero-fill the bytes again on every call.
    if (v->size() < bytes) v->resize(bytes);
    return v->data();
  }
};

namespace {

// True when the rows left after the last whole block of the horizontal pass go through one
// more block, overlapping the one before (HorizontalPass), false when they are summed in
// place: from 13 rows left on. A block costs about as much as 16 rows summed in place, and
// rows summed in place need weights packed for them (about 5 µs here). A horizontal-only resize of
// H rows of 350 pixels to 256 (Zen 4, 2026-11-28, two runs, medians of three) took, overlapping
// against in place: 1 row left, 104.6-104.7 against 100.4-101.8 µs; 4, 104.4-104.5 against
// 101.2-102.4; 8, 104.9-105.2 against 102.9-103.1; 12, 105.2-105.3 against 104.8; 16, 104.4-105.4
// against 106.8-107.0; 24, 104.4-107.6 against 110.2-110.5; 31, 103.8-106.6 against 113.2-113.5.
constexpr int kOverlapMinRows = 13;
bool OverlapLastBlock(int rows) {
  return rows >= internal::kRowBlockRows && rows % internal::kRowBlockRows >= kOverlapMinRows;
}

// The horizontal pass: the vector kernels for RGB where they run (blocks of rows summed by
// the AVX2 or AVX-512 vertical kernel; the rows a block leaves, where few, and images of
// fewer rows than a block, in place with AVX2), else the portable one. `axis` is the
// horizontal axis with its packed weights (PrepareHorizontal for `rows`).
void HorizontalPass(int c, const uint8_t* in, size_t in_stride, int in_width, int rows,
                    const AxisWeights& axis, uint8_t* out, size_t out_stride,
                    ResizeScratch::Buffers& buffers) {
#if defined(SHARDPACK_RESIZE_AVX2)  // resize_avx2.cc is built only for x86-64
  if (c == 3 && buffers.avx2) {
    // Blocks of rows transposed and summed by the vertical kernel. The rows left over, fewer
    // than a block, go through one more block that ends at the last row and overlaps the
    // ones before (the rows summed twice get the same bytes twice: a row's sums depend on
    // that row alone) where there are enough of them (OverlapLastBlock); else they, and
    // images of fewer rows than a block, are summed in place, one row at a time.
    // PrepareHorizontal packed the weights each way needs.
    int done = 0;
    if (rows >= internal::kRowBlockRows) {
      const internal::AxisTaps taps = axis.ColumnTaps();
      uint8_t* lines = buffers.Columns(internal::RowBlockLinesBytes(in_width, axis.out_size));
      done = internal::ResampleRowBlocksRgbAvx2(in, in_stride, in_width, rows, taps, out,
                                                out_stride, lines, buffers.vbmi);
      if (OverlapLastBlock(rows)) {
        const size_t last = static_cast<size_t>(rows - internal::kRowBlockRows);
        internal::ResampleRowBlocksRgbAvx2(in + last * in_stride, in_stride, in_width,
                                           internal::kRowBlockRows, taps, out + last * out_stride,
                                           out_stride, lines, buffers.vbmi);
        done = rows;
      }
    }
    if (done < rows) {
      internal::AxisTaps taps = axis.Taps();
      taps.groups =
          static_cast<int>(axis.packed.size() / (static_cast<size_t>(axis.out_size) * 32));
      taps.packed = axis.packed.data();
      internal::ResampleRowsRgbAvx2(in + done * in_stride, in_stride, in_width, rows - done, taps,
                                    out + done * out_stride, out_stride);
    }
    return;
  }
#endif
  ResampleRowsAnyChannels(c, in, in_stride, in_width, rows, axis, out, out_stride,
                          buffers.Columns(ColumnsBytes(in_width, rows, c)));
}

// Splits the weights into pairs of taps (PackVerticalWeights), as the vertical kernel
// takes them.
void PackPairs(AxisWeights* axis) {
  axis->pair_weights.resize(
      internal::PairWeightsSize(axis->out_size, internal::VerticalPairs(axis->ksize)));
  internal::AxisTaps taps = axis->Taps();
  internal::PackVerticalWeights(axis->pair_weights.data(), &taps);
}

// Cuts the weights into digits (PackDigitWeights), as the AVX-512 kernel takes them; false
// when a weight does not fit.
bool PackQuads(AxisWeights* axis) {
  axis->digit_weights.resize(
      internal::DigitWeightsSize(axis->out_size, internal::TapQuads(axis->ksize)));
  internal::AxisTaps taps = axis->Taps();
  return internal::PackDigitWeights(axis->digit_weights.data(), &taps);
}

// The weights as the vertical kernel that will run takes them: in quads for the AVX-512
// kernel where it runs and some sample has more than four taps (Lanczos and bicubic
// shrinking, the converter's case), else in pairs for the AVX2 kernel. With four taps or
// fewer (bilinear, the loader's crops) a quad is one pass whose fixed costs (the three
// digit sums recombined) outweigh what it saves: on Zen 4 the loader's crops took 1.09x
// as long with quads from three taps on (BM_ResizeRandomCrop;
// bench/results/resize-kernels-2026-11-28-zen4.md).
void PackForColumns(AxisWeights* axis, const ResizeScratch::Buffers& buffers) {
  axis->use_quads = buffers.avx512 &&
                    *std::max_element(axis->count.begin(), axis->count.end()) > 4 &&
                    PackQuads(axis);
  if (!axis->use_quads) PackPairs(axis);
}

// Packs the horizontal weights for the vector passes that will run over `rows` rows: as the
// vertical kernel takes them for blocks of kRowBlockRows rows (PackForColumns), and in
// groups of four taps for rows summed in place (HorizontalPass, OverlapLastBlock).
void PrepareHorizontal(int c, int rows, AxisWeights* axis, const ResizeScratch::Buffers& buffers) {
  if (c != 3 || !buffers.avx2) return;
  if (rows >= internal::kRowBlockRows) PackForColumns(axis, buffers);
  if (rows % internal::kRowBlockRows == 0 || OverlapLastBlock(rows)) return;
  const int max_count = *std::max_element(axis->count.begin(), axis->count.end());
  const int groups = internal::PackedGroups(max_count);
  axis->packed.resize(internal::PackedSize(axis->out_size, groups));
  internal::AxisTaps taps = axis->Taps();
  internal::PackHorizontalWeights(groups, axis->packed.data(), &taps);
}

// Packs the vertical weights for the vector kernel that will run (PackForColumns).
void PrepareVertical(AxisWeights* axis, const ResizeScratch::Buffers& buffers) {
  if (buffers.avx2) PackForColumns(axis, buffers);
}

// The vertical pass: the AVX-512 or AVX2 kernel where it runs, else the portable one.
// `axis` is the vertical axis with its weights packed for it (PrepareVertical).
void VerticalPass(const uint8_t* in, size_t in_stride, size_t row_bytes, const AxisWeights& axis,
                  uint8_t* out, size_t out_stride, const ResizeScratch::Buffers& buffers) {
  size_t done = 0;
#if defined(SHARDPACK_RESIZE_AVX2)
  if (buffers.avx2) {
    done = internal::ResampleColumnsVector(in, in_stride, row_bytes, axis.ColumnTaps(), out,
                                           out_stride);
  }
#endif
  if (done < row_bytes) {
    ResampleColumns(in + done, in_stride, row_bytes - done, axis, out + done, out_stride);
  }
}

// The pixels a resampling reads: a height x width x channels image of which rows
// [top, top + avail_height) and columns [left, left + avail_width) are at hand, row y
// at pixels + (y - top) * stride. The whole image when left = top = 0 and avail_* are
// the sides.
struct Source {
  const uint8_t* pixels;
  int height, width, channels;
  size_t stride;
  int left = 0, top = 0, avail_height = 0, avail_width = 0;

  const uint8_t* At(int y, int x) const {
    return pixels + static_cast<size_t>(y - top) * stride +
           static_cast<size_t>(x - left) * channels;
  }
};

Source WholeSource(const Image& img) {
  return {img.pixels.data(),
          img.height,
          img.width,
          img.channels,
          static_cast<size_t>(img.width) * img.channels,
          0,
          0,
          img.height,
          img.width};
}

// Pillow's ImagingResampleInner: resamples `box` of the source to out_height x out_width
// at `out` (rows out_stride apart). Arguments are already validated. False, with out
// untouched, when the source's window lacks a pixel the resampling reads.
bool ResampleInto(const Source& src, const Box& box, int out_height, int out_width,
                  ResizeFilter filter, uint8_t* out, size_t out_stride,
                  ResizeScratch::Buffers& buffers) {
  const int c = src.channels;
  const size_t src_stride = src.stride;
  const Kernel kernel = KernelFor(filter);
  const bool need_horizontal = !IsWholePixelWindow(box.x0, box.x1, out_width);
  const bool need_vertical = !IsWholePixelWindow(box.y0, box.y1, out_height);
  const size_t out_row_bytes = static_cast<size_t>(out_width) * c;

  AxisWeights& horizontal = buffers.horizontal;
  AxisWeights& vertical = buffers.vertical;
  // The source columns and rows read; an axis that needs no pass is an offset.
  int col_begin = static_cast<int>(box.x0);
  int col_end = col_begin + out_width;
  if (need_horizontal) {
    ComputeAxisWeights(src.width, box.x0, box.x1, out_width, kernel, buffers.avx2,
                       buffers.share_weights ? &vertical : nullptr, &horizontal,
                       &buffers.kernel_values);
    ReadRange(&horizontal, &col_begin, &col_end);
  }
  int row_begin = static_cast<int>(box.y0);
  int row_end = row_begin + out_height;
  if (need_vertical) {
    ComputeAxisWeights(src.height, box.y0, box.y1, out_height, kernel, buffers.avx2,
                       buffers.share_weights ? &horizontal : nullptr, &vertical,
                       &buffers.kernel_values);
    ReadRange(&vertical, &row_begin, &row_end);
  }
  if (col_begin < src.left || col_end > src.left + src.avail_width || row_begin < src.top ||
      row_end > src.top + src.avail_height) {
    return false;
  }
  // Pillow's choice (and so ours, as the rounding between passes depends on it): when the
  // height shrinks by more than twice as many pixels as the width, the vertical pass goes
  // first so that the horizontal one has fewer rows to do. Decided on the whole source,
  // as Pillow does, whatever the box. Each pass reads only the rows (or columns) that the
  // other pass uses; the skipped ones would not change a byte.
  const int height_loss = src.height - out_height;
  const bool horizontal_first = !(height_loss > 0 && height_loss > (src.width - out_width) * 2);
  const int horizontal_rows = need_vertical && horizontal_first ? row_end - row_begin : out_height;
  if (need_horizontal) PrepareHorizontal(c, horizontal_rows, &horizontal, buffers);
  if (need_vertical) PrepareVertical(&vertical, buffers);
  const uint8_t* origin = src.At(row_begin, col_begin);
  const int in_width = col_end - col_begin;

  if (!need_horizontal && !need_vertical) {
    for (int y = 0; y < out_height; ++y) {
      std::copy_n(origin + y * src_stride, out_row_bytes, out + y * out_stride);
    }
    return true;
  }
  if (!need_vertical) {
    HorizontalPass(c, origin, src_stride, in_width, out_height, horizontal, out, out_stride,
                   buffers);
    return true;
  }
  if (!need_horizontal) {
    VerticalPass(origin, src_stride, out_row_bytes, vertical, out, out_stride, buffers);
    return true;
  }

  if (horizontal_first) {
    const int rows = row_end - row_begin;
    uint8_t* temp = buffers.Temp(static_cast<size_t>(rows) * out_row_bytes);
    HorizontalPass(c, origin, src_stride, in_width, rows, horizontal, temp, out_row_bytes, buffers);
    VerticalPass(temp, out_row_bytes, out_row_bytes, vertical, out, out_stride, buffers);
  } else {
    const size_t temp_stride = static_cast<size_t>(in_width) * c;
    uint8_t* temp = buffers.Temp(static_cast<size_t>(out_height) * temp_stride);
    VerticalPass(origin, src_stride, temp_stride, vertical, temp, temp_stride, buffers);
    HorizontalPass(c, temp, temp_stride, in_width, out_height, horizontal, out, out_stride,
                   buffers);
  }
  return true;
}

// The caller's scratch, or else `local`'s.
ResizeScratch::Buffers& ScratchBuffers(ResizeScratch* scratch, ResizeScratch* local) {
  return (scratch != nullptr ? scratch : local)->buffers();
}

// ResampleInto with a new output image; `buffers` is the caller's scratch.
StatusOr<Image> ResampleRegion(const Source& src, const Box& box, int out_height, int out_width,
                               ResizeFilter filter, ResizeScratch::Buffers& buffers) {
  SHARDPACK_RETURN_IF_ERROR(ChosenKernels().status);
  Image out = NewImage(out_height, out_width, src.channels);
  if (!ResampleInto(src, box, out_height, out_width, filter, out.pixels.data(),
                    static_cast<size_t>(out_width) * src.channels, buffers)) {
    return InvalidArgumentError(
        "resize: the window of columns " + std::to_string(src.left) + ".." +
        std::to_string(src.left + src.avail_width) + ", rows " + std::to_string(src.top) + ".." +
        std::to_string(src.top + src.avail_height) +
        " lacks source pixels that the resize reads (FitReadRegion names them)");
  }
  return out;
}

std::string SizeText(int height, int width) {
  return std::to_string(height) + "x" + std::to_string(width) + " (height x width)";
}

Status CheckSourceShape(int height, int width, int channels) {
  if (channels != 1 && channels != 3) {
    return InvalidArgumentError("resize: source has " + std::to_string(channels) +
                                " channels, expected 1 or 3");
  }
  if (height <= 0 || width <= 0) {
    return InvalidArgumentError("resize: source size " + SizeText(height, width) +
                                " must be positive");
  }
  return Status::Ok();
}

Status CheckSource(const Image& src) {
  SHARDPACK_RETURN_IF_ERROR(CheckSourceShape(src.height, src.width, src.channels));
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
  if (height <= 0 || width <= 0 || height > kMaxImageSide || width > kMaxImageSide) {
    return InvalidArgumentError("resize: output size " + SizeText(height, width) +
                                " must be in 1.." + std::to_string(kMaxImageSide));
  }
  return Status::Ok();
}

// round(num / den) with halves rounded up, for positive operands; at least 1.
int RoundHalfUpDiv(int64_t num, int64_t den) {
  return static_cast<int>(std::max<int64_t>((2 * num + den) / (2 * den), 1));
}

// The box must be finite, non-empty and inside the source; written so that NaN fails.
Status CheckBox(float x0, float y0, float x1, float y1, int height, int width) {
  if (!(x0 >= 0.0f && x0 < x1 && x1 <= static_cast<float>(width) && y0 >= 0.0f && y0 < y1 &&
        y1 <= static_cast<float>(height))) {
    return InvalidArgumentError("resize: box (x0, y0, x1, y1) = (" + std::to_string(x0) + ", " +
                                std::to_string(y0) + ", " + std::to_string(x1) + ", " +
                                std::to_string(y1) + ") must be non-empty and inside the " +
                                SizeText(height, width) + " source");
  }
  return Status::Ok();
}

}  // namespace

ResizeScratch::ResizeScratch() = default;
ResizeScratch::~ResizeScratch() = default;
ResizeScratch::ResizeScratch(ResizeScratch&& other) noexcept = default;
ResizeScratch& ResizeScratch::operator=(ResizeScratch&& other) noexcept = default;

ResizeScratch::Buffers& ResizeScratch::buffers() {
  if (buffers_ == nullptr) buffers_ = std::make_unique<Buffers>();
  return *buffers_;
}

namespace {

// The most taps a kernel of an axis from `in_size` to `out_size` has: the widest comes with
// the longest box, the whole source side.
size_t MostTaps(const Kernel& kernel, int in_size, int out_size) {
  const double filter_scale = std::max(static_cast<double>(in_size) / out_size, 1.0);
  return static_cast<size_t>(std::ceil(kernel.support * filter_scale)) * 2 + 1;
}

}  // namespace

void ResizeScratch::Reserve(int max_src_height, int max_src_width, int out_height, int out_width,
                            int channels, ResizeFilter filter) {
  if (max_src_height <= 0 || max_src_width <= 0 || out_height <= 0 || out_width <= 0 ||
      channels <= 0) {
    return;
  }
  Buffers& b = buffers();
  const Kernel kernel = KernelFor(filter);
  const size_t kh = MostTaps(kernel, max_src_width, out_width);
  const size_t kv = MostTaps(kernel, max_src_height, out_height);
  b.horizontal.first.reserve(out_width);
  b.horizontal.count.reserve(out_width);
  b.horizontal.weights.reserve(static_cast<size_t>(out_width) * kh);
  b.horizontal.positions.reserve(static_cast<size_t>(out_width) * kh);
  if (channels == 3 && b.avx2) {
    b.horizontal.packed.reserve(
        internal::PackedSize(out_width, internal::PackedGroups(static_cast<int>(kh))));
    b.horizontal.pair_weights.reserve(
        internal::PairWeightsSize(out_width, internal::VerticalPairs(static_cast<int>(kh))));
    if (b.avx512) {
      b.horizontal.digit_weights.reserve(
          internal::DigitWeightsSize(out_width, internal::TapQuads(static_cast<int>(kh))));
    }
  }
  b.vertical.first.reserve(out_height);
  b.vertical.count.reserve(out_height);
  b.vertical.weights.reserve(static_cast<size_t>(out_height) * kv);
  b.vertical.positions.reserve(static_cast<size_t>(out_height) * kv);
  if (b.avx2) {
    b.vertical.pair_weights.reserve(
        internal::PairWeightsSize(out_height, internal::VerticalPairs(static_cast<int>(kv))));
  }
  if (b.avx512) {
    b.vertical.digit_weights.reserve(
        internal::DigitWeightsSize(out_height, internal::TapQuads(static_cast<int>(kv))));
  }
  if (b.kernel_values.size() < kKernelValueRows * std::max(kh, kv)) {
    b.kernel_values.resize(kKernelValueRows * std::max(kh, kv));
  }
  const size_t c = static_cast<size_t>(channels);
  // Horizontal first: source rows x output row; vertical first: output rows x source row.
  b.Temp(std::max(static_cast<size_t>(max_src_height) * out_width * c,
                  static_cast<size_t>(out_height) * max_src_width * c));
  b.Columns(std::max(ColumnsBytes(max_src_width, max_src_height, channels),
                     ColumnsBytes(max_src_width, out_height, channels)));
  if (channels == 3 && b.avx2) b.Columns(internal::RowBlockLinesBytes(max_src_width, out_width));
}

size_t ResizeScratch::ReserveBytes(int max_src_height, int max_src_width, int out_height,
                                   int out_width, int channels, ResizeFilter filter) {
  if (max_src_height <= 0 || max_src_width <= 0 || out_height <= 0 || out_width <= 0 ||
      channels <= 0) {
    return 0;
  }
  // Reserve's buffers, term by term, with every vector kernel's.
  const Kernel kernel = KernelFor(filter);
  const size_t kh = MostTaps(kernel, max_src_width, out_width);
  const size_t kv = MostTaps(kernel, max_src_height, out_height);
  auto axis = [](int out, size_t k) {
    const size_t n = static_cast<size_t>(out);
    return 2 * n * sizeof(int) + n * k * (sizeof(int32_t) + sizeof(double)) +
           internal::PackedSize(out, internal::PackedGroups(static_cast<int>(k))) *
               sizeof(int16_t) +
           internal::PairWeightsSize(out, internal::VerticalPairs(static_cast<int>(k))) *
               sizeof(int32_t) +
           internal::DigitWeightsSize(out, internal::TapQuads(static_cast<int>(k))) *
               sizeof(int32_t);
  };
  const size_t c = static_cast<size_t>(channels);
  return sizeof(Buffers) + axis(out_width, kh) + axis(out_height, kv) +
         kKernelValueRows * std::max(kh, kv) * sizeof(double) +
         std::max(static_cast<size_t>(max_src_height) * out_width * c,
                  static_cast<size_t>(out_height) * max_src_width * c) +
         std::max({ColumnsBytes(max_src_width, max_src_height, channels),
                   ColumnsBytes(max_src_width, out_height, channels),
                   channels == 3 ? internal::RowBlockLinesBytes(max_src_width, out_width) : 0});
}

size_t ResizeScratch::capacity_bytes() const {
  if (buffers_ == nullptr) return 0;
  const Buffers& b = *buffers_;
  size_t bytes = sizeof(Buffers) + b.kernel_values.capacity() * sizeof(double) + b.temp.capacity() +
                 b.columns.capacity();
  for (const AxisWeights* axis : {&b.horizontal, &b.vertical}) {
    bytes += (axis->first.capacity() + axis->count.capacity()) * sizeof(int) +
             axis->weights.capacity() * sizeof(int32_t) +
             axis->packed.capacity() * sizeof(int16_t) +
             axis->pair_weights.capacity() * sizeof(int32_t) +
             axis->digit_weights.capacity() * sizeof(int32_t) +
             axis->positions.capacity() * sizeof(double);
  }
  return bytes;
}

Status ResizeRegionInto(const uint8_t* src, int src_height, int src_width, int channels,
                        size_t src_stride, float x0, float y0, float x1, float y1, int out_height,
                        int out_width, ResizeFilter filter, uint8_t* out, size_t out_stride,
                        ResizeScratch* scratch) {
  if (src == nullptr || out == nullptr || scratch == nullptr) {
    return InvalidArgumentError("resize: null source, output or scratch");
  }
  SHARDPACK_RETURN_IF_ERROR(ChosenKernels().status);
  SHARDPACK_RETURN_IF_ERROR(CheckSourceShape(src_height, src_width, channels));
  SHARDPACK_RETURN_IF_ERROR(CheckOutputSize(out_height, out_width));
  const size_t src_row = static_cast<size_t>(src_width) * channels;
  if (src_stride < src_row) {
    return InvalidArgumentError("resize: source stride " + std::to_string(src_stride) +
                                " is shorter than a row of " + std::to_string(src_row) + " bytes");
  }
  const size_t out_row = static_cast<size_t>(out_width) * channels;
  if (out_stride < out_row) {
    return InvalidArgumentError("resize: output stride " + std::to_string(out_stride) +
                                " is shorter than a row of " + std::to_string(out_row) + " bytes");
  }
  SHARDPACK_RETURN_IF_ERROR(CheckBox(x0, y0, x1, y1, src_height, src_width));
  const Source source = {src, src_height, src_width,  channels, src_stride,
                         0,   0,          src_height, src_width};
  // The whole source is at hand, so nothing can be missing.
  ResampleInto(source, Box{x0, y0, x1, y1}, out_height, out_width, filter, out, out_stride,
               scratch->buffers());
  return Status::Ok();
}

Status ResizeKernelsStatus() { return ChosenKernels().status; }

StatusOr<Image> Resize(const Image& src, int out_height, int out_width, ResizeFilter filter) {
  SHARDPACK_RETURN_IF_ERROR(CheckSource(src));
  SHARDPACK_RETURN_IF_ERROR(CheckOutputSize(out_height, out_width));
  ResizeScratch::Buffers buffers;
  return ResampleRegion(WholeSource(src), WholeBox(src.height, src.width), out_height, out_width,
                        filter, buffers);
}

namespace {

// Where ResizeFit's output comes from: with kPad, the whole source resampled to
// inner_height x inner_width (then centred); otherwise `box` resampled to the output.
struct FitPlan {
  Box box;
  int inner_height, inner_width;
};

FitPlan PlanFit(int src_height, int src_width, int out_height, int out_width, FitMode fit) {
  FitPlan plan = {WholeBox(src_height, src_width), out_height, out_width};
  // Compare the aspect ratios exactly: src is relatively wider when W/H > out_W/out_H.
  const int64_t src_cross = static_cast<int64_t>(src_width) * out_height;
  const int64_t out_cross = static_cast<int64_t>(src_height) * out_width;
  if (fit == FitMode::kStretch || src_cross == out_cross) return plan;
  const bool wider = src_cross > out_cross;
  if (fit == FitMode::kCrop) {
    // The centred box as ImageOps.fit computes it, in double, then handed over in single
    // precision as Python hands it to Pillow's C code.
    const double out_ratio = static_cast<double>(out_width) / out_height;
    double x0 = 0.0, y0 = 0.0, crop_width = src_width, crop_height = src_height;
    if (wider) {
      crop_width = out_ratio * src_height;
      x0 = (src_width - crop_width) * 0.5;
    } else {
      crop_height = src_width / out_ratio;
      y0 = (src_height - crop_height) * 0.5;
    }
    plan.box = {static_cast<float>(x0), static_cast<float>(y0), static_cast<float>(x0 + crop_width),
                static_cast<float>(y0 + crop_height)};
    return plan;
  }
  if (wider) {
    plan.inner_height = std::min(
        RoundHalfUpDiv(static_cast<int64_t>(src_height) * out_width, src_width), out_height);
  } else {
    plan.inner_width = std::min(
        RoundHalfUpDiv(static_cast<int64_t>(src_width) * out_height, src_height), out_width);
  }
  return plan;
}

StatusOr<Image> FitSource(const Source& src, int out_height, int out_width, FitMode fit,
                          ResizeFilter filter, const uint8_t pad_rgb[3], ResizeScratch* scratch) {
  ResizeScratch local;
  SHARDPACK_RETURN_IF_ERROR(CheckOutputSize(out_height, out_width));
  if (fit == FitMode::kPad && pad_rgb == nullptr) {
    return InvalidArgumentError("resize: FitMode::kPad needs a pad colour, got null");
  }
  const FitPlan plan = PlanFit(src.height, src.width, out_height, out_width, fit);
  if (plan.inner_height == out_height && plan.inner_width == out_width) {
    return ResampleRegion(src, plan.box, out_height, out_width, filter,
                          ScratchBuffers(scratch, &local));
  }
  SHARDPACK_ASSIGN_OR_RETURN(
      const Image inner, ResampleRegion(src, plan.box, plan.inner_height, plan.inner_width, filter,
                                        ScratchBuffers(scratch, &local)));
  const int c = src.channels;
  Image out = NewImage(out_height, out_width, c);
  if (c == 1) {
    const uint8_t luma = Luma601(pad_rgb[0], pad_rgb[1], pad_rgb[2]);
    std::fill(out.pixels.begin(), out.pixels.end(), luma);
  } else {
    for (size_t i = 0; i < out.pixels.size(); i += 3) {
      std::copy(pad_rgb, pad_rgb + 3, out.pixels.begin() + i);
    }
  }
  const int top = (out_height - plan.inner_height) / 2;
  const int left = (out_width - plan.inner_width) / 2;
  const size_t inner_stride = static_cast<size_t>(plan.inner_width) * c;
  for (int y = 0; y < plan.inner_height; ++y) {
    std::copy(inner.row(y), inner.row(y) + inner_stride,
              out.row(top + y) + static_cast<size_t>(left) * c);
  }
  return out;
}

}  // namespace

StatusOr<Image> ResizeFit(const Image& src, int out_height, int out_width, FitMode fit,
                          ResizeFilter filter, const uint8_t pad_rgb[3], ResizeScratch* scratch) {
  SHARDPACK_RETURN_IF_ERROR(CheckSource(src));
  return FitSource(WholeSource(src), out_height, out_width, fit, filter, pad_rgb, scratch);
}

StatusOr<Image> ResizeFitWindow(const ImageWindow& src, int out_height, int out_width, FitMode fit,
                                ResizeFilter filter, const uint8_t pad_rgb[3],
                                ResizeScratch* scratch) {
  const Image& img = src.image;
  SHARDPACK_RETURN_IF_ERROR(CheckSource(img));
  SHARDPACK_RETURN_IF_ERROR(CheckSourceShape(src.full_height, src.full_width, img.channels));
  if (src.height <= 0 || src.width <= 0 || src.x0 < 0 || src.y0 < 0 ||
      src.x0 > img.width - src.width || src.y0 > img.height - src.height) {
    return InvalidArgumentError("resize: window " + SizeText(src.height, src.width) + " at (" +
                                std::to_string(src.x0) + ", " + std::to_string(src.y0) +
                                ") is not inside its " + SizeText(img.height, img.width) +
                                " pixels");
  }
  if (src.left < 0 || src.top < 0 || src.left > src.full_width - src.width ||
      src.top > src.full_height - src.height) {
    return InvalidArgumentError("resize: window " + SizeText(src.height, src.width) + " at (" +
                                std::to_string(src.left) + ", " + std::to_string(src.top) +
                                ") is not inside the " + SizeText(src.full_height, src.full_width) +
                                " image");
  }
  const Source source = {src.row(0),
                         src.full_height,
                         src.full_width,
                         img.channels,
                         static_cast<size_t>(img.width) * img.channels,
                         src.left,
                         src.top,
                         src.height,
                         src.width};
  return FitSource(source, out_height, out_width, fit, filter, pad_rgb, scratch);
}

Region FitReadRegion(int src_height, int src_width, int out_height, int out_width, FitMode fit,
                     ResizeFilter filter) {
  const Region whole = {0, 0, src_width, src_height};
  if (src_height <= 0 || src_width <= 0 || out_height <= 0 || out_width <= 0) return whole;
  const FitPlan plan = PlanFit(src_height, src_width, out_height, out_width, fit);
  // A tap of output pixel i lies within support * max(scale, 1) of its centre, and the
  // centres lie inside the box: Pillow's lo = trunc(centre - support + 0.5) is at least
  // floor(box start - support), hi = trunc(centre + support + 0.5) at most
  // ceil(box end + support) + 1. One more pixel on each side for float slack.
  const double support = KernelFor(filter).support;
  auto axis = [&](float in0, float in1, int out_size, int size, int* begin, int* end) {
    const double reach = support * std::max(static_cast<double>(in1 - in0) / out_size, 1.0);
    *begin = std::max(static_cast<int>(std::floor(in0 - reach)) - 1, 0);
    *end = std::min(static_cast<int>(std::ceil(in1 + reach)) + 2, size);
  };
  Region r;
  axis(plan.box.x0, plan.box.x1, plan.inner_width, src_width, &r.x0, &r.x1);
  axis(plan.box.y0, plan.box.y1, plan.inner_height, src_height, &r.y0, &r.y1);
  return r;
}

StatusOr<Image> ResizeMaxSide(const Image& src, int max_side, ResizeFilter filter,
                              ResizeScratch* scratch) {
  ResizeScratch local;
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
  return ResampleRegion(WholeSource(src), WholeBox(src.height, src.width), out_height, out_width,
                        filter, ScratchBuffers(scratch, &local));
}

namespace internal {

bool HaveAvx2() {
#if defined(SHARDPACK_RESIZE_AVX2)
  static const bool have = cpu::Get().avx2;
  return have;
#else
  return false;
#endif
}

bool HaveAvx512Vnni() {
#if defined(SHARDPACK_RESIZE_AVX2)  // resize_avx512.cc is built with resize_avx2.cc
  static const bool have = HaveAvx2() && cpu::Get().avx512f && cpu::Get().avx512bw &&
                           cpu::Get().avx512vl && cpu::Get().avx512vnni;
  return have;
#else
  return false;
#endif
}

bool HaveAvx512Vbmi() {
#if defined(SHARDPACK_RESIZE_AVX2)  // resize_avx512vbmi.cc is built with resize_avx2.cc
  static const bool have = HaveAvx2() && cpu::Get().avx512f && cpu::Get().avx512bw &&
                           cpu::Get().avx512vl && cpu::Get().avx512vbmi;
  return have;
#else
  return false;
#endif
}

void PackHorizontalWeights(int groups, int16_t* packed, AxisTaps* taps) {
  for (int x = 0; x < taps->out_size; ++x) {
    const int32_t* k = taps->weights + static_cast<size_t>(x) * taps->ksize;
    const int n = taps->count[x];
    int16_t* group = packed + static_cast<size_t>(x) * groups * 32;
    for (int g = 0; g < groups; ++g, group += 32) {
      for (int lane = 0; lane < 2; ++lane) {
        for (int pair = 0; pair < 2; ++pair) {
          const int t = g * 4 + lane * 2 + pair;
          const int32_t w = t < n ? k[t] : 0;
          const auto hi = static_cast<int16_t>(WeightHigh(w));
          const auto lo = static_cast<int16_t>(WeightLow(w));
          for (int ch = 0; ch < 3; ++ch) {
            group[lane * 8 + ch * 2 + pair] = hi;
            group[16 + lane * 8 + ch * 2 + pair] = lo;
          }
        }
        for (int i = 6; i < 8; ++i) group[lane * 8 + i] = group[16 + lane * 8 + i] = 0;
      }
    }
  }
  taps->groups = groups;
  taps->packed = packed;
}

void PackVerticalWeights(int32_t* pair_weights, AxisTaps* taps) {
  const int pairs = VerticalPairs(taps->ksize);
  // Two 16-bit halves in one int32, the first in the low word (vpmaddwd's pair order).
  auto words = [](int32_t first, int32_t second) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(first)) |
                                static_cast<uint32_t>(static_cast<uint16_t>(second)) << 16);
  };
  for (int y = 0; y < taps->out_size; ++y) {
    const int32_t* k = taps->weights + static_cast<size_t>(y) * taps->ksize;
    const int n = taps->count[y];
    int32_t* out = pair_weights + static_cast<size_t>(y) * pairs * 2;
    for (int p = 0; p < pairs; ++p) {
      const int32_t w0 = 2 * p < n ? k[2 * p] : 0;
      const int32_t w1 = 2 * p + 1 < n ? k[2 * p + 1] : 0;
      out[2 * p] = words(WeightHigh(w0), WeightHigh(w1));
      out[2 * p + 1] = words(WeightLow(w0), WeightLow(w1));
    }
  }
  taps->pairs = pairs;
  taps->pair_weights = pair_weights;
}

bool PackDigitWeights(int32_t* digit_weights, AxisTaps* taps) {
  constexpr int32_t kLowest = -128 * (1 + 256 + 65536), kHighest = 127 * (1 + 256 + 65536);
  const int quads = TapQuads(taps->ksize);
  for (int x = 0; x < taps->out_size; ++x) {
    const int32_t* k = taps->weights + static_cast<size_t>(x) * taps->ksize;
    const int n = taps->count[x];
    int32_t* out = digit_weights + static_cast<size_t>(x) * quads * 3;
    for (int q = 0; q < quads; ++q, out += 3) {
      uint32_t digits[3] = {0, 0, 0};
      for (int l = 0; l < 4; ++l) {
        const int t = q * 4 + l;
        const int32_t w = t < n ? k[t] : 0;
        if (w < kLowest || w > kHighest) return false;
        // Digit 0 is w's low byte read as signed; taking it away and shifting leaves
        // floor((w + 128) / 256), whose low byte is digit 1; so digit 1 is byte 1 of
        // w + 0x80 and digit 2 byte 2 of w + 0x8080 (floor divisions nest).
        const auto u = static_cast<uint32_t>(w);
        digits[0] |= (u & 0xFF) << (8 * l);
        digits[1] |= ((u + 0x80) >> 8 & 0xFF) << (8 * l);
        digits[2] |= ((u + 0x8080) >> 16 & 0xFF) << (8 * l);
      }
      for (int d = 0; d < 3; ++d) out[d] = static_cast<int32_t>(digits[d]);
    }
  }
  taps->quads = quads;
  taps->digit_weights = digit_weights;
  return true;
}

void UsePortableKernels(ResizeScratch* scratch) {
  scratch->buffers().avx2 = false;
  scratch->buffers().avx512 = false;
  scratch->buffers().vbmi = false;
}

void UseAvx2Kernels(ResizeScratch* scratch) {
  scratch->buffers().avx512 = false;
  scratch->buffers().vbmi = false;
}

void UseAvx2Transposes(ResizeScratch* scratch) { scratch->buffers().vbmi = false; }

void UseAvx2Sums(ResizeScratch* scratch) { scratch->buffers().avx512 = false; }

void WeighEachSampleAlone(ResizeScratch* scratch) { scratch->buffers().share_weights = false; }

void LanczosValues(const LanczosTaps& taps, double* w) {
  for (int t = 0; t < taps.n; ++t) {
    const double x = taps.x[t];
    double v = 0.0;
    if (-3.0 <= x && x < 3.0) {
      const double x3 = x / 3;
      const double sinc = x == 0.0 ? 1.0
                                   : (taps.sin0 * taps.cos_t[t] + taps.cos0 * taps.sin_t[t]) /
                                         (x * std::numbers::pi);
      const double sinc3 = x3 == 0.0 ? 1.0
                                     : (taps.sin03 * taps.cos_t3[t] + taps.cos03 * taps.sin_t3[t]) /
                                           (x3 * std::numbers::pi);
      v = sinc * sinc3;
    }
    w[t] = v;
  }
}

void FixedWeights(int n, const double* w, double sum, int32_t* fixed) {
  for (int t = 0; t < n; ++t) {
    const double v = (sum != 0.0 ? w[t] / sum : w[t]) * (1 << kPrecisionBits);
    fixed[t] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
  }
}

}  // namespace internal

}  // namespace shardpack::image
