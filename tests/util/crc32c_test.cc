#include "util/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace shardpack::crc32c {
namespace {

// RFC 3720 section B.4 test vectors.
TEST(Crc32cTest, MatchesRfc3720Vectors) {
  std::vector<uint8_t> buf(32, 0);
  EXPECT_EQ(Value(buf.data(), buf.size()), 0x8a9136aau);
  std::fill(buf.begin(), buf.end(), 0xff);
  EXPECT_EQ(Value(buf.data(), buf.size()), 0x62a8ab43u);
  std::iota(buf.begin(), buf.end(), 0);
  EXPECT_EQ(Value(buf.data(), buf.size()), 0x46dd794eu);
  for (int i = 0; i < 32; ++i) buf[i] = static_cast<uint8_t>(31 - i);
  EXPECT_EQ(Value(buf.data(), buf.size()), 0x113fdb5cu);
  const uint8_t iscsi_read[48] = {0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00,
                                  0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00,
                                  0x00, 0x18, 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                                  0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(Value(iscsi_read, sizeof iscsi_read), 0xd9963a56u);
  EXPECT_EQ(Value(std::string_view("123456789")), 0xe3069283u);
}

TEST(Crc32cTest, HardwareAndPortablePathsAgreeOnEveryLengthAndAlignment) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> buf(3 * 8192 * 2 + 100);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len : {0, 1, 7, 8, 9, 255, 256, 767, 768, 769, 4096, 24575, 24576, 24577,
                     static_cast<int>(buf.size()) - 8}) {
    for (size_t align = 0; align < 8; ++align) {
      if (align + len > buf.size()) continue;
      EXPECT_EQ(Extend(0, buf.data() + align, len), ExtendPortable(0, buf.data() + align, len))
          << "len " << len << " align " << align;
    }
  }
}

TEST(Crc32cTest, ExtendEqualsValueOfConcatenation) {
  std::string a = "hello ", b = "world";
  EXPECT_EQ(Extend(Value(a), b.data(), b.size()), Value(a + b));
}

TEST(Crc32cTest, CombineEqualsValueOfConcatenation) {
  std::mt19937_64 rng(11);
  for (size_t la : {0, 1, 13, 1000}) {
    for (size_t lb : {0, 1, 5, 64, 4097, 196608}) {
      std::string a(la, '\0'), b(lb, '\0');
      for (auto& c : a) c = static_cast<char>(rng());
      for (auto& c : b) c = static_cast<char>(rng());
      EXPECT_EQ(Combine(Value(a), Value(b), b.size()), Value(a + b)) << la << "+" << lb;
    }
  }
}

// Combine keeps the power of the last length a thread asked for: lengths repeated,
// alternated and returned to give the same answers as fresh ones.
TEST(Crc32cTest, CombineOfRepeatedAndAlternatingLengths) {
  std::mt19937_64 rng(12);
  for (size_t lb : {5, 5, 4097, 5, 196608, 196608, 1, 4097, 4097, 5}) {
    std::string a(1 + rng() % 300, '\0'), b(lb, '\0');
    for (auto& c : a) c = static_cast<char>(rng());
    for (auto& c : b) c = static_cast<char>(rng());
    EXPECT_EQ(Combine(Value(a), Value(b), b.size()), Value(a + b)) << a.size() << "+" << lb;
  }
}

TEST(Crc32cTest, MaskRoundTripsAndDiffers) {
  uint32_t crc = Value(std::string_view("foo"));
  EXPECT_NE(Mask(crc), crc);
  EXPECT_NE(Mask(Mask(crc)), crc);
  EXPECT_EQ(Unmask(Mask(crc)), crc);
  EXPECT_EQ(Unmask(Unmask(Mask(Mask(crc)))), crc);
}

}  // namespace
}  // namespace shardpack::crc32c

