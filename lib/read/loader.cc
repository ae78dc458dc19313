// The loader's ring. Batches are numbered within an epoch; batch b lives in slot
// (slot_base + b) % S (S = prefetch + 2), where each (re)start picks slot_base so that its
// first batch goes into the slot after the last one handed out: batches the consumer
// still holds from before (an epoch's last, typically) never sit where the new epoch's
// first ones go. Workers take chunks of consecutive samples of the lowest batch not
// yet handed out; the first chunk of a batch claims its slot, which must have been
// released by the consumer (and, on the GPU, its last host-to-device copy finished).
// The worker that finishes a batch's last chunk publishes it: on the GPU it queues the
// copy (and the normalisation kernel) on the slot's stream and records the slot's event;
// the consumer never waits on the host for a copy.
//
// Every sample is copied once, from the mapped shard (or the LMDB map) into its place in
// the slot: the checksums are computed over the record first, while it comes into cache,
// then the pixels are copied (or transformed) from there.
#include "shardpack/loader.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <sys/resource.h>

#include "cuda/cuda.h"
#include "image/image.h"
#include "io/mapped_range.h"
#include "io/memory_budget.h"
#include "io/system_files.h"
#include "read/dataset_access.h"
#include "read/io_choice.h"
#include "read/loader_options.h"
#include "read/normalize.h"
#include "read/populator.h"
#include "read/read_ahead.h"
#include "read/ring.h"
#include "read/sample_step.h"
#include "read/sampler.h"
#include "util/crc32c.h"

namespace shardpack {
namespace {

using Clock = std::chrono::steady_clock;

// LoaderOptions::huge_pages: threads mapping records ahead (each waits for one 2 MiB read
// at a time). bench/cold_read.cc, a cold epoch by number of threads, two rounds (Zen 3, a
// virtual disk): 2: 1.59-1.70 GB/s; 4: 1.82-1.98; 8: 1.78-1.98; 16: 1.76-1.96. 8 leaves
// room for a disk with more parallelism than this one.
constexpr int kPopulators = 8;

}  // namespace

// One ring slot (read/ring.h); Batch names it.
struct Batch::Slot : read::RingSlot {};

// How far ahead of the sample being filled the mapped path prefetches (Work).
constexpr int kPrefetchIndexAhead = 16;
constexpr int kPrefetchRecordAhead = 8;
constexpr int kPrefetchRestAhead = 4;

class Loader::Impl {
 public:
  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  read::OrderSpec spec;
  std::vector<uint64_t> shard_records;
  uint64_t shard_layout = 0;  // ShardLayoutDigest
  // Host path with normalisation: the tables, built once per loader (the step's).
  std::optional<read::HostNormalizer> host_normalizer;
  read::SampleStep step;
  read::SlotShape shape;  // every slot's
  int chunk = 1;

  std::vector<std::unique_ptr<Batch::Slot>> slots;
  read::LoaderMemory memory;  // what Create allocates
  struct UnitStart {
    uint64_t unit = 0;
    uint64_t first = 0;  // its first position to read
  };
  // A worker's own buffers: the samples to hint, gathered under the lock and hinted
  // outside it (each batch of `hint` ending at hint_batches[k]); one batch's indices; the
  // read-ahead units to start.
  struct WorkerScratch {
    read::SampleScratch sample;
    std::vector<uint64_t> hint, batch_indices;
    std::vector<size_t> hint_batches;
    std::vector<UnitStart> unit_starts;
    long major_faults = 0;  // the thread's count (getrusage) after its last chunk
  };
  // One per worker, sized in Create (the step's for the dataset's largest sample), so
  // that neither a sample nor a worker starting late allocates.
  std::vector<WorkerScratch> scratches;
  std::vector<std::thread> workers;

