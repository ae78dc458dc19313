// Built with -mavx2 -mavx512f -mavx512bw -mavx512vl -mavx512vbmi (lib/CMakeLists.txt);
// called only when the CPU has them (internal::HaveAvx512Vbmi).
//
// The transposes of the horizontal pass's blocks of rows (resize_avx2.cc,
// ResampleRowBlocksRgbAvx2) by two-table byte permutes (vpermt2b), 16 rows of four pixels
// at a time. In: four 64-byte registers take four rows each (a 16-byte load a row, 12 bytes
// of them the four pixels); each pixel column's 16 rows, 48 bytes, are picked from two pairs
// of them and written by one masked store. Out: the four lines' 48 bytes of 16 rows are
// loaded (masked) and each group of four rows is picked from two pairs of them, a row a
// 16-byte lane, stored lane by lane. The AVX2 form takes 16 shuffles and four stores for
// four rows of four pixels each way; this one, per four rows of four pixels, in: three
// inserts, two byte permutes, an OR and one store; out: two permutes, an OR, three extracts
// and the same four stores. The bytes are moved, never computed: the same lines and rows.
#include <immintrin.h>

#include <cstring>

#include "image/resize_kernels.h"

namespace shardpack::image::internal {
namespace {

constexpr int kTileRows = 16;
// The 48 bytes of 16 rows of RGB, and the low 24 (rows 0-7) and high 24 (rows 8-15).
constexpr __mmask64 kTileBytes = (__mmask64{1} << 48) - 1;
constexpr __mmask64 kLowRows = (__mmask64{1} << 24) - 1;
constexpr __mmask64 kHighRows = kTileBytes & ~kLowRows;

inline __m128i Load16(const uint8_t* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline void Store16(uint8_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }

// Four 16-byte loads, rows p, p + stride, ..., as the four lanes of one register.
inline __m512i LoadFourRows(const uint8_t* p, size_t stride) {
  __m512i v = _mm512_castsi128_si512(Load16(p));
  v = _mm512_inserti32x4(v, Load16(p + stride), 1);
  v = _mm512_inserti32x4(v, Load16(p + 2 * stride), 2);
  return _mm512_inserti32x4(v, Load16(p + 3 * stride), 3);
}

// In: for pixel column j (0..3), byte 3k + c of its line (row k of the tile, channel c) is
// byte j * 3 + c of lane k % 4 of register k / 4. Rows 0-7 are in the pair {q0, q1} (table
// bytes 0..127: register k / 4 % 2, lane k % 4), rows 8-15 in {q2, q3} the same way.
struct InPermutes {
  __m512i column[4];
  InPermutes() {
    alignas(64) uint8_t index[4][64] = {};
    for (int j = 0; j < 4; ++j) {
      for (int b = 0; b < 48; ++b) {
        const int k = b / 3, c = b % 3;
        index[j][b] = static_cast<uint8_t>((k / 4 % 2) * 64 + (k % 4) * 16 + j * 3 + c);
      }
      column[j] = _mm512_load_si512(index[j]);
    }
  }
};

// Out: for rows 4g..4g+3 of the tile (lane i, row 4g + i), byte 3p + c of the lane (pixel
// p, channel c) is byte 3 (4g + i) + c of line p: lines 0 and 1 are the pair {l0, l1}
// (table bytes 0..127), lines 2 and 3 the pair {l2, l3}; the lane's bytes 12-15 are zero.
struct OutPermutes {
  __m512i rows[4];
  static constexpr __mmask64 kFirstTwo = 0x003F003F003F003F;   // bytes 0-5 of each lane
  static constexpr __mmask64 kSecondTwo = 0x0FC00FC00FC00FC0;  // bytes 6-11 of each lane
  OutPermutes() {
    alignas(64) uint8_t index[4][64] = {};
    for (int g = 0; g < 4; ++g) {
      for (int b = 0; b < 64; ++b) {
        const int i = b / 16, p = b % 16 / 3, c = b % 16 % 3;
        if (b % 16 >= 12) continue;
        index[g][b] = static_cast<uint8_t>((p % 2) * 64 + 3 * (4 * g + i) + c);
      }
      rows[g] = _mm512_load_si512(index[g]);
    }
  }
};

}  // namespace

int RowsToLinesAvx512(const uint8_t* block, size_t in_stride, int in_width, uint8_t* lines) {
  static const InPermutes permutes;
  int x = 0;
  // A 16-byte load at column x reads to x + 5.33: the last columns are the caller's.
  for (; x + 6 <= in_width; x += 4) {
    uint8_t* dst = lines + static_cast<size_t>(x) * kRowLineStride;
    const uint8_t* src = block + static_cast<size_t>(x) * 3;
    for (int r = 0; r < kRowBlockRows; r += kTileRows, src += kTileRows * in_stride) {
      const __m512i q0 = LoadFourRows(src, in_stride);
      const __m512i q1 = LoadFourRows(src + 4 * in_stride, in_stride);
      const __m512i q2 = LoadFourRows(src + 8 * in_stride, in_stride);
      const __m512i q3 = LoadFourRows(src + 12 * in_stride, in_stride);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i low = _mm512_maskz_permutex2var_epi8(kLowRows, q0, permutes.column[j], q1);
        const __m512i high = _mm512_maskz_permutex2var_epi8(kHighRows, q2, permutes.column[j], q3);
        _mm512_mask_storeu_epi8(dst + j * kRowLineStride + r * 3, kTileBytes,
                                _mm512_or_si512(low, high));
      }
    }
  }
  return x;
}

int LinesToRowsAvx512(const uint8_t* lines, int out_width, uint8_t* block_out, size_t out_stride) {
  static const OutPermutes permutes;
  int x = 0;
  // A 16-byte store at pixel x writes to x + 5.33, and the bytes past x + 4 are written
  // over by the next columns: the last columns are the caller's.
  for (; x + 6 <= out_width; x += 4) {
    const uint8_t* src = lines + static_cast<size_t>(x) * kRowLineStride;
    uint8_t* dst = block_out + static_cast<size_t>(x) * 3;
    for (int r = 0; r < kRowBlockRows; r += kTileRows) {
      const __m512i l0 = _mm512_maskz_loadu_epi8(kTileBytes, src + r * 3);
      const __m512i l1 = _mm512_maskz_loadu_epi8(kTileBytes, src + kRowLineStride + r * 3);
      const __m512i l2 = _mm512_maskz_loadu_epi8(kTileBytes, src + 2 * kRowLineStride + r * 3);
      const __m512i l3 = _mm512_maskz_loadu_epi8(kTileBytes, src + 3 * kRowLineStride + r * 3);
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const __m512i v = _mm512_or_si512(
            _mm512_maskz_permutex2var_epi8(OutPermutes::kFirstTwo, l0, permutes.rows[g], l1),
            _mm512_maskz_permutex2var_epi8(OutPermutes::kSecondTwo, l2, permutes.rows[g], l3));
        uint8_t* row = dst + static_cast<size_t>(r + 4 * g) * out_stride;
        // (Lane 0 by a masked store, the others extracted with a full mask: GCC 12's
        // unmasked cast and extract read an undefined register and trip -Wuninitialized.)
        _mm512_mask_storeu_epi32(row, 0xF, v);
        Store16(row + out_stride, _mm512_maskz_extracti32x4_epi32(0xF, v, 1));
        Store16(row + 2 * out_stride, _mm512_maskz_extracti32x4_epi32(0xF, v, 2));
        Store16(row + 3 * out_stride, _mm512_maskz_extracti32x4_epi32(0xF, v, 3));
      }
    }
  }
  return x;
}

}  // namespace shardpack::image::internal
