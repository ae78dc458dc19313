// A link planted at a temporary name in an output directory (by whoever else can write
// there) is removed, never followed: convert and adopt never truncate or write a file
// outside the directory through it, whatever the backend and the write method.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "format/format.h"
#include "image_fixtures.h"
#include "io/dir_lock.h"
#include "io/env.h"
#include "shardpack/convert.h"
#include "shardpack/shard_writer.h"
#include "shardpack/verify.h"
#include "test_util.h"
#include "tf_fixtures.h"

namespace shardpack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

enum class LinkKind { kSymlink, kHardLink };

constexpr char kTargetText[] = "a file outside the output directory\n";

// A file outside the output directory, and the links to it planted at names inside.
class Planted {
 public:
  explicit Planted(LinkKind kind) : kind_(kind), target_(outside_.Join("target")) {
    testing::WriteFileOrDie(target_, kTargetText);
  }

  // Plants a link to the target at `path` (whatever is there is replaced).
  void At(const std::string& path) {
    ::unlink(path.c_str());
    const int rc = kind_ == LinkKind::kSymlink ? ::symlink(target_.c_str(), path.c_str())
                                               : ::link(target_.c_str(), path.c_str());
    ASSERT_EQ(rc, 0) << path << ": " << std::strerror(errno);
    paths_.push_back(path);
  }

  // The target is as it was, and no planted link is left: each name was used, and so
  // removed or renamed over, which proves the list of names a real one.
  void ExpectTargetUnchangedAndEveryLinkReplaced() const {
    EXPECT_EQ(testing::ReadFileOrDie(target_), kTargetText);
    struct stat st {};
    ASSERT_EQ(::stat(target_.c_str(), &st), 0);
    EXPECT_EQ(st.st_nlink, 1u) << "a hard link to the target is left";
    for (const std::string& p : paths_) {
      struct stat at {};
      if (::lstat(p.c_str(), &at) != 0) continue;  // removed or renamed away: used
      EXPECT_FALSE(S_ISLNK(at.st_mode)) << p << ": the symlink planted there is still there";
      EXPECT_FALSE(at.st_ino == st.st_ino && at.st_dev == st.st_dev)
          << p << ": the hard link planted there is still there";
    }
  }

  size_t planted() const { return paths_.size(); }

 private:
  LinkKind kind_;
  TempDir outside_;
  std::string target_;
  std::vector<std::string> paths_;
};

std::string KindName(LinkKind k) { return k == LinkKind::kSymlink ? "Symlink" : "HardLink"; }

// Twelve 16x16 PNGs in two class folders.
void WriteImages(const TempDir& src) {
  for (int i = 0; i < 12; ++i) {
    testing::WriteFileMakingDirs(
        src.Join("c" + std::to_string(i % 2) + "/img" + std::to_string(i) + ".png"),
        testing::EncodePng(testing::Pattern(16, 16, 3, i), 16, 16, 3));
  }
}

using WriteParam = std::tuple<Backend, WriteMethod, LinkKind>;

std::string WriteParamName(const ::testing::TestParamInfo<WriteParam>& info) {
  const auto [backend, method, kind] = info.param;
  const std::string how = backend == Backend::kLmdb     ? "Lmdb"
                          : method == WriteMethod::kMap ? "TfrecordMap"
                                                        : "TfrecordWrite";
  return how + KindName(kind);
}

const auto kWriteParams =
    ::testing::Values(WriteParam{Backend::kTfrecord, WriteMethod::kWrite, LinkKind::kSymlink},
                      WriteParam{Backend::kTfrecord, WriteMethod::kWrite, LinkKind::kHardLink},
                      WriteParam{Backend::kTfrecord, WriteMethod::kMap, LinkKind::kSymlink},
                      WriteParam{Backend::kTfrecord, WriteMethod::kMap, LinkKind::kHardLink},
                      WriteParam{Backend::kLmdb, WriteMethod::kWrite, LinkKind::kSymlink},
                      WriteParam{Backend::kLmdb, WriteMethod::kWrite, LinkKind::kHardLink});

class PlantedLinkShardWriterTest : public ::testing::TestWithParam<WriteParam> {};