  mutable std::mutex mu;
  std::condition_variable work_cv;   // workers: a slot was freed, or the plan changed
  std::condition_variable ready_cv;  // consumer: a batch is ready
  std::condition_variable idle_cv;   // StartEpoch: no worker is inside a chunk
  bool stopping = false;
  uint64_t generation = 0;
  read::EpochPlan plan;
  uint64_t fill_batch = 0;  // the batch whose chunks are being handed out
  int fill_chunk = 0;       // its next chunk
  // Read-ahead: batches [fill_batch, hinted_batch) were handed to DatasetAccess::WillNeed (or to
  // the populator), and it is kept read_ahead_batches past the batch being claimed.
  uint64_t hinted_batch = 0;
  uint64_t read_ahead_batches = 0;
  // Mapped path: the shards' bytes; whether this epoch's scan for the blocks the page
  // cache lacks was made (NoteMajorFaults; cleared by Restart), and what the scans hinted.
  uint64_t stored_bytes = 0;
  std::atomic<bool> scanned{false};
  std::atomic<uint64_t> stat_found_missing{0};
  // LoaderOptions::huge_pages on: maps the hinted batches' records (null: MADV_WILLNEED).
  // Declared after `dataset`, destroyed before it.
  std::unique_ptr<read::Populator> populator;
  // The read-ahead path (null: the mapped path). The epoch's order is cut into units
  // (read::ReadUnits); units [.., started_unit) had their reads started, the next from
  // position started_position on.
  std::unique_ptr<read::ReadAhead> reads;
  uint64_t started_unit = 0;
  uint64_t started_position = 0;
  uint64_t unit_cap = 0;            // the most samples of a unit
  uint64_t read_slots = 0;          // units read ahead
  std::vector<uint64_t> unit_ends;  // the epoch's units, sized once
  std::string io_description;
  uint64_t deliver_batch = 0;  // the batch Next() returns next
  int active_chunks = 0;       // chunks being worked on
  bool failed = false;
  bool restarting = false;  // StartEpoch is waiting for the workers to leave

  // Statistics.
  Clock::time_point created = Clock::now();
  uint64_t stat_batches = 0;
  uint64_t stat_samples = 0;
  uint64_t stat_bytes = 0;
  uint64_t stat_ready_sum = 0;
  double stat_wait = 0;
  std::atomic<uint64_t> stat_skipped{0};

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    work_cv.notify_all();
    if (reads != nullptr) reads->Cancel();
    for (std::thread& t : workers) t.join();
    for (auto& slot : slots) {
      if (slot->copy_pending) (void)slot->copied.Synchronize();
    }
  }

  uint64_t slot_base = 0;  // batch b of the current plan lives in slot (slot_base + b) % S
  uint64_t next_slot = 0;  // the slot after the last batch handed out
  Batch::Slot& SlotOf(uint64_t batch) { return *slots[(slot_base + batch) % slots.size()]; }

  int ChunksOf(int size) const { return std::max(1, (size + chunk - 1) / chunk); }

  bool gpu() const { return shape.gpu(); }

  // The ring, allocated once: prefetch + 2 slots.
  Status AllocateRing() {
    for (int i = 0; i < options.prefetch + 2; ++i) {
      auto slot = std::make_unique<Batch::Slot>();
      SHARDPACK_RETURN_IF_ERROR(slot->Allocate(shape));
      slots.push_back(std::move(slot));
    }
    return Status::Ok();
  }

  // A chunk of a batch handed to a worker: samples [begin, end) of `slot`.
  struct Chunk {
    Batch::Slot* slot = nullptr;
    uint64_t generation = 0;
    int begin = 0;
    int end = 0;
    bool claim = false;  // the batch's first chunk: its slot was claimed with it
  };