namespace shardpack::crc32c {
namespace {

// Every implementation the CPU offers equals the portable one: every length up to 5000
// bytes plus the boundaries of each path, several alignments and non-zero initial CRCs.
TEST(Crc32cTest, EveryImplementationAgreesWithThePortableOne) {
  std::mt19937_64 rng(21);
  std::vector<uint8_t> buf(70000);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 5000; ++n) lengths.push_back(n);
  for (size_t n : {8191, 8192, 24575, 24576, 24577, 65535, 65536, 69000}) lengths.push_back(n);
  int checked = 0;
  for (Implementation impl : {Implementation::kCrc32Instruction, Implementation::kClmulAvx512,
                              Implementation::kClmulAvx2}) {
    if (!IsAvailable(impl)) continue;
    for (size_t n : lengths) {
      size_t align = n % 13;
      uint32_t init = static_cast<uint32_t>(rng());
      ASSERT_EQ(ExtendWith(impl, init, buf.data() + align, n),
                ExtendPortable(init, buf.data() + align, n))
          << "implementation " << static_cast<int>(impl) << " length " << n;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << "no hardware implementation on this CPU";
}

}  // namespace
}  // namespace shardpack::crc32c

namespace shardpack::crc32c {
namespace {

// The copy is exact and the checksum is Extend's, on every length around the paths'
// boundaries (the fused loops from 1,024 bytes, their 256-byte steps and tails), source and
// destination alignments, non-zero initial CRCs, and on every implementation this CPU has
// (the fused AVX-512 and AVX2 copies, the pieces of the others).
TEST(Crc32cTest, CopyAndExtendCopiesExactlyAndSumsAsExtend) {
  std::mt19937_64 rng(31);
  std::vector<uint8_t> src(200000);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  std::vector<size_t> lengths = {0,    1,    255,  256,   1023,  1024,  1025,   1279,
                                 1280, 1281, 4096, 16384, 16385, 50000, 196608, 196613};
  for (size_t n = 1024; n < 1024 + 300; n += 7) lengths.push_back(n);
  std::vector<uint8_t> dst(src.size() + 64);
  for (Implementation impl : {Implementation::kPortable, Implementation::kCrc32Instruction,
                              Implementation::kClmulAvx512, Implementation::kClmulAvx2}) {
    if (!IsAvailable(impl)) continue;
    for (size_t n : lengths) {
      for (size_t from : {0, 3, 64}) {
        for (size_t to : {0, 5, 64}) {
          if (from + n > src.size() || to + n + 1 > dst.size()) continue;
          for (CopyStores stores :
               {CopyStores::kCached, CopyStores::kStreaming, CopyStores::kStreamingUnfenced}) {
            std::fill(dst.begin(), dst.end(), 0xa5);
            const uint32_t init = static_cast<uint32_t>(rng());
            const std::string what = "implementation " + std::to_string(static_cast<int>(impl)) +
                                     " length " + std::to_string(n) + " from " +
                                     std::to_string(from) + " to " + std::to_string(to) +
                                     " stores " + std::to_string(static_cast<int>(stores));
            ASSERT_EQ(CopyAndExtendWith(impl, init, dst.data() + to, src.data() + from, n, stores),
                      Extend(init, src.data() + from, n))
                << what;
            if (stores == CopyStores::kStreamingUnfenced) StoreFence();
            ASSERT_EQ(0, std::memcmp(dst.data() + to, src.data() + from, n)) << what;
            ASSERT_EQ(dst[to + n], 0xa5) << "wrote past the end, " << what;
            if (to > 0) {
              ASSERT_EQ(dst[to - 1], 0xa5) << "wrote before the start, " << what;
            }
          }
        }
      }
    }
  }
  // The default copy (the best implementation there is) too.
  std::vector<uint8_t> a(4096);
  EXPECT_EQ(CopyAndExtend(5, a.data(), src.data(), a.size(), CopyStores::kStreaming),
            Extend(5, src.data(), a.size()));
  EXPECT_EQ(a, std::vector<uint8_t>(src.begin(), src.begin() + 4096));
}

}  // namespace
}  // namespace shardpack::crc32c
