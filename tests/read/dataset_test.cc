#include "shardpack/dataset.h"
#include "read/dataset_access.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "format/format.h"
#include "shardpack/loader.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;

TEST(DatasetTest, LocateNamesShardRecordAndOffset) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 10, .max_shard_records = 4});
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok());
  auto loc = (*ds)->Locate(9);
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->shard, 2u);
  EXPECT_EQ(loc->record, 1u);
  EXPECT_GT(loc->offset, 0u);
}

TEST(DatasetTest, PixelsAreCacheLineAlignedInTheMapForBothBackends) {
  // Samples larger than half a page, so LMDB stores them in overflow pages.
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    Manifest m = testing::WriteTestDataset(
        dir.path(),
        {.backend = backend, .samples = 9, .height = 32, .width = 21, .max_shard_records = 4});
    EXPECT_EQ(m.pixel_alignment, 64u);
    auto ds = Dataset::Open(dir.path());
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    for (uint64_t i = 0; i < 9; ++i) {
      SampleView s;
      ASSERT_TRUE((*ds)->Get(i, &s).ok());
      EXPECT_EQ(reinterpret_cast<uintptr_t>(s.pixels.data()) % 64, 0u)
          << (backend == Backend::kLmdb ? "lmdb" : "tfrecord") << " sample " << i;
    }
  }
}

TEST(DatasetTest, FlippedPixelIsACorruptionNamingFileRecordAndOffset) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 6, .max_shard_records = 3});
  auto ds0 = Dataset::Open(dir.path());
  ASSERT_TRUE(ds0.ok());
  auto loc = (*ds0)->Locate(4);
  ASSERT_TRUE(loc.ok());
  SampleView s;
  ASSERT_OK((*ds0)->Get(4, &s));
  const std::string path = dir.Join(m.shards[1].data.file);
  std::string bytes = testing::ReadFileOrDie(path);
  const size_t pixel_at =
      bytes.find(std::string(reinterpret_cast<const char*>(s.pixels.data()), s.pixels.size()));
  ds0->reset();
  ASSERT_NE(pixel_at, std::string::npos);
  bytes[pixel_at + 5] ^= 0x10;
  testing::WriteFileOrDie(path, bytes);
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok());
  Status st = (*ds)->Get(4, &s);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find(m.shards[1].data.file + ": record 1 at offset " +
                              std::to_string(loc->offset) + ": data checksum"),
            std::string::npos)
      << st.message();
  // With checksums off, the damaged pixels come back: the choice is the caller's.
  auto unchecked = Dataset::Open(dir.path(), {.verify_crc = false});
  ASSERT_TRUE(unchecked.ok());
  EXPECT_OK((*unchecked)->Get(4, &s));
}

TEST(DatasetTest, MissingManifestOrShardIsAClearError) {
  TempDir dir;
  auto ds = Dataset::Open(dir.path());
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find("is not a shardpack dataset"), std::string::npos);
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 6, .max_shard_records = 3});
  std::filesystem::remove(dir.Join(m.shards[1].data.file));
  ds = Dataset::Open(dir.path());
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find(m.shards[1].data.file), std::string::npos);
}

