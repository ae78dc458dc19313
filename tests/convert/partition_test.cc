// Partitioned conversion: parts converted separately (as tasks of a job array would) and
// merged give the single-process conversion's dataset.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "image_fixtures.h"
#include "shardpack/convert.h"
#include "shardpack/dataset.h"
#include "shardpack/limits.h"
#include "shardpack/verify.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// `n` JPEGs in 3 classes; with `broken`, every 10th is cut in half (a reject).
void MakeTree(const std::string& root, int n, bool broken) {
  for (int i = 0; i < n; ++i) {
    fs::path dir = fs::path(root) / ("class" + std::to_string(i % 3));
    fs::create_directories(dir);
    const int side = 24 + i % 5;
    std::string jpg =
        testing::EncodeJpeg(testing::Pattern(side, side + 3, 3, i), side, side + 3, 3);
    if (broken && i % 10 == 9) jpg = jpg.substr(0, jpg.size() / 2);
    testing::WriteFileOrDie((dir / ("img" + std::to_string(i) + ".jpg")).string(), jpg);
  }
}

ConvertOptions Options(Backend backend) {
  ConvertOptions o;
  o.backend = backend;
  o.height = 16;
  o.width = 16;
  o.max_shard_records = 4;
  o.shuffle = true;
  o.seed = 5;
  o.num_threads = 2;
  return o;
}

// Every file under `dir` (recursively), by relative name.
std::map<std::string, std::string> FilesUnder(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    out[fs::relative(e.path(), dir).string()] = testing::ReadFileOrDie(e.path().string());
  }
  return out;
}

// Converts every part of `count` into `dst`, as separate runs.
void ConvertParts(const std::string& src, const std::string& dst, ConvertOptions o, int count) {
  o.part_count = count;
  for (int i = 0; i < count; ++i) {
    o.part_index = i;
    auto s = Convert(src, dst, o);
    ASSERT_TRUE(s.ok()) << "part " << i << ": " << s.status().ToString();
  }
}

// Every sample of a dataset, in order: label, filename and pixels.
std::vector<std::string> Samples(const std::string& dir) {
  auto ds = Dataset::Open(dir);
  EXPECT_TRUE(ds.ok()) << ds.status().ToString();
  std::vector<std::string> out;
  if (!ds.ok()) return out;
  for (uint64_t i = 0; i < (*ds)->size(); ++i) {
    SampleView s;
    Status st = (*ds)->Get(i, &s);
    EXPECT_TRUE(st.ok()) << st.ToString();
    out.push_back(std::to_string(s.label) + "|" + std::string(s.filename) + "|" +
                  std::string(reinterpret_cast<const char*>(s.pixels.data()), s.pixels.size()));
  }
  return out;
}

TEST(PartitionTest, RangesTileTheInputsAndEndOnShardBoundaries) {
  for (uint64_t inputs : {0ull, 1ull, 7ull, 100ull, 1001ull}) {
    for (int count : {1, 2, 3, 7, 16}) {
      for (uint64_t records : {0ull, 1ull, 4ull, 64ull}) {
        uint64_t expect = 0;
        for (int i = 0; i < count; ++i) {
          InputRange r = PartitionInputs(inputs, i, count, records);
          EXPECT_EQ(r.begin, expect) << inputs << " " << count << " " << records << " " << i;
          EXPECT_LE(r.begin, r.end);
          if (records > 0 && i + 1 < count) {
            EXPECT_EQ(r.end % records, 0u);
          }
          expect = r.end;
        }
        EXPECT_EQ(expect, inputs);
      }
    }
  }
  // Even cuts when there is no shard size to honour.
  EXPECT_EQ(PartitionInputs(100, 1, 4, 0).begin, 25u);
  EXPECT_EQ(PartitionInputs(100, 1, 4, 0).end, 50u);
  // No overflow near the top of the range.
  InputRange r = PartitionInputs(UINT64_MAX, 3, 4, 0);
  EXPECT_EQ(r.end, UINT64_MAX);
  EXPECT_GT(r.begin, UINT64_MAX / 2);
}

class PartitionBackendTest : public ::testing::TestWithParam<Backend> {};

TEST_P(PartitionBackendTest, MergedPartsAreByteIdenticalToOneProcess) {
  TempDir src, single, parts;
  MakeTree(src.path(), 30, /*broken=*/false);
  const ConvertOptions o = Options(GetParam());
  ASSERT_TRUE(Convert(src.path(), single.path(), o).ok());
  ConvertParts(src.path(), parts.path(), o, 3);
  EXPECT_TRUE(fs::exists(PartDirectory(parts.path(), 2, 3) + "/manifest.json"));
  EXPECT_FALSE(fs::exists(parts.Join("manifest.json")));
  auto merged = Merge(parts.path());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_TRUE(merged->ok());
  EXPECT_EQ(merged->parts, 3);
  EXPECT_EQ(merged->inputs, 30u);
  EXPECT_EQ(merged->written, 30u);
  // Every file, the manifest included; the parts directory is gone.
  EXPECT_EQ(FilesUnder(parts.path()), FilesUnder(single.path()));
  EXPECT_FALSE(fs::exists(parts.Join("parts")));
  // Merging again is a no-op.
  auto again = Merge(parts.path());
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_merged);
  EXPECT_EQ(FilesUnder(parts.path()), FilesUnder(single.path()));
}

