#include "shardpack/loader.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>

#include "cuda/cuda.h"
#include "read/delivered_batch.h"
#include "read/normalize.h"
#include "test_util.h"
#include "util/hash.h"

namespace shardpack {
namespace {

using testing::OpenDatasetOrDie;
using testing::TempDir;
using testing::TestDatasetSpec;

std::unique_ptr<Loader> LoaderOrDie(std::shared_ptr<const Dataset> ds, const LoaderOptions& o,
                                    const LoaderState* state = nullptr) {
  auto loader = Loader::Create(std::move(ds), o, state);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  return std::move(loader).value();
}

using testing::Got;

std::vector<Got> ReadEpoch(Loader& loader, size_t max_batches = SIZE_MAX) {
  return testing::ReadRest(loader, max_batches);
}

// Every LoaderTest runs on both backends and both I/O paths: the mapping, and read-ahead
// through io_uring and through pread threads (O_DIRECT where the file system allows it).
struct LoaderParam {
  Backend backend;
  IoPath io;
  IoQueue queue;
};

class LoaderTest : public ::testing::TestWithParam<LoaderParam> {
 protected:
  TestDatasetSpec Spec(uint64_t samples) {
    TestDatasetSpec s;
    s.backend = GetParam().backend;
    s.samples = samples;
    s.height = 6;
    s.width = 5;
    s.max_shard_records = 7;
    return s;
  }
  // Default options on this test's I/O path.
  LoaderOptions Options() const {
    LoaderOptions o;
    o.io = GetParam().io;
    o.io_queue = GetParam().queue;
    o.io_reuse_page_cache = false;  // the shards were just written: read them from storage
    return o;
  }
  bool read_ahead() const { return GetParam().io == IoPath::kReadAhead; }
};

TEST_P(LoaderTest, DeliversTheEpochOrderWithTheStoredPixelsAndLabels) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(50));
  LoaderOptions o = Options();
  o.batch_size = 8;
  o.seed = 5;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  EXPECT_EQ(loader->batches_per_epoch(), 7u);
  std::vector<Got> got = ReadEpoch(*loader);
  ASSERT_EQ(got.size(), 7u);
  std::vector<uint64_t> order = loader->EpochOrder(0);
  std::vector<uint64_t> delivered;
  for (const Got& g : got) {
    for (int i = 0; i < g.size; ++i) {
      const uint64_t index = g.indices[i];
      delivered.push_back(index);
      EXPECT_EQ(g.labels[i], static_cast<int64_t>(index % 3));
      std::vector<uint8_t> want = testing::TestPixels(index, 6, 5, 3);
      EXPECT_EQ(g.bytes.substr(i * want.size(), want.size()), std::string(want.begin(), want.end()))
          << "sample " << index;
    }
  }
  EXPECT_EQ(delivered, order);
  EXPECT_EQ(got.back().size, 2);  // 50 = 6 * 8 + 2, kPartial
  std::set<uint64_t> unique(order.begin(), order.end());
  EXPECT_EQ(unique.size(), 50u);
}

TEST_P(LoaderTest, BatchesDoNotDependOnThreadsOrPrefetch) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(61));
  auto ds = OpenDatasetOrDie(dir.path());
  std::vector<Got> reference;
  for (int threads : {1, 2, 8}) {
    for (int prefetch : {1, 4}) {
      LoaderOptions o = Options();
      o.batch_size = 9;
      o.shuffle = ShuffleMode::kBlock;
      o.block_size = 3;
      o.block_window = 4;
      o.seed = 99;
      o.num_threads = threads;
      o.prefetch = prefetch;
      auto loader = LoaderOrDie(ds, o);
      std::vector<Got> got = ReadEpoch(*loader);
      ASSERT_OK(loader->StartEpoch(1));
      std::vector<Got> second = ReadEpoch(*loader);
      got.insert(got.end(), second.begin(), second.end());
      if (reference.empty()) {
        reference = got;
        ASSERT_EQ(reference.size(), 14u);
      } else {
        EXPECT_TRUE(got == reference) << threads << " threads, prefetch " << prefetch;
      }
    }
  }
}

// Read-ahead is a hint to the kernel: the batches are the same with it off, small (one
// batch ahead) or large (past the end of the epoch), for both shuffles, from a resume
// point too.
TEST_P(LoaderTest, ReadAheadChangesNoBatch) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(61));
  auto ds = OpenDatasetOrDie(dir.path());
  for (ShuffleMode shuffle : {ShuffleMode::kGlobal, ShuffleMode::kBlock}) {
    std::vector<Got> reference;
    for (uint64_t read_ahead : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 30}) {
      LoaderOptions o = Options();
      o.batch_size = 7;
      o.shuffle = shuffle;
      o.block_size = 3;
      o.seed = 5;
      o.num_threads = 2;
      o.read_ahead_bytes = read_ahead;
      o.io_buffer_bytes = read_ahead;
      auto loader = LoaderOrDie(ds, o);
      std::vector<Got> got = ReadEpoch(*loader);
      ASSERT_OK(loader->StartEpoch(3));
      ASSERT_OK(loader->Next().status());
      std::vector<Got> rest = ReadEpoch(*loader);  // epoch 3 from batch 1
      got.insert(got.end(), rest.begin(), rest.end());
      if (reference.empty()) {
        reference = got;
      } else {
        EXPECT_TRUE(got == reference) << "read_ahead_bytes " << read_ahead;
      }
    }
  }
}

