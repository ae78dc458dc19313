#include "util/hash.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace shardpack {
namespace {

// Reference digests from an independent implementation (Python xxhash 3.x, xxh3_128).
TEST(Xxh3Test, KnownDigests) {
  EXPECT_EQ(Xxh3Hex("", 0), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(Xxh3Hex("abc", 3), "06b05ab6733a618578af5f94892f3950");
}

TEST(Xxh3Test, StreamingEqualsOneShotAndSimdEqualsBaseline) {
  std::mt19937_64 rng(9);
  std::string data(300000, '\0');
  for (auto& c : data) c = static_cast<char>(rng());
  for (size_t n : {0, 1, 16, 17, 128, 129, 240, 241, 1024, 4096, 65537, 300000}) {
    Xxh3Hasher h;
    size_t pos = 0;
    for (size_t step = 1; pos < n; step = step * 3 + 1) {
      size_t k = std::min(step, n - pos);
      h.Update(data.data() + pos, k);
      pos += k;
    }
    EXPECT_EQ(h.HexDigest(), Xxh3Hex(data.data(), n)) << n;
    EXPECT_EQ(Xxh3HexPortable(data.data(), n), Xxh3Hex(data.data(), n)) << n;
  }
}

}  // namespace
}  // namespace shardpack
