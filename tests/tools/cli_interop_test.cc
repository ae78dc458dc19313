// The CLI's interoperability commands run as a user runs them: verify --tfrecord,
// adopt, convert from TFRecord files and to Caffe-schema LMDB.
#include <gtest/gtest.h>

#include "image_fixtures.h"
#include "test_util.h"
#include "tf_fixtures.h"
#include "tools/cli_run.h"

namespace shardpack {
namespace {

using testing::CliRun;
using testing::RunCli;

std::string JpegRecords(int n) {
  std::vector<std::string> payloads;
  for (int i = 0; i < n; ++i) {
    payloads.push_back(testing::TfImageExample{
        .encoded = testing::EncodeJpeg(testing::Pattern(16, 16, 3, i), 16, 16, 3),
        .label = 1 + i % 2,
        .height = 16,
        .width = 16}
                           .Serialize());
  }
  return testing::FrameRecords(payloads);
}

TEST(CliInteropTest, VerifyTfrecordExitsZeroOnIntactFilesAndOneOnAFault) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("train-00000-of-00001"), JpegRecords(3));
  CliRun ok = RunCli("verify --tfrecord " + dir.path());
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find(": OK: 1 files, 3 records"), std::string::npos) << ok.out;
  std::string bytes = testing::ReadFileOrDie(dir.Join("train-00000-of-00001"));
  bytes[bytes.size() - 1] ^= 1;
  testing::WriteFileOrDie(dir.Join("train-00000-of-00001"), bytes);
  CliRun bad = RunCli("verify --tfrecord " + dir.path());
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("shardpack verify: train-00000-of-00001: record 2 at offset"),
            std::string::npos)
      << bad.out;
}

TEST(CliInteropTest, VerifyWithoutManifestSuggestsTfrecord) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("train-00000-of-00001"), JpegRecords(1));
  CliRun r = RunCli("verify " + dir.path());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("shardpack verify --tfrecord PATH"), std::string::npos) << r.out;
  EXPECT_EQ(RunCli("verify --no-decode " + dir.path()).code, 2);
}

TEST(CliInteropTest, ConvertReadsTfrecordFilesAndWritesCaffeLmdb) {
  testing::TempDir src, out;
  testing::WriteFileOrDie(src.Join("train-00000-of-00001"), JpegRecords(4));
  CliRun r = RunCli("convert " + src.path() + " " + out.path() +
                    " --size 8x8 --format lmdb --lmdb-schema caffe --quiet");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("4 inputs: 4 written, 0 rejected; 3 classes, 1 lmdb shards"),
            std::string::npos)
      << r.out;
  CliRun v = RunCli("verify " + out.path());
  EXPECT_EQ(v.code, 0) << v.out;
}

TEST(CliInteropTest, CaffeSchemaWithTfrecordOutputIsAUsageError) {
  testing::TempDir src, out;
  testing::WriteFileOrDie(src.Join("a.tfrecord"), JpegRecords(1));
  CliRun r = RunCli("convert " + src.path() + " " + out.path() + " --keep --lmdb-schema caffe");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("--lmdb-schema caffe needs --format lmdb"), std::string::npos) << r.out;
}

TEST(CliInteropTest, AdoptExitsZeroAndWritesTheManifestOrOneWithTheFaults) {
  testing::TempDir good;
  std::vector<uint8_t> px = testing::TestPixels(0, 2, 3, 3);
  testing::WriteFileOrDie(good.Join("a.tfrecord"),
                          testing::FrameRecords({testing::TfRawExample(px, 2, 3, 3, 0, "x", "f")}));
  CliRun ok = RunCli("adopt " + good.path());
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("adopted 1 files, 1 records, 1 classes"), std::string::npos) << ok.out;
  EXPECT_EQ(RunCli("verify " + good.path()).code, 0);
  EXPECT_EQ(RunCli("adopt " + good.path()).code, 2);  // already a dataset

  testing::TempDir bad;
  testing::WriteFileOrDie(
      bad.Join("a.tfrecord"),
      testing::FrameRecords({testing::TfRawExample(px, 2, 3, 3, 0, "x", "f", false)}));
  CliRun no = RunCli("adopt " + bad.path());
  EXPECT_EQ(no.code, 1) << no.out;
  EXPECT_NE(no.out.find("shardpack adopt: a.tfrecord: record 0 at offset 0: feature "
                        "image/raw/crc32c: missing"),
            std::string::npos)
      << no.out;
}

}  // namespace
}  // namespace shardpack
