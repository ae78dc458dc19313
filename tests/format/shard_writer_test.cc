#include "shardpack/shard_writer.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>

#include "example.pb.h"
#include "format/index_file.h"
#include "io/mem_env.h"
#include "shardpack/dataset.h"
#include "test_util.h"
#include "util/text.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/hash.h"

namespace shardpack {
namespace {

using testing::TempDir;
using testing::TestDatasetSpec;

class RoundTripTest : public ::testing::TestWithParam<Backend> {};

TEST_P(RoundTripTest, EverySampleReadsBackByGlobalIndex) {
  TempDir dir;
  TestDatasetSpec spec{.backend = GetParam(), .samples = 11, .max_shard_records = 4};
  Manifest m = testing::WriteTestDataset(dir.path(), spec);
  ASSERT_EQ(m.shards.size(), 3u);
  EXPECT_EQ(m.shards[0].data.file, GetParam() == Backend::kTfrecord
                                       ? "shard-00000-of-00003.tfrecord"
                                       : "shard-00000-of-00003.lmdb");
  EXPECT_EQ(m.shards[2].records, 3u);
  EXPECT_EQ(m.shards[2].first_sample, 8u);
  EXPECT_EQ(m.classes[0].count, 4u);  // samples 0, 3, 6, 9
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  ASSERT_EQ((*ds)->size(), 11u);
  for (uint64_t i = 0; i < 11; ++i) {
    SampleView s;
    ASSERT_OK((*ds)->Get(i, &s));
    std::vector<uint8_t> expected = testing::TestPixels(i, 4, 5, 3);
    EXPECT_EQ(std::vector<uint8_t>(s.pixels.begin(), s.pixels.end()), expected) << i;
    EXPECT_EQ(s.label, static_cast<int64_t>(i % 3));
    EXPECT_EQ(s.class_text, "class" + std::to_string(i % 3));
    EXPECT_EQ(s.filename, "img" + std::to_string(i) + ".jpg");
    EXPECT_EQ(s.height, 4);
    EXPECT_EQ(s.width, 5);
  }
  SampleView s;
  Status st = (*ds)->Get(11, &s);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
}

TEST_P(RoundTripTest, VariableSizeSamplesKeepTheirShapes) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(),
                            {.backend = GetParam(), .samples = 6, .variable_size = true});
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  for (uint64_t i = 0; i < 6; ++i) {
    SampleView s;
    ASSERT_OK((*ds)->Get(i, &s));
    EXPECT_EQ(s.height, 4 + static_cast<int>(i % 3));
    EXPECT_EQ(s.width, 5 + static_cast<int>(i % 2));
    EXPECT_EQ(s.pixels.size(), static_cast<size_t>(s.height * s.width * 3));
  }
}

TEST_P(RoundTripTest, OutputIsByteIdenticalAcrossRuns) {
  TempDir a, b;
  Manifest ma = testing::WriteTestDataset(a.path(), {.backend = GetParam(), .samples = 9});
  Manifest mb = testing::WriteTestDataset(b.path(), {.backend = GetParam(), .samples = 9});
  EXPECT_EQ(SerializeManifest(ma), SerializeManifest(mb));
  for (const ShardEntry& e : ma.shards) {
    EXPECT_EQ(testing::ReadFileOrDie(a.Join(e.data.file)),
              testing::ReadFileOrDie(b.Join(e.data.file)));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RoundTripTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb),
                         [](const auto& info) { return std::string(BackendName(info.param)); });

