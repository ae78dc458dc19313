// The loader allocates nothing per batch or per sample once warmed up. A program of its
// own, because it replaces the allocation functions to count every call: operator new
// (every C++ allocation) and malloc/calloc/realloc (C libraries: LMDB's transactions),
// forwarded to glibc's.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <new>

#include "shardpack/loader.h"
#include "test_util.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace {
std::atomic<uint64_t> g_allocations{0};
// The largest single request since the last reset.
std::atomic<uint64_t> g_largest{0};

void Counted(size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  uint64_t seen = g_largest.load(std::memory_order_relaxed);
  while (size > seen && !g_largest.compare_exchange_weak(seen, size, std::memory_order_relaxed)) {
  }
}
}  // namespace

extern "C" {
void* malloc(size_t size) {
  Counted(size);
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) {
  Counted(n * size);
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) {
  Counted(size);
  return __libc_realloc(p, size);
}
// Page-aligned memory (the loader's ring, the read-ahead buffers) comes from these.
void* aligned_alloc(size_t alignment, size_t size) {
  Counted(size);
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) {
  Counted(size);
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  Counted(size);
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}

#include "operator_new_to_malloc.h"

namespace shardpack {
namespace {

using testing::TempDir;

// Allocations made while the epoch's batches are delivered: after StartEpoch (which
// builds the epoch's order) has returned, until the last batch is released (the
// end-of-epoch OutOfRange status, with its message, comes after).
uint64_t AllocationsInEpoch(Loader& loader, uint64_t epoch, uint64_t* samples) {
  EXPECT_TRUE(loader.StartEpoch(epoch).ok());
  const uint64_t before = g_allocations.load();
  *samples = 0;
  for (uint64_t i = 0; i < loader.batches_per_epoch(); ++i) {
    StatusOr<Batch> b = loader.Next();
    if (!b.ok()) break;
    *samples += static_cast<uint64_t>(b->size());
  }
  const uint64_t allocations = g_allocations.load() - before;
  EXPECT_EQ(loader.Next().status().code(), StatusCode::kOutOfRange);
  return allocations;
}

void ExpectNoAllocationsAfterWarmUp(const testing::TestDatasetSpec& spec, LoaderOptions o) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), spec);
  auto opened = Dataset::Open(dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<const Dataset> ds(std::move(opened).value());
  auto created = Loader::Create(ds, o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Loader& loader = **created;
  uint64_t samples = 0;
  for (uint64_t e = 0; e < 3; ++e) AllocationsInEpoch(loader, e, &samples);  // warm-up
  for (uint64_t e = 3; e < 6; ++e) {
    EXPECT_EQ(AllocationsInEpoch(loader, e, &samples), 0u) << "epoch " << e;
    EXPECT_EQ(samples, spec.samples);
  }
}

TEST(LoaderAllocationTest, TfrecordPassThroughAllocatesNothingPerBatch) {
  ExpectNoAllocationsAfterWarmUp(
      {.backend = Backend::kTfrecord,
       .samples = 200,
       .height = 16,
       .width = 12,
       .max_shard_records = 30},
      {.batch_size = 16, .shuffle = ShuffleMode::kGlobal, .num_threads = 2});
}

TEST(LoaderAllocationTest, LmdbBlockShuffleAllocatesNothingPerBatch) {
  ExpectNoAllocationsAfterWarmUp(
      {.backend = Backend::kLmdb,
       .samples = 200,
       .height = 16,
       .width = 12,
       .max_shard_records = 30},
      {.batch_size = 16, .shuffle = ShuffleMode::kBlock, .block_size = 8, .num_threads = 2});
}

// The read-ahead path: its planner, queues (io_uring and pread threads) and buffers reuse
// what the first batches sized.
TEST(LoaderAllocationTest, ReadAheadAllocatesNothingPerBatch) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    for (IoQueue queue : {IoQueue::kUring, IoQueue::kPread}) {
      LoaderOptions o;
      o.batch_size = 16;
      o.num_threads = 2;
      o.shuffle = ShuffleMode::kBlock;
      o.block_size = 8;
      o.io = IoPath::kReadAhead;
      o.io_queue = queue;
      o.io_reuse_page_cache = false;
      o.io_buffer_bytes = 1;  // one slot: its buffer is reused for every batch
      SCOPED_TRACE(std::string(backend == Backend::kTfrecord ? "tfrecord" : "lmdb") +
                   (queue == IoQueue::kUring ? ", io_uring" : ", pread"));
      ExpectNoAllocationsAfterWarmUp(
          {.backend = backend, .samples = 200, .height = 16, .width = 12, .max_shard_records = 30},
          o);
    }
  }
}

