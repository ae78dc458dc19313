// The loader's read-ahead path: its planner (coalescing, slots), its equality with the
// mapped path over every order-changing option, its errors (injected through MemEnv and
// on real files), and the automatic choice between the paths.
#include "read/read_ahead.h"
#include "read/dataset_access.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "io/mapped_range.h"
#include "io/mem_env.h"
#include "read/delivered_batch.h"
#include "read/io_choice.h"
#include "shardpack/loader.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::OpenDatasetOrDie;
using testing::TempDir;
using testing::TestDatasetSpec;

TestDatasetSpec Spec(Backend backend, uint64_t samples) {
  TestDatasetSpec s;
  s.backend = backend;
  s.samples = samples;
  s.height = 6;
  s.width = 5;
  s.max_shard_records = 7;
  return s;
}

std::string SampleBytes(const SampleView& v) {
  return std::string(reinterpret_cast<const char*>(v.pixels.data()), v.pixels.size());
}

// ---- the planner ----

class ReadAheadTest : public ::testing::TestWithParam<Backend> {};

TEST(ReadUnitsTest, BatchesWithoutWindowsAndWholeWindowsWithThem) {
  std::vector<uint64_t> ends;
  read::ReadUnits({}, 10, 4, 4, &ends);
  EXPECT_EQ(ends, (std::vector<uint64_t>{4, 8, 10}));
  read::ReadUnits({}, 0, 4, 4, &ends);
  EXPECT_TRUE(ends.empty());
  // Windows end at 3, 9, 20, 26; positions read: 24; batch 4, at most 8 per unit. [0, 3)
  // is smaller than a batch: joined to [3, 9); [0, 9) and [9, 20) are cut in two; the
  // last window stops at 24.
  read::ReadUnits(std::vector<uint64_t>{3, 9, 20, 26}, 24, 4, 8, &ends);
  EXPECT_EQ(ends, (std::vector<uint64_t>{4, 9, 14, 20, 24}));
  // Windows that fit: one unit each; cap is at least two batches.
  read::ReadUnits(std::vector<uint64_t>{6, 12, 18}, 18, 4, 1, &ends);
  EXPECT_EQ(ends, (std::vector<uint64_t>{6, 12, 18}));
}

TEST_P(ReadAheadTest, RecordsAdjacentInAFileAreOneReadAndEverySampleIsTheStoredOne) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(GetParam(), 21));  // 3 shards of 7
  auto ds = OpenDatasetOrDie(dir.path());
  read::ReadAheadOptions o;
  o.unit_samples = 9;
  o.slots = 2;
  o.queue = IoQueue::kPread;
  o.reuse_cache = false;
  auto ra = read::ReadAhead::Create(*ds, o);
  ASSERT_OK(ra.status());
  // Records 3..11 span shards 0 and 1: two runs, two reads.
  std::vector<uint64_t> run = {3, 4, 5, 6, 7, 8, 9, 10, 11};
  // Out of order: every record is a read of its own.
  std::vector<uint64_t> scattered = {20, 2, 15, 9, 0, 13, 6, 18, 11};
  (*ra)->SetUnits(std::vector<uint64_t>{9, 18});
  (*ra)->Start(0, 0, run);
  (*ra)->Start(1, 9, scattered);
  for (auto [first, indices] : {std::pair{0, run}, std::pair{9, scattered}}) {
    for (size_t i = 0; i < indices.size(); ++i) {
      SampleView got, want;
      ASSERT_OK((*ra)->Sample(first + i, true, &got));
      ASSERT_OK(ds->Get(indices[i], &want));
      EXPECT_EQ(SampleBytes(got), SampleBytes(want)) << "sample " << indices[i];
      EXPECT_EQ(got.label, want.label);
      EXPECT_EQ(got.filename, want.filename);
    }
  }
  if (GetParam() == Backend::kTfrecord) {
    EXPECT_EQ((*ra)->reads_issued(), 2u + 9u);
  } else {
    // LMDB: small values sit in leaf pages between node headers, so they never touch;
    // a read per sample at most.
    EXPECT_LE((*ra)->reads_issued(), 18u);
  }
  EXPECT_GT((*ra)->bytes_read(), 18u * 90);
  (*ra)->Finish(0, 18);
  // Records adjacent in the file coalesce in whatever order the unit holds them.
  if (GetParam() == Backend::kTfrecord) {
    (*ra)->Reset();
    (*ra)->SetUnits(std::vector<uint64_t>{3});
    const uint64_t before = (*ra)->reads_issued();
    const std::vector<uint64_t> reversed = {5, 3, 4};
    (*ra)->Start(0, 0, reversed);
    for (int i = 0; i < 3; ++i) {
      SampleView got, want;
      ASSERT_OK((*ra)->Sample(static_cast<uint64_t>(i), true, &got));
      ASSERT_OK(ds->Get(reversed[static_cast<size_t>(i)], &want));
      EXPECT_EQ(SampleBytes(got), SampleBytes(want));
    }
    EXPECT_EQ((*ra)->reads_issued(), before + 1);
    (*ra)->Finish(0, 3);
  }
}

