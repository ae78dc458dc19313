#include "util/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

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

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(uint32_t crc, const uint8_t* p,
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
  while (n >= 8) {
    c0 = _mm_crc32_u64(c0, LoadLE64(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  return static_cast<uint32_t>(c0) ^ 0xffffffffu;
}

bool CpuHasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
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
  if (CpuHasSse42()) return ExtendHardware(crc, static_cast<const uint8_t*>(data), n);
#endif
  return ExtendPortable(crc, data, n);
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
  return MultModP(X2nModP(len_b, 3), crc_a) ^ crc_b;
}

}  // namespace shardpack::crc32c
