// Convert with a TFRecord SRC: TensorFlow's image/encoded Examples (build_image_data.py)
// and image/raw ones are re-packed into pre-decoded shards, every record accounted for.
#include <gtest/gtest.h>

#include <filesystem>
#include <tuple>

#include <filesystem>

#include "image/image.h"
#include "image_fixtures.h"
#include "shardpack/convert.h"
#include "shardpack/dataset.h"
#include "shardpack/verify.h"
#include "test_util.h"
#include "tf_fixtures.h"

namespace shardpack {
namespace {

using testing::TempDir;

// Two build_image_data.py-style shards of three records, labels 1 and 2 (1-based, as
// TensorFlow's scripts write them).
struct TfDataset {
  TempDir dir;
  std::vector<std::string> jpegs;
  std::vector<uint64_t> offsets0;  // record offsets of the first file
  TfDataset() {
    for (int shard = 0; shard < 2; ++shard) {
      std::vector<std::string> payloads;
      for (int k = 0; k < 3; ++k) {
        const int n = shard * 3 + k;
        jpegs.push_back(testing::PatternJpeg(20 + n, 30, n));
        testing::TfImageExample e{.encoded = jpegs.back(),
                                  .label = 1 + n % 2,
                                  .height = 20 + n,
                                  .width = 30,
                                  .class_text = n % 2 == 0 ? "cat" : "dog",
                                  .filename = "img" + std::to_string(n) + ".JPEG"};
        payloads.push_back(e.Serialize());
      }
      testing::WriteFileOrDie(dir.Join("train-0000" + std::to_string(shard) + "-of-00002"),
                              testing::FrameRecords(payloads, shard == 0 ? &offsets0 : nullptr));
    }
  }
  std::string File(int shard) const {
    return dir.Join("train-0000" + std::to_string(shard) + "-of-00002");
  }
};

ConvertOptions Keep(int threads = 0) {
  ConvertOptions o;
  o.keep = true;
  o.num_threads = threads;
  return o;
}

TEST(TfrecordInputTest, EncodedRecordsConvertToTheirDecodedPixels) {
  TfDataset tf;
  TempDir out;
  auto s = Convert(tf.dir.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 6u) << testing::RejectList(*s);
  EXPECT_EQ(s->rejected, 0u);
  auto ds = Dataset::Open(out.path());
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  for (uint64_t i = 0; i < 6; ++i) {
    SampleView v;
    ASSERT_OK((*ds)->Get(i, &v));
    auto expected = image::Decode(reinterpret_cast<const uint8_t*>(tf.jpegs[i].data()),
                                  tf.jpegs[i].size(), image::DecodeOptions{});
    ASSERT_TRUE(expected.ok());
    EXPECT_EQ(v.height, 20 + static_cast<int>(i));
    EXPECT_EQ(v.width, 30);
    EXPECT_TRUE(std::equal(v.pixels.begin(), v.pixels.end(), expected->pixels.begin(),
                           expected->pixels.end()))
        << "sample " << i;
    EXPECT_EQ(v.label, 1 + static_cast<int64_t>(i % 2));
    EXPECT_EQ(v.filename, "img" + std::to_string(i) + ".JPEG");
  }
  EXPECT_TRUE(VerifyDataset(out.path())->ok());
}

TEST(TfrecordInputTest, LabelsAreKeptAndClassesNamedByTheirText) {
  TfDataset tf;
  TempDir out;
  auto s = Convert(tf.dir.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok());
  const auto& classes = s->manifest.classes;
  ASSERT_EQ(classes.size(), 3u);  // 1-based labels: class 0 holds nothing
  EXPECT_EQ(classes[0].name, "0");
  EXPECT_EQ(classes[0].count, 0u);
  EXPECT_EQ(classes[1].name, "cat");
  EXPECT_EQ(classes[1].count, 3u);
  EXPECT_EQ(classes[2].name, "dog");
}

TEST(TfrecordInputTest, ClassesBeyondTheLimitsAreRefusedBeforeAnythingIsWritten) {
  for (const auto& [label, text, why] :
       {std::tuple<int64_t, std::string, std::string>{1000000, "x",
                                                      "1000001 classes, more than "
                                                      "the 1000000"},
        std::tuple<int64_t, std::string, std::string>{3, std::string(2000, 'n'),
                                                      "has a name of 2000 bytes, more than the "
                                                      "1024 allowed"}}) {
    TempDir src, out;
    testing::TfImageExample e{
        .encoded = testing::PatternJpeg(20, 20, 1), .label = label, .class_text = text};
    testing::WriteFileOrDie(src.Join("train-00000-of-00001"),
                            testing::FrameRecords({e.Serialize()}));
    auto s = Convert(src.path(), out.Join("ds"), Keep());
    ASSERT_FALSE(s.ok()) << why;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(why), std::string::npos) << s.status().message();
    EXPECT_FALSE(std::filesystem::exists(out.Join("ds")));
  }
}

TEST(TfrecordInputTest, DamagedRecordIsRejectedByFileRecordAndOffset) {
  TfDataset tf;
  std::string bytes = testing::ReadFileOrDie(tf.File(0));
  bytes[tf.offsets0[1] + 40] ^= 0x20;  // inside record 1's payload
  testing::WriteFileOrDie(tf.File(0), bytes);
  TempDir out;
  auto s = Convert(tf.dir.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 5u);
  EXPECT_EQ(s->rejected, 1u);
  EXPECT_EQ(s->inputs, s->written + s->rejected);
  const std::string tsv = testing::ReadFileOrDie(out.Join("rejects.tsv"));
  const std::string expected = "train-00000-of-00002: record 1 at offset " +
                               std::to_string(tf.offsets0[1]) + "\tCorruption: data checksum";
  EXPECT_NE(tsv.find(expected), std::string::npos) << tsv;
}

TEST(TfrecordInputTest, UndecodableImageInAnIntactRecordIsRejected) {
  TempDir src;
  std::string jpeg = testing::PatternJpeg(40, 40, 1);
  std::vector<std::string> payloads = {
      testing::TfImageExample{.encoded = jpeg, .label = 0}.Serialize(),
      testing::TfImageExample{.encoded = jpeg.substr(0, jpeg.size() / 2), .label = 0}.Serialize()};
  std::vector<uint64_t> offsets;
  testing::WriteFileOrDie(src.Join("a.tfrecord"), testing::FrameRecords(payloads, &offsets));
  TempDir out;
  auto s = Convert(src.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 1u);
  ASSERT_EQ(s->rejects.size(), 1u);
  EXPECT_EQ(s->rejects[0].path, "a.tfrecord: record 1 at offset " + std::to_string(offsets[1]));
  EXPECT_NE(s->rejects[0].reason.find("image/encoded: "), std::string::npos)
      << s->rejects[0].reason;
}

TEST(TfrecordInputTest, ClassTextThatContradictsAnEarlierRecordIsRejected) {
  TempDir src;
  std::string jpeg = testing::PatternJpeg(8, 8, 1);
  std::vector<std::string> payloads = {
      testing::TfImageExample{.encoded = jpeg, .label = 0, .class_text = "cat"}.Serialize(),
      testing::TfImageExample{.encoded = jpeg, .label = 0, .class_text = "dog"}.Serialize()};
  testing::WriteFileOrDie(src.Join("a.tfrecord"), testing::FrameRecords(payloads));
  TempDir out;
  auto s = Convert(src.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->rejects.size(), 1u);
  EXPECT_NE(s->rejects[0].reason.find("\"dog\", but label 0 is \"cat\" (a.tfrecord: record 0"),
            std::string::npos)
      << s->rejects[0].reason;
}

TEST(TfrecordInputTest, FileThatIsNotATfrecordFileIsRejectedAsSuch) {
  TfDataset tf;
  testing::WriteFileOrDie(tf.dir.Join("photo.jpg"), testing::PatternJpeg(8, 8, 2));
  TempDir out;
  auto s = Convert(tf.dir.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 6u);
  ASSERT_EQ(s->rejects.size(), 1u) << testing::RejectList(*s);
  EXPECT_EQ(s->rejects[0].path.rfind("photo.jpg: record 0 at offset 0", 0), 0u);
  EXPECT_NE(s->rejects[0].reason.find("not a TFRecord file"), std::string::npos);
}

TEST(TfrecordInputTest, RawRecordsOfAShardpackDatasetConvertAgain) {
  TempDir first;
  Manifest m = testing::WriteTestDataset(first.path(), {.samples = 7, .height = 6, .width = 5});
  TempDir out;
  ConvertOptions o = Keep();
  o.channels = 1;  // RGB -> gray on the way
  auto s = Convert(first.path(), out.path(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 7u) << testing::RejectList(*s);
  ASSERT_EQ(s->manifest.classes.size(), m.classes.size());
  for (size_t i = 0; i < m.classes.size(); ++i) {
    EXPECT_EQ(s->manifest.classes[i].name, m.classes[i].name);  // from its manifest
  }
  auto ds = Dataset::Open(out.path());
  ASSERT_TRUE(ds.ok());
  SampleView v;
  ASSERT_OK((*ds)->Get(3, &v));
  EXPECT_EQ(v.channels, 1);
  const std::vector<uint8_t> rgb = testing::TestPixels(3, 6, 5, 3);
  const uint32_t y = (19595u * rgb[0] + 38470u * rgb[1] + 7471u * rgb[2] + 32768u) >> 16;
  EXPECT_EQ(v.pixels[0], y);
}

TEST(TfrecordInputTest, GlobPatternSelectsTheFilesToConvert) {
  TfDataset tf;
  TempDir out;
  auto s = Convert(tf.dir.Join("train-00001-*"), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 3u);
}

TEST(TfrecordInputTest, ClassFoldersAreNotMistakenForTfrecordFiles) {
  TempDir src;
  std::filesystem::create_directories(src.Join("cat"));
  testing::WriteFileOrDie(src.Join("cat/a.jpg"), testing::PatternJpeg(8, 8, 1));
  TempDir out;
  auto s = Convert(src.path(), out.path(), Keep());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 1u);
  EXPECT_EQ(s->manifest.classes[0].name, "cat");
}

TEST(TfrecordInputTest, ExplicitTfrecordInputReadsAnyFileName) {
  TfDataset tf;
  std::filesystem::rename(tf.File(0), tf.dir.Join("zero"));
  std::filesystem::rename(tf.File(1), tf.dir.Join("one"));
  TempDir out;
  auto guessed = Convert(tf.dir.path(), out.path(), Keep());
  EXPECT_EQ(guessed.status().code(), StatusCode::kInvalidArgument);  // "no class folders"
  ConvertOptions o = Keep();
  o.input_format = InputFormat::kTfrecord;
  auto s = Convert(tf.dir.path(), out.path(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 6u);
}

TEST(TfrecordInputTest, OutputBytesAreIdenticalForAnyThreadCount) {
  TfDataset tf;
  std::vector<std::unique_ptr<TempDir>> outs;
  for (int threads : {1, 2, 8}) {
    outs.push_back(std::make_unique<TempDir>());
    ConvertOptions o;
    o.height = o.width = 16;
    o.num_threads = threads;
    o.shuffle = true;
    o.seed = 3;
    o.max_shard_records = 2;
    ASSERT_TRUE(Convert(tf.dir.path(), outs.back()->path(), o).ok());
  }
  for (const auto& entry : std::filesystem::directory_iterator(outs[0]->path())) {
    const std::string name = entry.path().filename();
    const std::string a = testing::ReadFileOrDie(entry.path());
    EXPECT_EQ(a, testing::ReadFileOrDie(outs[1]->Join(name))) << name;
    EXPECT_EQ(a, testing::ReadFileOrDie(outs[2]->Join(name))) << name;
  }
}

TEST(TfrecordInputTest, NoUsableRecordIsInvalidArgumentNamingTheFirstReject) {
  TempDir src;
  testing::WriteFileOrDie(src.Join("a.tfrecord"), "this is not a TFRecord file at all");
  TempDir out;
  auto s = Convert(src.path(), out.path(), Keep());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("no usable TFRecord record (1 rejected; first: "
                                      "a.tfrecord: record 0 at offset 0"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace shardpack
