#include "util/crc32c.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#include <nmmintrin.h>
#include <wmmintrin.h>
#endif

#include "util/cpu.h"

namespace shardpack::crc32c {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // reflected Castagnoli polynomial

using Table = std::array<std::array<uint32_t, 256>, 8>;

// Slicing-by-8 tables: table[k][b] is the CRC register after feeding byte b followed by
// k zero bytes.
constexpr Table MakeSlicingTable() {
  Table t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int i = 0; i < 8; ++i) crc = (crc & 1) ? (crc >> 1) ^ kPoly : crc >> 1;
    t[0][b] = crc;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}
constexpr Table kSlicing = MakeSlicingTable();

uint64_t LoadLE64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // x86 and aarch64 Linux are little-endian
}

// Multiplies a(x) by b(x) modulo the polynomial, bit-reflected.
uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t m = 1u << 31;
  uint32_t p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

// x^(2^k) mod p for k = 0..63.
struct PowerTable {
  std::array<uint32_t, 64> x2n{};
  PowerTable() {
    uint32_t p = 1u << 30;  // x^1
    x2n[0] = p;
    for (size_t n = 1; n < x2n.size(); ++n) x2n[n] = p = MultModP(p, p);
  }
};
const PowerTable& Powers() {
  static const PowerTable table;
  return table;
}

// x^(n * 2^k) mod p.
uint32_t X2nModP(uint64_t n, unsigned k) {
  const PowerTable& t = Powers();
  uint32_t p = 1u << 31;  // x^0
  while (n != 0) {
    if (n & 1) p = MultModP(t.x2n[k & 63], p);
    n >>= 1;
    ++k;
  }
  return p;
}