// Records a little apart in a file still join one read: LMDB keeps each value larger
// than a page in overflow pages of its own, so consecutive values are up to a page apart
// (a 192 KiB value: 4 KiB, under a sixteenth of it); a gap of whole records keeps them
// apart.
// Reads `unit` (positions of records of `ds`) as one unit through `ra`; each sample must be
// the stored one. Returns how many reads it took.
uint64_t ReadUnit(read::ReadAhead& ra, const Dataset& ds, const std::vector<uint64_t>& unit) {
  ra.Reset();
  ra.SetUnits(std::vector<uint64_t>{unit.size()});
  const uint64_t before = ra.reads_issued();
  ra.Start(0, 0, unit);
  for (size_t i = 0; i < unit.size(); ++i) {
    SampleView got, want;
    EXPECT_OK(ra.Sample(i, true, &got));
    EXPECT_OK(ds.Get(unit[i], &want));
    EXPECT_EQ(SampleBytes(got), SampleBytes(want)) << "sample " << unit[i];
  }
  ra.Finish(0, unit.size());
  return ra.reads_issued() - before;
}

TEST_P(ReadAheadTest, RecordsASmallGapApartJoinOneReadAndTheirBytesAreTheStoredOnes) {
  TempDir dir;
  TestDatasetSpec spec = Spec(GetParam(), 6);
  spec.height = 256;  // 192 KiB of pixels, as the benchmarks' samples
  spec.width = 256;
  spec.max_shard_records = 6;
  spec.lmdb_initial_map_bytes = 16ull << 20;
  testing::WriteTestDataset(dir.path(), spec);
  auto ds = OpenDatasetOrDie(dir.path());
  read::ReadAheadOptions o;
  o.unit_samples = 6;
  o.slots = 1;
  o.queue = IoQueue::kPread;
  o.reuse_cache = false;
  auto ra = read::ReadAhead::Create(*ds, o);
  ASSERT_OK(ra.status());
  EXPECT_EQ(ReadUnit(**ra, *ds, {3, 1, 0, 2}), 1u) << "four neighbouring records, any order";
  // Every other record: the gaps are whole records, far more than a sixteenth of one.
  EXPECT_EQ(ReadUnit(**ra, *ds, {0, 2, 4}), 3u);
  // Six neighbours are 1.2 MiB: a read stops at 1 MiB, so they take two.
  EXPECT_EQ(ReadUnit(**ra, *ds, {5, 1, 3, 0, 2, 4}), 2u);
}

