// Built with -mavx2 (lib/CMakeLists.txt); called only when the CPU has AVX2
// (internal::HaveAvx2).
//
// The horizontal pass over RGB rows. The portable pass transposes blocks of rows so that
// the compiler can vectorise across rows; here each output pixel is summed in place
// instead, four taps at a time: one 16-byte load covers four RGB pixels (12 bytes),
// vpshufb spreads them into 16-bit pairs {p[t], p[t+1]} per channel, and vpmaddwd
// multiplies each pair by the two taps' weights and adds them. The weights have 23
// significant bits, more than vpmaddwd's 16, so each is split into a high and a low half
// (resize_kernels.h) and the two sums are recombined: the result is the exact 32-bit sum
// of the portable code, so the same bytes.
//
// That in-place sum takes about 16 instructions for the 21 multiply-adds of a 7-tap
// pixel; the vertical pass needs about half as many per multiply-add. So rows go through
// the horizontal pass 32 at a time, transposed (ResampleRowBlocksRgbAvx2): each source
// column of the block becomes a 96-byte line (32 rows x RGB), the vertical kernel sums
// the lines with the horizontal taps, and the output lines are transposed back, four
// pixels of four rows per shuffle. Same sums, so the same bytes; the converter's resize
// of a 350x280 photo to 256x256 ran 1.1-1.5x as fast (bench/micro_bench BM_ResizeCrop).
// The rows left over go through one more block that overlaps the last where enough are
// left (resize.cc, OverlapLastBlock); fewer, and images of fewer than 32 rows, are summed in
// place.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <numbers>

#include "image/resize_kernels.h"