#if defined(__x86_64__)
// memcpy with non-temporal stores (SSE2, every x86-64 CPU has it) from the destination's
// first 16-byte boundary on; the caller fences.
void StreamCopy(uint8_t* d, const uint8_t* s, size_t n) {
  const size_t head = std::min(n, (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; n -= 64, d += 64, s += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
  std::memcpy(d, s, n);
}
#endif

// What the CPU runs best, chosen once (BestEngine); Implementation names them to callers.
enum class Engine { kPortable, kCrc32, kClmulAvx2, kClmulAvx512 };

#if defined(__x86_64__)
// Three independent crc32 streams hide the instruction's 3-cycle latency; the partial
// results are merged by shifting with precomputed "append N zero bytes" operators
// (the method of Mark Adler's crc32c.c).
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t{};
  explicit ShiftTable(size_t len) {
    uint32_t op = X2nModP(len, 3);  // x^(8*len) mod p
    for (uint32_t n = 0; n < 256; ++n) {
      t[0][n] = MultModP(op, n);
      t[1][n] = MultModP(op, n << 8);
      t[2][n] = MultModP(op, n << 16);
      t[3][n] = MultModP(op, n << 24);
    }
  }
  uint32_t Shift(uint32_t crc) const {
    return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
  }
};

// The target attributes name crc32 beside sse4.2: newer clang (the wheel's, docs/WHEELS.md)
// treats the crc32 instruction as a feature of its own.

// The last bytes (any number) into the crc32 register c, then the finished CRC.
__attribute__((target("sse4.2,crc32"), always_inline)) inline uint32_t FinishCrc32(uint64_t c,
                                                                                   const uint8_t* p,
                                                                                   size_t n) {
  while (n >= 8) {
    c = _mm_crc32_u64(c, LoadLE64(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --n;
  }
  return static_cast<uint32_t>(c) ^ 0xffffffffu;
}

__attribute__((target("sse4.2,crc32"))) uint32_t ExtendHardware(uint32_t crc, const uint8_t* p,
                                                                size_t n) {
  static const ShiftTable long_shift(kLong);
  static const ShiftTable short_shift(kShort);
  uint64_t c0 = crc ^ 0xffffffffu;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  while (n >= 3 * kLong) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* end = p + kLong;
    do {
      c0 = _mm_crc32_u64(c0, LoadLE64(p));
      c1 = _mm_crc32_u64(c1, LoadLE64(p + kLong));
      c2 = _mm_crc32_u64(c2, LoadLE64(p + 2 * kLong));
      p += 8;
    } while (p < end);
    c0 = long_shift.Shift(static_cast<uint32_t>(c0)) ^ c1;
    c0 = long_shift.Shift(static_cast<uint32_t>(c0)) ^ c2;
    p += 2 * kLong;
    n -= 3 * kLong;
  }
  while (n >= 3 * kShort) {
    uint64_t c1 = 0, c2 = 0;
    const uint8_t* end = p + kShort;
    do {
      c0 = _mm_crc32_u64(c0, LoadLE64(p));
      c1 = _mm_crc32_u64(c1, LoadLE64(p + kShort));
      c2 = _mm_crc32_u64(c2, LoadLE64(p + 2 * kShort));
      p += 8;
    } while (p < end);
    c0 = short_shift.Shift(static_cast<uint32_t>(c0)) ^ c1;
    c0 = short_shift.Shift(static_cast<uint32_t>(c0)) ^ c2;
    p += 2 * kShort;
    n -= 3 * kShort;
  }
  return FinishCrc32(c0, p, n);
}

bool CpuHasSse42() {
  static const bool has = cpu::Get().sse42;
  return has;
}

// Carry-less multiplication folding (Intel, "Fast CRC Computation for Generic Polynomials
// Using PCLMULQDQ"), in the bit-reflected domain. A 128-bit lane loaded little-endian holds
// the message's higher-degree half in its low qword; each qword, read as a reflected
// polynomial (bit i = x^(63-i)), times a constant c in the same form, yields a 127-bit
// reflected product that, read as a 128-bit lane, is the product times x. So moving a lane
// D bits further along the message is
//   fold(X, D) = clmul(X.lo, x^(D+63) mod P) ^ clmul(X.hi, x^(D-1) mod P),
// each constant a 32-bit reflected remainder in the top half of a qword. Folding preserves
// the message modulo P; the remaining 128 bits F are finished by two crc32 instructions from
// a zero register, which compute exactly F * x^32 mod P.
struct FoldConstants {
  // For each distance: {x^(D+63), x^(D-1)} as qwords (remainder << 32).
  uint64_t d128[2], d256[2], d384[2], d512[2], d768[2], d1024[2], d1280[2], d1536[2], d1792[2],
      d2048[2];
  FoldConstants() {
    auto set = [](uint64_t* k, uint64_t d) {
      k[0] = static_cast<uint64_t>(X2nModP(d + 63, 0)) << 32;
      k[1] = static_cast<uint64_t>(X2nModP(d - 1, 0)) << 32;
    };
    set(d128, 128);
    set(d256, 256);
    set(d384, 384);
    set(d512, 512);
    set(d768, 768);
    set(d1024, 1024);
    set(d1280, 1280);
    set(d1536, 1536);
    set(d1792, 1792);
    set(d2048, 2048);
  }
};
const FoldConstants& Folds() {
  static const FoldConstants k;
  return k;
}

__attribute__((target("sse4.2,crc32,pclmul"))) inline __m128i Fold128(__m128i x,
                                                                      const uint64_t* k) {
  __m128i kk = _mm_set_epi64x(static_cast<long long>(k[1]), static_cast<long long>(k[0]));
  return _mm_xor_si128(_mm_clmulepi64_si128(x, kk, 0x00), _mm_clmulepi64_si128(x, kk, 0x11));
}

// Folds 16-byte lanes until fewer than 16 bytes remain; returns the register state after
// the folded bytes. Needs n >= 64.
__attribute__((target("sse4.2,crc32,pclmul"))) uint32_t FoldTail(__m128i x, const uint8_t*& p,
                                                                 size_t& n) {
  const FoldConstants& k = Folds();
  while (n >= 16) {
    x = _mm_xor_si128(Fold128(x, k.d128), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    p += 16;
    n -= 16;
  }
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  return static_cast<uint32_t>(_mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1))));
}

// The end of every folding engine: the last register state x, then the bytes left after
// it (fewer than 256), into the finished CRC. Always inlined: a call here cost the loader's
// fused copy 8% of its samples/s.
__attribute__((target("sse4.2,crc32,pclmul"), always_inline)) inline uint32_t FinishFold(
    __m128i x, const uint8_t* p, size_t n) {
  const uint64_t c = FoldTail(x, p, n);
  return FinishCrc32(c, p, n);
}