TEST_P(ReadAheadTest, ASlotTakesItsNextUnitOnlyOnceEveryPositionIsFinished) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(GetParam(), 14));  // 2 shards of 7
  auto ds = OpenDatasetOrDie(dir.path());
  read::ReadAheadOptions o;
  o.unit_samples = 6;
  o.slots = 2;
  o.reuse_cache = false;
  auto ra = read::ReadAhead::Create(*ds, o);
  ASSERT_OK(ra.status());
  (*ra)->SetUnits(std::vector<uint64_t>{6, 12, 18});
  EXPECT_EQ((*ra)->UnitOf(5), 0u);
  EXPECT_EQ((*ra)->UnitOf(6), 1u);
  EXPECT_EQ((*ra)->UnitOf(18), 3u);
  // Unit 0 interleaves records 0..5 of shard 0 as two batches of 3 would: no record of
  // either batch touches another of the same batch, but the unit's six are one run.
  const std::vector<uint64_t> unit0 = {4, 0, 2, 5, 1, 3};
  const std::vector<uint64_t> unit1 = {7, 8, 9, 10, 11, 12};
  EXPECT_TRUE((*ra)->Reserve(0));
  (*ra)->Start(0, 0, unit0);
  if (GetParam() == Backend::kTfrecord) {
    EXPECT_EQ((*ra)->reads_issued(), 1u);
  }
  EXPECT_TRUE((*ra)->Reserve(1));
  EXPECT_TRUE((*ra)->Reserve(1)) << "reserved already, by the same unit";
  (*ra)->Start(1, 6, unit1);
  EXPECT_FALSE((*ra)->Reserve(2)) << "unit 2 shares unit 0's slot";
  for (uint64_t p = 0; p < 12; ++p) {
    SampleView got, want;
    ASSERT_OK((*ra)->Sample(p, true, &got));
    ASSERT_OK(ds->Get(p < 6 ? unit0[p] : unit1[p - 6], &want));
    EXPECT_EQ(SampleBytes(got), SampleBytes(want)) << "position " << p;
  }
  (*ra)->Finish(0, 4);
  EXPECT_FALSE((*ra)->Reserve(2)) << "positions 4 and 5 of unit 0 are not finished";
  (*ra)->Finish(4, 4);  // a batch across units 0 and 1
  EXPECT_TRUE((*ra)->Reserve(2));
  EXPECT_FALSE((*ra)->Reserve(3)) << "unit 1 is not finished";
  (*ra)->Finish(8, 4);
  EXPECT_TRUE((*ra)->Reserve(3));
  // A resumed epoch starts inside a unit: positions 2..5 of unit 0.
  (*ra)->Reset();
  (*ra)->SetUnits(std::vector<uint64_t>{6, 12});
  (*ra)->Start(0, 2, std::vector<uint64_t>{13, 12, 11, 10});
  SampleView v, want;
  ASSERT_OK((*ra)->Sample(4, true, &v));
  ASSERT_OK(ds->Get(11, &want));
  EXPECT_EQ(SampleBytes(v), SampleBytes(want));
  EXPECT_FALSE((*ra)->Reserve(2));
  (*ra)->Finish(2, 4);
  EXPECT_TRUE((*ra)->Reserve(2));
  EXPECT_NE((*ra)->Describe().find("2 units of up to 6 samples ahead"), std::string::npos)
      << (*ra)->Describe();
}

INSTANTIATE_TEST_SUITE_P(Backends, ReadAheadTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb),
                         [](const auto& info) {
                           return info.param == Backend::kTfrecord ? "Tfrecord" : "Lmdb";
                         });

// ---- the loader: read-ahead delivers the mapped path's batches ----

using testing::Got;

// Epoch `epoch` from batch `from` on, then the whole of epoch + 1.
std::vector<Got> Read(std::shared_ptr<const Dataset> ds, const LoaderOptions& o, uint64_t epoch,
                      uint64_t from) {
  // The state of these options at (epoch, from): a loader's own, moved there.
  LoaderOptions mapped = o;
  mapped.io = IoPath::kMapped;
  LoaderState state = (*Loader::Create(ds, mapped))->state();
  state.epoch = epoch;
  state.next_batch = from;
  auto loader = Loader::Create(ds, o, &state);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  std::vector<Got> out = testing::ReadRest(**loader);
  EXPECT_OK((*loader)->StartEpoch(epoch + 1));
  const std::vector<Got> next = testing::ReadRest(**loader);
  out.insert(out.end(), next.begin(), next.end());
  return out;
}

class ReadAheadLoaderTest : public ::testing::TestWithParam<Backend> {};

