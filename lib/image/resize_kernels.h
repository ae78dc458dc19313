// The resampler's inner loops that have a hand-written vector version (lib/image/
// resize.cc keeps the portable ones). Internal to lib/image.
//
// Every kernel here computes exactly the integer sums of the portable code, so the bytes
// do not depend on the CPU; resize_test.cc holds the two to each other on many shapes.
//
// Thread-safety: reentrant; no global state except the CPU check, a function-local
// static.
#ifndef SHARDPACK_IMAGE_RESIZE_KERNELS_H_
#define SHARDPACK_IMAGE_RESIZE_KERNELS_H_

#include <cstddef>
#include <cstdint>

namespace shardpack::image::internal {

// Fixed point of the weights: 8 bits of sample, 2 bits of headroom for kernels whose
// partial sums leave 0..1 (negative lobes), 22 bits of fraction. Pillow's PRECISION_BITS.
inline constexpr int kPrecisionBits = 32 - 8 - 2;

// A weight w (|w| < 2^23) splits into w = hi * 2^kWeightSplitBits + lo with 0 <= lo <
// 2^kWeightSplitBits: both halves fit in int16, so pmaddwd multiplies a pixel by each
// without loss, and (sum(p * hi) << kWeightSplitBits) + sum(p * lo) is sum(p * w) exactly
// (in wrapping 32-bit arithmetic, and the true sum fits in 32 bits).
inline constexpr int kWeightSplitBits = 11;
// The two halves: hi = floor(w / 2^11) (an arithmetic shift), lo the non-negative rest.
inline int32_t WeightHigh(int32_t w) { return w >> kWeightSplitBits; }
inline int32_t WeightLow(int32_t w) { return w & ((1 << kWeightSplitBits) - 1); }

// The taps of one axis, as resize.cc computes them: output sample x reads count[x]
// source samples from first[x] on, weighted by weights[x * ksize ...] (fixed point,
// kPrecisionBits). For the horizontal pass, `packed` holds the same weights split for
// the AVX2 kernel: per output pixel, `groups` groups of four taps, each 16 int16 of high
// halves then 16 of low halves, laid out as lane 0 = {w0, w1} x 3 channels + 2 zeros and
// lane 1 = {w2, w3} x 3 + 2 zeros; taps past count[x] are 0. PackHorizontalWeights fills
// it.
struct AxisTaps {
  int out_size = 0;
  int ksize = 0;
  const int* first = nullptr;
  const int* count = nullptr;
  const int32_t* weights = nullptr;
  int groups = 0;
  const int16_t* packed = nullptr;
  // For the vertical pass: per output row, `pairs` pairs of taps {t, t + 1} (t even), each
  // as two int32: the high halves {hi_t, hi_t+1} as 16-bit words, then the low halves;
  // a tap past count[y] is 0. PackVerticalWeights fills it.
  int pairs = 0;
  const int32_t* pair_weights = nullptr;
  // For the AVX-512 vertical kernel: per output sample, `quads` groups of four taps, each
  // as three int32 of digits (PackDigitWeights); a tap past count[y] is 0. Where these are
  // set, ResampleColumnsVector runs that kernel; else the AVX2 one with pair_weights.
  int quads = 0;
  const int32_t* digit_weights = nullptr;
};

// int16 values `packed` needs for out_size pixels of at most max_count taps, and the
// number of groups.
inline int PackedGroups(int max_count) { return (max_count + 3) / 4; }
inline size_t PackedSize(int out_size, int groups) {
  return static_cast<size_t>(out_size) * groups * 32;
}

// Fills taps->packed (PackedSize(out_size, groups) values at `packed`) from the int32
// weights; sets taps->groups and taps->packed.
void PackHorizontalWeights(int groups, int16_t* packed, AxisTaps* taps);

// int32 values `pair_weights` needs for out_size rows of at most ksize taps, and the
// number of pairs per row.
inline int VerticalPairs(int ksize) { return (ksize + 1) / 2; }
inline size_t PairWeightsSize(int out_size, int pairs) {
  return static_cast<size_t>(out_size) * pairs * 2;
}

// Fills taps->pair_weights (PairWeightsSize(out_size, VerticalPairs(ksize)) values at
// `pair_weights`) from the int32 weights; sets taps->pairs and taps->pair_weights.
void PackVerticalWeights(int32_t* pair_weights, AxisTaps* taps);

// int32 values `digit_weights` needs for out_size samples of at most ksize taps, and the
// number of quads per sample.
inline int TapQuads(int ksize) { return (ksize + 3) / 4; }
inline size_t DigitWeightsSize(int out_size, int quads) {
  return static_cast<size_t>(out_size) * quads * 3;
}

// Fills taps->digit_weights (DigitWeightsSize(out_size, TapQuads(ksize)) values) from the
// int32 weights; sets taps->quads and taps->digit_weights. Each weight w is cut into
// signed base-256 digits, w = d0 + d1 * 2^8 + d2 * 2^16 with each d in -128..127; int32 k
// of a quad holds digit k of its four taps, tap l in byte l (the order in which vpdpbusd
// pairs them with the four interleaved rows). False when a weight lies outside what three
// digits hold, -8,421,504..8,355,711 (about -2..2 in fixed point; Pillow's normalised
// weights stay within 1): the AVX-512 kernel must not run on those taps.
bool PackDigitWeights(int32_t* digit_weights, AxisTaps* taps);

// True when this CPU runs the AVX2 kernels (and this build has them).
bool HaveAvx2();
// True when this CPU runs the AVX-512 kernel (AVX-512 F, BW, VL and VNNI; this build has
// it).
bool HaveAvx512Vnni();
// True when this CPU runs the AVX-512 transposes (AVX-512 F, BW, VL and VBMI; this build
// has them).
bool HaveAvx512Vbmi();

// The Lanczos kernel at the taps of one output sample, as Pillow's precompute_coeffs
// evaluates it, its sines by angle addition: for t < n, w[t] = sinc(x[t]) sinc(x[t] / 3)
// for -3 <= x[t] < 3, else 0, where sinc(x) = sin(pi x) / (pi x) (1 at 0), sin(pi x[t]) =
// sin0 cos_t[t] + cos0 sin_t[t] and sin(pi x[t] / 3) = sin03 cos_t3[t] + cos03 sin_t3[t]
// (sin0 and the rest are those of pi x[0] and pi x[0] / 3; the tables those of t times
// the taps' spacing). The positions and the tables hold at least n values.
struct LanczosTaps {
  int n = 0;
  const double* x = nullptr;
  double sin0 = 0.0, cos0 = 0.0, sin03 = 0.0, cos03 = 0.0;
  const double* sin_t = nullptr;
  const double* cos_t = nullptr;
  const double* sin_t3 = nullptr;
  const double* cos_t3 = nullptr;
};
// Writes w[0..n). The AVX2 form (call only when HaveAvx2()) computes four taps at a time
// with the same operations in the same order, and no fused multiply-add (the file is built
// without -mfma): the same doubles, so the same fixed-point weights.
void LanczosValues(const LanczosTaps& taps, double* w);
void LanczosValuesAvx2(const LanczosTaps& taps, double* w);

// Pillow's normalize_coeffs_8bpc for one output sample: fixed[t] = w[t] / sum (w[t] when
// sum is 0) times 2^kPrecisionBits, rounded half away from zero, for t < n. The AVX2 form
// (call only when HaveAvx2()) gives the same integers.
void FixedWeights(int n, const double* w, double sum, int32_t* fixed);
void FixedWeightsAvx2(int n, const double* w, double sum, int32_t* fixed);

// Horizontal pass over 3-channel rows with AVX2 (call only when HaveAvx2()): each of
// `rows` rows of `in` (rows in_stride bytes apart, in_width pixels each; no byte past
// in_width * 3 of a row is read) becomes taps.out_size pixels at out (rows out_stride
// apart). Same bytes as the portable pass.
void ResampleRowsRgbAvx2(const uint8_t* in, size_t in_stride, int in_width, int rows,
                         const AxisTaps& taps, uint8_t* out, size_t out_stride);

// Horizontal pass over 3-channel rows with AVX2 (call only when HaveAvx2()), as
// ResampleRowsRgbAvx2 but kRowBlockRows rows at a time, transposed: each block's source
// columns become lines of kRowLineBytes (kRowLineStride apart) in `lines`, which
// ResampleColumnsVector sums with the taps (packed as for the vertical pass), and back. `lines`
// holds RowBlockLinesBytes(in_width, out_size) bytes. Returns the rows done, the largest multiple
// of kRowBlockRows up to `rows`; the caller sums the rest. No byte past in_width * 3 of a source
// row is read, and none past out_size * 3 of an output row is written. Same bytes as the portable
// pass. With `vbmi` (call so only when HaveAvx512Vbmi()) the blocks are transposed by
// RowsToLinesAvx512 and LinesToRowsAvx512.
inline constexpr int kRowBlockRows = 32;
inline constexpr size_t kRowLineBytes = kRowBlockRows * 3;
inline constexpr size_t kRowLineStride = kRowLineBytes + 4;
inline size_t RowBlockLinesBytes(int in_width, int out_width) {
  return static_cast<size_t>(in_width + out_width) * kRowLineStride;
}
int ResampleRowBlocksRgbAvx2(const uint8_t* in, size_t in_stride, int in_width, int rows,
                             const AxisTaps& taps, uint8_t* out, size_t out_stride, uint8_t* lines,
                             bool vbmi);
// The transposes of one block of kRowBlockRows rows with AVX-512 VBMI (call only when
// HaveAvx512Vbmi()), 16 rows of four pixels at a time: RowsToLinesAvx512 writes line x
// (kRowLineStride apart in `lines`) with column x of the block's rows, LinesToRowsAvx512
// writes each row of block_out (out_stride apart) from the lines. Each does the columns
// from 0 while a 16-byte load or store at one stays inside its row, and returns how many:
// the caller moves the rest. Same bytes as the AVX2 transposes.
int RowsToLinesAvx512(const uint8_t* block, size_t in_stride, int in_width, uint8_t* lines);
int LinesToRowsAvx512(const uint8_t* lines, int out_width, uint8_t* block_out, size_t out_stride);
// Vertical pass with AVX2 (call only when HaveAvx2()): output row y (at out + y *
// out_stride) is the weighted sum of source rows first[y]..first[y] + count[y] (at in,
// in_stride apart), with the weights packed by PackVerticalWeights, for the first
// row_bytes rounded down to 32 bytes of each row (the caller sums the rest). Same bytes as
// the portable pass, any channel count. Returns the bytes done per row.
size_t ResampleColumnsAvx2(const uint8_t* in, size_t in_stride, size_t row_bytes,
                           const AxisTaps& taps, uint8_t* out, size_t out_stride);
// The same with AVX-512 VNNI (call only when HaveAvx512Vnni()), with the weights packed by
// PackDigitWeights, for all row_bytes of each row (masked loads and stores: no byte past
// row_bytes is read or written). Returns row_bytes.
size_t ResampleColumnsAvx512(const uint8_t* in, size_t in_stride, size_t row_bytes,
                             const AxisTaps& taps, uint8_t* out, size_t out_stride);
// The vertical kernel the taps are packed for: ResampleColumnsAvx512 where they carry
// digit_weights (call only when HaveAvx512Vnni()), else ResampleColumnsAvx2 with their
// pair_weights (call only when HaveAvx2()). Returns the bytes done per row.
size_t ResampleColumnsVector(const uint8_t* in, size_t in_stride, size_t row_bytes,
                             const AxisTaps& taps, uint8_t* out, size_t out_stride);

}  // namespace shardpack::image::internal

#endif  // SHARDPACK_IMAGE_RESIZE_KERNELS_H_
