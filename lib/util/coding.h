// Little-endian fixed-width integers and protobuf base-128 varints, with bounds checks
// on every decode: a decoder never reads past `limit`.
#ifndef SHARDPACK_UTIL_CODING_H_
#define SHARDPACK_UTIL_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>

namespace shardpack {

inline void EncodeFixed32(uint8_t* dst, uint32_t v) { std::memcpy(dst, &v, 4); }
inline void EncodeFixed64(uint8_t* dst, uint64_t v) { std::memcpy(dst, &v, 8); }
inline uint32_t DecodeFixed32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t DecodeFixed64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "shardpack's on-disk integers are little-endian; port coding.h first");

// Number of bytes the varint encoding of v takes (1..10).
inline int VarintLength(uint64_t v) {
  int n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Writes v at dst (which must have VarintLength(v) bytes) and returns the end.
inline uint8_t* EncodeVarint64(uint8_t* dst, uint64_t v) {
  while (v >= 0x80) {
    *dst++ = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  *dst++ = static_cast<uint8_t>(v);
  return dst;
}

inline void PutVarint64(std::string* dst, uint64_t v) {
  uint8_t buf[10];
  uint8_t* end = EncodeVarint64(buf, v);
  dst->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(end - buf));
}

// Decodes a varint in [p, limit). Returns the byte after it, or nullptr when the varint
// runs past `limit` or is longer than 10 bytes.
inline const uint8_t* DecodeVarint64(const uint8_t* p, const uint8_t* limit, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && p < limit; shift += 7) {
    uint64_t byte = *p++;
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) {
      *v = result;
      return p;
    }
  }
  return nullptr;
}

}  // namespace shardpack

#endif  // SHARDPACK_UTIL_CODING_H_