// A shard and index written here, read back by a parse written from the TFRecord and
// DALI specs alone, and the manifest's checksums recomputed from the files.
TEST(ShardWriterTest, TfrecordShardParsesIndependentlyAndMatchesManifestAndIndex) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 5, .max_shard_records = 0});
  ASSERT_EQ(m.shards.size(), 1u);
  std::string file = testing::ReadFileOrDie(dir.Join(m.shards[0].data.file));
  std::string index = testing::ReadFileOrDie(dir.Join(m.shards[0].index->file));
  EXPECT_EQ(Xxh3Hex(file.data(), file.size()), m.shards[0].data.xxh3_128);
  EXPECT_EQ(file.size(), m.shards[0].data.bytes);
  EXPECT_EQ(Xxh3Hex(index.data(), index.size()), m.shards[0].index->xxh3_128);
  std::string expected_index;
  size_t pos = 0;
  int n = 0;
  while (pos < file.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(file.data() + pos);
    uint64_t len = DecodeFixed64(p);
    auto unmask = [](uint32_t v) {
      uint32_t rot = v - 0xa282ead8u;
      return (rot >> 17) | (rot << 15);
    };
    ASSERT_EQ(unmask(DecodeFixed32(p + 8)), crc32c::Value(p, 8));
    ASSERT_EQ(unmask(DecodeFixed32(p + 12 + len)), crc32c::Value(p + 12, len));
    tf::Example ex;
    ASSERT_TRUE(ex.ParseFromArray(p + 12, static_cast<int>(len)));
    const std::string& raw = ex.features().feature().at("image/raw").bytes_list().value(0);
    std::vector<uint8_t> px = testing::TestPixels(n, 4, 5, 3);
    EXPECT_EQ(raw, std::string(px.begin(), px.end()));
    // The pixels start on a 64-byte boundary of the file.
    EXPECT_EQ((raw.data() - ex.features().feature().at("image/raw").bytes_list().value(0).data()),
              0);
    size_t at = file.find(raw, pos);
    EXPECT_EQ(at % 64, 0u) << "record " << n;
    expected_index += std::to_string(pos) + " " + std::to_string(16 + len) + "\n";
    pos += 16 + len;
    ++n;
  }
  EXPECT_EQ(n, 5);
  EXPECT_EQ(index, expected_index);
}

TEST(ShardWriterTest, RotatesBySizeWithAtLeastOneRecordPerShard) {
  TempDir dir;
  // Each record is about 520 bytes (192 pixel bytes, metadata, alignment padding).
  Manifest m = testing::WriteTestDataset(
      dir.path(),
      {.samples = 9, .height = 8, .width = 8, .max_shard_records = 0, .max_shard_bytes = 1200});
  EXPECT_GE(m.shards.size(), 4u);
  EXPECT_LE(m.shards.size(), 9u);
  for (const ShardEntry& e : m.shards) EXPECT_LE(e.data.bytes, 1200u);
  TempDir dir2;
  m = testing::WriteTestDataset(
      dir2.path(),
      {.samples = 3, .height = 64, .width = 64, .max_shard_records = 0, .max_shard_bytes = 100});
  EXPECT_EQ(m.shards.size(), 3u) << "a record larger than the limit still gets a shard";
}

TEST(ShardWriterTest, ShapeLabelAndChannelViolationsAreRejected) {
  TempDir dir;
  ShardWriterOptions o;
  o.class_names = {"a"};
  o.image = {.channels = 3, .height = 2, .width = 2};
  auto w = ShardWriter::Create(dir.path(), o);
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> px(12);
  Status s = (*w)->Add({.pixels = px, .height = 2, .width = 2, .channels = 3, .label = 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("label 1 is not a class"), std::string::npos) << s.message();
  s = (*w)->Add({.pixels = px, .height = 3, .width = 2, .channels = 3, .label = 0});
  EXPECT_NE(s.message().find("the dataset is 2x2"), std::string::npos) << s.message();
  s = (*w)->Add({.pixels = std::span(px).first(11), .height = 2, .width = 2, .channels = 3});
  EXPECT_NE(s.message().find("11 pixel bytes"), std::string::npos) << s.message();
  EXPECT_OK((*w)->Add({.pixels = px, .height = 2, .width = 2, .channels = 3, .label = 0}));
  EXPECT_TRUE((*w)->Finish().ok());
}

// The writer refuses what the readers would refuse: more pixels than the format allows
// is caught on Add, not discovered by a reader later.
TEST(ShardWriterTest, ImagesAboveThePixelLimitAreRejectedOnAdd) {
  TempDir dir;
  ShardWriterOptions o;
  o.class_names = {"a"};
  o.image = {.channels = 1};
  auto w = ShardWriter::Create(dir.path(), o);
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> px(10000ull * 9000);
  Status s = (*w)->Add({.pixels = px, .height = 10000, .width = 9000, .channels = 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("has more than 89478485 pixels"), std::string::npos) << s.message();
  o.image.channels = 4;
  auto w4 = ShardWriter::Create(dir.Join("four"), o);
  ASSERT_FALSE(w4.ok());
  EXPECT_NE(w4.status().message().find("expected 1 (gray) or 3 (RGB)"), std::string::npos);
}

// The writer refuses the class names that ParseManifest refuses: it never writes a dataset
// its own readers cannot open.
TEST(ShardWriterTest, ClassNamesTheReadersWouldRefuseAreRefusedAtCreate) {
  for (const std::string& name : {std::string("a\nb"), std::string("nul\0", 4),
                                  std::string("esc\x1b]0;x\x07"), std::string("bad\xff")}) {
    TempDir dir;
    ShardWriterOptions o;
    o.class_names = {"fine", name};
    auto w = ShardWriter::Create(dir.path(), o);
    ASSERT_FALSE(w.ok()) << EscapeBytes(name);
    EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(w.status().message().find("printable UTF-8"), std::string::npos)
        << w.status().message();
  }
  TempDir dir;
  ShardWriterOptions o;
  o.class_names = {"caf\xc3\xa9", "\xe7\x8c\xab", "back\\slash"};
  EXPECT_TRUE(ShardWriter::Create(dir.path(), o).ok());
}

TEST(ShardWriterTest, RefusesADirectoryThatHoldsADataset) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 2});
  ShardWriterOptions o;
  o.class_names = {"a"};
  auto w = ShardWriter::Create(dir.path(), o);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kAlreadyExists);
}