namespace shardpack::image::internal {
namespace {

constexpr int32_t kRoundingHalf = 1 << (kPrecisionBits - 1);

// Lane 0 takes taps 0 and 1 (bytes 0..5), lane 1 taps 2 and 3 (bytes 6..11), each as
// 16-bit {R0, R1, G0, G1, B0, B1, 0, 0}; -1 writes a zero byte.
inline __m256i PairShuffle() {
  return _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                          6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
}

// The portable sum for one output pixel, for the pixels whose vector loads would read
// past the end of the row.
inline void PixelScalar(const uint8_t* row, const AxisTaps& taps, int x, uint8_t* dst) {
  const int32_t* k = taps.weights + static_cast<size_t>(x) * taps.ksize;
  const uint8_t* p = row + static_cast<size_t>(taps.first[x]) * 3;
  int32_t s0 = kRoundingHalf;
  int32_t s1 = kRoundingHalf;
  int32_t s2 = kRoundingHalf;
  for (int t = 0; t < taps.count[x]; ++t, p += 3) {
    s0 += p[0] * k[t];
    s1 += p[1] * k[t];
    s2 += p[2] * k[t];
  }
  dst[0] = static_cast<uint8_t>(std::clamp(s0 >> kPrecisionBits, 0, 255));
  dst[1] = static_cast<uint8_t>(std::clamp(s1 >> kPrecisionBits, 0, 255));
  dst[2] = static_cast<uint8_t>(std::clamp(s2 >> kPrecisionBits, 0, 255));
}

// Recombines the split sums of one pixel (lanes {R, G, B, 0} x 2 tap pairs), rounds,
// shifts and clips: the pixel's three bytes in the low bytes of the result.
inline uint32_t FinishPixel(__m256i hi, __m256i lo) {
  const __m256i sum = _mm256_add_epi32(_mm256_slli_epi32(hi, kWeightSplitBits), lo);
  __m128i v = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  v = _mm_srai_epi32(_mm_add_epi32(v, _mm_set1_epi32(kRoundingHalf)), kPrecisionBits);
  v = _mm_packs_epi32(v, v);   // to int16, saturating (the values are small)
  v = _mm_packus_epi16(v, v);  // to 0..255, saturating: the clip
  return static_cast<uint32_t>(_mm_cvtsi128_si32(v));
}

// FinishPixel for four rows at once, sharing the rounding, shift and packing: the same
// values, in fewer instructions.
inline void FinishFourPixels(const __m256i hi[4], const __m256i lo[4], uint32_t pixels[4]) {
  const __m256i sum[4] = {_mm256_add_epi32(_mm256_slli_epi32(hi[0], kWeightSplitBits), lo[0]),
                          _mm256_add_epi32(_mm256_slli_epi32(hi[1], kWeightSplitBits), lo[1]),
                          _mm256_add_epi32(_mm256_slli_epi32(hi[2], kWeightSplitBits), lo[2]),
                          _mm256_add_epi32(_mm256_slli_epi32(hi[3], kWeightSplitBits), lo[3])};
  // {row 0 | row 1} and {row 2 | row 3}, each the sum of its two tap-pair lanes.
  const __m256i half = _mm256_set1_epi32(kRoundingHalf);
  __m256i a = _mm256_add_epi32(_mm256_permute2x128_si256(sum[0], sum[1], 0x20),
                               _mm256_permute2x128_si256(sum[0], sum[1], 0x31));
  __m256i b = _mm256_add_epi32(_mm256_permute2x128_si256(sum[2], sum[3], 0x20),
                               _mm256_permute2x128_si256(sum[2], sum[3], 0x31));
  a = _mm256_srai_epi32(_mm256_add_epi32(a, half), kPrecisionBits);
  b = _mm256_srai_epi32(_mm256_add_epi32(b, half), kPrecisionBits);
  // Per 128-bit lane: lane 0 = {row 0, row 2}, lane 1 = {row 1, row 3}, clipped to bytes.
  __m256i packed = _mm256_packs_epi32(a, b);
  packed = _mm256_packus_epi16(packed, packed);
  const __m128i low = _mm256_castsi256_si128(packed);
  const __m128i high = _mm256_extracti128_si256(packed, 1);
  pixels[0] = static_cast<uint32_t>(_mm_cvtsi128_si32(low));
  pixels[2] = static_cast<uint32_t>(_mm_extract_epi32(low, 1));
  pixels[1] = static_cast<uint32_t>(_mm_cvtsi128_si32(high));
  pixels[3] = static_cast<uint32_t>(_mm_extract_epi32(high, 1));
}

inline void StorePixel(uint32_t value, bool last, uint8_t* dst) {
  // The fourth byte belongs to the next pixel, which is written after this one.
  if (last) {
    std::memcpy(dst, &value, 3);
  } else {
    std::memcpy(dst, &value, 4);
  }
}

// kRows rows at once, so that each weight vector is loaded once for all of them.
// kGroups > 0: the number of tap groups, known at compile time (fully unrolled); 0: any,
// taken from taps.groups.
template <int kRows, int kGroups>
inline void Rows(const uint8_t* in, size_t in_stride, int vector_end, const AxisTaps& taps,
                 uint8_t* out, size_t out_stride) {
  const __m256i shuffle = PairShuffle();
  const int out_width = taps.out_size;
  const int groups = kGroups > 0 ? kGroups : taps.groups;
  for (int x = 0; x < out_width; ++x) {
    uint8_t* dst = out + static_cast<size_t>(x) * 3;
    const bool last = x + 1 == out_width;
    if (taps.first[x] >= vector_end) {
      for (int r = 0; r < kRows; ++r)
        PixelScalar(in + r * in_stride, taps, x, dst + r * out_stride);
      continue;
    }
    const size_t offset = static_cast<size_t>(taps.first[x]) * 3;
    const int16_t* w = taps.packed + static_cast<size_t>(x) * groups * 32;
    __m256i hi[kRows];
    __m256i lo[kRows];
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) hi[r] = lo[r] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int g = 0; g < groups; ++g, w += 32) {
      const __m256i wh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
      const __m256i wl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16));
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* p = in + r * in_stride + offset + static_cast<size_t>(g) * 12;
        const __m256i px = _mm256_shuffle_epi8(
            _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            shuffle);
        hi[r] = _mm256_add_epi32(hi[r], _mm256_madd_epi16(px, wh));
        lo[r] = _mm256_add_epi32(lo[r], _mm256_madd_epi16(px, wl));
      }
    }
    if constexpr (kRows == 4) {
      uint32_t pixels[4];
      FinishFourPixels(hi, lo, pixels);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) StorePixel(pixels[r], last, dst + r * out_stride);
    } else {
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        StorePixel(FinishPixel(hi[r], lo[r]), last, dst + r * out_stride);
      }
    }
  }
}