  // Worker loop: take a chunk, fill it, publish the batch if it was the last chunk.
  void Work(WorkerScratch& worker) {
    if (gpu()) (void)cuda::SetDevice(options.device);
    step.WarmDecoder(&worker.sample);
    worker.major_faults = ThreadMajorFaults();
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      work_cv.wait(lock, [&] { return stopping || ChunkAvailable(); });
      if (stopping) return;
      const Chunk chunk_taken = TakeChunk(worker);
      lock.unlock();
      StartReadAhead(worker);
      int error_position = -1;
      const Status error = FillChunk(chunk_taken, worker, &error_position);
      lock.lock();
      FinishChunk(chunk_taken, error, error_position, lock);
    }
  }

  // Under the lock: whether a worker may take a chunk now.
  bool ChunkAvailable() {
    if (failed || restarting || fill_batch >= plan.num_batches()) return false;
    return fill_chunk > 0 || SlotOf(fill_batch).state == Batch::Slot::State::kFree;
  }

  // Under the lock: the next chunk. The first chunk of a batch claims its slot and gathers
  // into `worker` the reads or hints that go with the batch.
  Chunk TakeChunk(WorkerScratch& worker) {
    Chunk c;
    c.slot = &SlotOf(fill_batch);
    c.generation = generation;
    if (fill_chunk == 0) {
      c.claim = true;
      ClaimSlot(*c.slot);
      GatherReadAhead(worker);
    }
    c.begin = fill_chunk * chunk;
    c.end = std::min(c.slot->size, c.begin + chunk);
    if (++fill_chunk == ChunksOf(c.slot->size)) {
      fill_chunk = 0;
      ++fill_batch;
    }
    ++active_chunks;
    return c;
  }

  // Under the lock: `slot` takes batch fill_batch of the plan.
  void ClaimSlot(Batch::Slot& slot) {
    slot.state = Batch::Slot::State::kFilling;
    slot.generation = generation;
    slot.epoch = plan.epoch();
    slot.index = fill_batch;
    slot.valid = plan.Batch(fill_batch, &slot.indices);
    slot.size = static_cast<int>(slot.indices.size());
    slot.labels.assign(slot.indices.size(), 0);
    slot.bad.assign(slot.indices.size(), 0);
    slot.chunks_left = ChunksOf(slot.size);
    slot.status = Status::Ok();
    slot.status_position = -1;
  }

  // Under the lock, at a batch's first chunk: this batch and the next read_ahead_batches
  // have their records read in the background, all at once, while this one is copied.
  void GatherReadAhead(WorkerScratch& worker) {
    if (reads != nullptr) {
      CollectStarts(&worker.unit_starts);
      return;
    }
    if (read_ahead_batches == 0) return;
    const uint64_t until = std::min(plan.num_batches(), fill_batch + 1 + read_ahead_batches);
    for (uint64_t b = std::max(hinted_batch, fill_batch); b < until; ++b) {
      const int valid = plan.Batch(b, &worker.batch_indices);
      worker.hint.insert(worker.hint.end(), worker.batch_indices.begin(),
                         worker.batch_indices.begin() + valid);
      worker.hint_batches.push_back(worker.hint.size());
    }
    hinted_batch = std::max(hinted_batch, until);
  }

  // Outside the lock: starts what GatherReadAhead gathered.
  void StartReadAhead(WorkerScratch& worker) {
    if (!worker.unit_starts.empty()) {
      StartReads(worker.unit_starts);
    } else if (!worker.hint.empty()) {
      HintBatches(worker.hint, worker.hint_batches);
    }
    worker.unit_starts.clear();
    worker.hint.clear();
    worker.hint_batches.clear();
  }

  // Outside the lock: the chunk's samples into their slot. The error that stopped it, at
  // `*position` (OK: none; a kSkip corruption is counted, not returned).
  Status FillChunk(const Chunk& c, WorkerScratch& worker, int* position) {
    Batch::Slot& slot = *c.slot;
    Status error;
    // The host buffer is rewritten only once the previous copy out of it is done.
    if (c.claim && slot.copy_pending) {
      error = slot.copied.Synchronize();
      slot.copy_pending = false;
    }
    // Read-ahead: each sample's record is done with once copied (its unit's slot may then
    // take the next unit, even before the batch is whole); on an error, the rest.
    int finished = c.begin;
    if (!error.ok()) *position = c.begin;
    PrefetchFirst(slot, c.begin, c.end);
    for (int i = c.begin; error.ok() && i < c.end; ++i) {
      PrefetchAhead(slot, i, c.end);
      Status s = FillSample(slot, i, worker);
      if (reads != nullptr) FinishReads(slot, i, finished = i + 1, worker.unit_starts);
      if (s.ok()) continue;
      if (s.code() == StatusCode::kCorruption && options.on_corrupt == OnCorrupt::kSkip) {
        slot.bad[i] = 1;
        stat_skipped.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      error = s;
      *position = i;
    }
    // The samples' non-temporal stores are ordered before the batch's publication
    // (read/sample_step.h).
    crc32c::StoreFence();
    if (reads != nullptr) FinishReads(slot, finished, c.end, worker.unit_starts);
    if (reads == nullptr && read_ahead_batches > 0) NoteMajorFaults(worker);
    return error;
  }

  // Under the lock: the chunk's error joins its batch's (the first by position); the
  // worker that finishes a batch's last chunk publishes it.
  void FinishChunk(const Chunk& c, const Status& error, int position,
                   std::unique_lock<std::mutex>& lock) {
    Batch::Slot* slot = c.slot;
    if (!error.ok() && (slot->status_position < 0 || position < slot->status_position)) {
      slot->status = error;
      slot->status_position = position;
    }
    const bool last = --slot->chunks_left == 0;
    if (last && c.generation == generation) {
      // Still counted as active: StartEpoch waits until the publication is over.
      lock.unlock();
      Status published = slot->status.ok() ? read::PublishSlot(shape, *slot) : Status::Ok();
      lock.lock();
      if (!published.ok() && slot->status.ok()) slot->status = published;
      if (c.generation == generation) {
        slot->state = Batch::Slot::State::kReady;
        if (!slot->status.ok()) failed = true;
      }
      ready_cv.notify_all();
    }
    if (--active_chunks == 0) idle_cv.notify_all();
  }

  // Mapped path: the index line of the sample 16 ahead, the first bytes of the one 8
  // ahead (whose index line came 8 samples ago), the rest of the one 4 ahead, so that the
  // memory's latency of a random record is waited for while earlier samples are copied
  // (docs/LOADER.md, "Small samples").
  // The chunk's first samples, which no earlier sample of it prefetched: their index
  // lines, then their records' first bytes (each waits for its index line; they wait
  // together, not one by one as a copy would).
  void PrefetchFirst(const Batch::Slot& slot, int begin, int end) const {
    if (reads != nullptr) return;
    const read::DatasetAccess access(*dataset);
    for (int i = begin; i < std::min(end, begin + kPrefetchIndexAhead); ++i) {
      access.Prefetch(slot.indices[i], 0);
    }
    for (int i = begin; i < std::min(end, begin + kPrefetchRecordAhead); ++i) {
      access.Prefetch(slot.indices[i], 1);
    }
    for (int i = begin; i < std::min(end, begin + kPrefetchRestAhead); ++i) {
      access.Prefetch(slot.indices[i], 2);
    }
  }

  void PrefetchAhead(const Batch::Slot& slot, int i, int end) const {
    if (reads != nullptr) return;
    if (i + kPrefetchIndexAhead < end)
      read::DatasetAccess(*dataset).Prefetch(slot.indices[i + kPrefetchIndexAhead], 0);
    if (i + kPrefetchRecordAhead < end) {
      read::DatasetAccess(*dataset).Prefetch(slot.indices[i + kPrefetchRecordAhead], 1);
    }
    if (i + kPrefetchRestAhead < end) {
      read::DatasetAccess(*dataset).Prefetch(slot.indices[i + kPrefetchRestAhead], 2);
    }
  }

  // Sample i of the slot into its place in the host buffer (read::SampleStep).
  Status FillSample(Batch::Slot& slot, int i, WorkerScratch& worker) {
    read::SampleSource source;
    source.index = slot.indices[i];
    source.epoch = slot.epoch;
    // Read ahead: every sample but a kPad batch's fill (the rank's first samples again).
    if (reads != nullptr && i < slot.valid) {
      source.reads = reads.get();
      source.position = slot.index * static_cast<uint64_t>(options.batch_size) + i;
    }
    read::SampleTarget target;
    target.pixels = slot.host + static_cast<size_t>(i) * shape.sample_bytes;
    if (shape.host_normalizes()) {
      target.normalized =
          slot.host_out_memory.get() + static_cast<size_t>(i) * shape.out_sample_bytes();
    }
    target.label = &slot.labels[i];
    return step.Run(source, target, &worker.sample);
  }

  // Read-ahead path, under the lock: the units whose reads may start now, in order (a
  // unit's read slot is free once the unit read_slots before it is done), reserved.
  void CollectStarts(std::vector<UnitStart>* starts) {
    while (started_unit < reads->num_units() && reads->Reserve(started_unit)) {
      starts->push_back({started_unit, started_position});
      started_position = reads->UnitEnd(started_unit);
      ++started_unit;
    }
  }

  // Outside the lock, while counted as an active worker: samples [from, to) of the slot's
  // batch are done with their records (kPad fill has none). A unit that this completes
  // frees its read slot: the units that may then start are started.
  void FinishReads(const Batch::Slot& slot, int from, int to, std::vector<UnitStart>& starts) {
    to = std::min(to, slot.valid);
    if (from >= to) return;
    const uint64_t first = slot.index * static_cast<uint64_t>(options.batch_size) + from;
    if (!reads->Finish(first, static_cast<uint64_t>(to - from))) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      CollectStarts(&starts);
    }
    StartReads(starts);
    starts.clear();
  }

  // Outside the lock, while counted as an active worker (the plan cannot change): queues
  // the reads of the units CollectStarts gathered.
  void StartReads(const std::vector<UnitStart>& starts) {
    const std::vector<uint64_t>& order = plan.order();
    for (const UnitStart& u : starts) {
      const uint64_t end = reads->UnitEnd(u.unit);
      reads->Start(u.unit, u.first,
                   std::span<const uint64_t>(order.data() + u.first, end - u.first));
    }
  }

  // Read-ahead of the batches in `hint` (each ending at hint_batches[k]). A batch found in
  // memory already (DatasetAccess::Resident's probe) is left alone: in the page cache a hint per
  // record costs a quarter of the loader's throughput and buys nothing.
  void HintBatches(const std::vector<uint64_t>& hint, const std::vector<size_t>& ends) const {
    size_t begin = 0;
    for (const size_t end : ends) {
      const std::span<const uint64_t> batch(hint.data() + begin, end - begin);
      if (!read::DatasetAccess(*dataset).Resident(batch)) {
        if (populator != nullptr) {
          populator->Add(batch);
        } else {
          read::DatasetAccess(*dataset).WillNeed(batch);
        }
      }
      begin = end;
    }
  }

  // Mapped path, after a chunk: a worker that waited for the disk (a major fault) although
  // the page cache holds the dataset (the automatic choice's premise) found a record
  // outside it, and DatasetAccess::Resident's probes of 8 records a batch rarely see a few
  // missing among many. The first such wait of an epoch scans the dataset for the blocks
  // it lacks and reads them ahead, all at once, if they are at most an eighth of it
  // (docs/LOADER.md, "A cache that lacks a few blocks").
  void NoteMajorFaults(WorkerScratch& worker) {
    const long faults = ThreadMajorFaults();
    const bool waited = faults > worker.major_faults;
    worker.major_faults = faults;
    if (!waited || scanned.exchange(true, std::memory_order_relaxed)) return;
    stat_found_missing.fetch_add(read::DatasetAccess(*dataset).WillNeedMissing(stored_bytes / 8),
                                 std::memory_order_relaxed);
  }

  static long ThreadMajorFaults() {
    rusage usage{};
    return ::getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_majflt : 0;
  }

  // Takes every slot back from the workers and points them at (epoch, batch).
  void Restart(uint64_t epoch, uint64_t batch, std::unique_lock<std::mutex>& lock) {
    ++generation;
    restarting = true;
    if (reads != nullptr) reads->Cancel();  // no worker waits for a record any more
    idle_cv.wait(lock, [&] { return active_chunks == 0; });
    restarting = false;
    if (reads != nullptr) reads->Reset();  // no read in flight into a buffer it reuses
    plan = read::EpochPlan::Make(spec, shard_records, epoch);
    if (reads != nullptr) {
      read::ReadUnits(plan.window_ends(), plan.read_positions(),
                      static_cast<uint64_t>(options.batch_size), unit_cap, &unit_ends);
      reads->SetUnits(unit_ends);
      started_position = std::min(plan.read_positions(), batch * options.batch_size);
      started_unit = reads->UnitOf(started_position);
    }
    const uint64_t n = slots.size();
    slot_base = (next_slot + n - batch % n) % n;
    for (auto& slot : slots) {
      if (slot->state == Batch::Slot::State::kFilling ||
          slot->state == Batch::Slot::State::kReady) {
        slot->state = Batch::Slot::State::kFree;
      }
    }
    fill_batch = batch;
    fill_chunk = 0;
    hinted_batch = batch;
    scanned.store(false, std::memory_order_relaxed);
    if (populator != nullptr) populator->Clear();
    deliver_batch = batch;
    failed = false;
    work_cv.notify_all();
  }

  // `ordered`: the reuse waits for `consumer_stream`'s work queued so far.
  void Release(Batch::Slot* slot, bool ordered, void* consumer_stream) {
    if (gpu() && ordered) {
      // A failed record leaves the next copy unordered; it cannot fail for a valid
      // stream and event, and the device's own error then surfaces at that copy.
      if (slot->consumer_done.Record(consumer_stream).ok()) slot->consumer_event_pending = true;
    }
    slot->consumer_waited = false;
    slot->consumer_stream = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu);
      slot->state = Batch::Slot::State::kFree;
    }
    work_cv.notify_all();
  }
};