TEST_P(ReadAheadLoaderTest, DeliversTheMappedPathsBatchesUnderEveryOption) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(GetParam(), 61));
  auto ds = OpenDatasetOrDie(dir.path());
  struct Case {
    const char* name;
    std::function<void(LoaderOptions*)> set;
    uint64_t from;
  };
  const std::vector<Case> cases = {
      {"global", [](LoaderOptions*) {}, 0},
      {"none", [](LoaderOptions* o) { o->shuffle = ShuffleMode::kNone; }, 0},
      {"block",
       [](LoaderOptions* o) {
         o->shuffle = ShuffleMode::kBlock;
         o->block_size = 3;
         o->block_window = 2;
       },
       0},
      {"block, read in groups of 3 batches, resumed inside a group",
       [](LoaderOptions* o) {
         o->shuffle = ShuffleMode::kBlock;
         o->block_size = 5;
         o->block_window = 4;
       },
       4},
      {"block, groups of 3, rank 1 of 2",
       [](LoaderOptions* o) {
         o->shuffle = ShuffleMode::kBlock;
         o->block_size = 5;
         o->block_window = 4;
         o->rank = 1;
         o->world_size = 2;
       },
       0},
      {"rank 1 of 3, pad",
       [](LoaderOptions* o) {
         o->rank = 1;
         o->world_size = 3;
         o->tail = Tail::kPad;
       },
       0},
      {"resume at batch 4", [](LoaderOptions*) {}, 4},
      {"drop tail, one slot",
       [](LoaderOptions* o) {
         o->tail = Tail::kDrop;
         o->io_buffer_bytes = 1;
       },
       2},
      {"random crop, flip, float16",
       [](LoaderOptions* o) {
         o->transform = Transform::kRandomResizedCrop;
         o->output_height = 4;
         o->output_width = 4;
         o->random_flip = true;
         o->output_type = OutputType::kFloat16;
       },
       1},
      {"page cache reused", [](LoaderOptions* o) { o->io_reuse_page_cache = true; }, 0},
      {"no checksums, cached reads, depth 1",
       [](LoaderOptions* o) {
         o->verify_crc = false;
         o->io_bypass_cache = false;
         o->io_depth = 1;
       },
       0},
  };
  for (const Case& c : cases) {
    for (IoQueue queue : {IoQueue::kUring, IoQueue::kPread}) {
      LoaderOptions o;
      o.batch_size = 7;
      o.seed = 11;
      o.num_threads = 3;
      o.io_reuse_page_cache = false;  // just written: read from storage unless a case says
      c.set(&o);
      o.io = IoPath::kMapped;
      const std::vector<Got> mapped = Read(ds, o, 2, c.from);
      o.io = IoPath::kReadAhead;
      o.io_queue = queue;
      const std::vector<Got> read_ahead = Read(ds, o, 2, c.from);
      EXPECT_FALSE(mapped.empty()) << c.name;
      EXPECT_TRUE(read_ahead == mapped)
          << c.name << (queue == IoQueue::kUring ? ", io_uring" : ", pread");
    }
  }
}