TEST_P(LoaderTest, ResumingFromAStateContinuesWithTheSameBatches) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(45));
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o = Options();
  o.batch_size = 4;
  o.seed = 3;
  o.num_threads = 2;
  auto whole = LoaderOrDie(ds, o);
  ASSERT_OK(whole->StartEpoch(2));
  std::vector<Got> uninterrupted = ReadEpoch(*whole);
  ASSERT_EQ(uninterrupted.size(), 12u);

  auto first = LoaderOrDie(ds, o);
  ASSERT_OK(first->StartEpoch(2));
  std::vector<Got> before = ReadEpoch(*first, 5);
  const std::string saved = first->state().ToString();
  first.reset();  // the job dies with batches prefetched

  auto state = LoaderState::Parse(saved);
  ASSERT_OK(state.status());
  EXPECT_EQ(state->epoch, 2u);
  EXPECT_EQ(state->next_batch, 5u);
  o.num_threads = 1;  // the thread count may change across a restart
  auto resumed = LoaderOrDie(ds, o, &*state);
  std::vector<Got> after = ReadEpoch(*resumed);
  before.insert(before.end(), after.begin(), after.end());
  EXPECT_TRUE(before == uninterrupted);
}

TEST_P(LoaderTest, RanksSplitEveryEpochIntoDisjointEqualParts) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(30));
  auto ds = OpenDatasetOrDie(dir.path());
  std::multiset<uint64_t> seen;
  for (int rank = 0; rank < 4; ++rank) {
    LoaderOptions o = Options();
    o.batch_size = 3;
    o.world_size = 4;
    o.rank = rank;
    o.tail = Tail::kDrop;
    auto loader = LoaderOrDie(ds, o);
    std::vector<Got> got = ReadEpoch(*loader);
    ASSERT_EQ(got.size(), 2u);  // floor(30 / 4) = 7 per rank, 2 full batches of 3
    for (const Got& g : got) seen.insert(g.indices.begin(), g.indices.end());
  }
  EXPECT_EQ(seen.size(), 24u);
  EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 24u);  // disjoint
}

TEST_P(LoaderTest, PadCompletesTheLastBatchAndCountsValidSamples) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(10));
  LoaderOptions o = Options();
  o.batch_size = 4;
  o.tail = Tail::kPad;
  o.shuffle = ShuffleMode::kNone;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  std::vector<Got> got = ReadEpoch(*loader);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].size, 4);
  EXPECT_EQ(got[2].valid, 2);
  EXPECT_EQ(got[2].indices, (std::vector<uint64_t>{8, 9, 0, 1}));
}

TEST_P(LoaderTest, CorruptRecordFailsNamingFileRecordAndOffset) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), Spec(14));
  // The last byte of shard 0 belongs to its last record (global index 6).
  const std::string shard = dir.Join(m.shards[0].data.file);
  std::string bytes = testing::ReadFileOrDie(shard);
  if (GetParam().backend == Backend::kTfrecord) {
    bytes[bytes.size() - 1] ^= 1;  // the payload checksum
  } else {
    // LMDB: flip a pixel byte of record 6 in place (values are stored verbatim).
    std::vector<uint8_t> px = testing::TestPixels(6, 6, 5, 3);
    size_t at = bytes.find(std::string(px.begin(), px.end()));
    ASSERT_NE(at, std::string::npos);
    bytes[at + 10] ^= 1;
  }
  testing::WriteFileOrDie(shard, bytes);
  LoaderOptions o = Options();
  o.batch_size = 5;
  o.shuffle = ShuffleMode::kNone;
  o.num_threads = 2;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  auto b0 = loader->Next();
  ASSERT_OK(b0.status());
  b0->Release();
  auto b1 = loader->Next();  // samples 5..9
  ASSERT_EQ(b1.status().code(), StatusCode::kCorruption);
  EXPECT_NE(b1.status().message().find(m.shards[0].data.file + ": record 6"), std::string::npos)
      << b1.status().ToString();
  if (GetParam().backend == Backend::kTfrecord) {
    EXPECT_NE(b1.status().message().find(" at offset "), std::string::npos);
  }
  // The error stays; the loader does not hang.
  EXPECT_EQ(loader->Next().status().code(), StatusCode::kCorruption);
}

TEST_P(LoaderTest, VerifyCrcOffDeliversAFlippedPixelThatTheDefaultRejects) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), Spec(7));
  const std::string shard = dir.Join(m.shards[0].data.file);
  std::string bytes = testing::ReadFileOrDie(shard);
  std::vector<uint8_t> px = testing::TestPixels(3, 6, 5, 3);
  const size_t at = bytes.find(std::string(px.begin(), px.end()));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] ^= 1;
  testing::WriteFileOrDie(shard, bytes);
  // The dataset is opened with its checksums on; the loader's option decides.
  std::shared_ptr<const Dataset> ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o = Options();
  o.batch_size = 7;
  o.shuffle = ShuffleMode::kNone;
  EXPECT_EQ(LoaderOrDie(ds, o)->Next().status().code(), StatusCode::kCorruption);
  o.verify_crc = false;
  auto loader = LoaderOrDie(ds, o);
  auto b = loader->Next();
  ASSERT_OK(b.status());
  const auto* got = static_cast<const uint8_t*>(b->host_data()) + 3 * px.size();
  EXPECT_EQ(got[10], px[10] ^ 1);
  EXPECT_EQ(std::memcmp(got, px.data(), 10), 0);
}