// ---- Batch ----

Batch::Batch(Loader* loader, Slot* slot) : loader_(loader), slot_(slot) {}
Batch::Batch(Batch&& other) noexcept : loader_(other.loader_), slot_(other.slot_) {
  other.loader_ = nullptr;
  other.slot_ = nullptr;
}
Batch& Batch::operator=(Batch&& other) noexcept {
  if (this != &other) {
    Release();
    loader_ = other.loader_;
    slot_ = other.slot_;
    other.loader_ = nullptr;
    other.slot_ = nullptr;
  }
  return *this;
}
Batch::~Batch() { Release(); }

void Batch::Release() {
  if (slot_ == nullptr) return;
  loader_->impl_->Release(slot_, slot_->consumer_waited, slot_->consumer_stream);
  slot_ = nullptr;
  loader_ = nullptr;
}

void Batch::Release(void* consumer_stream) {
  if (slot_ == nullptr) return;
  loader_->impl_->Release(slot_, /*ordered=*/true, consumer_stream);
  slot_ = nullptr;
  loader_ = nullptr;
}

uint64_t Batch::epoch() const { return slot_->epoch; }
uint64_t Batch::index() const { return slot_->index; }
int Batch::size() const { return slot_->size; }
int Batch::valid() const { return slot_->valid; }
int Batch::height() const { return loader_->impl_->shape.height; }
int Batch::width() const { return loader_->impl_->shape.width; }
int Batch::channels() const { return loader_->impl_->shape.channels; }
OutputType Batch::type() const { return loader_->impl_->options.output_type; }