TEST_P(ReadAheadLoaderTest, StatsNameThePathAndCountTheBytesRead) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), Spec(GetParam(), 20));
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 5;
  o.io = IoPath::kReadAhead;
  o.io_reuse_page_cache = false;
  auto loader = Loader::Create(ds, o);
  ASSERT_OK(loader.status());
  while ((*loader)->Next().ok()) {
  }
  const LoaderStats s = (*loader)->stats();
  EXPECT_EQ(s.io.rfind("read-ahead: ", 0), 0u) << s.io;
  EXPECT_NE(s.io.find("(forced)"), std::string::npos) << s.io;
  EXPECT_GE(s.bytes_read, 20u * 90);
  EXPECT_EQ(s.batches_from_page_cache, 0u);
  // With the page cache reused (the default), batches found there are read through the
  // mapping: the same batches, no storage read.
  for (const ShardEntry& e : ds->manifest().shards) testing::ReadFileOrDie(dir.Join(e.data.file));
  o.io_reuse_page_cache = true;
  auto reusing = Loader::Create(ds, o);
  ASSERT_OK(reusing.status());
  while ((*reusing)->Next().ok()) {
  }
  EXPECT_EQ((*reusing)->stats().batches_from_page_cache, 4u);  // a unit per batch
  EXPECT_EQ((*reusing)->stats().bytes_read, 0u);
  o.io = IoPath::kAuto;  // a small dataset fits: the mapping
  auto small = Loader::Create(ds, o);
  ASSERT_OK(small.status());
  EXPECT_EQ((*small)->stats().io.rfind("mapped (dataset ", 0), 0u) << (*small)->stats().io;
  EXPECT_EQ((*small)->stats().bytes_read, 0u);
  // A block shuffle reads a window of blocks (5 x 4 records: 20 samples) as one unit,
  // three of them at least.
  o.io = IoPath::kReadAhead;
  o.shuffle = ShuffleMode::kBlock;
  o.block_size = 5;
  o.block_window = 4;
  auto blocks = Loader::Create(ds, o);
  ASSERT_OK(blocks.status());
  EXPECT_NE((*blocks)->stats().io.find("units of up to 20 samples ahead"), std::string::npos)
      << (*blocks)->stats().io;
  o.io_buffer_bytes = 1;  // one batch: three units of two batches, the least
  auto small_buffer = Loader::Create(ds, o);
  ASSERT_OK(small_buffer.status());
  EXPECT_NE((*small_buffer)->stats().io.find(", 3 units of up to 10 samples ahead"),
            std::string::npos)
      << (*small_buffer)->stats().io;
}

INSTANTIATE_TEST_SUITE_P(Backends, ReadAheadLoaderTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb),
                         [](const auto& info) {
                           return info.param == Backend::kTfrecord ? "Tfrecord" : "Lmdb";
                         });

TEST(ReadAheadReuseTest, ARecordMissingFromACachedUnitIsReadFromStorageAlone) {
  // 24 records of 196 KB in one TFRecord shard; units of 12 (a batch each, no shuffle), so
  // the 8 probes of the first unit look at records 0, 1, 3, 4, 6, 7, 9 and 10, not 5.
  // (LMDB's writer leaves its file in folios larger than a record, which an eviction of
  // one record's pages does not split; the probing is the same for both formats.)
  TempDir dir;
  TestDatasetSpec spec = Spec(Backend::kTfrecord, 24);
  spec.height = 256;
  spec.width = 256;
  spec.max_shard_records = 24;
  testing::WriteTestDataset(dir.path(), spec);
  LoaderOptions o;
  o.batch_size = 12;
  o.shuffle = ShuffleMode::kNone;
  o.io = IoPath::kMapped;
  std::vector<Got> expected;
  {
    // The mapped path's batches, through a dataset of its own: its pages are unmapped (so
    // evictable) once it is gone.
    auto mapped = Loader::Create(OpenDatasetOrDie(dir.path()), o);
    ASSERT_OK(mapped.status());
    expected = testing::ReadRest(**mapped);
  }
  auto ds = OpenDatasetOrDie(dir.path());
  const std::string file = dir.Join(ds->manifest().shards.at(0).data.file);
  // Record 5's pages dropped, but for those it shares with its neighbours.
  const auto extent = read::DatasetAccess(*ds).shard(0).Extent(5);
  ASSERT_OK(extent.status());
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = (extent->offset + page - 1) / page * page;
  const uint64_t end = (extent->offset + extent->length) / page * page;
  testing::EvictFromPageCache(file, begin, end - begin);
  for (uint64_t i = 0; i < ds->size(); ++i) {
    if (read::DatasetAccess(*ds).Resident(i) != (i != 5)) {
      GTEST_SKIP() << "the page cache did not drop exactly record 5 of " << file << " (record " << i
                   << ")";
    }
  }

  o.io = IoPath::kReadAhead;
  auto loader = Loader::Create(ds, o);
  ASSERT_OK(loader.status());
  EXPECT_TRUE(testing::ReadRest(**loader) == expected);
  // The second unit whole from the page cache; of the first, record 5 alone from storage
  // (its extent, rounded out to whole blocks where the reads bypass the cache), and not
  // through the mapping, which would have read it into the page cache.
  const LoaderStats stats = (*loader)->stats();
  EXPECT_EQ(stats.batches_from_page_cache, 1u);
  EXPECT_GE(stats.bytes_read, extent->length);
  EXPECT_LE(stats.bytes_read, extent->length + 2 * page);
  EXPECT_FALSE(read::DatasetAccess(*ds).Resident(5));
}