TEST_P(LoaderTest, AShardTruncatedWhileMappedIsAnIOErrorNamingItNotACrash) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), Spec(28));  // 4 shards of 7
  LoaderOptions o = Options();
  o.batch_size = 2;
  o.prefetch = 1;         // workers stay within 3 batches (6 samples) of the consumer
  o.io_buffer_bytes = 1;  // and the read-ahead path reads only the batch being claimed
  o.shuffle = ShuffleMode::kNone;
  o.num_threads = 2;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  // The last shard loses every page while the loader holds it mapped.
  const std::string last = dir.Join(m.shards.back().data.file);
  ASSERT_EQ(::truncate(last.c_str(), 0), 0);
  Status failure;
  for (uint64_t b = 0; b < loader->batches_per_epoch(); ++b) {
    auto batch = loader->Next();
    if (!batch.ok()) {
      failure = batch.status();
      EXPECT_EQ(b, 21u / 2) << "the first batch reading the last shard";
      break;
    }
  }
  ASSERT_FALSE(failure.ok()) << "reading a truncated shard succeeded";
  EXPECT_EQ(failure.code(), StatusCode::kIOError) << failure.ToString();
  EXPECT_NE(failure.message().find(m.shards.back().data.file + ": record 0"), std::string::npos)
      << failure.ToString();
  // Mapped: the lost pages raised SIGBUS; read-ahead: a short read (LMDB's extent lookup
  // goes through its map, so SIGBUS there too).
  EXPECT_NE(failure.message().find("the file is shorter than when it was opened"),
            std::string::npos)
      << failure.ToString();
  if (!read_ahead()) {
    EXPECT_NE(failure.message().find("SIGBUS"), std::string::npos) << failure.ToString();
  }
  // The error stays; the loader does not hang.
  EXPECT_EQ(loader->Next().status().code(), StatusCode::kIOError);
}

TEST_P(LoaderTest, SkipModeLeavesCorruptSamplesOutAndCountsThem) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), Spec(14));
  const std::string shard = dir.Join(m.shards[0].data.file);
  std::string bytes = testing::ReadFileOrDie(shard);
  std::vector<uint8_t> px = testing::TestPixels(6, 6, 5, 3);
  size_t at = bytes.find(std::string(px.begin(), px.end()));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 10] ^= 1;
  testing::WriteFileOrDie(shard, bytes);
  LoaderOptions o = Options();
  o.batch_size = 5;
  o.shuffle = ShuffleMode::kNone;
  o.on_corrupt = OnCorrupt::kSkip;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  std::vector<Got> got = ReadEpoch(*loader);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].indices, (std::vector<uint64_t>{5, 7, 8, 9}));
  EXPECT_EQ(got[1].size, 4);
  EXPECT_EQ(got[1].bytes.size(), 4u * 90);
  std::vector<uint8_t> seven = testing::TestPixels(7, 6, 5, 3);
  EXPECT_EQ(got[1].bytes.substr(90, 90), std::string(seven.begin(), seven.end()));
  EXPECT_EQ(loader->stats().skipped_corrupt, 1u);
}

INSTANTIATE_TEST_SUITE_P(
    BackendsAndIo, LoaderTest,
    ::testing::Values(LoaderParam{Backend::kTfrecord, IoPath::kMapped, IoQueue::kAuto},
                      LoaderParam{Backend::kTfrecord, IoPath::kReadAhead, IoQueue::kUring},
                      LoaderParam{Backend::kTfrecord, IoPath::kReadAhead, IoQueue::kPread},
                      LoaderParam{Backend::kLmdb, IoPath::kMapped, IoQueue::kAuto},
                      LoaderParam{Backend::kLmdb, IoPath::kReadAhead, IoQueue::kUring},
                      LoaderParam{Backend::kLmdb, IoPath::kReadAhead, IoQueue::kPread}),
    [](const auto& info) {
      std::string name = info.param.backend == Backend::kTfrecord ? "Tfrecord" : "Lmdb";
      if (info.param.io == IoPath::kMapped) return name + "Mapped";
      return name + (info.param.queue == IoQueue::kUring ? "IoUring" : "Pread");
    });

TEST(LoaderRingTest, HoldingTheSlotThatIsNeededIsAnErrorNotADeadlock) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 40});
  LoaderOptions o;
  o.batch_size = 2;
  o.prefetch = 1;  // 3 slots
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  std::vector<Batch> held;
  for (int i = 0; i < 3; ++i) {
    auto b = loader->Next();
    ASSERT_OK(b.status());
    held.push_back(std::move(b).value());
  }
  auto fourth = loader->Next();
  EXPECT_EQ(fourth.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(fourth.status().message().find("release"), std::string::npos);
  held.erase(held.begin());  // releases batch 0
  auto again = loader->Next();
  ASSERT_OK(again.status());
  EXPECT_EQ(again->index(), 3u);
}

