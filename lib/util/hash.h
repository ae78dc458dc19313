// XXH3-128 file checksums for the manifest, streamed so that a file is hashed while it
// is written or scanned, never read twice for it. xxHash (Debian's libxxhash-dev) is
// compiled inline twice, for SSE2 and for AVX2, and the faster one is chosen at run time.
#ifndef SHARDPACK_UTIL_HASH_H_
#define SHARDPACK_UTIL_HASH_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace shardpack {

class Xxh3Hasher {
 public:
  Xxh3Hasher();
  ~Xxh3Hasher();
  Xxh3Hasher(const Xxh3Hasher&) = delete;
  Xxh3Hasher& operator=(const Xxh3Hasher&) = delete;
  Xxh3Hasher(Xxh3Hasher&&) noexcept;
  Xxh3Hasher& operator=(Xxh3Hasher&&) noexcept;

  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  // 32 lower-case hex digits of the canonical (big-endian) XXH128 digest.
  std::string HexDigest() const;
  void Reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// One-shot XXH3-128 of a buffer, as HexDigest() gives it.
std::string Xxh3Hex(const void* data, size_t n);

// The same with the baseline (SSE2) code whatever the CPU has, for tests that compare.
std::string Xxh3HexPortable(const void* data, size_t n);

}  // namespace shardpack

#endif  // SHARDPACK_UTIL_HASH_H_
