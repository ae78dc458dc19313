#include "format/lmdb_shard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "format/example.h"
#include "format/format.h"
#include "test_util.h"

namespace shardpack::format {
namespace {

TEST(LmdbShardTest, MapFullGrowsTheMapAndReplaysTheBatch) {
  testing::TempDir dir;
  const std::string path = dir.Join("s.lmdb");
  auto w = LmdbShardWriter::Create(path, {.initial_map_bytes = 16 << 10, .batch_bytes = 20 << 10});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::string entries = EncodeFeatureEntries({16, 16, 3, 0, "c", "f"}, 0);
  for (int i = 0; i < 60; ++i) {
    std::string px(16 * 16 * 3, static_cast<char>(i));
    ASSERT_OK((*w)->Append(entries, px, 0, kKeyRaw));
  }
  FileEntry f;
  ASSERT_OK((*w)->Finish(&f));
  EXPECT_GE((*w)->map_growths(), 3) << "16 KiB must double several times for ~50 KiB";
  auto r = LmdbShardReader::Open(path, true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->entries(), 60u);
  for (int i = 0; i < 60; ++i) {
    std::string_view v;
    ASSERT_OK((*r)->Get(i, &v));
    DecodedSample d;
    ASSERT_OK(ParseSample(reinterpret_cast<const uint8_t*>(v.data()), v.size(), &d));
    EXPECT_EQ(d.pixels[0], static_cast<uint8_t>(i));
  }
  uint64_t walked = 0;
  ASSERT_OK((*r)->ForEach([&](std::string_view k, std::string_view) {
    EXPECT_EQ(k, LmdbKey(walked++));
    return Status::Ok();
  }));
  EXPECT_EQ(walked, 60u);
}

// A shard of `n` records of `side` x `side` x 3 pixels (values of every size: inside
// leaves, or each in an overflow run), record i's pixels all i.
std::string WriteNumberedShard(const testing::TempDir& dir, const std::string& name, int n,
                               int side) {
  const std::string path = dir.Join(name);
  auto w = LmdbShardWriter::Create(path, {});
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  std::string entries = EncodeFeatureEntries({side, side, 3, 0, "c", "f"}, 0);
  for (int i = 0; i < n; ++i) {
    std::string px(static_cast<size_t>(side) * side * 3, static_cast<char>(i));
    EXPECT_TRUE((*w)->Append(entries, px, 0, kKeyRaw).ok());
  }
  FileEntry f;
  EXPECT_TRUE((*w)->Finish(&f).ok());
  return path;
}

// The leaf index (IndexLeaves) changes how a record is found, not what: every record's
// value is the tree search's, and every prefetch stage runs on every record.
TEST(LmdbShardTest, TheLeafIndexFindsWhatTheTreeSearchFinds) {
  testing::TempDir dir;
  for (int side : {4, 20, 64}) {  // 48 B (many a leaf), 1.2 KB, 12 KB (overflow) values
    const int n = side == 64 ? 300 : 3000;
    const std::string path = WriteNumberedShard(dir, "s" + std::to_string(side) + ".lmdb", n, side);
    auto plain = LmdbShardReader::Open(path, true);
    auto indexed = LmdbShardReader::Open(path, true);
    ASSERT_TRUE(plain.ok() && indexed.ok());
    ASSERT_GE((*plain)->meta().depth, 2) << side;
    (*indexed)->IndexLeaves(n);
    for (int i = 0; i < n; ++i) {
      for (int stage : {0, 1, 2}) (*indexed)->Prefetch(i, stage);
      std::string_view a, b;
      ASSERT_OK((*plain)->Get(i, &a));
      ASSERT_OK((*indexed)->Get(i, &b));
      ASSERT_EQ((*plain)->FileOffset(a), (*indexed)->FileOffset(b)) << side << " record " << i;
      ASSERT_EQ(a.size(), b.size());
    }
    // Past the records, and an index for fewer or more records than the shard holds.
    std::string_view v;
    EXPECT_EQ((*indexed)->Get(n, &v).code(), StatusCode::kCorruption);
    (*indexed)->Prefetch(n, 1);
    for (uint64_t records : {uint64_t{1}, uint64_t(n) / 2, uint64_t(n) + 5}) {
      (*indexed)->IndexLeaves(records);
      for (int i = 0; i < n; i += 7) {
        for (int stage : {0, 1, 2}) (*indexed)->Prefetch(i, stage);
        std::string_view a, b;
        ASSERT_OK((*plain)->Get(i, &a));
        ASSERT_OK((*indexed)->Get(i, &b));
        ASSERT_EQ((*plain)->FileOffset(a), (*indexed)->FileOffset(b))
            << side << " record " << i << " of " << records;
      }
    }
  }
}

// With the leaf index, a damaged shard answers each record as the tree search does: the
// same error word for word, or a value inside the file; a value wherever the search finds
// one. (Where the index points at a node holding the key that a damaged leaf's order hides
// from the search, it returns that value: the record's own checksums judge it.) The
// sanitizer build checks that nothing is read outside the file.
TEST(LmdbShardTest, TheLeafIndexAnswersADamagedShardAsTheTreeSearchDoes) {
  testing::TempDir dir;
  const int n = 400;
  const std::string clean = WriteNumberedShard(dir, "clean.lmdb", n, 20);
  const std::string bytes = testing::ReadFileOrDie(clean);
  auto meta = LmdbShardReader::Open(clean, true);
  ASSERT_TRUE(meta.ok());
  const uint64_t psize = (*meta)->meta().page_size;
  std::mt19937 rng(5);
  int errors = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string damaged = bytes;
    // A byte of a page's header or node table, or anywhere in a page.
    const uint64_t page = 2 + rng() % (damaged.size() / psize - 2);
    const uint64_t at = page * psize + (trial % 2 == 0 ? rng() % 64 : rng() % psize);
    damaged[at] = static_cast<char>(trial % 3 == 0 ? 0xff : damaged[at] ^ (1 << (rng() % 8)));
    const std::string path = dir.Join("damaged.lmdb");
    testing::WriteFileOrDie(path, damaged);
    auto plain = LmdbShardReader::Open(path, true);
    auto indexed = LmdbShardReader::Open(path, true);
    ASSERT_EQ(plain.ok(), indexed.ok());
    if (!plain.ok()) continue;
    (*indexed)->IndexLeaves(n);
    for (int i = 0; i < n; ++i) {
      for (int stage : {0, 1, 2}) (*indexed)->Prefetch(i, stage);
      std::string_view a, b;
      const Status sa = (*plain)->Get(i, &a);
      const Status sb = (*indexed)->Get(i, &b);
      if (!sb.ok()) {
        ASSERT_EQ(sa.ToString(), sb.ToString()) << "trial " << trial << " record " << i;
        ++errors;
        continue;
      }
      EXPECT_LE((*indexed)->FileOffset(b) + b.size(), damaged.size());
      if (sa.ok()) {
        EXPECT_EQ(a.size(), b.size()) << "trial " << trial << " record " << i;
      }
    }
  }
  EXPECT_GT(errors, 0) << "some damage must be found";
}

TEST(LmdbShardTest, KeysAreTenDigitsZeroPaddedAndWiderNumbersKeepAllTheirDigits) {
  EXPECT_EQ(LmdbKey(0), "0000000000");
  EXPECT_EQ(LmdbKey(7), "0000000007");
  EXPECT_EQ(LmdbKey(1234567890), "1234567890");
  EXPECT_EQ(LmdbKey(12345678901ull), "12345678901");
  EXPECT_EQ(LmdbKey(~0ull), "18446744073709551615");
}

TEST(LmdbShardTest, OpeningAMissingOrNonLmdbFileIsAClearError) {
  testing::TempDir dir;
  auto r = LmdbShardReader::Open(dir.Join("missing.lmdb"), true);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  testing::WriteFileOrDie(dir.Join("junk.lmdb"), std::string(8192, 'j'));
  r = LmdbShardReader::Open(dir.Join("junk.lmdb"), true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("junk.lmdb"), std::string::npos) << r.status().message();
}

// A link put at the temporary's name while the shard is written: the records still go to
// the file the writer made (liblmdb writes it through its descriptor), the link's target is
// untouched, and Finish refuses to publish what is no longer the file written.
TEST(LmdbShardTest, ATemporaryReplacedByALinkWhileWrittenIsNeitherWrittenThroughNorPublished) {
  testing::TempDir dir;
  const std::string path = dir.Join("s.lmdb");
  const std::string outside = dir.Join("outside.txt");
  testing::WriteFileOrDie(outside, "keep me");
  auto w = LmdbShardWriter::Create(path, {.initial_map_bytes = 1 << 20, .batch_bytes = 1});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(::unlink((path + ".tmp").c_str()), 0);
  ASSERT_EQ(::symlink(outside.c_str(), (path + ".tmp").c_str()), 0);
  const std::string entries = EncodeFeatureEntries({4, 4, 3, 0, "c", "f"}, 0);
  for (int i = 0; i < 5; ++i) ASSERT_OK((*w)->Append(entries, std::string(48, 'p'), 0, kKeyRaw));
  FileEntry f;
  Status s = (*w)->Finish(&f);
  EXPECT_EQ(s.code(), StatusCode::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("replaced by another file while it was written"), std::string::npos)
      << s.message();
  EXPECT_EQ(testing::ReadFileOrDie(outside), "keep me");
  struct stat st {};
  EXPECT_NE(::lstat(path.c_str(), &st), 0) << "nothing is published";
}

}  // namespace
}  // namespace shardpack::format