const void* Batch::host_data() const {
  const Loader::Impl& impl = *loader_->impl_;
  if (impl.shape.host_normalizes()) return slot_->host_out_memory.get();
  return slot_->host;
}

size_t Batch::host_bytes() const {
  const Loader::Impl& impl = *loader_->impl_;
  const size_t sample =
      impl.shape.host_normalizes() ? impl.shape.out_sample_bytes() : impl.shape.sample_bytes;
  return static_cast<size_t>(slot_->size) * sample;
}

std::span<const int64_t> Batch::labels() const { return slot_->labels; }
std::span<const uint64_t> Batch::indices() const { return slot_->indices; }

void* Batch::device_data() const {
  const Loader::Impl& impl = *loader_->impl_;
  if (!impl.gpu()) return nullptr;
  return impl.shape.normalize() ? slot_->device_out.data() : slot_->device_in.data();
}
void* Batch::cuda_stream() const { return loader_->impl_->gpu() ? slot_->stream.get() : nullptr; }
void* Batch::cuda_event() const { return loader_->impl_->gpu() ? slot_->copied.get() : nullptr; }

Status Batch::WaitOn(void* consumer_stream) {
  if (slot_ == nullptr) return FailedPreconditionError("batch: already released");
  if (!loader_->impl_->gpu()) return Status::Ok();
  slot_->consumer_waited = true;
  slot_->consumer_stream = consumer_stream;
  if (!slot_->copy_pending) return Status::Ok();
  return cuda::StreamWaitEvent(consumer_stream, slot_->copied.get());
}