// Folding with 128-bit PCLMULQDQ alone is latency-bound and measured slower than the
// three-stream crc32 instruction (12.7 against 22.6 GB/s on the development machine), so
// Extend folds only with AVX-512 VPCLMULQDQ (the fused copy also with AVX2, below): four
// 128-bit lanes per register, four registers, 256 bytes a step (47.9 GB/s there;
// bench/micro_bench BM_Crc32cWith).
__attribute__((target("sse4.2,crc32,pclmul,avx512f,vpclmulqdq"))) inline __m512i Fold512(
    __m512i x, const uint64_t* k) {
  __m512i kk = _mm512_set_epi64(static_cast<long long>(k[1]), static_cast<long long>(k[0]),
                                static_cast<long long>(k[1]), static_cast<long long>(k[0]),
                                static_cast<long long>(k[1]), static_cast<long long>(k[0]),
                                static_cast<long long>(k[1]), static_cast<long long>(k[0]));
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, kk, 0x00),
                          _mm512_clmulepi64_epi128(x, kk, 0x11));
}

__attribute__((target("sse4.2,crc32,pclmul,avx512f,vpclmulqdq"))) uint32_t ExtendClmulAvx512(
    uint32_t crc, const uint8_t* p, size_t n) {
  const FoldConstants& k = Folds();
  __m512i z0 = _mm512_xor_si512(
      _mm512_loadu_si512(p),
      _mm512_inserti32x4(_mm512_setzero_si512(),
                         _mm_cvtsi32_si128(static_cast<int>(crc ^ 0xffffffffu)), 0));
  __m512i z1 = _mm512_loadu_si512(p + 64), z2 = _mm512_loadu_si512(p + 128),
          z3 = _mm512_loadu_si512(p + 192);
  p += 256;
  n -= 256;
  while (n >= 256) {
    z0 = _mm512_xor_si512(Fold512(z0, k.d2048), _mm512_loadu_si512(p));
    z1 = _mm512_xor_si512(Fold512(z1, k.d2048), _mm512_loadu_si512(p + 64));
    z2 = _mm512_xor_si512(Fold512(z2, k.d2048), _mm512_loadu_si512(p + 128));
    z3 = _mm512_xor_si512(Fold512(z3, k.d2048), _mm512_loadu_si512(p + 192));
    p += 256;
    n -= 256;
  }
  __m512i z = _mm512_xor_si512(_mm512_xor_si512(Fold512(z0, k.d1536), Fold512(z1, k.d1024)),
                               _mm512_xor_si512(Fold512(z2, k.d512), z3));
  // The four lanes of z, earliest first, folded into the last.
  // (A store, not _mm512_extracti32x4_epi32, whose GCC 12 definition trips
  // -Wuninitialized.)
  alignas(64) __m128i lane[4];
  _mm512_store_si512(lane, z);
  __m128i x = _mm_xor_si128(_mm_xor_si128(Fold128(lane[0], k.d384), Fold128(lane[1], k.d256)),
                            _mm_xor_si128(Fold128(lane[2], k.d128), lane[3]));
  return FinishFold(x, p, n);
}

// Stores 64 bytes at dst: through the caches, or around them (non-temporal; dst must be
// 64-byte aligned).
template <bool kStream>
__attribute__((target("avx512f"))) inline void Store64(uint8_t* dst, __m512i v) {
  if constexpr (kStream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), v);
  } else {
    _mm512_storeu_si512(dst, v);
  }
}