// ---- errors through MemEnv: an EIO, a truncation, on the read-ahead path ----

// A TFRecord dataset written to disk, then copied into a MemEnv under the same paths.
std::shared_ptr<const Dataset> InMemory(const TempDir& dir, io::MemEnv* env, Manifest* m) {
  *m = testing::WriteTestDataset(dir.path(), Spec(Backend::kTfrecord, 14));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    env->SetFileContents(entry.path().string(), testing::ReadFileOrDie(entry.path().string()));
  }
  return OpenDatasetOrDie(dir.path(), env);
}

StatusOr<int> BatchesUntilFailure(Loader& loader) {
  for (int b = 0;; ++b) {
    auto batch = loader.Next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) return b;
      return batch.status();
    }
  }
}

// Read-ahead from storage, shards in order, a batch per shard, one worker, and one read at a
// time into one batch of buffers: the reads come in the order of the shards, so "the
// second read" is shard 1's.
LoaderOptions InOrderReadAhead() {
  LoaderOptions o;
  o.io_depth = 1;
  o.io_buffer_bytes = 1;
  o.batch_size = 7;
  o.shuffle = ShuffleMode::kNone;
  o.io = IoPath::kReadAhead;
  o.io_reuse_page_cache = false;
  o.prefetch = 1;
  o.num_threads = 1;
  return o;
}

TEST(ReadAheadFaultTest, AnInjectedReadErrorNamesTheFileTheRecordAndTheErrno) {
  TempDir dir;
  io::MemEnv env;
  Manifest m;
  auto ds = InMemory(dir, &env, &m);
  const LoaderOptions o = InOrderReadAhead();
  env.InjectFault(io::FaultOp::kRead, 2, EIO);  // the second shard's read
  auto loader = Loader::Create(ds, o);
  ASSERT_OK(loader.status());
  auto failed = BatchesUntilFailure(**loader);
  ASSERT_FALSE(failed.ok()) << "an injected EIO went unnoticed";
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  const std::string msg = failed.status().message();
  EXPECT_NE(msg.find(m.shards[1].data.file + ": record 0 at offset 0: "), std::string::npos) << msg;
  EXPECT_NE(msg.find("Input/output error"), std::string::npos) << msg;
  EXPECT_EQ((*loader)->Next().status().code(), StatusCode::kIOError) << "the error stays";
}

TEST(ReadAheadFaultTest, AShardTruncatedWhileOpenIsAShortReadNamedAsSuch) {
  TempDir dir;
  io::MemEnv env;
  Manifest m;
  auto ds = InMemory(dir, &env, &m);
  const LoaderOptions o = InOrderReadAhead();
  // Truncated after the dataset was opened (and checked), before any read.
  const std::string shard1 = dir.Join(m.shards[1].data.file);
  const std::string bytes = env.FileContents(shard1);
  env.SetFileContents(shard1, bytes.substr(0, bytes.size() / 2));
  auto loader = Loader::Create(ds, o);
  ASSERT_OK(loader.status());
  auto failed = BatchesUntilFailure(**loader);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  EXPECT_NE(failed.status().message().find(m.shards[1].data.file + ": record 0 at offset 0: " +
                                           std::string(io::kShrunkWhileOpen)),
            std::string::npos)
      << failed.status().message();
}