TEST(DatasetTest, AShardShrunkWhileOpenIsAnIOErrorNamingItForBothBackends) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    const char* name = backend == Backend::kLmdb ? "lmdb" : "tfrecord";
    TempDir dir;
    // Samples larger than a page, so that each record has pages of its own.
    Manifest m = testing::WriteTestDataset(
        dir.path(),
        {.backend = backend, .samples = 8, .height = 48, .width = 40, .max_shard_records = 4});
    auto ds = Dataset::Open(dir.path());
    ASSERT_TRUE(ds.ok()) << name << ": " << ds.status().ToString();
    SampleView kept;
    ASSERT_OK((*ds)->Get(1, &kept));
    // With readers ready, the LMDB shard reads its map at once (no size check first).
    ASSERT_OK((*ds)->ReserveReaders(2));
    ASSERT_EQ(::truncate(dir.Join(m.shards[1].data.file).c_str(), 0), 0);

    SampleView s;
    Status got = (*ds)->Get(6, &s);
    EXPECT_EQ(got.code(), StatusCode::kIOError) << name << ": " << got.ToString();
    EXPECT_NE(got.message().find(m.shards[1].data.file + ": record 2"), std::string::npos)
        << name << ": " << got.ToString();
    EXPECT_NE(got.message().find("shorter than when it was opened: reading its mapping raised "
                                 "SIGBUS"),
              std::string::npos)
        << name << ": " << got.ToString();
    EXPECT_EQ((*ds)->CheckIntact(7).code(), StatusCode::kIOError) << name;
    // The other shard reads on, and its views stay the file's bytes.
    ASSERT_OK((*ds)->Get(2, &s));
    EXPECT_OK((*ds)->CheckIntact(1));
    EXPECT_EQ((*ds)->CheckIntact(8).code(), StatusCode::kOutOfRange) << name;
  }
}

TEST(DatasetTest, AViewReadAfterItsShardShrankIsCaughtByCheckIntact) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(
      dir.path(), {.samples = 4, .height = 64, .width = 64, .max_shard_records = 4});
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok());
  SampleView s;
  ASSERT_OK((*ds)->Get(3, &s));
  EXPECT_OK((*ds)->CheckIntact(3));
  ASSERT_EQ(::truncate(dir.Join(m.shards[0].data.file).c_str(), 0), 0);
  unsigned sum = 0;
  for (uint8_t v : s.pixels) sum += v;  // reads zeros, does not crash
  EXPECT_EQ(sum, 0u);
  Status intact = (*ds)->CheckIntact(3);
  EXPECT_EQ(intact.code(), StatusCode::kIOError) << intact.ToString();
  EXPECT_NE(intact.message().find(m.shards[0].data.file + ": record 3 at offset "),
            std::string::npos)
      << intact.ToString();
}

TEST(DatasetTest, AFifoInPlaceOfTheManifestOrAShardIsRefusedWithoutBlocking) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    Manifest m = testing::WriteTestDataset(
        dir.path(), {.backend = backend, .samples = 6, .max_shard_records = 3});
    const std::string shard = dir.Join(m.shards[1].data.file);
    std::filesystem::remove(shard);
    ASSERT_EQ(::mkfifo(shard.c_str(), 0644), 0);
    auto ds = Dataset::Open(dir.path());
    ASSERT_FALSE(ds.ok());
    EXPECT_EQ(ds.status().code(), StatusCode::kInvalidArgument) << ds.status().ToString();
    EXPECT_NE(ds.status().message().find(m.shards[1].data.file + ": not a regular file but a FIFO"),
              std::string::npos)
        << ds.status().ToString();
  }
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Join("manifest.json").c_str(), 0644), 0);
  auto ds = Dataset::Open(dir.path());
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("manifest.json: not a regular file but a FIFO"),
            std::string::npos)
      << ds.status().ToString();
}

TEST(DatasetTest, WillNeedAndPrefetchAreHintsThatChangeNothingForBothBackends) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    testing::WriteTestDataset(
        dir.path(),
        {.backend = backend, .samples = 9, .height = 40, .width = 30, .max_shard_records = 4});
    auto ds = Dataset::Open(dir.path());
    ASSERT_TRUE(ds.ok());
    std::vector<std::vector<uint8_t>> before;
    for (uint64_t i = 0; i < 9; ++i) {
      SampleView s;
      ASSERT_OK((*ds)->Get(i, &s));
      before.emplace_back(s.pixels.begin(), s.pixels.end());
    }
    const std::vector<uint64_t> all = {8, 0, 3, 3, 7, 1, 2, 4, 5, 6, 9, 1000};  // past the end too
    read::DatasetAccess(**ds).WillNeed(all);
    for (const uint64_t i : all) {
      read::DatasetAccess(**ds).Prefetch(i, 0);
      read::DatasetAccess(**ds).Prefetch(i, 1);
    }
    for (uint64_t i = 0; i < 9; ++i) {
      SampleView s;
      ASSERT_OK((*ds)->Get(i, &s));
      EXPECT_EQ(std::vector<uint8_t>(s.pixels.begin(), s.pixels.end()), before[i]);
      EXPECT_TRUE(read::DatasetAccess(**ds).Resident(i)) << "just read: in memory";
    }
    EXPECT_FALSE(read::DatasetAccess(**ds).Resident(9)) << "past the end";
  }
}