TEST(LoaderRingTest, BatchesHeldAcrossStartEpochDoNotBlockTheNewEpoch) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 8});
  LoaderOptions o;
  o.batch_size = 2;
  o.prefetch = 1;  // 3 slots, 4 batches per epoch: epochs end in different slots
  o.shuffle = ShuffleMode::kNone;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  // The consumer always holds the two batches before the one it asks for (the most a
  // 3-slot ring allows), across epoch boundaries too, as a for-loop over batches that
  // keeps the previous step's batch alive does.
  std::deque<Batch> held;  // destroyed before the loader
  for (uint64_t epoch = 0; epoch < 5; ++epoch) {
    if (epoch > 0) ASSERT_OK(loader->StartEpoch(epoch));
    for (uint64_t b = 0; b < loader->batches_per_epoch(); ++b) {
      auto batch = loader->Next();
      ASSERT_TRUE(batch.ok()) << "epoch " << epoch << " batch " << b << ": "
                              << batch.status().ToString();
      EXPECT_EQ(batch->index(), b);
      EXPECT_EQ(batch->epoch(), epoch);
      EXPECT_EQ(batch->indices()[0], 2 * b);
      held.push_back(std::move(batch).value());
      if (held.size() > 2) held.pop_front();
    }
    EXPECT_EQ(loader->Next().status().code(), StatusCode::kOutOfRange);
  }
}

TEST(LoaderRingTest, WaitReadyReturnsOnceNextWouldNotBlock) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 8});
  LoaderOptions o;
  o.batch_size = 2;
  o.prefetch = 1;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  EXPECT_TRUE(loader->WaitReady(std::chrono::seconds(30)));  // batch 0 gets made
  std::vector<Batch> held;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(loader->WaitReady(std::chrono::seconds(30)));
    auto b = loader->Next();
    ASSERT_OK(b.status());
    held.push_back(std::move(b).value());
  }
  // Batch 3 needs the slot of held batch 0: Next() would fail at once, so no wait.
  EXPECT_TRUE(loader->WaitReady(std::chrono::milliseconds(0)));
  EXPECT_EQ(loader->Next().status().code(), StatusCode::kFailedPrecondition);
  held.clear();
  ASSERT_TRUE(loader->WaitReady(std::chrono::seconds(30)));
  ASSERT_OK(loader->Next().status());                            // batch 3, the epoch's last
  EXPECT_TRUE(loader->WaitReady(std::chrono::milliseconds(0)));  // the epoch is over
  EXPECT_EQ(loader->Next().status().code(), StatusCode::kOutOfRange);
}

TEST(LoaderRingTest, StartEpochDropsWhatWasPrefetched) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 40});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 1;
  auto a = LoaderOrDie(ds, o);
  ASSERT_OK(a->Next().status());
  ASSERT_OK(a->StartEpoch(1));
  auto b = LoaderOrDie(ds, o);
  ASSERT_OK(b->StartEpoch(1));
  EXPECT_TRUE(ReadEpoch(*a) == ReadEpoch(*b));
  EXPECT_EQ(a->state().epoch, 1u);
  EXPECT_EQ(a->state().next_batch, 10u);
}

TEST(LoaderRingTest, StatsCountWhatWasDelivered) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 20});
  LoaderOptions o;
  o.batch_size = 6;
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  ReadEpoch(*loader);
  LoaderStats s = loader->stats();
  EXPECT_EQ(s.batches, 4u);
  EXPECT_EQ(s.samples, 20u);
  EXPECT_EQ(s.bytes, 20u * 4 * 5 * 3);
  EXPECT_GE(s.wait_seconds, 0.0);
  EXPECT_NE(s.ToString().find("samples/s"), std::string::npos);
}

TEST(LoaderOutputTest, HostNormalisationMatchesTheReference) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 9, .height = 3, .width = 2});
  for (OutputType type : {OutputType::kFloat32, OutputType::kFloat16}) {
    LoaderOptions o;
    o.batch_size = 4;
    o.output_type = type;
    o.shuffle = ShuffleMode::kNone;
    auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
    auto b = loader->Next();
    ASSERT_OK(b.status());
    const size_t element = type == OutputType::kFloat32 ? 4 : 2;
    ASSERT_EQ(b->host_bytes(), 4u * 3 * 2 * 3 * element);
    std::vector<uint8_t> nhwc;
    for (uint64_t i = 0; i < 4; ++i) {
      std::vector<uint8_t> px = testing::TestPixels(i, 3, 2, 3);
      nhwc.insert(nhwc.end(), px.begin(), px.end());
    }
    std::vector<uint8_t> want(b->host_bytes());
    read::HostNormalizer(read::MakeNormalizeParams(o.mean, o.std),
                         type == OutputType::kFloat32 ? read::NormalizeType::kFloat32
                                                      : read::NormalizeType::kFloat16)
        .Run(nhwc.data(), 4, 3, 2, 3, want.data());
    EXPECT_EQ(std::memcmp(b->host_data(), want.data(), want.size()), 0);
  }
}