TEST(ShardWriterTest, AbandonedWriterPublishesNothing) {
  TempDir dir;
  {
    ShardWriterOptions o;
    o.class_names = {"a"};
    o.image = {.channels = 1, .height = 2, .width = 2};
    o.max_shard_records = 1;
    auto w = ShardWriter::Create(dir.path(), o);
    ASSERT_TRUE(w.ok());
    std::vector<uint8_t> px(4);
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK((*w)->Add({.pixels = px, .height = 2, .width = 2, .channels = 1}));
    }
  }  // destroyed without Finish()
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Every write, fsync, close, rename and directory fsync of a whole dataset write fails in
// turn; each failure surfaces as an error naming the operation, and no manifest is ever
// published after a failure.
TEST(ShardWriterTest, EveryInjectedIoFailureIsAnErrorAndNeverPublishesAManifest) {
  auto write = [](io::MemEnv* env) -> Status {
    ShardWriterOptions o;
    o.class_names = {"a", "b"};
    o.image = {.channels = 3, .height = 2, .width = 2};
    o.max_shard_records = 2;
    o.env = env;
    auto w = ShardWriter::Create("/out", o);
    if (!w.ok()) return w.status();
    for (int i = 0; i < 5; ++i) {
      std::vector<uint8_t> px = testing::TestPixels(i, 2, 2, 3);
      SHARDPACK_RETURN_IF_ERROR(
          (*w)->Add({.pixels = px, .height = 2, .width = 2, .channels = 3, .label = i % 2}));
    }
    return (*w)->Finish().status();
  };
  io::MemEnv clean;
  ASSERT_OK(write(&clean));
  for (io::FaultOp op : {io::FaultOp::kAppend, io::FaultOp::kSync, io::FaultOp::kClose,
                         io::FaultOp::kRename, io::FaultOp::kSyncDir}) {
    const int calls = clean.Count(op);
    ASSERT_GT(calls, 0);
    for (int nth = 1; nth <= calls; ++nth) {
      io::MemEnv env;
      env.InjectFault(op, nth, nth % 2 ? ENOSPC : EIO);
      Status s = write(&env);
      ASSERT_FALSE(s.ok()) << "op " << static_cast<int>(op) << " call " << nth;
      EXPECT_EQ(s.code(), StatusCode::kIOError);
      EXPECT_NE(s.message().find(nth % 2 ? "ENOSPC" : "EIO"), std::string::npos) << s.message();
      const bool manifest_renamed_before_dir_sync =
          op == io::FaultOp::kSyncDir && nth == calls;  // the very last step
      EXPECT_EQ(env.FileExists("/out/manifest.json"), manifest_renamed_before_dir_sync)
          << "op " << static_cast<int>(op) << " call " << nth;
    }
  }
}

TEST(ShardWriterTest, LmdbMapGrowsFromATinyInitialSizeAndKeepsEveryRecord) {
  for (uint64_t initial : {32ull << 10, 100ull << 10, 1ull << 20}) {
    TempDir dir;
    Manifest m = testing::WriteTestDataset(dir.path(), {.backend = Backend::kLmdb,
                                                        .samples = 40,
                                                        .height = 32,
                                                        .width = 32,
                                                        .max_shard_records = 0,
                                                        .lmdb_initial_map_bytes = initial});
    ASSERT_EQ(m.num_samples, 40u);
    auto ds = Dataset::Open(dir.path());
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    for (uint64_t i = 0; i < 40; ++i) {
      SampleView s;
      ASSERT_OK((*ds)->Get(i, &s));
      EXPECT_EQ(std::vector<uint8_t>(s.pixels.begin(), s.pixels.end()),
                testing::TestPixels(i, 32, 32, 3));
    }
  }
}

}  // namespace
}  // namespace shardpack