TEST(LoaderAllocationTest, TransformsAndNormalisationAllocateNothingPerBatch) {
  LoaderOptions o;
  o.batch_size = 8;
  o.num_threads = 2;
  o.output_height = 10;
  o.output_width = 10;
  o.transform = Transform::kRandomResizedCrop;
  o.random_flip = true;
  o.output_type = OutputType::kFloat16;
  ExpectNoAllocationsAfterWarmUp(
      {.samples = 96, .height = 20, .width = 17, .variable_size = true, .max_shard_records = 25},
      o);
}

// Encoded samples: each worker's JPEG decompressor is kept and its libjpeg memory is
// arenas kept from one image to the next (image/jpeg_memory.h), so a JPEG dataset decodes
// with no allocation per sample, straight into the ring and DCT-scaled through a transform.
TEST(LoaderAllocationTest, JpegSamplesDecodeWithoutAllocating) {
  for (bool transform : {false, true}) {
    LoaderOptions o;
    o.batch_size = 8;
    o.num_threads = 2;
    if (transform) {
      o.output_height = 8;
      o.output_width = 8;
      o.transform = Transform::kCenterCrop;
    }
    SCOPED_TRACE(transform ? "center crop, decoded at 1/2" : "no transform");
    ExpectNoAllocationsAfterWarmUp({.samples = 96,
                                    .height = 32,
                                    .width = 24,
                                    .max_shard_records = 25,
                                    .encoding = ImageEncoding::kJpeg},
                                   o);
  }
}

// A ring over the memory budget is refused before any of it is allocated: Create's
// largest allocation is far from one slot (8 x 1000 x 1000 x 3 = 24 MB, a manifest's claim
// over 32 x 32 images).
TEST(LoaderAllocationTest, ARingOverTheBudgetIsRefusedBeforeAnyOfItIsAllocated) {
  TempDir dir;
  testing::WriteTestDataset(
      dir.path(), {.samples = 8, .height = 32, .width = 32, .encoding = ImageEncoding::kJpeg});
  auto m = ReadManifest(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  m->image.height = 1000;
  m->image.width = 1000;
  testing::WriteFileOrDie(dir.path() + "/manifest.json", SerializeManifest(*m));
  auto opened = Dataset::Open(dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::shared_ptr<const Dataset> ds(std::move(opened).value());
  LoaderOptions o;
  o.batch_size = 8;
  o.num_threads = 2;
  o.max_memory_bytes = 16ull << 20;
  g_largest.store(0);
  auto refused = Loader::Create(ds, o);
  const uint64_t largest = g_largest.load();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_LT(largest, 1u << 20) << "the largest allocation of a refused Create";
  // The same loader with room for it allocates its slots.
  o.max_memory_bytes = 1ull << 30;
  g_largest.store(0);
  auto created = Loader::Create(ds, o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_GE(g_largest.load(), 8u * 1000 * 1000 * 3);
}

TEST(LoaderAllocationTest, TheCounterSeesAllocations) {
  const uint64_t before = g_allocations.load();
  auto* v = new std::vector<int>(100);
  // Both allocations escape, so that the compiler cannot elide them (GCC does at -O1).
  asm volatile("" : : "r"(v), "r"(v->data()) : "memory");
  delete v;
  EXPECT_GE(g_allocations.load() - before, 2u);
}

}  // namespace
}  // namespace shardpack