// ExtendClmulAvx512 that also stores every 64 bytes it loads at `dst`: the copy and the
// checksum in one pass over the source. Needs n >= 256 (and, streaming, dst aligned to 64).
template <bool kStream>
__attribute__((target("sse4.2,crc32,pclmul,avx512f,vpclmulqdq"))) uint32_t CopyExtendClmulAvx512(
    uint32_t crc, uint8_t* dst, const uint8_t* p, size_t n) {
  const FoldConstants& k = Folds();
  const __m512i l0 = _mm512_loadu_si512(p);
  __m512i z1 = _mm512_loadu_si512(p + 64), z2 = _mm512_loadu_si512(p + 128),
          z3 = _mm512_loadu_si512(p + 192);
  Store64<kStream>(dst, l0);
  Store64<kStream>(dst + 64, z1);
  Store64<kStream>(dst + 128, z2);
  Store64<kStream>(dst + 192, z3);
  __m512i z0 = _mm512_xor_si512(
      l0, _mm512_inserti32x4(_mm512_setzero_si512(),
                             _mm_cvtsi32_si128(static_cast<int>(crc ^ 0xffffffffu)), 0));
  p += 256;
  dst += 256;
  n -= 256;
  while (n >= 256) {
    const __m512i a = _mm512_loadu_si512(p), b = _mm512_loadu_si512(p + 64),
                  c = _mm512_loadu_si512(p + 128), d = _mm512_loadu_si512(p + 192);
    Store64<kStream>(dst, a);
    Store64<kStream>(dst + 64, b);
    Store64<kStream>(dst + 128, c);
    Store64<kStream>(dst + 192, d);
    z0 = _mm512_xor_si512(Fold512(z0, k.d2048), a);
    z1 = _mm512_xor_si512(Fold512(z1, k.d2048), b);
    z2 = _mm512_xor_si512(Fold512(z2, k.d2048), c);
    z3 = _mm512_xor_si512(Fold512(z3, k.d2048), d);
    p += 256;
    dst += 256;
    n -= 256;
  }
  std::memcpy(dst, p, n);  // the tail (< 256 bytes), summed below (the caller fences)
  // From here on as ExtendClmulAvx512.
  __m512i z = _mm512_xor_si512(_mm512_xor_si512(Fold512(z0, k.d1536), Fold512(z1, k.d1024)),
                               _mm512_xor_si512(Fold512(z2, k.d512), z3));
  alignas(64) __m128i lane[4];
  _mm512_store_si512(lane, z);
  __m128i x = _mm_xor_si128(_mm_xor_si128(Fold128(lane[0], k.d384), Fold128(lane[1], k.d256)),
                            _mm_xor_si128(Fold128(lane[2], k.d128), lane[3]));
  return FinishFold(x, p, n);
}

// The same folding with AVX2 VPCLMULQDQ, for CPUs that have it without AVX-512 (AMD Zen 3,
// Intel's client cores): two 128-bit lanes per register, eight registers, 256 bytes a step.
__attribute__((target("sse4.2,crc32,pclmul,avx2,vpclmulqdq"))) inline __m256i Fold256(
    __m256i x, const uint64_t* k) {
  __m256i kk = _mm256_set_epi64x(static_cast<long long>(k[1]), static_cast<long long>(k[0]),
                                 static_cast<long long>(k[1]), static_cast<long long>(k[0]));
  return _mm256_xor_si256(_mm256_clmulepi64_epi128(x, kk, 0x00),
                          _mm256_clmulepi64_epi128(x, kk, 0x11));
}

// Eight registers holding the last 256 bytes' state (y[i] at byte 32 i), folded into one
// 128-bit lane at the last 16 bytes.
__attribute__((target("sse4.2,crc32,pclmul,avx2,vpclmulqdq"), always_inline)) inline __m128i
FoldEight(const __m256i* y) {
  const FoldConstants& k = Folds();
  const __m256i a =
      _mm256_xor_si256(_mm256_xor_si256(Fold256(y[0], k.d1792), Fold256(y[1], k.d1536)),
                       _mm256_xor_si256(Fold256(y[2], k.d1280), Fold256(y[3], k.d1024)));
  const __m256i b = _mm256_xor_si256(_mm256_xor_si256(Fold256(y[4], k.d768), Fold256(y[5], k.d512)),
                                     _mm256_xor_si256(Fold256(y[6], k.d256), y[7]));
  const __m256i z = _mm256_xor_si256(a, b);
  return _mm_xor_si128(Fold128(_mm256_castsi256_si128(z), k.d128), _mm256_extracti128_si256(z, 1));
}

// Not Extend's engine (the crc32 instruction measured faster without the copy: 20.4
// against 17.8 GB/s on Zen 3); ExtendWith runs it, so that the tests check the AVX2 fold
// on every length, apart from the copy.
__attribute__((target("sse4.2,crc32,pclmul,avx2,vpclmulqdq"))) uint32_t ExtendClmulAvx2(
    uint32_t crc, const uint8_t* p, size_t n) {
  const FoldConstants& k = Folds();
  __m256i y[8];
  for (int i = 0; i < 8; ++i) {
    y[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i));
  }
  y[0] = _mm256_xor_si256(
      y[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(crc ^ 0xffffffffu))));
  p += 256;
  n -= 256;
  while (n >= 256) {
    for (int i = 0; i < 8; ++i) {
      y[i] = _mm256_xor_si256(Fold256(y[i], k.d2048),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i)));
    }
    p += 256;
    n -= 256;
  }
  return FinishFold(FoldEight(y), p, n);
}

