// The shipped samples (samples/), run as a user runs them, on datasets whose records say
// what the manifest does not: a sample must refuse them, naming the record, never index
// memory with them.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "format/index_file.h"
#include "shardpack/convert.h"
#include "shardpack/manifest.h"
#include "test_util.h"
#include "tf_fixtures.h"
#include "util/hash.h"

namespace shardpack {
namespace {

using testing::TempDir;

struct SampleRun {
  int code;  // -1 when the program did not exit normally (a crash)
  std::string out;
};

SampleRun RunSample(const std::string& command) {
  SampleRun r{-1, ""};
  FILE* p = ::popen(("timeout 60 " + command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// One TFRecord shard of four 4x5 samples of two classes, the third labelled `label`: adopted
// with valid labels, then the shard rewritten with the third record's label changed, its
// index and the manifest's entries for both made anew. Every checksum holds: whoever makes
// a dataset computes them.
void WriteDatasetWithThirdLabel(const TempDir& dir, int64_t label) {
  auto payloads = [](int64_t third) {
    std::vector<std::string> p;
    for (int i = 0; i < 4; ++i) {
      const int64_t l = i == 2 ? third : i % 2;
      p.push_back(testing::TfRawExample(testing::TestPixels(i, 4, 5, 3), 4, 5, 3, l,
                                        "c" + std::to_string(i % 2), "f.png"));
    }
    return p;
  };
  const std::string shard = dir.Join("part-0.tfrecord");
  testing::WriteFileOrDie(shard, testing::FrameRecords(payloads(0)));
  auto adopted = Adopt(dir.path());
  ASSERT_TRUE(adopted.ok() && adopted->ok()) << adopted.status().ToString();

  std::vector<uint64_t> offsets;
  const std::string bytes = testing::FrameRecords(payloads(label), &offsets);
  testing::WriteFileOrDie(shard, bytes);
  std::string index;
  for (size_t i = 0; i < offsets.size(); ++i) {
    const uint64_t end = i + 1 < offsets.size() ? offsets[i + 1] : bytes.size();
    format::AppendIndexLine(&index, {offsets[i], end - offsets[i]});
  }
  testing::WriteFileOrDie(dir.Join("part-0.idx"), index);
  auto m = ReadManifest(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  m->shards[0].data.bytes = bytes.size();
  m->shards[0].data.xxh3_128 = Xxh3Hex(bytes.data(), bytes.size());
  m->shards[0].index->bytes = index.size();
  m->shards[0].index->xxh3_128 = Xxh3Hex(index.data(), index.size());
  testing::WriteFileOrDie(dir.Join("manifest.json"), SerializeManifest(*m));
}

TEST(SamplesTest, ReadDatasetRefusesALabelOutsideTheClassListNamingTheRecord) {
#ifndef SHARDPACK_READ_DATASET
  GTEST_SKIP() << "the samples are not built (SHARDPACK_BUILD_SAMPLES=OFF)";
#else
  {
    TempDir good;
    WriteDatasetWithThirdLabel(good, 0);
    SampleRun r = RunSample(std::string(SHARDPACK_READ_DATASET) + " " + good.path());
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("read 4 samples"), std::string::npos) << r.out;
  }
  for (const int64_t label : {int64_t{-1}, int64_t{2}, int64_t{1} << 40}) {
    TempDir dir;
    WriteDatasetWithThirdLabel(dir, label);
    SampleRun r = RunSample(std::string(SHARDPACK_READ_DATASET) + " " + dir.path());
    EXPECT_EQ(r.code, 1) << "label " << label << ": " << r.out;
    // Dataset::Get refuses the record, naming it.
    EXPECT_NE(r.out.find("part-0.tfrecord: record 2 at offset "), std::string::npos) << r.out;
    EXPECT_NE(
        r.out.find("label " + std::to_string(label) + " is outside the 2 classes of the manifest"),
        std::string::npos)
        << r.out;
  }
#endif
}

}  // namespace
}  // namespace shardpack