TEST(ReadAheadFaultTest, ACorruptRecordReadsAsOnTheMappedPath) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), Spec(Backend::kTfrecord, 14));
  const std::string shard = dir.Join(m.shards[0].data.file);
  std::string bytes = testing::ReadFileOrDie(shard);
  std::vector<uint8_t> px = testing::TestPixels(4, 6, 5, 3);
  const size_t at = bytes.find(std::string(px.begin(), px.end()));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 4;
  testing::WriteFileOrDie(shard, bytes);
  auto ds = OpenDatasetOrDie(dir.path());
  std::string messages[2];
  uint64_t skipped[2];
  for (int path = 0; path < 2; ++path) {
    LoaderOptions o;
    o.batch_size = 7;
    o.shuffle = ShuffleMode::kNone;
    o.io = path == 0 ? IoPath::kMapped : IoPath::kReadAhead;
    auto loader = Loader::Create(ds, o);
    ASSERT_OK(loader.status());
    messages[path] = (*loader)->Next().status().ToString();
    o.on_corrupt = OnCorrupt::kSkip;
    auto skipping = Loader::Create(ds, o);
    ASSERT_OK(skipping.status());
    auto b = (*skipping)->Next();
    ASSERT_OK(b.status());
    EXPECT_EQ(b->size(), 6);
    b->Release();
    skipped[path] = (*skipping)->stats().skipped_corrupt;
  }
  EXPECT_NE(messages[0].find("record 4 at offset"), std::string::npos) << messages[0];
  EXPECT_EQ(messages[1], messages[0]);
  EXPECT_EQ(skipped[0], 1u);
  EXPECT_EQ(skipped[1], 1u);
}

// ---- the automatic choice ----

void WriteText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(IoChoiceTest, TheCgroupLimitBelowMemAvailableDecides) {
  TempDir root;
  WriteText(root.Join("proc/meminfo"), "MemTotal: 25000000 kB\nMemAvailable: 20000000 kB\n");
  // cgroup v1: the limit of a parent counts for its children.
  WriteText(root.Join("proc/self/cgroup"), "4:memory:/job/step\n0::/\n");
  WriteText(root.Join("sys/fs/cgroup/memory/job/memory.limit_in_bytes"), "2147483648\n");
  WriteText(root.Join("sys/fs/cgroup/memory/job/step/memory.limit_in_bytes"),
            "9223372036854771712\n");
  read::CacheLimit v1 = read::PageCacheLimit(root.path());
  EXPECT_EQ(v1.bytes, 2147483648u);
  EXPECT_EQ(v1.source, "cgroup memory.limit_in_bytes of /job");
  // cgroup v2: "max" is no limit.
  WriteText(root.Join("proc/self/cgroup"), "0::/user/session\n");
  WriteText(root.Join("sys/fs/cgroup/user/memory.max"), "max\n");
  WriteText(root.Join("sys/fs/cgroup/user/session/memory.max"), "1000000000\n");
  read::CacheLimit v2 = read::PageCacheLimit(root.path());
  EXPECT_EQ(v2.bytes, 1000000000u);
  EXPECT_EQ(v2.source, "cgroup memory.max of /user/session");
  // No cgroup limit: what the kernel reports available.
  WriteText(root.Join("sys/fs/cgroup/user/session/memory.max"), "max\n");
  read::CacheLimit none = read::PageCacheLimit(root.path());
  EXPECT_EQ(none.bytes, 20000000ull * 1024);
  EXPECT_EQ(none.source, "MemAvailable");
}

TEST(IoChoiceTest, MappedWhileTheDatasetFitsInThreeQuartersOfTheLimit) {
  const read::CacheLimit limit{4000000000, "cgroup memory.max of /a"};
  read::IoChoice fits = read::ChooseIo(3000000000, limit);
  EXPECT_FALSE(fits.read_ahead);
  EXPECT_EQ(
      fits.why,
      "dataset 3.0 GB <= 75% of the 4.0 GB the page cache may hold (cgroup memory.max of /a)");
  read::IoChoice big = read::ChooseIo(3000000001, limit);
  EXPECT_TRUE(big.read_ahead);
  EXPECT_NE(big.why.find("dataset 3.0 GB > 75% of the 4.0 GB"), std::string::npos) << big.why;
}

}  // namespace
}  // namespace shardpack