template <int kGroups>
void RowsOf(const uint8_t* in, size_t in_stride, int rows, int vector_end, const AxisTaps& taps,
            uint8_t* out, size_t out_stride) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    Rows<4, kGroups>(in + r * in_stride, in_stride, vector_end, taps, out + r * out_stride,
                     out_stride);
  }
  for (; r < rows; ++r) {
    Rows<1, kGroups>(in + r * in_stride, in_stride, vector_end, taps, out + r * out_stride,
                     out_stride);
  }
}

// One pair of source rows into the vertical sums of 32 samples: the rows' bytes are
// interleaved into 16-bit pairs {a[x], b[x]}, which vpmaddwd multiplies by the pair of
// weights' high and low halves. Sums j = 0..3 hold samples {4j..4j+3, 16+4j..16+4j+3}
// (the 128-bit lanes), the order in which FinishColumns packs them back.
inline void AccumulateRowPair(__m256i a, __m256i b, int32_t weight_hi, int32_t weight_lo,
                              __m256i hi[4], __m256i lo[4]) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i wh = _mm256_set1_epi32(weight_hi);
  const __m256i wl = _mm256_set1_epi32(weight_lo);
  const __m256i ab_low = _mm256_unpacklo_epi8(a, b);
  const __m256i ab_high = _mm256_unpackhi_epi8(a, b);
  const __m256i pairs[4] = {_mm256_unpacklo_epi8(ab_low, zero), _mm256_unpackhi_epi8(ab_low, zero),
                            _mm256_unpacklo_epi8(ab_high, zero),
                            _mm256_unpackhi_epi8(ab_high, zero)};
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    hi[j] = _mm256_add_epi32(hi[j], _mm256_madd_epi16(pairs[j], wh));
    lo[j] = _mm256_add_epi32(lo[j], _mm256_madd_epi16(pairs[j], wl));
  }
}

// Recombines, rounds, shifts and clips the sums of AccumulateRowPair: 32 bytes in order.
inline __m256i FinishColumns(const __m256i hi[4], const __m256i lo[4]) {
  const __m256i half = _mm256_set1_epi32(kRoundingHalf);
  __m256i v[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m256i sum = _mm256_add_epi32(_mm256_slli_epi32(hi[j], kWeightSplitBits), lo[j]);
    v[j] = _mm256_srai_epi32(_mm256_add_epi32(sum, half), kPrecisionBits);
  }
  // Per lane: {0-3, 4-7} and {8-11, 12-15} as int16, then bytes 0-15 (lane 1: 16-31).
  return _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
}

inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void Store16(uint8_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

// Four rows of four 3-byte pixels (the first 12 bytes of each input) to four columns of
// four (the first 12 bytes of each output; the last 4 are zero): out[j] holds pixel j of
// rows 0..3.
inline void TransposePixels4x4(__m128i a, __m128i b, __m128i c, __m128i d, __m128i out[4]) {
  const __m128i widen = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
  const __m128i narrow = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  a = _mm_shuffle_epi8(a, widen);
  b = _mm_shuffle_epi8(b, widen);
  c = _mm_shuffle_epi8(c, widen);
  d = _mm_shuffle_epi8(d, widen);
  const __m128i ab_low = _mm_unpacklo_epi32(a, b);   // a0 b0 a1 b1
  const __m128i cd_low = _mm_unpacklo_epi32(c, d);   // c0 d0 c1 d1
  const __m128i ab_high = _mm_unpackhi_epi32(a, b);  // a2 b2 a3 b3
  const __m128i cd_high = _mm_unpackhi_epi32(c, d);  // c2 d2 c3 d3
  out[0] = _mm_shuffle_epi8(_mm_unpacklo_epi64(ab_low, cd_low), narrow);
  out[1] = _mm_shuffle_epi8(_mm_unpackhi_epi64(ab_low, cd_low), narrow);
  out[2] = _mm_shuffle_epi8(_mm_unpacklo_epi64(ab_high, cd_high), narrow);
  out[3] = _mm_shuffle_epi8(_mm_unpackhi_epi64(ab_high, cd_high), narrow);
}

}  // namespace

size_t ResampleColumnsAvx2(const uint8_t* in, size_t in_stride, size_t row_bytes,
                           const AxisTaps& taps, uint8_t* out, size_t out_stride) {
  constexpr size_t kStep = 32;
  const size_t done = row_bytes / kStep * kStep;
  for (int y = 0; y < taps.out_size; ++y) {
    const uint8_t* src = in + static_cast<size_t>(taps.first[y]) * in_stride;
    const int n = taps.count[y];
    const int32_t* w = taps.pair_weights + static_cast<size_t>(y) * taps.pairs * 2;
    uint8_t* dst = out + static_cast<size_t>(y) * out_stride;
    for (size_t i = 0; i < done; i += kStep) {
      __m256i hi[4];
      __m256i lo[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) hi[j] = lo[j] = _mm256_setzero_si256();
      const uint8_t* p = src + i;
      int t = 0;
      for (; t + 1 < n; t += 2, p += 2 * in_stride) {
        AccumulateRowPair(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + in_stride)), w[t],
                          w[t + 1], hi, lo);
      }
      if (t < n) {
        // The odd last tap: its pair's second weight is 0, and the row past it is not read.
        AccumulateRowPair(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                          _mm256_setzero_si256(), w[t], w[t + 1], hi, lo);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), FinishColumns(hi, lo));
    }
  }
  return done;
}

size_t ResampleColumnsVector(const uint8_t* in, size_t in_stride, size_t row_bytes,
                             const AxisTaps& taps, uint8_t* out, size_t out_stride) {
  return taps.digit_weights != nullptr
             ? ResampleColumnsAvx512(in, in_stride, row_bytes, taps, out, out_stride)
             : ResampleColumnsAvx2(in, in_stride, row_bytes, taps, out, out_stride);
}

