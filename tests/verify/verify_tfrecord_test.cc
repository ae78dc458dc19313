// verify --tfrecord: TFRecord files without a manifest, TensorFlow's image/encoded
// Examples and shardpack's image/raw ones.
#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "shardpack/verify.h"
#include "test_util.h"
#include "tf_fixtures.h"

namespace shardpack {
namespace {

using testing::TempDir;

std::string Jpeg(int h, int w) {
  return testing::EncodeJpeg(testing::Pattern(h, w, 3, 1), h, w, 3);
}

// One file holding `examples`; returns the record offsets.
std::vector<uint64_t> WriteFile(const TempDir& dir, const std::vector<std::string>& examples) {
  std::vector<uint64_t> offsets;
  testing::WriteFileOrDie(dir.Join("train-00000-of-00001"),
                          testing::FrameRecords(examples, &offsets));
  return offsets;
}

std::string Faults(const VerifyReport& r) {
  std::string out;
  for (const auto& f : r.faults) out += FormatFault(f) + "\n";
  return out;
}

TEST(VerifyTfrecordTest, BuildImageDataRecordsVerify) {
  TempDir dir;
  WriteFile(
      dir,
      {testing::TfImageExample{
           .encoded = Jpeg(30, 40), .label = 1, .height = 30, .width = 40, .class_text = "cat"}
           .Serialize(),
       testing::TfImageExample{.encoded = testing::EncodePng(testing::Pattern(5, 7, 3, 2), 5, 7, 3),
                               .label = 2,
                               .height = 5,
                               .width = 7,
                               .format = "PNG"}
           .Serialize()});
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << Faults(*r);
  EXPECT_EQ(r->records, 2u);
  EXPECT_EQ(r->files, 1u);
}

TEST(VerifyTfrecordTest, TruncatedJpegInAnIntactRecordIsAFault) {
  TempDir dir;
  const std::string jpeg = Jpeg(64, 64);
  auto offsets = WriteFile(
      dir, {testing::TfImageExample{.encoded = jpeg}.Serialize(),
            testing::TfImageExample{.encoded = jpeg.substr(0, jpeg.size() * 2 / 3)}.Serialize()});
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fault_count, 1u) << Faults(*r);
  EXPECT_EQ(r->faults[0].file, "train-00000-of-00001");
  EXPECT_EQ(r->faults[0].record, 1);
  EXPECT_EQ(r->faults[0].offset, static_cast<int64_t>(offsets[1]));
  EXPECT_NE(r->faults[0].message.find("image/encoded: Corruption: JPEG"), std::string::npos)
      << r->faults[0].message;
}

TEST(VerifyTfrecordTest, WithoutDecodingATruncatedJpegPasses) {
  TempDir dir;
  const std::string jpeg = Jpeg(64, 64);
  WriteFile(dir, {testing::TfImageExample{.encoded = jpeg.substr(0, jpeg.size() / 2)}.Serialize()});
  VerifyOptions o;
  o.decode_images = false;
  auto r = VerifyTfrecordFiles(dir.path(), o);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok()) << Faults(*r);
}

TEST(VerifyTfrecordTest, DeclaredSizeThatTheJpegDoesNotHaveIsAFault) {
  TempDir dir;
  WriteFile(dir, {testing::TfImageExample{.encoded = Jpeg(64, 48), .height = 48, .width = 64}
                      .Serialize()});  // height and width swapped
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fault_count, 1u);
  EXPECT_NE(r->faults[0].message.find("image/height x image/width is 48x64, but the JPEG decodes "
                                      "to 8x6 at 1/8 scale (expected 6x8)"),
            std::string::npos)
      << r->faults[0].message;
}

TEST(VerifyTfrecordTest, FormatThatContradictsTheBytesIsAFault) {
  TempDir dir;
  WriteFile(dir, {testing::TfImageExample{.encoded = Jpeg(8, 8), .format = "PNG"}.Serialize()});
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fault_count, 1u);
  EXPECT_NE(r->faults[0].message.find("image/format: \"PNG\", but image/encoded is a JPEG"),
            std::string::npos)
      << r->faults[0].message;
}

TEST(VerifyTfrecordTest, EncodedBytesThatAreNoImageAreAFault) {
  TempDir dir;
  WriteFile(dir, {testing::TfImageExample{.encoded = "GIF89a...", .format = ""}.Serialize()});
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fault_count, 1u);
  EXPECT_NE(r->faults[0].message.find("not a JPEG or PNG file (starts with 47 49 46 38)"),
            std::string::npos)
      << r->faults[0].message;
}

TEST(VerifyTfrecordTest, DamagedFramingIsAFaultWithItsOffsetAndTheScanGoesOn) {
  TempDir dir;
  const std::string jpeg = Jpeg(8, 8);
  std::vector<std::string> examples(3, testing::TfImageExample{.encoded = jpeg}.Serialize());
  auto offsets = WriteFile(dir, examples);
  std::string bytes = testing::ReadFileOrDie(dir.Join("train-00000-of-00001"));
  bytes[offsets[1] + 2] ^= 1;  // record 1's length
  testing::WriteFileOrDie(dir.Join("train-00000-of-00001"), bytes);
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fault_count, 1u) << Faults(*r);
  EXPECT_EQ(r->faults[0].record, 1);
  EXPECT_EQ(r->faults[0].offset, static_cast<int64_t>(offsets[1]));
  EXPECT_NE(r->faults[0].message.find("length checksum"), std::string::npos);
  EXPECT_EQ(r->records, 3u);  // records 0 and 2 were read
}

TEST(VerifyTfrecordTest, RawRecordsWithAWrongPixelChecksumAreAFault) {
  TempDir dir;
  std::vector<uint8_t> px = testing::TestPixels(0, 2, 2, 3);
  std::string payload = testing::TfRawExample(px, 2, 2, 3, 0, "a", "a");
  // Flip a pixel in the payload and re-frame it: the record checksum is then right.
  const size_t at = payload.find(std::string(px.begin(), px.end()));
  ASSERT_NE(at, std::string::npos);
  payload[at] ^= 1;
  WriteFile(dir, {payload});
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fault_count, 1u);
  EXPECT_NE(r->faults[0].message.find("pixel checksum"), std::string::npos);
}

TEST(VerifyTfrecordTest, ShardpackDatasetShardsVerifyAsTfrecordFiles) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 6});
  auto r = VerifyTfrecordFiles(dir.path());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok()) << Faults(*r);
  EXPECT_EQ(r->records, 6u);
}

}  // namespace
}  // namespace shardpack