// Links appear at the names of each shard just before the writer opens it (its
// temporary, its index's temporary, its staged name) and at the manifest's temporary
// before Finish: a link planted while a dataset is being written is no safer than one
// that was there before.
TEST_P(PlantedLinkShardWriterTest, NoFileOutsideTheOutputIsWrittenThroughALinkAtAShardsNames) {
  const auto [backend, method, kind] = GetParam();
  TempDir dir;
  Planted planted(kind);
  ShardWriterOptions o;
  o.backend = backend;
  o.write_method = method;
  o.max_shard_records = 3;
  o.lmdb_initial_map_bytes = 1 << 20;
  o.class_names = {"a", "b"};
  o.image.channels = 3;
  o.image.height = 4;
  o.image.width = 5;
  auto writer = ShardWriter::Create(dir.path(), o);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  constexpr uint64_t kSamples = 12;  // four shards
  for (uint64_t i = 0; i < kSamples; ++i) {
    if (i % 3 == 0) {
      const std::string staged = format::StagedShardFileName(i / 3, backend);
      planted.At(dir.Join(staged));
      planted.At(dir.Join(staged + ".tmp"));
      if (backend == Backend::kTfrecord) {
        planted.At(dir.Join(format::StagedIndexFileName(i / 3) + ".tmp"));
      }
    }
    const std::vector<uint8_t> px = testing::TestPixels(i, 4, 5, 3);
    ASSERT_OK((*writer)->Add(
        {.pixels = px, .height = 4, .width = 5, .channels = 3, .label = int64_t(i % 2)}));
  }
  planted.At(dir.Join(std::string(format::kManifestName) + ".tmp"));
  auto manifest = (*writer)->Finish();
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  ASSERT_EQ(manifest->shards.size(), 4u);
  planted.ExpectTargetUnchangedAndEveryLinkReplaced();
  auto report = VerifyDataset(dir.path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << FormatFault(report->faults[0]);
}

INSTANTIATE_TEST_SUITE_P(BackendsAndWriteMethods, PlantedLinkShardWriterTest, kWriteParams,
                         WriteParamName);

class PlantedLinkConvertTest : public ::testing::TestWithParam<WriteParam> {};

// The names the converter itself writes in DST, planted before the run: its lock, its
// progress record's temporary, rejects.tsv's and the manifest's. (A shard's names planted
// before the run make DST "an interrupted conversion", refused or cleared by overwrite;
// planted while it runs, they are PlantedLinkShardWriterTest's.)
TEST_P(PlantedLinkConvertTest, NoFileOutsideTheOutputIsWrittenThroughALinkAtATemporaryName) {
  const auto [backend, method, kind] = GetParam();
  TempDir src, out;
  WriteImages(src);
  const std::string dst = out.Join("ds");
  fs::create_directory(dst);
  Planted planted(kind);
  for (const std::string& name :
       {std::string(io::kLockFileName), std::string(format::kConvertProgressName) + ".tmp",
        std::string("rejects.tsv.tmp"), std::string(format::kManifestName) + ".tmp"}) {
    planted.At(io::JoinPath(dst, name));
  }
  ConvertOptions o;
  o.backend = backend;
  o.write_method = method;
  o.width = o.height = 8;
  o.max_shard_records = 3;
  o.num_threads = 2;
  auto summary = Convert(src.path(), dst, o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_EQ(summary->manifest.shards.size(), 4u);
  planted.ExpectTargetUnchangedAndEveryLinkReplaced();
  auto report = VerifyDataset(dst);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << FormatFault(report->faults[0]);
}

INSTANTIATE_TEST_SUITE_P(BackendsAndWriteMethods, PlantedLinkConvertTest, kWriteParams,
                         WriteParamName);

// overwrite sets the replaced dataset aside in DST/.shardpack-replaced until the new one
// is published, and a run that finds that directory without a manifest in DST (a killed
// overwrite) first moves what it holds back into DST. A symlink planted at that name
// made the run empty the directory it leads to, outside DST, into DST (and then fail on
// rmdir): it is removed, never followed, there and where the dataset is set aside.
TEST(PlantedLinkTest, OverwriteNeverMovesFilesThroughALinkAtItsAsideDirectory) {
  TempDir src, out, outside;
  WriteImages(src);
  testing::WriteFileOrDie(outside.Join("keep.txt"), kTargetText);
  const std::string dst = out.Join("ds");
  fs::create_directory(dst);
  const std::string aside = io::JoinPath(dst, ".shardpack-replaced");
  ASSERT_EQ(::symlink(outside.path().c_str(), aside.c_str()), 0);
  ConvertOptions o;
  o.width = o.height = 8;
  o.max_shard_records = 3;
  o.overwrite = true;
  auto summary = Convert(src.path(), dst, o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(testing::ReadFileOrDie(outside.Join("keep.txt")), kTargetText);
  EXPECT_FALSE(fs::exists(io::JoinPath(dst, "keep.txt")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(aside)));
  auto report = VerifyDataset(dst);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << FormatFault(report->faults[0]);
}

class PlantedLinkAdoptTest : public ::testing::TestWithParam<LinkKind> {};

// adopt writes an index beside each file, then the manifest, into SRC itself.
TEST_P(PlantedLinkAdoptTest, NoFileOutsideTheDirectoryIsWrittenThroughALinkAtATemporaryName) {
  TempDir dir;
  int n = 0;
  for (int file = 0; file < 2; ++file) {
    std::vector<std::string> payloads;
    for (int k = 0; k < 3; ++k, ++n) {
      payloads.push_back(testing::TfRawExample(testing::TestPixels(n, 4, 5, 3), 4, 5, 3, n % 2,
                                               "c" + std::to_string(n % 2),
                                               "f" + std::to_string(n) + ".png", true));
    }
    testing::WriteFileOrDie(dir.Join("part-" + std::to_string(file) + ".tfrecord"),
                            testing::FrameRecords(payloads));
  }
  Planted planted(GetParam());
  for (const std::string& name :
       {std::string(io::kLockFileName), std::string("part-0.idx.tmp"),
        std::string("part-1.idx.tmp"), std::string("manifest.json.tmp")}) {
    planted.At(dir.Join(name));
  }
  // A pattern, so that the planted names are not taken for TFRecord files to adopt.
  auto summary = Adopt(dir.Join("*.tfrecord"));
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  ASSERT_TRUE(summary->ok()) << FormatFault(summary->faults[0]);
  planted.ExpectTargetUnchangedAndEveryLinkReplaced();
  auto report = VerifyDataset(dir.path());
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->ok()) << FormatFault(report->faults[0]);
}

INSTANTIATE_TEST_SUITE_P(LinkKinds, PlantedLinkAdoptTest,
                         ::testing::Values(LinkKind::kSymlink, LinkKind::kHardLink),
                         [](const ::testing::TestParamInfo<LinkKind>& info) {
                           return KindName(info.param);
                         });

}  // namespace
}  // namespace shardpack