int ResampleRowBlocksRgbAvx2(const uint8_t* in, size_t in_stride, int in_width, int rows,
                             const AxisTaps& taps, uint8_t* out, size_t out_stride, uint8_t* lines,
                             bool vbmi) {
  const int out_width = taps.out_size;
  uint8_t* in_lines = lines;
  uint8_t* out_lines = lines + static_cast<size_t>(in_width) * kRowLineStride;
  int r0 = 0;
  for (; r0 + kRowBlockRows <= rows; r0 += kRowBlockRows) {
    const uint8_t* block = in + static_cast<size_t>(r0) * in_stride;
    // In: line x holds source column x of the block's rows, row by row, 3 bytes each.
    // Four columns of four rows at a time (of 16 with VBMI); a 16-byte load at column x
    // reads to x + 5.33, so the last columns are copied one by one.
    int x = vbmi ? RowsToLinesAvx512(block, in_stride, in_width, in_lines) : 0;
    for (; x + 6 <= in_width; x += 4) {
      uint8_t* dst = in_lines + static_cast<size_t>(x) * kRowLineStride;
      const uint8_t* src = block + static_cast<size_t>(x) * 3;
#pragma GCC unroll 8
      for (int r = 0; r < kRowBlockRows; r += 4, src += 4 * in_stride) {
        __m128i c[4];
        TransposePixels4x4(Load16(src), Load16(src + in_stride), Load16(src + 2 * in_stride),
                           Load16(src + 3 * in_stride), c);
        // 16 bytes each, 12 of them the pixels: the rest is written over by the next rows
        // or falls in the line's spare bytes.
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) Store16(dst + j * kRowLineStride + r * 3, c[j]);
      }
    }
    for (; x < in_width; ++x) {
      uint8_t* dst = in_lines + static_cast<size_t>(x) * kRowLineStride;
      const uint8_t* src = block + static_cast<size_t>(x) * 3;
      for (int r = 0; r < kRowBlockRows; ++r) std::memcpy(dst + r * 3, src + r * in_stride, 3);
    }
    ResampleColumnsVector(in_lines, kRowLineStride, kRowLineBytes, taps, out_lines, kRowLineStride);
    // Out: the same the other way; a 16-byte store at pixel x writes to x + 5.33, and the
    // bytes past x + 4 are written over by the next columns, so the last ones one by one.
    uint8_t* block_out = out + static_cast<size_t>(r0) * out_stride;
    x = vbmi ? LinesToRowsAvx512(out_lines, out_width, block_out, out_stride) : 0;
    for (; x + 6 <= out_width; x += 4) {
      const uint8_t* src = out_lines + static_cast<size_t>(x) * kRowLineStride;
      uint8_t* dst = block_out + static_cast<size_t>(x) * 3;
#pragma GCC unroll 8
      for (int r = 0; r < kRowBlockRows; r += 4, dst += 4 * out_stride) {
        __m128i p[4];
        TransposePixels4x4(Load16(src + r * 3), Load16(src + kRowLineStride + r * 3),
                           Load16(src + 2 * kRowLineStride + r * 3),
                           Load16(src + 3 * kRowLineStride + r * 3), p);
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) Store16(dst + i * out_stride, p[i]);
      }
    }
    for (; x < out_width; ++x) {
      const uint8_t* src = out_lines + static_cast<size_t>(x) * kRowLineStride;
      uint8_t* dst = block_out + static_cast<size_t>(x) * 3;
      for (int r = 0; r < kRowBlockRows; ++r) std::memcpy(dst + r * out_stride, src + r * 3, 3);
    }
  }
  return r0;
}

void ResampleRowsRgbAvx2(const uint8_t* in, size_t in_stride, int in_width, int rows,
                         const AxisTaps& taps, uint8_t* out, size_t out_stride) {
  // The vector loads of a pixel whose taps start at `first` read 16 bytes from
  // first * 3 + 12 * g, g < groups: inside the row while first * 3 + 12 * (groups - 1) +
  // 16 <= in_width * 3. Pixels from vector_end on are summed one by one.
  const int slack = in_width * 3 - 12 * (taps.groups - 1) - 16;
  const int vector_end = slack < 0 ? 0 : slack / 3 + 1;
  // Shrinking by up to about 1.2x (Lanczos) or 2.5x (bilinear) needs at most 8 taps: two
  // groups, the common case; bilinear and area upscaling (the loader's random-resized-crop)
  // need one. Those counts are unrolled.
  if (taps.groups == 1) {
    RowsOf<1>(in, in_stride, rows, vector_end, taps, out, out_stride);
  } else if (taps.groups == 2) {
    RowsOf<2>(in, in_stride, rows, vector_end, taps, out, out_stride);
  } else if (taps.groups == 3) {
    RowsOf<3>(in, in_stride, rows, vector_end, taps, out, out_stride);
  } else {
    RowsOf<0>(in, in_stride, rows, vector_end, taps, out, out_stride);
  }
}

