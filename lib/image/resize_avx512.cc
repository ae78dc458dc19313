// Built with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (lib/CMakeLists.txt); called only
// when the CPU has them (internal::HaveAvx512Vnni).
//
// The vertical pass with vpdpbusd, which multiplies four unsigned bytes by four signed
// bytes and adds the four products to an int32. Four source rows are interleaved so that
// each int32 holds one sample of each, {a[x], b[x], c[x], d[x]}; the four taps' weights
// (23 significant bits) are cut into three signed base-256 digits (resize_kernels.h), one
// vpdpbusd per digit; the digit sums, shifted by 0, 8 and 16 bits and added, are the exact
// 32-bit sum of the portable code, so the same bytes.
//
// Per four taps and 32 samples that is 8 shuffles and 12 vpdpbusd, where the AVX2 kernel
// takes 12 shuffles, 16 vpmaddwd and 16 additions: 20 vector instructions against 44. On
// Zen 4, whose two pipes for multiplies also take the shuffles and shifts, the two measure
// the same; on Intel's cores, whose shuffles, multiplies and additions share three ports,
// a model (llvm-mca) expects it faster, not yet measured (docs/DESIGN.md).
#include <immintrin.h>

#include <algorithm>

#include "image/resize_kernels.h"

namespace shardpack::image::internal {
namespace {

constexpr int32_t kRoundingHalf = 1 << (kPrecisionBits - 1);

// The digit sums of 32 samples: s0 started at the rounding half, s1 and s2 the digits
// worth 2^8 and 2^16. Vector j holds samples {4j..4j+3} of each 16-byte lane, the order
// the interleaving leaves them in and the one Finish packs back.
struct Sums {
  __m256i s0[4], s1[4], s2[4];
};

// sum += the four products of each int32's unsigned bytes in q with the signed bytes in w
// (vpdpbusd). Written in place by inline assembly: GCC 12 gives the intrinsic a fresh
// register and copies it back, two more instructions per sum in the loop.
inline __m256i DotAdd(__m256i sum, __m256i q, __m256i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(sum) : "v"(q), "v"(w));
  return sum;
}

// Adds four rows' samples (the 32 bytes at a, b, c and d under `mask`; the others read as
// 0 and are never loaded) times the digits w0..w2 of their four taps.
inline void AccumulateQuad(const uint8_t* a, const uint8_t* b, const uint8_t* c, const uint8_t* d,
                           __mmask32 mask, __m256i w0, __m256i w1, __m256i w2, Sums* sums) {
  const __m256i ra = _mm256_maskz_loadu_epi8(mask, a);
  const __m256i rb = _mm256_maskz_loadu_epi8(mask, b);
  const __m256i rc = _mm256_maskz_loadu_epi8(mask, c);
  const __m256i rd = _mm256_maskz_loadu_epi8(mask, d);
  const __m256i ab_low = _mm256_unpacklo_epi8(ra, rb);
  const __m256i ab_high = _mm256_unpackhi_epi8(ra, rb);
  const __m256i cd_low = _mm256_unpacklo_epi8(rc, rd);
  const __m256i cd_high = _mm256_unpackhi_epi8(rc, rd);
  const __m256i q[4] = {
      _mm256_unpacklo_epi16(ab_low, cd_low), _mm256_unpackhi_epi16(ab_low, cd_low),
      _mm256_unpacklo_epi16(ab_high, cd_high), _mm256_unpackhi_epi16(ab_high, cd_high)};
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    sums->s0[j] = DotAdd(sums->s0[j], q[j], w0);
    sums->s1[j] = DotAdd(sums->s1[j], q[j], w1);
    sums->s2[j] = DotAdd(sums->s2[j], q[j], w2);
  }
}

// Recombines the digit sums, shifts and clips: 32 bytes in order.
inline __m256i Finish(const Sums& sums) {
  __m256i v[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m256i high =
        _mm256_add_epi32(_mm256_slli_epi32(sums.s1[j], 8), _mm256_slli_epi32(sums.s2[j], 16));
    v[j] = _mm256_srai_epi32(_mm256_add_epi32(sums.s0[j], high), kPrecisionBits);
  }
  // Per lane: {0-3, 4-7} and {8-11, 12-15} as int16, then bytes 0-15 of the lane.
  return _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
}

}  // namespace

size_t ResampleColumnsAvx512(const uint8_t* in, size_t in_stride, size_t row_bytes,
                             const AxisTaps& taps, uint8_t* out, size_t out_stride) {
  constexpr size_t kStep = 32;
  const __m256i half = _mm256_set1_epi32(kRoundingHalf);
  const __m256i zero = _mm256_setzero_si256();
  for (int y = 0; y < taps.out_size; ++y) {
    const uint8_t* src = in + static_cast<size_t>(taps.first[y]) * in_stride;
    const int n = taps.count[y];
    const int full = n / 4;  // quads of four taps; the rest, n % 4, in one more
    const int32_t* digits = taps.digit_weights + static_cast<size_t>(y) * taps.quads * 3;
    // The last quad's taps past n have weight 0: they read row n - 1 again.
    const uint8_t* rest[4];
    for (int l = 0; l < 4; ++l) {
      rest[l] = src + static_cast<size_t>(std::min(full * 4 + l, n - 1)) * in_stride;
    }
    uint8_t* dst = out + static_cast<size_t>(y) * out_stride;
    for (size_t i = 0; i < row_bytes; i += kStep) {
      const __mmask32 mask =
          row_bytes - i >= kStep ? ~__mmask32{0} : (__mmask32{1} << (row_bytes - i)) - 1;
      Sums sums;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        sums.s0[j] = half;
        sums.s1[j] = sums.s2[j] = zero;
      }
      const uint8_t* p = src + i;
      const int32_t* w = digits;
      for (int g = 0; g < full; ++g, p += 4 * in_stride, w += 3) {
        AccumulateQuad(p, p + in_stride, p + 2 * in_stride, p + 3 * in_stride, mask,
                       _mm256_set1_epi32(w[0]), _mm256_set1_epi32(w[1]), _mm256_set1_epi32(w[2]),
                       &sums);
      }
      if (full * 4 < n) {
        AccumulateQuad(rest[0] + i, rest[1] + i, rest[2] + i, rest[3] + i, mask,
                       _mm256_set1_epi32(w[0]), _mm256_set1_epi32(w[1]), _mm256_set1_epi32(w[2]),
                       &sums);
      }
      _mm256_mask_storeu_epi8(dst + i, mask, Finish(sums));
    }
  }
  return row_bytes;
}

}  // namespace shardpack::image::internal
