#include "format/lmdb_shard.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

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