TEST(LoaderOutputTest, HostNormalisationTablesAreBuiltOncePerLoader) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 12, .height = 3, .width = 2});
  LoaderOptions o;
  o.batch_size = 4;
  o.output_type = OutputType::kFloat16;
  const uint64_t before = read::HostNormalizer::Constructed();
  auto loader = LoaderOrDie(OpenDatasetOrDie(dir.path()), o);
  EXPECT_EQ(ReadEpoch(*loader).size(), 3u);  // batches
  ASSERT_OK(loader->StartEpoch(1));
  EXPECT_EQ(ReadEpoch(*loader).size(), 3u);  // batches
  EXPECT_EQ(read::HostNormalizer::Constructed() - before, 1u);
}

TEST(LoaderOutputTest, NormalisationStatisticsOutside0To1UnitsAreRefused) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 4});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.output_type = OutputType::kFloat32;
  o.mean = {123.675f, 116.28f, 103.53f};
  auto loader = Loader::Create(ds, o);
  EXPECT_EQ(loader.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(loader.status().message().find("loader: normalisation: mean[0] is 123.675"),
            std::string::npos)
      << loader.status().message();
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {0.2f, 0.0f, 0.2f};
  loader = Loader::Create(ds, o);
  EXPECT_NE(loader.status().message().find("std[1] is 0"), std::string::npos)
      << loader.status().message();
  // uint8 output does not normalise: the statistics are not used, nor checked.
  o.output_type = OutputType::kUint8;
  EXPECT_OK(Loader::Create(ds, o).status());
}

TEST(LoaderOutputTest, VariableSizeDatasetsNeedATransform) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(),
                            {.samples = 12, .height = 8, .width = 9, .variable_size = true});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 4;
  o.output_height = 6;
  o.output_width = 6;
  auto none = Loader::Create(ds, o);
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  o.transform = Transform::kRandomResizedCrop;
  o.random_flip = true;
  auto loader = LoaderOrDie(ds, o);
  std::vector<Got> got = ReadEpoch(*loader);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].bytes.size(), 4u * 6 * 6 * 3);
  // The random transforms are a function of (seed, epoch, index) only.
  o.num_threads = 1;
  auto again = LoaderOrDie(ds, o);
  EXPECT_TRUE(ReadEpoch(*again) == got);
}

TEST(LoaderOptionsTest, BadOptionsAreInvalidArguments) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 4});
  auto ds = OpenDatasetOrDie(dir.path());
  auto code = [&](auto change) {
    LoaderOptions o;
    change(o);
    return Loader::Create(ds, o).status().code();
  };
  EXPECT_EQ(code([](LoaderOptions& o) { o.batch_size = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) { o.prefetch = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) { o.prefetch = kMaxPrefetch + 1; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) { o.num_threads = kMaxThreads + 1; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) { o.io_depth = kMaxIoDepth + 1; }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) { o.device = -2; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) {
              o.rank = 2;
              o.world_size = 2;
            }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) { o.block_size = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(code([](LoaderOptions& o) {
              o.output_height = 9;
              o.output_width = 9;
            }),
            StatusCode::kInvalidArgument);
}

TEST(LoaderOptionsTest, EveryOptionEnumNameParsesBackToItsValue) {
  auto round_trip = [](auto value) {
    using E = decltype(value);
    auto parsed = ParseEnum<E>(EnumName(value), "option");
    return parsed.ok() && *parsed == value;
  };
  for (size_t i = 0; i < EnumNames<ShuffleMode>().size(); ++i) {
    EXPECT_TRUE(round_trip(static_cast<ShuffleMode>(i)));
  }
  for (size_t i = 0; i < EnumNames<Transform>().size(); ++i) {
    EXPECT_TRUE(round_trip(static_cast<Transform>(i)));
  }
  EXPECT_TRUE(round_trip(Tail::kPad));
  EXPECT_TRUE(round_trip(OutputType::kFloat16));
  EXPECT_TRUE(round_trip(IoPath::kReadAhead));
  EXPECT_TRUE(round_trip(IoQueue::kPread));
  EXPECT_TRUE(round_trip(HugePages::kOff));
  EXPECT_TRUE(round_trip(OnCorrupt::kSkip));
  EXPECT_STREQ(EnumName(static_cast<Tail>(7)), "?");
  auto bad = ParseEnum<Tail>("sideways", "tail");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "tail=sideways: expected partial, drop or pad");
}

TEST(LoaderOptionsTest, AStateForAnotherConfigurationIsRefused) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 8});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 2;
  auto loader = LoaderOrDie(ds, o);
  LoaderState s = loader->state();
  o.seed = 1;
  auto other = Loader::Create(ds, o, &s);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("another configuration"), std::string::npos);
  o.seed = 0;
  s.next_batch = 5;  // 4 batches per epoch
  EXPECT_EQ(Loader::Create(ds, o, &s).status().code(), StatusCode::kInvalidArgument);
}