// ---- Loader ----

namespace {

// What each sample becomes: the order's inputs, the transform and the output shape, the
// normalisation, and the per-sample step that does all of it.
Status SetUpSamples(Loader::Impl& impl) {
  const LoaderOptions& o = impl.options;
  const Manifest& manifest = impl.dataset->manifest();
  impl.spec = read::OrderSpecOf(o);
  for (const ShardEntry& e : manifest.shards) impl.shard_records.push_back(e.records);
  impl.shard_layout = ShardLayoutDigest(manifest);
  SHARDPACK_ASSIGN_OR_RETURN(read::SampleTransformer transformer,
                             read::SampleTransformer::Create(o, manifest.image));
  read::SlotShape& shape = impl.shape;
  shape.batch_size = o.batch_size;
  shape.height = transformer.out_height();
  shape.width = transformer.out_width();
  shape.channels = transformer.channels();
  shape.sample_bytes = static_cast<size_t>(shape.height) * static_cast<size_t>(shape.width) *
                       static_cast<size_t>(shape.channels);
  shape.output_type = o.output_type;
  shape.device = o.device;
  if (shape.normalize()) {
    SHARDPACK_RETURN_IF_ERROR(read::CheckNormalizeStatistics(o.mean, o.std).WithPrefix("loader"));
    shape.norm = read::MakeNormalizeParams(o.mean, o.std);
    if (!shape.gpu()) {
      impl.host_normalizer.emplace(shape.norm, o.output_type == OutputType::kFloat16
                                                   ? read::NormalizeType::kFloat16
                                                   : read::NormalizeType::kFloat32);
    }
  }
  if (shape.gpu()) SHARDPACK_RETURN_IF_ERROR(cuda::CheckDevice(o.device));
  impl.step = read::SampleStep(impl.dataset.get(), o, std::move(transformer),
                               impl.host_normalizer ? &*impl.host_normalizer : nullptr);
  return Status::Ok();
}

// The I/O path PlanIo chose: the read-ahead's queues and buffers, or on the mapped path
// the hints ahead, by 4 KiB hints or by threads populating 2 MiB pages.
Status SetUpIo(Loader::Impl& impl, const read::IoPlan& io, int threads) {
  impl.stored_bytes = io.stored_bytes;
  impl.read_ahead_batches = io.read_ahead_batches;
  impl.unit_cap = io.unit_cap;
  impl.read_slots = io.read_slots;
  if (io.read_ahead) {
    SHARDPACK_ASSIGN_OR_RETURN(impl.reads,
                               read::ReadAhead::Create(*impl.dataset, io.read_ahead_options));
    impl.io_description = "read-ahead: " + impl.reads->Describe() + " (" + io.why + ")";
    return Status::Ok();
  }
  impl.io_description = "mapped (" + io.why + ")";
  if (impl.read_ahead_batches == 0) return Status::Ok();
  std::string obstacle;
  if (impl.options.huge_pages == HugePages::kAuto) {
    obstacle = io::PopulateAndHugePagesWork()
                   ? io::HostReclaimsFreeMemory()
                   : "this kernel lacks MADV_POPULATE_READ or transparent huge pages";
  }
  const read::PagesChoice pages = read::ChoosePages(impl.options.huge_pages, io.fit, obstacle);
  if (pages.huge) {
    // The populating threads read through LMDB's transactions too.
    SHARDPACK_RETURN_IF_ERROR(impl.dataset->ReserveReaders(threads + kPopulators));
    read::DatasetAccess(*impl.dataset).PreferHugePages();
    impl.populator = std::make_unique<read::Populator>(impl.dataset.get(), kPopulators);
    // What the hints may hold at once: the batches ahead, and the one claimed.
    impl.populator->Reserve(static_cast<size_t>(impl.read_ahead_batches + 1) *
                            static_cast<size_t>(impl.options.batch_size));
  }
  impl.io_description += std::string(pages.huge ? "; uncached pages read 2 MiB at a time by " +
                                                      std::to_string(kPopulators) + " threads"
                                                : "; uncached pages hinted 4 KiB at a time") +
                         " (" + pages.why + ")";
  return Status::Ok();
}

// The workers, each with its scratch sized now, so that none allocates later.
void StartWorkers(Loader::Impl& impl, int threads) {
  const size_t batch = static_cast<size_t>(impl.options.batch_size);
  const size_t hinted = static_cast<size_t>(impl.read_ahead_batches + 1);
  impl.scratches.resize(static_cast<size_t>(threads));
  for (Loader::Impl::WorkerScratch& worker : impl.scratches) {
    impl.step.Reserve(&worker.sample);
    worker.hint.reserve(hinted * batch);
    worker.batch_indices.reserve(batch);
    worker.hint_batches.reserve(hinted);
    worker.unit_starts.reserve(static_cast<size_t>(impl.read_slots));
  }
  Loader::Impl* raw = &impl;
  for (int i = 0; i < threads; ++i) {
    raw->workers.emplace_back([raw, i] { raw->Work(raw->scratches[static_cast<size_t>(i)]); });
  }
}

}  // namespace