// ExtendClmulAvx2 that also stores every 32 bytes it loads at `dst`, as
// CopyExtendClmulAvx512. Needs n >= 256 (and, streaming, dst aligned to 32).
template <bool kStream>
__attribute__((target("sse4.2,crc32,pclmul,avx2,vpclmulqdq"))) uint32_t CopyExtendClmulAvx2(
    uint32_t crc, uint8_t* dst, const uint8_t* p, size_t n) {
  const FoldConstants& k = Folds();
  auto store = [dst](size_t at, __m256i v) __attribute__((target("avx2"), always_inline)) {
    if constexpr (kStream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + at), v);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at), v);
    }
  };
  __m256i y[8];
  for (int i = 0; i < 8; ++i) {
    y[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * i));
    store(32 * i, y[i]);
  }
  y[0] = _mm256_xor_si256(
      y[0], _mm256_zextsi128_si256(_mm_cvtsi32_si128(static_cast<int>(crc ^ 0xffffffffu))));
  size_t done = 256;
  while (n - done >= 256) {
    for (int i = 0; i < 8; ++i) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + done + 32 * i));
      store(done + 32 * i, v);
      y[i] = _mm256_xor_si256(Fold256(y[i], k.d2048), v);
    }
    done += 256;
  }
  std::memcpy(dst + done, p + done, n - done);  // the tail (< 256 bytes), summed below
  return FinishFold(FoldEight(y), p + done, n - done);
}

Engine BestEngine() {
  static const Engine e = [] {
    const cpu::Features& has = cpu::Get();
    if (!has.sse42) return Engine::kPortable;
    if (has.pclmul && has.avx512f && has.vpclmulqdq) {
      return Engine::kClmulAvx512;
    }
    if (has.pclmul && has.avx2 && has.vpclmulqdq) {
      return Engine::kClmulAvx2;
    }
    return Engine::kCrc32;
  }();
  return e;
}
#endif

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = crc ^ 0xffffffffu;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c = (c >> 8) ^ kSlicing[0][(c ^ *p++) & 0xff];
    --n;
  }
  while (n >= 8) {
    uint64_t v = LoadLE64(p) ^ c;
    c = kSlicing[7][v & 0xff] ^ kSlicing[6][(v >> 8) & 0xff] ^ kSlicing[5][(v >> 16) & 0xff] ^
        kSlicing[4][(v >> 24) & 0xff] ^ kSlicing[3][(v >> 32) & 0xff] ^
        kSlicing[2][(v >> 40) & 0xff] ^ kSlicing[1][(v >> 48) & 0xff] ^ kSlicing[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ kSlicing[0][(c ^ *p++) & 0xff];
    --n;
  }
  return c ^ 0xffffffffu;
}

uint32_t Extend(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  const auto* p = static_cast<const uint8_t*>(data);
  switch (BestEngine()) {
    case Engine::kClmulAvx512:
      if (n >= 1024) return ExtendClmulAvx512(crc, p, n);
      [[fallthrough]];
    case Engine::kClmulAvx2:
    case Engine::kCrc32:
      return ExtendHardware(crc, p, n);
    case Engine::kPortable:
      break;
  }
#endif
  return ExtendPortable(crc, data, n);
}