// The lanes of a group of four taps from t on that lie below n: all four, or the first
// n - t (for the masked loads and stores of the last group).
inline __m256i TapMask(int t, int n) {
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - t), _mm256_setr_epi64x(0, 1, 2, 3));
}

void LanczosValuesAvx2(const LanczosTaps& taps, double* w) {
  const __m256d pi = _mm256_set1_pd(std::numbers::pi);
  const __m256d three = _mm256_set1_pd(3.0);
  const __m256d minus_three = _mm256_set1_pd(-3.0);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d zero = _mm256_setzero_pd();
  const __m256d sin0 = _mm256_set1_pd(taps.sin0), cos0 = _mm256_set1_pd(taps.cos0);
  const __m256d sin03 = _mm256_set1_pd(taps.sin03), cos03 = _mm256_set1_pd(taps.cos03);
  for (int t = 0; t < taps.n; t += 4) {
    const __m256i mask = TapMask(t, taps.n);
    // Past n the lanes compute from zeros (a 0 / 0 among them) and are not stored.
    const __m256d x = _mm256_maskload_pd(taps.x + t, mask);
    const __m256d sin_t = _mm256_maskload_pd(taps.sin_t + t, mask);
    const __m256d cos_t = _mm256_maskload_pd(taps.cos_t + t, mask);
    const __m256d sin_t3 = _mm256_maskload_pd(taps.sin_t3 + t, mask);
    const __m256d cos_t3 = _mm256_maskload_pd(taps.cos_t3 + t, mask);
    const __m256d x3 = _mm256_div_pd(x, three);
    __m256d sinc =
        _mm256_div_pd(_mm256_add_pd(_mm256_mul_pd(sin0, cos_t), _mm256_mul_pd(cos0, sin_t)),
                      _mm256_mul_pd(x, pi));
    sinc = _mm256_blendv_pd(sinc, one, _mm256_cmp_pd(x, zero, _CMP_EQ_OQ));
    __m256d sinc3 =
        _mm256_div_pd(_mm256_add_pd(_mm256_mul_pd(sin03, cos_t3), _mm256_mul_pd(cos03, sin_t3)),
                      _mm256_mul_pd(x3, pi));
    sinc3 = _mm256_blendv_pd(sinc3, one, _mm256_cmp_pd(x3, zero, _CMP_EQ_OQ));
    const __m256d inside = _mm256_and_pd(_mm256_cmp_pd(minus_three, x, _CMP_LE_OQ),
                                         _mm256_cmp_pd(x, three, _CMP_LT_OQ));
    _mm256_maskstore_pd(w + t, mask, _mm256_and_pd(_mm256_mul_pd(sinc, sinc3), inside));
  }
}

void FixedWeightsAvx2(int n, const double* w, double sum, int32_t* fixed) {
  const __m256d divisor = _mm256_set1_pd(sum);
  const bool divide = sum != 0.0;
  const __m256d one_fixed = _mm256_set1_pd(1 << kPrecisionBits);
  const __m256d half = _mm256_set1_pd(0.5);
  const __m256d zero = _mm256_setzero_pd();
  for (int t = 0; t < n; t += 4) {
    const __m256i mask = TapMask(t, n);
    __m256d v = _mm256_maskload_pd(w + t, mask);
    if (divide) v = _mm256_div_pd(v, divisor);
    v = _mm256_mul_pd(v, one_fixed);
    // v - 0.5 below zero, v + 0.5 from zero on, then truncated: half away from zero.
    const __m256d rounded = _mm256_blendv_pd(_mm256_add_pd(v, half), _mm256_sub_pd(v, half),
                                             _mm256_cmp_pd(v, zero, _CMP_LT_OQ));
    // The low 32 bits of each 64-bit lane of the mask select the int32 lanes.
    const __m128i mask32 = _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(mask, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
    _mm_maskstore_epi32(fixed + t, mask32, _mm256_cvttpd_epi32(rounded));
  }
}

}  // namespace shardpack::image::internal