StatusOr<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const Dataset> dataset,
                                                 const LoaderOptions& options,
                                                 const LoaderState* state) {
  if (dataset == nullptr) return InvalidArgumentError("loader: no dataset");
  SHARDPACK_RETURN_IF_ERROR(read::CheckLoaderOptions(options));
  auto impl = std::make_unique<Impl>();
  impl->dataset = std::move(dataset);
  impl->options = options;
  SHARDPACK_RETURN_IF_ERROR(SetUpSamples(*impl));
  const Manifest& manifest = impl->dataset->manifest();
  if (state != nullptr) {
    SHARDPACK_RETURN_IF_ERROR(read::CheckResumeState(*state, options, manifest, impl->spec));
  }
  const int threads = read::WorkerThreads(options);
  impl->chunk = std::clamp(options.batch_size / (2 * threads), 1, 64);
  SHARDPACK_RETURN_IF_ERROR(impl->dataset->ReserveReaders(threads));

  // Everything allocated from here on, checked against the budget first (loader.h,
  // "Memory"): the largest terms come from the output shape, which without a transform is
  // the dataset's claim.
  const read::IoPlan io = read::PlanIo(options, manifest);
  impl->memory =
      read::MemoryOf(*impl->dataset, options, impl->shape, threads, impl->step.ScratchBytes(), io);
  SHARDPACK_RETURN_IF_ERROR(
      read::CheckLoaderMemory(impl->memory, options, impl->shape, threads, manifest.image));
  SHARDPACK_RETURN_IF_ERROR(SetUpIo(*impl, io, threads));
  SHARDPACK_RETURN_IF_ERROR(impl->AllocateRing());
  {
    std::unique_lock<std::mutex> lock(impl->mu);
    impl->Restart(state != nullptr ? state->epoch : 0, state != nullptr ? state->next_batch : 0,
                  lock);
  }
  StartWorkers(*impl, threads);
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() = default;

StatusOr<Batch> Loader::Next() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  if (m.deliver_batch >= m.plan.num_batches()) {
    return OutOfRangeError("loader: epoch " + std::to_string(m.plan.epoch()) + " is done (" +
                           std::to_string(m.plan.num_batches()) + " batches)");
  }
  Batch::Slot& slot = m.SlotOf(m.deliver_batch);
  if (slot.state == Batch::Slot::State::kHeld) {
    return FailedPreconditionError("loader: batch " + std::to_string(m.deliver_batch) +
                                   " needs the ring slot still held " + "by batch " +
                                   std::to_string(slot.index) + ": release batches (the ring has " +
                                   std::to_string(m.slots.size()) + " slots)");
  }
  uint64_t ready = 0;
  for (auto& s : m.slots) ready += s->state == Batch::Slot::State::kReady ? 1 : 0;
  m.stat_ready_sum += ready;
  const auto t0 = Clock::now();
  m.ready_cv.wait(lock, [&] {
    return slot.state == Batch::Slot::State::kReady && slot.generation == m.generation &&
           slot.index == m.deliver_batch;
  });
  m.stat_wait += std::chrono::duration<double>(Clock::now() - t0).count();
  if (!slot.status.ok()) {
    m.failed = true;
    return slot.status;
  }
  slot.state = Batch::Slot::State::kHeld;
  ++m.deliver_batch;
  m.next_slot = (m.slot_base + m.deliver_batch) % m.slots.size();
  ++m.stat_batches;
  m.stat_samples += static_cast<uint64_t>(slot.size);
  m.stat_bytes += static_cast<uint64_t>(slot.size) * m.shape.sample_bytes;
  return Batch(this, &slot);
}