INSTANTIATE_TEST_SUITE_P(Backends, PartitionBackendTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb),
                         [](const auto& info) {
                           return info.param == Backend::kLmdb ? "Lmdb" : "Tfrecord";
                         });

TEST(PartitionTest, WithRejectsAndByteSizedShardsTheSamplesRejectsAndOptionsMatch) {
  TempDir src, single, parts;
  MakeTree(src.path(), 40, /*broken=*/true);
  ConvertOptions o = Options(Backend::kTfrecord);
  o.max_shard_records = 0;
  o.max_shard_bytes = 3000;  // a few records per shard
  auto one = Convert(src.path(), single.path(), o);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->rejected, 4u);
  ConvertParts(src.path(), parts.path(), o, 4);
  auto merged = Merge(parts.path());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->rejected, 4u);
  EXPECT_EQ(merged->written, one->written);
  auto report = VerifyDataset(parts.path());
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->ok()) << (report->faults.empty() ? "" : FormatFault(report->faults[0]));
  EXPECT_EQ(Samples(parts.path()), Samples(single.path()));
  EXPECT_EQ(testing::ReadFileOrDie(parts.Join("rejects.tsv")),
            testing::ReadFileOrDie(single.Join("rejects.tsv")));
  auto a = ReadManifest(single.path());
  auto b = ReadManifest(parts.path());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(b->options_json, a->options_json);
  EXPECT_EQ(b->num_samples, a->num_samples);
  ASSERT_EQ(b->classes.size(), a->classes.size());
  for (size_t c = 0; c < a->classes.size(); ++c)
    EXPECT_EQ(b->classes[c].count, a->classes[c].count);
}

TEST(PartitionTest, MorePartsThanInputsLeavesSomeEmpty) {
  TempDir src, single, parts;
  MakeTree(src.path(), 3, /*broken=*/false);
  ConvertOptions o = Options(Backend::kTfrecord);
  o.max_shard_records = 0;
  ASSERT_TRUE(Convert(src.path(), single.path(), o).ok());
  ConvertParts(src.path(), parts.path(), o, 5);
  auto merged = Merge(parts.path());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->written, 3u);
  EXPECT_EQ(Samples(parts.path()), Samples(single.path()));
}

TEST(PartitionTest, MissingAndUnfinishedPartsAreNamedWithHowToRedoThem) {
  TempDir src, dst;
  MakeTree(src.path(), 12, /*broken=*/false);
  ConvertOptions o = Options(Backend::kTfrecord);
  o.part_count = 4;
  for (int i : {0, 2}) {
    o.part_index = i;
    ASSERT_TRUE(Convert(src.path(), dst.path(), o).ok());
  }
  auto merged = Merge(dst.path());
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), StatusCode::kNotFound);
  EXPECT_NE(merged.status().message().find("parts 1, 3 of 4 are missing"), std::string::npos)
      << merged.status().message();
  EXPECT_NE(merged.status().message().find("--part I/4"), std::string::npos);
  // A part that started but did not finish: its directory has no manifest.
  fs::create_directories(PartDirectory(dst.path(), 1, 4));
  o.part_index = 3;
  ASSERT_TRUE(Convert(src.path(), dst.path(), o).ok());
  merged = Merge(dst.path());
  ASSERT_FALSE(merged.ok());
  EXPECT_NE(merged.status().message().find("part 1/4 did not finish"), std::string::npos)
      << merged.status().message();
  EXPECT_NE(merged.status().message().find("--part 1/4"), std::string::npos);
  EXPECT_FALSE(fs::exists(dst.Join("manifest.json")));
  // Re-run alone, the missing part completes the set.
  o.part_index = 1;
  ASSERT_TRUE(Convert(src.path(), dst.path(), o).ok());
  merged = Merge(dst.path());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->written, 12u);
}

TEST(PartitionTest, PartsOfDifferentOptionsAreRefused) {
  TempDir src, dst;
  MakeTree(src.path(), 12, /*broken=*/false);
  ConvertOptions o = Options(Backend::kTfrecord);
  o.part_count = 2;
  o.part_index = 0;
  ASSERT_TRUE(Convert(src.path(), dst.path(), o).ok());
  o.part_index = 1;
  o.seed = 6;
  ASSERT_TRUE(Convert(src.path(), dst.path(), o).ok());
  auto merged = Merge(dst.path());
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(merged.status().message().find("not of one conversion"), std::string::npos)
      << merged.status().message();
  EXPECT_FALSE(fs::exists(dst.Join("manifest.json")));
}