TEST(LoaderOptionsTest, AStateNamesEveryFieldThatDiffers) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 8});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = ShuffleMode::kBlock;
  o.block_size = 2;
  o.block_window = 2;
  LoaderState s = LoaderOrDie(ds, o)->state();
  struct Case {
    std::function<void(LoaderOptions&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](LoaderOptions& c) { c.tail = Tail::kDrop; }, "tail is partial in the state, drop now"},
      {[](LoaderOptions& c) { c.tail = Tail::kPad; }, "tail is partial in the state, pad now"},
      {[](LoaderOptions& c) { c.block_size = 4; }, "block_size is 2 in the state, 4 now"},
      {[](LoaderOptions& c) { c.block_window = 3; }, "block_window is 2 in the state, 3 now"},
      {[](LoaderOptions& c) { c.seed = 9; }, "seed is 0 in the state, 9 now"},
      {[](LoaderOptions& c) { c.shuffle = ShuffleMode::kGlobal; },
       "shuffle is block in the state, global now"},
  };
  for (const Case& c : cases) {
    LoaderOptions changed = o;
    c.change(changed);
    auto other = Loader::Create(ds, changed, &s);
    EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_NE(other.status().message().find(c.message), std::string::npos)
        << other.status().message();
  }
  // The block geometry does not shape a global shuffle: not checked there.
  LoaderOptions global = o;
  global.shuffle = ShuffleMode::kGlobal;
  LoaderState g = LoaderOrDie(ds, global)->state();
  global.block_size = 7;
  EXPECT_OK(Loader::Create(ds, global, &g).status());
}

TEST(LoaderOptionsTest, ABlockStateForOtherShardSizesIsRefused) {
  TempDir a;
  TempDir b;
  testing::WriteTestDataset(a.path(), {.samples = 8, .max_shard_records = 4});
  testing::WriteTestDataset(b.path(), {.samples = 8, .max_shard_records = 3});
  LoaderOptions o;
  o.batch_size = 2;
  o.shuffle = ShuffleMode::kBlock;
  o.block_size = 2;
  LoaderState s = LoaderOrDie(OpenDatasetOrDie(a.path()), o)->state();
  auto other = Loader::Create(OpenDatasetOrDie(b.path()), o, &s);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("shard_layout"), std::string::npos)
      << other.status().message();
}

TEST(LoaderOptionsTest, StateTextRoundTrips) {
  LoaderState s;
  s.epoch = 7;
  s.next_batch = 123;
  s.seed = 18446744073709551615ull;
  s.num_samples = 1281167;
  s.rank = 3;
  s.world_size = 8;
  s.batch_size = 256;
  s.shuffle = ShuffleMode::kBlock;
  s.tail = Tail::kPad;
  s.block_size = 32;
  s.block_window = 5;
  s.shard_layout = 0x0123456789abcdefull;
  auto back = LoaderState::Parse(s.ToString());
  ASSERT_OK(back.status());
  EXPECT_EQ(back->ToString(), s.ToString());
  EXPECT_EQ(back->version, 2);
  EXPECT_EQ(back->tail, Tail::kPad);
  EXPECT_EQ(back->block_size, 32);
  EXPECT_EQ(back->block_window, 5);
  EXPECT_EQ(back->shard_layout, 0x0123456789abcdefull);
}

TEST(LoaderOptionsTest, MalformedStatesAreRejectedNamingTheItem) {
  const std::string good =
      "shardpack-loader-state 2 epoch=1 next_batch=2 seed=3 num_samples=10 rank=0 "
      "world_size=1 batch_size=2 shuffle=global tail=partial block_size=64 block_window=16 "
      "shard_layout=00000000000000ff";
  ASSERT_OK(LoaderState::Parse(good).status());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"hello", "expected \"shardpack-loader-state 2"},
      {"shardpack-loader-state 3 epoch=1", "expected \"shardpack-loader-state 2"},
      {good + " epoch=5", "\"epoch\" appears twice"},
      {good + " colour=red", "unknown item \"colour\""},
      {good + " stray", "\"stray\" is not key=value"},
      {"shardpack-loader-state 2 epoch=1 next_batch=2 seed=3 num_samples=10 rank=0 "
       "world_size=1 batch_size=2 tail=partial block_size=64 block_window=16 "
       "shard_layout=00000000000000ff",
       "missing shuffle"},
      {"shardpack-loader-state 2 epoch=1", "missing next_batch, seed"},
      {std::string(good).replace(good.find("epoch=1"), 7, "epoch=x"), "epoch=x: not a decimal"},
      {std::string(good).replace(good.find("epoch=1"), 7, "epoch=-1"), "epoch=-1: not a decimal"},
      {std::string(good).replace(good.find("rank=0"), 6, "rank=4294967296"),
       "rank=4294967296: outside 0..2147483647"},
      {std::string(good).replace(good.find("batch_size=2"), 12, "batch_size=0"),
       "batch_size=0: outside 1.."},
      {std::string(good).replace(good.find("rank=0"), 6, "rank=1"),
       "rank 1 is not below world_size 1"},
      {std::string(good).replace(good.find("tail=partial"), 12, "tail=some"),
       "tail=some: expected partial, drop or pad"},
      {std::string(good).replace(good.find("shuffle=global"), 14, "shuffle=GLOBAL"),
       "shuffle=GLOBAL: expected none, global or block"},
      {std::string(good).replace(good.find("shard_layout=00000000000000ff"), 29, "shard_layout=ff"),
       "shard_layout=ff: expected 16 hex digits"},
  };
  for (const auto& [text, message] : bad) {
    auto st = LoaderState::Parse(text);
    EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(st.status().message().find(message), std::string::npos)
        << text << " -> " << st.status().message();
  }
}