bool Loader::WaitReady(std::chrono::milliseconds timeout) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.mu);
  if (m.deliver_batch >= m.plan.num_batches()) return true;
  Batch::Slot& slot = m.SlotOf(m.deliver_batch);
  if (slot.state == Batch::Slot::State::kHeld) return true;
  const auto t0 = Clock::now();
  const bool ready = m.ready_cv.wait_for(lock, timeout, [&] {
    return slot.state == Batch::Slot::State::kReady && slot.generation == m.generation &&
           slot.index == m.deliver_batch;
  });
  m.stat_wait += std::chrono::duration<double>(Clock::now() - t0).count();
  return ready;
}

Status Loader::StartEpoch(uint64_t epoch) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  impl_->Restart(epoch, 0, lock);
  return Status::Ok();
}

LoaderState Loader::state() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  const LoaderOptions& o = impl_->options;
  LoaderState s;
  s.epoch = impl_->plan.epoch();
  s.next_batch = impl_->deliver_batch;
  s.seed = o.seed;
  s.num_samples = impl_->dataset->size();
  s.rank = o.rank;
  s.world_size = o.world_size;
  s.batch_size = o.batch_size;
  s.shuffle = o.shuffle;
  s.tail = o.tail;
  s.block_size = o.block_size;
  s.block_window = o.block_window;
  s.shard_layout = impl_->shard_layout;
  return s;
}

LoaderStats Loader::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  LoaderStats s;
  s.batches = impl_->stat_batches;
  s.samples = impl_->stat_samples;
  s.bytes = impl_->stat_bytes;
  s.skipped_corrupt = impl_->stat_skipped.load();
  s.seconds = std::chrono::duration<double>(Clock::now() - impl_->created).count();
  s.wait_seconds = impl_->stat_wait;
  s.mean_ready_batches =
      s.batches > 0 ? static_cast<double>(impl_->stat_ready_sum) / static_cast<double>(s.batches)
                    : 0.0;
  s.io = impl_->io_description;
  s.bytes_read = impl_->reads != nullptr ? impl_->reads->bytes_read() : 0;
  s.batches_from_page_cache = impl_->reads != nullptr ? impl_->reads->cached_units() : 0;
  s.bytes_found_missing = impl_->stat_found_missing.load();
  return s;
}

uint64_t Loader::batches_per_epoch() const {
  return read::BatchesPerEpoch(impl_->spec, impl_->dataset->size());
}

const LoaderOptions& Loader::options() const { return impl_->options; }

std::vector<uint64_t> Loader::EpochOrder(uint64_t epoch) const {
  return read::EpochPlan::Make(impl_->spec, impl_->shard_records, epoch).order();
}

}  // namespace shardpack