TEST(PartitionTest, ADamagedPartIsNamedByFileAndRecordAndConvertedAgainAlone) {
  TempDir src, single, dst;
  MakeTree(src.path(), 24, /*broken=*/false);
  const ConvertOptions o = Options(Backend::kTfrecord);
  ASSERT_TRUE(Convert(src.path(), single.path(), o).ok());
  ConvertParts(src.path(), dst.path(), o, 3);
  // Flip one pixel byte in the first shard of part 1.
  const std::string part1 = PartDirectory(dst.path(), 1, 3);
  auto m = ReadManifest(part1);
  ASSERT_TRUE(m.ok());
  const std::string shard = part1 + "/" + m->shards[0].data.file;
  std::string bytes = testing::ReadFileOrDie(shard);
  bytes[bytes.size() - 20] ^= 0x40;
  testing::WriteFileOrDie(shard, bytes);

  auto merged = Merge(dst.path());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  ASSERT_FALSE(merged->ok());
  const VerifyFault& f = merged->faults.front();
  EXPECT_EQ(f.file.rfind("parts/part-00001-of-00003/shard-00000-of-", 0), 0u) << f.file;
  EXPECT_FALSE(fs::exists(dst.Join("manifest.json")));
  EXPECT_TRUE(fs::exists(shard));  // nothing moved

  ConvertOptions redo = o;
  redo.part_count = 3;
  redo.part_index = 1;
  redo.overwrite = true;
  ASSERT_TRUE(Convert(src.path(), dst.path(), redo).ok());
  merged = Merge(dst.path());
  ASSERT_TRUE(merged.ok() && merged->ok());
  EXPECT_EQ(FilesUnder(dst.path()), FilesUnder(single.path()));
}

TEST(PartitionTest, AMergeStoppedByAnIoErrorFinishesWhenRunAgain) {
  TempDir src, single, dst;
  MakeTree(src.path(), 30, /*broken=*/false);
  const ConvertOptions o = Options(Backend::kTfrecord);
  ASSERT_TRUE(Convert(src.path(), single.path(), o).ok());
  ConvertParts(src.path(), dst.path(), o, 3);
  // A directory in the way of the 5th shard's final name: that rename fails part-way.
  auto m = ReadManifest(single.path());
  ASSERT_TRUE(m.ok());
  const std::string blocker = dst.Join(m->shards[4].data.file);
  fs::create_directories(blocker + "/x");
  auto merged = Merge(dst.path());
  ASSERT_FALSE(merged.ok());
  EXPECT_TRUE(fs::exists(dst.Join(".shardpack-merge.json")));
  EXPECT_TRUE(fs::exists(dst.Join(m->shards[0].data.file)));  // moved before the error
  EXPECT_FALSE(fs::exists(dst.Join("manifest.json")));
  fs::remove_all(blocker);
  merged = Merge(dst.path());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->written, 30u);
  EXPECT_EQ(FilesUnder(dst.path()), FilesUnder(single.path()));
}

TEST(PartitionTest, MergeRefusesAThreadCountOutsideItsRange) {
  TempDir dst;
  MergeOptions o;
  o.num_threads = kMaxThreads + 1;
  auto merged = Merge(dst.path(), o);
  EXPECT_EQ(merged.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(merged.status().message().find("num_threads must be in 0..4096, not 4097"),
            std::string::npos)
      << merged.status().message();
}

TEST(PartitionTest, ConvertRefusesBadPartsAndCaffeKeysAndAMergedDestination) {
  TempDir src, dst;
  MakeTree(src.path(), 6, /*broken=*/false);
  ConvertOptions o = Options(Backend::kTfrecord);
  o.part_count = 2;
  o.part_index = 2;
  EXPECT_EQ(Convert(src.path(), dst.path(), o).status().code(), StatusCode::kInvalidArgument);
  o.part_index = 0;
  o.backend = Backend::kLmdb;
  o.lmdb_schema = LmdbSchema::kCaffe;
  auto caffe = Convert(src.path(), dst.path(), o);
  EXPECT_EQ(caffe.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(caffe.status().message().find("Caffe"), std::string::npos);
  o = Options(Backend::kTfrecord);
  ASSERT_TRUE(Convert(src.path(), dst.path(), o).ok());
  o.part_count = 2;
  auto after = Convert(src.path(), dst.path(), o);
  EXPECT_EQ(after.status().code(), StatusCode::kAlreadyExists);
  // A dataset converted in one process has nothing to merge.
  auto merged = Merge(dst.path());
  ASSERT_TRUE(merged.ok());
  EXPECT_TRUE(merged->already_merged);
}

}  // namespace
}  // namespace shardpack