namespace {

// CopyAndExtend with the given engine, without the fence kStreaming ends with.
uint32_t CopyAndExtendUnfenced(Engine engine, uint32_t crc, uint8_t* d, const uint8_t* s, size_t n,
                               CopyStores stores) {
#if defined(__x86_64__)
  if ((engine == Engine::kClmulAvx512 || engine == Engine::kClmulAvx2) && n >= 1024) {
    const bool wide = engine == Engine::kClmulAvx512;
    if (stores == CopyStores::kCached) {
      return wide ? CopyExtendClmulAvx512<false>(crc, d, s, n)
                  : CopyExtendClmulAvx2<false>(crc, d, s, n);
    }
    // Up to the destination's first 64-byte boundary through the caches, the rest around.
    const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
    std::memcpy(d, s, head);
    crc = Extend(crc, s, head);
    return wide ? CopyExtendClmulAvx512<true>(crc, d + head, s + head, n - head)
                : CopyExtendClmulAvx2<true>(crc, d + head, s + head, n - head);
  }
#endif
  // Elsewhere in pieces that stay in the first-level cache between the two passes.
  constexpr size_t kPiece = 16 << 10;
  while (n > 0) {
    const size_t m = std::min(n, kPiece);
    crc = Extend(crc, s, m);
#if defined(__x86_64__)
    if (stores != CopyStores::kCached) {
      StreamCopy(d, s, m);
    } else {
      std::memcpy(d, s, m);
    }
#else
    std::memcpy(d, s, m);
#endif
    d += m;
    s += m;
    n -= m;
  }
  return crc;
}

// CopyAndExtend with the given engine.
uint32_t CopyAndExtendOn(Engine engine, uint32_t crc, uint8_t* d, const uint8_t* s, size_t n,
                         CopyStores stores) {
  crc = CopyAndExtendUnfenced(engine, crc, d, s, n, stores);
  if (stores == CopyStores::kStreaming) StoreFence();
  return crc;
}

}  // namespace

void StoreFence() {
#if defined(__x86_64__)
  _mm_sfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

uint32_t CopyAndExtend(uint32_t crc, void* dst, const void* src, size_t n, CopyStores stores) {
#if defined(__x86_64__)
  const Engine engine = BestEngine();
#else
  const Engine engine = Engine::kPortable;
#endif
  return CopyAndExtendOn(engine, crc, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                         n, stores);
}

uint32_t CopyAndExtendWith(Implementation impl, uint32_t crc, void* dst, const void* src, size_t n,
                           CopyStores stores) {
  Engine engine = Engine::kPortable;
  switch (impl) {
    case Implementation::kPortable:
      break;
    case Implementation::kCrc32Instruction:
      engine = Engine::kCrc32;
      break;
    case Implementation::kClmulAvx2:
      engine = Engine::kClmulAvx2;
      break;
    case Implementation::kClmulAvx512:
      engine = Engine::kClmulAvx512;
      break;
  }
  if (!IsAvailable(impl)) return CopyAndExtend(crc, dst, src, n, stores);
  return CopyAndExtendOn(engine, crc, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src),
                         n, stores);
}

uint32_t ExtendWith(Implementation impl, uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (impl) {
    case Implementation::kPortable:
      return ExtendPortable(crc, data, n);
#if defined(__x86_64__)
    case Implementation::kCrc32Instruction:
      if (CpuHasSse42()) return ExtendHardware(crc, p, n);
      break;
    case Implementation::kClmulAvx512:
      if (IsAvailable(impl) && n >= 256) return ExtendClmulAvx512(crc, p, n);
      break;
    case Implementation::kClmulAvx2:
      if (IsAvailable(impl) && n >= 256) return ExtendClmulAvx2(crc, p, n);
      break;
#endif
    default:
      break;
  }
  return Extend(crc, data, n);
}

bool IsAvailable(Implementation impl) {
  switch (impl) {
    case Implementation::kPortable:
      return true;
#if defined(__x86_64__)
    case Implementation::kCrc32Instruction:
      return BestEngine() >= Engine::kCrc32;
    case Implementation::kClmulAvx512:
      return BestEngine() == Engine::kClmulAvx512;
    case Implementation::kClmulAvx2:
      // Every CPU with AVX-512 VPCLMULQDQ has the AVX2 form too.
      return BestEngine() >= Engine::kClmulAvx2;
#endif
    default:
      return false;
  }
}

bool IsHardwareAccelerated() {
#if defined(__x86_64__)
  return CpuHasSse42();
#else
  return false;
#endif
}

uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  if (len_b == 0) return crc_a;
  // x^(8 len_b) mod P, the most of a combine's cost, for the length this thread asked for
  // last: a reader combines around pixel runs of one length (one image size) record after
  // record.
  thread_local uint64_t last_len = 0;
  thread_local uint32_t last_op = 0;
  if (len_b != last_len) {
    last_op = X2nModP(len_b, 3);
    last_len = len_b;
  }
  return MultModP(last_op, crc_a) ^ crc_b;
}

}  // namespace shardpack::crc32c
