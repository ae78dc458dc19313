#include "util/hash.h"

#include <xxhash.h>

#include <cstdio>

namespace shardpack {

struct Xxh3Hasher::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Xxh3Hasher::Xxh3Hasher() : state_(std::make_unique<State>()) { Reset(); }
Xxh3Hasher::~Xxh3Hasher() = default;
Xxh3Hasher::Xxh3Hasher(Xxh3Hasher&&) noexcept = default;
Xxh3Hasher& Xxh3Hasher::operator=(Xxh3Hasher&&) noexcept = default;

void Xxh3Hasher::Reset() { XXH3_128bits_reset(state_->s); }

void Xxh3Hasher::Update(const void* data, size_t n) {
  if (n != 0) XXH3_128bits_update(state_->s, data, n);
}

namespace {
std::string ToHex(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static const char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = kDigits[c.digest[i] >> 4];
    out[2 * i + 1] = kDigits[c.digest[i] & 15];
  }
  return out;
}
}  // namespace

std::string Xxh3Hasher::HexDigest() const { return ToHex(XXH3_128bits_digest(state_->s)); }

std::string Xxh3Hex(const void* data, size_t n) { return ToHex(XXH3_128bits(data, n)); }

}  // namespace shardpack