TEST(LoaderOptionsTest, AVersion1StateStillResumes) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 8});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 2;
  auto v1 = LoaderState::Parse(
      "shardpack-loader-state 1 epoch=0 next_batch=2 seed=0 num_samples=8 rank=0 world_size=1 "
      "batch_size=2 shuffle=global");
  ASSERT_OK(v1.status());
  EXPECT_EQ(v1->version, 1);
  auto loader = Loader::Create(ds, o, &*v1);
  ASSERT_OK(loader.status());
  EXPECT_EQ((*loader)->state().next_batch, 2u);
  EXPECT_EQ(LoaderState::Parse("shardpack-loader-state 1 epoch=0 next_batch=2 seed=0 "
                               "num_samples=8 rank=0 world_size=1 batch_size=2")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(LoaderDeviceTest, ADeviceThatIsNotThereIsUnavailable) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 4});
  LoaderOptions o;
  o.device = cuda::DeviceCount();  // one past the last device
  EXPECT_EQ(Loader::Create(OpenDatasetOrDie(dir.path()), o).status().code(),
            StatusCode::kUnavailable);
}

// ---- GPU path (skipped without a CUDA device) ----

class LoaderGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }

  // The batch's device bytes, copied back on `stream` after it waited for the batch.
  static std::string DeviceBytes(Batch& b, void* stream, size_t bytes) {
    auto pinned = cuda::PinnedBuffer::Allocate(bytes);
    EXPECT_OK(pinned.status());
    EXPECT_OK(b.WaitOn(stream));
    EXPECT_OK(cuda::CopyToHostAsync(pinned->data(), b.device_data(), bytes, stream));
    EXPECT_OK(cuda::StreamSynchronize(stream));
    return std::string(static_cast<const char*>(pinned->data()), bytes);
  }
};

TEST_F(LoaderGpuTest, DeviceBatchesEqualTheHostPathsBatches) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 23, .height = 6, .width = 5});
  auto ds = OpenDatasetOrDie(dir.path());
  for (OutputType type : {OutputType::kUint8, OutputType::kFloat32, OutputType::kFloat16}) {
    LoaderOptions o;
    o.batch_size = 4;
    o.seed = 5;
    o.output_type = type;
    auto host = LoaderOrDie(ds, o);
    std::vector<Got> want = ReadEpoch(*host);
    o.device = 0;
    auto gpu = LoaderOrDie(ds, o);
    auto stream = cuda::Stream::Create(0);
    ASSERT_OK(stream.status());
    for (const Got& w : want) {
      auto b = gpu->Next();
      ASSERT_OK(b.status());
      EXPECT_EQ(std::vector<uint64_t>(b->indices().begin(), b->indices().end()), w.indices);
      EXPECT_EQ(DeviceBytes(*b, stream->get(), w.bytes.size()), w.bytes)
          << "batch " << w.index << ", output type " << static_cast<int>(type);
    }
    EXPECT_EQ(gpu->Next().status().code(), StatusCode::kOutOfRange);
  }
}

TEST_F(LoaderGpuTest, ReleasedSlotIsNotOverwrittenWhileTheConsumersStreamStillReadsIt) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 40, .height = 16, .width = 16});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 4;
  o.prefetch = 1;  // 3 slots: batch 3 reuses batch 0's
  o.shuffle = ShuffleMode::kNone;
  auto host = LoaderOrDie(ds, o);
  std::vector<Got> want = ReadEpoch(*host);
  o.device = 0;
  auto gpu = LoaderOrDie(ds, o);
  auto stream = cuda::Stream::Create(0);
  ASSERT_OK(stream.status());
  const size_t bytes = want[0].bytes.size();
  auto pinned = cuda::PinnedBuffer::Allocate(bytes);
  ASSERT_OK(pinned.status());
  {
    auto b0 = gpu->Next();
    ASSERT_OK(b0.status());
    ASSERT_OK(b0->WaitOn(stream->get()));
    // A long "training step" on the consumer's stream, then it reads the batch.
    ASSERT_OK(cuda::SpinAsync(stream->get(), 200'000'000));
    ASSERT_OK(cuda::CopyToHostAsync(pinned->data(), b0->device_data(), bytes, stream->get()));
  }  // released while the step is still running
  for (int i = 1; i <= 3; ++i) {
    auto b = gpu->Next();  // batch 3 is copied into batch 0's device slot
    ASSERT_OK(b.status());
  }
  ASSERT_OK(cuda::StreamSynchronize(stream->get()));
  EXPECT_EQ(std::string(static_cast<const char*>(pinned->data()), bytes), want[0].bytes);
}

// ---- memory (loader.h, "Memory") ----

