// Adopt: TFRecord files a tf.io.TFRecordWriter user wrote in shardpack's schema become a
// dataset in place, which verify, Dataset and the loader read.
#include <gtest/gtest.h>

#include <filesystem>

#include "format/tfrecord_files.h"
#include "shardpack/convert.h"
#include "shardpack/dataset.h"
#include "shardpack/verify.h"
#include "test_util.h"
#include "tf_fixtures.h"

namespace shardpack {
namespace {

using testing::TempDir;

// Two files of four 4x5 RGB samples each, labels i % 3, class texts "c0".."c2".
void WriteTfFiles(const TempDir& dir, bool with_crc = true, int sizes_vary = 0) {
  int n = 0;
  for (int file = 0; file < 2; ++file) {
    std::vector<std::string> payloads;
    for (int k = 0; k < 4; ++k, ++n) {
      const int h = 4 + (sizes_vary ? n % 3 : 0);
      payloads.push_back(testing::TfRawExample(testing::TestPixels(n, h, 5, 3), h, 5, 3, n % 3,
                                               "c" + std::to_string(n % 3),
                                               "f" + std::to_string(n) + ".png", with_crc));
    }
    testing::WriteFileOrDie(dir.Join("part-" + std::to_string(file) + ".tfrecord"),
                            testing::FrameRecords(payloads));
  }
}

TEST(AdoptTest, TensorFlowWrittenRecordsBecomeADatasetThatVerifiesAndReads) {
  TempDir dir;
  WriteTfFiles(dir);
  const std::string before = testing::ReadFileOrDie(dir.Join("part-0.tfrecord"));
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s->ok()) << FormatFault(s->faults[0]);
  EXPECT_EQ(s->records, 8u);
  EXPECT_EQ(testing::ReadFileOrDie(dir.Join("part-0.tfrecord")), before);  // unchanged
  EXPECT_TRUE(std::filesystem::exists(dir.Join("part-0.idx")));
  const Manifest& m = s->manifest;
  EXPECT_EQ(m.num_samples, 8u);
  ASSERT_EQ(m.classes.size(), 3u);
  EXPECT_EQ(m.classes[1].name, "c1");
  EXPECT_EQ(m.classes[1].count, 3u);
  EXPECT_EQ(m.image.height, 4);
  EXPECT_EQ(m.image.width, 5);
  EXPECT_EQ(m.shards[1].data.file, "part-1.tfrecord");
  EXPECT_EQ(m.shards[1].first_sample, 4u);

  auto v = VerifyDataset(dir.path());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << FormatFault(v->faults[0]);
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  for (uint64_t i = 0; i < 8; ++i) {
    SampleView sample;
    ASSERT_OK((*ds)->Get(i, &sample));
    const std::vector<uint8_t> expected = testing::TestPixels(i, 4, 5, 3);
    EXPECT_TRUE(
        std::equal(sample.pixels.begin(), sample.pixels.end(), expected.begin(), expected.end()));
    EXPECT_EQ(sample.label, static_cast<int64_t>(i % 3));
  }
}

TEST(AdoptTest, PixelAlignmentIsWhatEveryRecordHas) {
  TempDir dir;
  WriteTfFiles(dir);
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok() && s->ok());
  const uint32_t a = s->manifest.pixel_alignment;
  EXPECT_GE(a, 1u);
  EXPECT_EQ(a & (a - 1), 0u);
  EXPECT_TRUE(VerifyDataset(dir.path())->ok());  // verify checks every pixel offset
}

TEST(AdoptTest, SamplesOfDifferentSizesGiveAMaxSide) {
  TempDir dir;
  WriteTfFiles(dir, true, /*sizes_vary=*/1);
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok() && s->ok());
  EXPECT_FALSE(s->manifest.image.fixed());
  EXPECT_EQ(s->manifest.image.max_side, 6);
}

TEST(AdoptTest, RecordWithoutPixelChecksumIsAFaultAndNothingIsWritten) {
  TempDir dir;
  WriteTfFiles(dir, /*with_crc=*/false);
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s->ok());
  EXPECT_EQ(s->faults.size(), 8u);
  EXPECT_EQ(s->faults[0].file, "part-0.tfrecord");
  EXPECT_EQ(s->faults[0].record, 0);
  EXPECT_NE(s->faults[0].message.find("image/raw/crc32c: missing"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.Join("manifest.json")));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("part-0.idx")));
}

TEST(AdoptTest, DamagedRecordIsAFaultNamedByFileRecordAndOffset) {
  TempDir dir;
  WriteTfFiles(dir);
  std::string bytes = testing::ReadFileOrDie(dir.Join("part-1.tfrecord"));
  bytes[bytes.size() - 1] ^= 1;  // the last record's data checksum
  testing::WriteFileOrDie(dir.Join("part-1.tfrecord"), bytes);
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->faults.size(), 1u);
  EXPECT_EQ(s->faults[0].file, "part-1.tfrecord");
  EXPECT_EQ(s->faults[0].record, 3);
  EXPECT_GT(s->faults[0].offset, 0);
  EXPECT_NE(s->faults[0].message.find("data checksum"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.Join("manifest.json")));
}

TEST(AdoptTest, LabelPastTheClassLimitIsAFaultAndNothingIsWritten) {
  TempDir dir;
  std::vector<std::string> payloads;
  payloads.push_back(testing::TfRawExample(testing::TestPixels(0, 4, 5, 3), 4, 5, 3, 1, "a",
                                           "f0.png", /*with_crc=*/true));
  // A label the manifest could list (its class list would stop at 1,000,000 entries).
  payloads.push_back(testing::TfRawExample(testing::TestPixels(1, 4, 5, 3), 4, 5, 3,
                                           static_cast<int64_t>(kMaxClasses), "b", "f1.png",
                                           /*with_crc=*/true));
  testing::WriteFileOrDie(dir.Join("part-0.tfrecord"), testing::FrameRecords(payloads));
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->faults.size(), 1u);
  EXPECT_EQ(s->faults[0].record, 1);
  EXPECT_NE(s->faults[0].message.find("image/class/label: 1000000 is outside 0..999999"),
            std::string::npos)
      << s->faults[0].message;
  EXPECT_FALSE(std::filesystem::exists(dir.Join("manifest.json")));
}

TEST(AdoptTest, EncodedRecordsCannotBeAdopted) {
  TempDir dir;
  testing::WriteFileOrDie(
      dir.Join("a.tfrecord"),
      testing::FrameRecords({testing::TfImageExample{.encoded = "\xff\xd8"}.Serialize()}));
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->faults.size(), 1u);
  EXPECT_NE(s->faults[0].message.find("feature image/raw: expected one bytes value"),
            std::string::npos)
      << s->faults[0].message;
}

TEST(AdoptTest, DirectoryThatHoldsADatasetIsAlreadyExists) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 3});
  EXPECT_EQ(Adopt(dir.path()).status().code(), StatusCode::kAlreadyExists);
}

TEST(AdoptTest, FilesWhoseIndexNamesCollideAreAFault) {
  TempDir dir;
  WriteTfFiles(dir);
  std::filesystem::copy_file(dir.Join("part-0.tfrecord"), dir.Join("part-0.tfrecords"));
  auto s = Adopt(dir.path());
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(s->ok());
  EXPECT_NE(s->faults[0].message.find("its index would be part-0.idx"), std::string::npos)
      << s->faults[0].message;
}

}  // namespace
}  // namespace shardpack