TEST(DatasetTest, ResidentTellsWhetherARecordIsInThePageCache) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(
      dir.path(), {.samples = 8, .height = 64, .width = 64, .max_shard_records = 8});
  // Out of the page cache: written back, then dropped.
  ASSERT_NO_FATAL_FAILURE(testing::EvictFromPageCache(dir.Join(m.shards[0].data.file)));
  auto ds = Dataset::Open(dir.path());
  ASSERT_TRUE(ds.ok());
  if (read::DatasetAccess(**ds).Resident(5))
    GTEST_SKIP() << "this file system keeps the pages (tmpfs?)";
  SampleView s;
  ASSERT_OK((*ds)->Get(5, &s));
  EXPECT_TRUE(read::DatasetAccess(**ds).Resident(5));
}

TEST(DatasetTest, PublicRecordLimitDefaultIsTheFormatsLimit) {
  // A static_assert no longer compiles everywhere: DatasetOptions holds strings now, which
  // clang 14 with libstdc++ 12 cannot construct in a constant expression.
  EXPECT_EQ(DatasetOptions{}.max_record_bytes, kMaxRecordBytes);
}

// A label is an index into the class list for whoever consumes it: a record whose label
// lies outside the manifest's classes (a manifest with its last class dropped, its
// checksums recomputed) is a Corruption naming it in Dataset::Get, GetPixels and the
// Loader, and kSkip leaves it out; never a value a consumer indexes memory with.
TEST(DatasetTest, ALabelOutsideTheClassListIsACorruptionInEveryReader) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    Manifest m = testing::WriteTestDataset(
        dir.path(), {.backend = backend, .samples = 6, .num_classes = 3, .max_shard_records = 0});
    m.classes.pop_back();  // samples 2 and 5 are labelled 2
    m.classes[0].count += 2;
    testing::WriteFileOrDie(dir.Join("manifest.json"), SerializeManifest(m));
    testing::ResealDataset(dir.path());
    auto ds = Dataset::Open(dir.path());
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    SampleView view;
    EXPECT_TRUE((*ds)->Get(1, &view).ok());
    Status s = (*ds)->Get(2, &view);
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find(m.shards[0].data.file + ": record 2"), std::string::npos)
        << s.message();
    EXPECT_NE(s.message().find("label 2 is outside the 2 classes of the manifest"),
              std::string::npos)
        << s.message();
    std::vector<uint8_t> px(4 * 5 * 3);
    EXPECT_EQ((*ds)->GetPixels(5, px, &view).code(), StatusCode::kCorruption);

    std::shared_ptr<const Dataset> shared(std::move(ds).value());
    for (OnCorrupt policy : {OnCorrupt::kFail, OnCorrupt::kSkip}) {
      LoaderOptions o;
      o.batch_size = 6;
      o.num_threads = 1;
      o.on_corrupt = policy;
      auto loader = Loader::Create(shared, o);
      ASSERT_TRUE(loader.ok()) << loader.status().ToString();
      auto batch = (*loader)->Next();
      if (policy == OnCorrupt::kFail) {
        ASSERT_FALSE(batch.ok());
        EXPECT_EQ(batch.status().code(), StatusCode::kCorruption);
        EXPECT_NE(batch.status().message().find("label 2 is outside the 2 classes"),
                  std::string::npos)
            << batch.status().message();
      } else {
        ASSERT_TRUE(batch.ok()) << batch.status().ToString();
        EXPECT_EQ((*loader)->stats().skipped_corrupt, 2u);
      }
    }
  }
}

}  // namespace
}  // namespace shardpack