// The manifest of the dataset in `dir` made to claim another image size, its checksum
// written anew (as a hostile author would).
void ClaimImageSize(const std::string& dir, int height, int width) {
  auto m = ReadManifest(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  m->image.height = height;
  m->image.width = width;
  testing::WriteFileOrDie(dir + "/manifest.json", SerializeManifest(*m));
}

// 32 x 32 JPEGs whose manifest claims 8000 x 8000: a legal size (the largest image is
// 89,478,485 pixels), but none of the records'. The ring it asks for is refused with the
// numbers that make it up.
TEST(LoaderMemoryTest, ARingOverTheBudgetIsRefusedNamingItsTerms) {
  TempDir dir;
  testing::WriteTestDataset(
      dir.path(), {.samples = 8, .height = 32, .width = 32, .encoding = ImageEncoding::kJpeg});
  ClaimImageSize(dir.path(), 8000, 8000);
  LoaderOptions o;
  o.batch_size = 256;
  o.prefetch = 4;
  o.max_memory_bytes = 1ull << 30;
  auto loader = Loader::Create(OpenDatasetOrDie(dir.path()), o);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), StatusCode::kResourceExhausted);
  // 6 slots x 256 x 8000 x 8000 x 3.
  EXPECT_EQ(loader.status().message(),
            "loader: the ring needs 294912000000 bytes (prefetch 4 + 2 slots of batch 256 x 8000 "
            "x 8000 x 3 bytes) but only 1073741824 bytes are available "
            "(LoaderOptions::max_memory_bytes); lower batch_size or prefetch, or check the "
            "manifest's image size (8000 x 8000)");
}

// Without a limit of its own, the loader takes the process's: a ring no machine holds is
// refused against 7/8 of the memory available, whatever the machine.
TEST(LoaderMemoryTest, WithoutALimitTheProcesssAvailableMemoryIsTheBudget) {
  TempDir dir;
  testing::WriteTestDataset(
      dir.path(), {.samples = 8, .height = 32, .width = 32, .encoding = ImageEncoding::kJpeg});
  ClaimImageSize(dir.path(), 8000, 8000);
  LoaderOptions o;
  o.batch_size = 1 << 20;  // 201 PB a slot
  auto loader = Loader::Create(OpenDatasetOrDie(dir.path()), o);
  ASSERT_FALSE(loader.ok());
  EXPECT_EQ(loader.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(loader.status().message().find("bytes are available (7/8 of "), std::string::npos)
      << loader.status().message();
}

// The refusal comes before the allocation: the process does not grow by the ring (1.5 GB
// of a 2000 x 2000 claim over 32 x 32 JPEGs). Measured in a child, whose peak RSS starts
// where the fork left it.
TEST(LoaderMemoryTest, TheRefusalComesBeforeTheRingIsAllocated) {
  TempDir dir;
  testing::WriteTestDataset(
      dir.path(), {.samples = 8, .height = 32, .width = 32, .encoding = ImageEncoding::kJpeg});
  ClaimImageSize(dir.path(), 2000, 2000);
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 32;
  o.prefetch = 2;  // 4 slots x 32 x 12 MB = 1.5 GB
  o.num_threads = 2;
  o.max_memory_bytes = 256ull << 20;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Exit codes: 0 refused without growing, 1 not refused, 2 grew by 64 MB or more.
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    auto loader = Loader::Create(ds, o);
    ::getrusage(RUSAGE_SELF, &after);
    if (after.ru_maxrss - before.ru_maxrss >= 64 * 1024) ::_exit(2);  // KiB
    ::_exit(loader.status().code() == StatusCode::kResourceExhausted ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: not refused; 2: the process grew by 64 MB or more";
}

// The budget is checked against the formula loader.h states, to the byte: the ring's
// slots rounded to pages, and the indices of the batches and the epoch.
TEST(LoaderMemoryTest, TheCheckedMemoryIsTheStatedFormula) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 50, .height = 6, .width = 5});
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 8;
  o.prefetch = 2;
  o.num_threads = 2;
  o.io = IoPath::kMapped;
  o.read_ahead_bytes = 0;  // no batch hinted ahead: the one claimed only
  // ring: 4 slots of 8 x 6 x 5 x 3 = 720 bytes, a page each; the rest: 4 x 8 x 17 per slot,
  // (2 + 1) x (1 + 1) x 8 x 8 of hints, 50 x 8 of the epoch's order.
  const uint64_t ring = 4 * 4096;
  const uint64_t rest = 4 * 8 * 17 + 3 * 2 * 8 * 8 + 50 * 8;
  o.max_memory_bytes = ring + rest;
  EXPECT_OK(Loader::Create(ds, o).status());
  o.max_memory_bytes = ring + rest - 1;
  auto refused = Loader::Create(ds, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find(
                "loader: its memory needs " + std::to_string(ring + rest) +
                " bytes (the ring 16384 (prefetch 2 + 2 slots of batch 8 x 6 x 5 x 3 bytes), the "
                "2 workers' scratch 0, the read-ahead buffers 0, the batches' and the epoch's "
                "indices " +
                std::to_string(rest) + ") but only " + std::to_string(ring + rest - 1) +
                " bytes are available"),
            std::string::npos)
      << refused.status().message();
  // Host normalisation to float32 keeps a second buffer of 4 bytes a value per slot.
  o.output_type = OutputType::kFloat32;
  o.max_memory_bytes = 4 * (4096 + 4096) + rest;
  EXPECT_OK(Loader::Create(ds, o).status());
  o.max_memory_bytes -= 1;
  EXPECT_EQ(Loader::Create(ds, o).status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace shardpack
