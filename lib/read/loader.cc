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
#include "read/io_choice.h"
#include "read/normalize.h"
#include "read/populator.h"
#include "read/read_ahead.h"
#include "read/sampler.h"
#include "read/shard_reader.h"
#include "read/transform.h"
#include "util/coding.h"
#include "util/hash.h"

namespace shardpack {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kPageSize = 4096;
// LoaderOptions::io_buffer_bytes = 0: 384 MiB, or three windows of a block shuffle (at
// most 1 GiB).
constexpr uint64_t kDefaultIoBufferBytes = 384ull << 20;
constexpr uint64_t kMaxAutomaticIoBufferBytes = 1ull << 30;
// LoaderOptions::huge_pages: threads mapping records ahead (each waits for one 2 MiB read
// at a time). bench/cold_read.cc, a cold epoch by number of threads, two rounds (Zen 3, a
// virtual disk): 2: 1.59-1.70 GB/s; 4: 1.82-1.98; 8: 1.78-1.98; 16: 1.76-1.96. 8 leaves
// room for a disk with more parallelism than this one.
constexpr int kPopulators = 8;

size_t RoundUpToPage(size_t n) { return (n + kPageSize - 1) / kPageSize * kPageSize; }

// a x b and a + b, or UINT64_MAX past it: the memory check must see a huge need as huge.
uint64_t Times(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(p);
}
uint64_t Plus(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
// What AllocateAligned takes for `n` bytes.
uint64_t PageRounded(uint64_t n) {
  return n >= UINT64_MAX - kPageSize ? UINT64_MAX : RoundUpToPage(std::max<uint64_t>(n, 1));
}

// Page-aligned host memory for the host path, allocated once per slot.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

StatusOr<AlignedBuffer> AllocateAligned(size_t bytes) {
  void* p = std::aligned_alloc(kPageSize, RoundUpToPage(std::max<size_t>(bytes, 1)));
  if (p == nullptr) {
    return ResourceExhaustedError("loader: cannot allocate " + std::to_string(bytes) +
                                  " bytes for a batch slot");
  }
  // Backed now: the first epoch would otherwise take a page fault per 4 KiB of the ring.
  io::PrefaultWrite(p, RoundUpToPage(std::max<size_t>(bytes, 1)));
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

const char* ShuffleName(ShuffleMode m) {
  switch (m) {
    case ShuffleMode::kNone:
      return "none";
    case ShuffleMode::kGlobal:
      return "global";
    case ShuffleMode::kBlock:
      return "block";
  }
  return "?";
}

size_t OutputElementBytes(OutputType t) {
  switch (t) {
    case OutputType::kUint8:
      return 1;
    case OutputType::kFloat32:
      return 4;
    case OutputType::kFloat16:
      return 2;
  }
  return 1;
}

read::NormalizeType NormalizeTypeOf(OutputType t) {
  return t == OutputType::kFloat16 ? read::NormalizeType::kFloat16 : read::NormalizeType::kFloat32;
}

}  // namespace

// One ring slot. Its buffers are allocated once, in Create.
struct Batch::Slot {
  enum class State { kFree, kFilling, kReady, kHeld };

  // Buffers.
  uint8_t* host = nullptr;  // N x H x W x C uint8
  AlignedBuffer host_memory;
  cuda::PinnedBuffer pinned;
  AlignedBuffer host_out_memory;  // host path with normalisation: N x C x H x W floats
  cuda::DeviceBuffer device_in;   // GPU: uint8 batch
  cuda::DeviceBuffer device_out;  // GPU with normalisation: floats
  cuda::Stream stream;
  cuda::Event copied;         // recorded after the copy (and kernel) of each fill
  cuda::Event consumer_done;  // recorded on the consumer's stream at release
  bool copy_pending = false;
  bool consumer_event_pending = false;
  // The stream the consumer last passed to WaitOn for the batch held now.
  bool consumer_waited = false;
  void* consumer_stream = nullptr;

  // The batch it holds (guarded by the loader's mutex while kFilling).
  State state = State::kFree;
  uint64_t generation = 0;
  uint64_t epoch = 0;
  uint64_t index = 0;
  int size = 0;   // samples planned
  int valid = 0;  // of which not kPad fill
  std::vector<uint64_t> indices;
  std::vector<int64_t> labels;
  std::vector<uint8_t> bad;  // kSkip: sample i was left out
  int chunks_left = 0;
  Status status;  // the first error, by sample position
  int status_position = -1;
};

// How far ahead of the sample being filled the mapped path prefetches (Work).
constexpr int kPrefetchIndexAhead = 16;
constexpr int kPrefetchRecordAhead = 8;

class Loader::Impl {
 public:
  std::shared_ptr<const Dataset> dataset;
  LoaderOptions options;
  read::OrderSpec spec;
  std::vector<uint64_t> shard_records;
  uint64_t shard_layout = 0;  // ShardLayoutDigest
  read::SampleTransformer transformer;
  size_t sample_bytes = 0;   // uint8 HWC bytes of one output sample
  uint64_t num_classes = 0;  // the manifest's: labels are 0..num_classes - 1
  bool gpu = false;
  bool normalize = false;
  read::NormalizeParams norm;
  // Host path with normalisation: the tables, built once per loader.
  std::optional<read::HostNormalizer> host_normalizer;
  int chunk = 1;

  std::vector<std::unique_ptr<Batch::Slot>> slots;
  // What Create allocates, by the terms of loader.h's "Memory".
  struct Memory {
    uint64_t ring = 0, workers = 0, read_ahead = 0, rest = 0;
    uint64_t total() const { return Plus(Plus(ring, workers), Plus(read_ahead, rest)); }
  } memory;
  struct UnitStart {
    uint64_t unit = 0;
    uint64_t first = 0;  // its first position to read
  };
  // A worker's own buffers: the samples to hint, gathered under the lock and hinted
  // outside it (each batch of `hint` ending at hint_batches[k]); one batch's indices; the
  // read-ahead units to start.
  struct WorkerScratch {
    read::TransformScratch transform;
    // An encoded image's pixels, decoded here before a transform reads them (sized in
    // Create for the dataset's largest sample).
    std::vector<uint8_t> decoded;
    std::vector<uint64_t> hint, batch_indices;
    std::vector<size_t> hint_batches;
    std::vector<UnitStart> unit_starts;
    long major_faults = 0;  // the thread's count (getrusage) after its last chunk
  };
  // One per worker, sized in Create (the transform's for the dataset's largest sample),
  // so that neither a sample nor a worker starting late allocates.
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
  // Read-ahead: batches [fill_batch, hinted_batch) were handed to Dataset::WillNeed (or to
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

  // Worker loop: take a chunk, fill it, publish the batch if it was the last chunk.
  // Before its first chunk, a worker of a dataset of encoded images decodes one of them,
  // so that its decoder (libjpeg's decompressor and its arenas, kept per thread) exists
  // before the first epoch: however the chunks fall between the workers, none allocates
  // for its first image in the middle of an epoch. A sample that does not read or decode
  // is left to the epoch that reads it to report.
  void WarmDecoder(WorkerScratch& worker) {
    if (dataset->manifest().image.encoding == ImageEncoding::kRaw) return;
    const uint64_t tries = std::min<uint64_t>(dataset->size(), 8);
    for (uint64_t index = 0; index < tries; ++index) {
      SampleView view;
      if (!dataset->Get(index, &view, /*verify_crc=*/false).ok() ||
          view.encoding == ImageEncoding::kRaw) {
        continue;
      }
      const size_t bytes = static_cast<size_t>(view.height) * static_cast<size_t>(view.width) *
                           static_cast<size_t>(view.channels);
      std::vector<uint8_t> own;
      uint8_t* dst = worker.decoded.data();
      if (worker.decoded.size() < bytes) {
        own.resize(bytes);
        dst = own.data();
      }
      image::DecodeExact(view.encoded.data(), view.encoded.size(), view.height, view.width,
                         view.channels, dst)
          .IgnoreError();
      return;
    }
  }

  void Work(WorkerScratch& worker) {
    if (gpu) (void)cuda::SetDevice(options.device);
    WarmDecoder(worker);
    worker.major_faults = ThreadMajorFaults();
    std::vector<uint64_t>& hint = worker.hint;
    std::vector<uint64_t>& batch_indices = worker.batch_indices;
    std::vector<size_t>& hint_batches = worker.hint_batches;
    std::vector<UnitStart>& unit_starts = worker.unit_starts;
    std::unique_lock<std::mutex> lock(mu);
    while (true) {
      Batch::Slot* slot = nullptr;
      uint64_t gen = 0;
      int begin = 0;
      int end = 0;
      bool claim = false;
      work_cv.wait(lock, [&] {
        if (stopping) return true;
        if (failed || restarting || fill_batch >= plan.num_batches()) return false;
        if (fill_chunk > 0) return true;
        Batch::Slot& s = SlotOf(fill_batch);
        return s.state == Batch::Slot::State::kFree;
      });
      if (stopping) return;
      slot = &SlotOf(fill_batch);
      gen = generation;
      if (fill_chunk == 0) {
        claim = true;
        slot->state = Batch::Slot::State::kFilling;
        slot->generation = gen;
        slot->epoch = plan.epoch();
        slot->index = fill_batch;
        slot->valid = plan.Batch(fill_batch, &slot->indices);
        slot->size = static_cast<int>(slot->indices.size());
        slot->labels.assign(slot->indices.size(), 0);
        slot->bad.assign(slot->indices.size(), 0);
        slot->chunks_left = ChunksOf(slot->size);
        slot->status = Status::Ok();
        slot->status_position = -1;
        // This batch and the next read_ahead_batches: their records are read in the
        // background, all at once, while this one is copied.
        if (reads != nullptr) {
          CollectStarts(&unit_starts);
        } else if (read_ahead_batches > 0) {
          const uint64_t until = std::min(plan.num_batches(), fill_batch + 1 + read_ahead_batches);
          for (uint64_t b = std::max(hinted_batch, fill_batch); b < until; ++b) {
            const int valid = plan.Batch(b, &batch_indices);
            hint.insert(hint.end(), batch_indices.begin(), batch_indices.begin() + valid);
            hint_batches.push_back(hint.size());
          }
          hinted_batch = std::max(hinted_batch, until);
        }
      }
      const int chunks = ChunksOf(slot->size);
      begin = fill_chunk * chunk;
      end = std::min(slot->size, begin + chunk);
      if (++fill_chunk == chunks) {
        fill_chunk = 0;
        ++fill_batch;
      }
      ++active_chunks;
      lock.unlock();
      if (!unit_starts.empty()) {
        StartReads(unit_starts);
      } else if (!hint.empty()) {
        HintBatches(hint, hint_batches);
      }
      unit_starts.clear();
      hint.clear();
      hint_batches.clear();

      // The host buffer is rewritten only once the previous copy out of it is done.
      Status claim_status;
      if (claim && slot->copy_pending) {
        claim_status = slot->copied.Synchronize();
        slot->copy_pending = false;
      }
      int error_position = -1;
      Status error = claim_status;
      // Read-ahead: each sample's record is done with once copied (its unit's slot may
      // then take the next unit, even before the batch is whole); on an error, the rest.
      int finished = begin;
      if (error.ok()) {
        for (int i = begin; i < end; ++i) {
          // Mapped path: the index line of the sample 16 ahead, the first bytes of the
          // one 8 ahead (whose index line came 8 samples ago), so that the memory's
          // latency of a random record is waited for while earlier samples are copied
          // (docs/LOADER.md, "Small samples").
          if (reads == nullptr) {
            if (i + kPrefetchIndexAhead < end) {
              dataset->Prefetch(slot->indices[i + kPrefetchIndexAhead], 0);
            }
            if (i + kPrefetchRecordAhead < end) {
              dataset->Prefetch(slot->indices[i + kPrefetchRecordAhead], 1);
            }
          }
          Status s = FillSample(*slot, i, &worker);
          if (reads != nullptr) FinishReads(*slot, i, finished = i + 1, unit_starts);
          if (s.ok()) continue;
          if (s.code() == StatusCode::kCorruption && options.on_corrupt == OnCorrupt::kSkip) {
            slot->bad[i] = 1;
            stat_skipped.fetch_add(1, std::memory_order_relaxed);
            continue;
          }
          error = s;
          error_position = i;
          break;
        }
      } else {
        error_position = begin;
      }
      if (reads != nullptr) FinishReads(*slot, finished, end, unit_starts);
      if (reads == nullptr && read_ahead_batches > 0) NoteMajorFaults(worker);

      lock.lock();
      if (!error.ok() && (slot->status_position < 0 || error_position < slot->status_position)) {
        slot->status = error;
        slot->status_position = error_position;
      }
      const bool last = --slot->chunks_left == 0;
      if (last && gen == generation) {
        // Still counted as active: StartEpoch waits until the publication is over.
        lock.unlock();
        Status published = slot->status.ok() ? Publish(*slot) : Status::Ok();
        lock.lock();
        if (!published.ok() && slot->status.ok()) slot->status = published;
        if (gen == generation) {
          slot->state = Batch::Slot::State::kReady;
          if (!slot->status.ok()) failed = true;
        }
        ready_cv.notify_all();
      }
      if (--active_chunks == 0) idle_cv.notify_all();
    }
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
  // memory already (Dataset::Resident's probe) is left alone: in the page cache a hint per
  // record costs a quarter of the loader's throughput and buys nothing.
  void HintBatches(const std::vector<uint64_t>& hint, const std::vector<size_t>& ends) const {
    size_t begin = 0;
    for (const size_t end : ends) {
      const std::span<const uint64_t> batch(hint.data() + begin, end - begin);
      if (!dataset->Resident(batch)) {
        if (populator != nullptr) {
          populator->Add(batch);
        } else {
          dataset->WillNeed(batch);
        }
      }
      begin = end;
    }
  }

  // Mapped path, after a chunk: a worker that waited for the disk (a major fault) although
  // the page cache holds the dataset (the automatic choice's premise) found a record
  // outside it, and Dataset::Resident's probes of 8 records a batch rarely see a few
  // missing among many. The first such wait of an epoch scans the dataset for the blocks
  // it lacks and reads them ahead, all at once, if they are at most an eighth of it
  // (docs/LOADER.md, "A cache that lacks a few blocks").
  void NoteMajorFaults(WorkerScratch& worker) {
    const long faults = ThreadMajorFaults();
    const bool waited = faults > worker.major_faults;
    worker.major_faults = faults;
    if (!waited || scanned.exchange(true, std::memory_order_relaxed)) return;
    stat_found_missing.fetch_add(dataset->WillNeedMissing(stored_bytes / 8),
                                 std::memory_order_relaxed);
  }

  static long ThreadMajorFaults() {
    rusage usage{};
    return ::getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_majflt : 0;
  }

  // Sample i of the slot into its place in the host buffer. A shard that shrank while
  // mapped reads zeros instead of crashing (io/mapped_range.h): the check after the copy
  // turns that into an IOError naming the file, whatever else the zeros caused.
  Status FillSample(Batch::Slot& slot, int i, WorkerScratch* scratch) {
    Status s = CopySample(slot, i, scratch);
    Status intact = dataset->CheckIntact(slot.indices[i]);
    return intact.ok() ? s : intact;
  }

  Status CopySample(Batch::Slot& slot, int i, WorkerScratch* scratch) {
    SampleView view;
    uint8_t* dst = slot.host + static_cast<size_t>(i) * sample_bytes;
    // Without a transform the pixels go to the ring as they are: the shard reader copies
    // them there while checking their checksum, one pass over them instead of two (an
    // encoded image: decodes it there).
    // Unless the host normalises the sample next, nothing reads it again soon (the GPU
    // copy, or the consumer, a batch later): the copy's stores then go around the caches.
    read::CopyTarget copy;
    if (transformer.pass_through()) {
      copy = {dst, sample_bytes,
              normalize && !gpu ? crc32c::CopyStores::kCached : crc32c::CopyStores::kStreaming};
    }
    // Read ahead: every sample but a kPad batch's fill (the rank's first samples again).
    const bool read_ahead = reads != nullptr && i < slot.valid;
    if (read_ahead) {
      SHARDPACK_RETURN_IF_ERROR(
          reads->Sample(slot.index * static_cast<uint64_t>(options.batch_size) + i,
                        options.verify_crc, &view, &copy));
    } else {
      SHARDPACK_ASSIGN_OR_RETURN(const SampleLocation loc, dataset->Locate(slot.indices[i]));
      SHARDPACK_RETURN_IF_ERROR(
          dataset->shard(loc.shard).Get(loc.record, options.verify_crc, &view, &copy));
    }
    // A label is an index into the class list for whoever consumes the batch (a one-hot
    // encoding, a loss): one outside it is the record's fault, not the consumer's.
    if (view.label < 0 || static_cast<uint64_t>(view.label) >= num_classes) {
      return CorruptionError(Where(slot.indices[i]) + ": label " + std::to_string(view.label) +
                             " is outside the " + std::to_string(num_classes) +
                             " classes of the manifest");
    }
    slot.labels[i] = view.label;
    const size_t view_bytes = static_cast<size_t>(view.height) * static_cast<size_t>(view.width) *
                              static_cast<size_t>(view.channels);
    if (transformer.pass_through()) {
      if (view_bytes != sample_bytes || view.height != transformer.out_height() ||
          view.width != transformer.out_width()) {
        return ShapeFault(slot.indices[i], view);
      }
      if (!copy.copied) std::memcpy(dst, view.pixels.data(), sample_bytes);
    } else {
      const uint64_t key = read::SampleKey(options.seed, slot.epoch, slot.indices[i]);
      Status s;
      if (view.encoding == ImageEncoding::kRaw) {
        s = transformer.Apply(view.pixels.data(), view.height, view.width, view.channels, key, dst,
                              &scratch->transform);
      } else {
        s = DecodeAndApply(view, key, slot.indices[i], dst, scratch);
        if (s.code() == StatusCode::kCorruption) return s;
      }
      if (!s.ok()) return ShapeFault(slot.indices[i], view, s.message());
    }
    if (normalize && !gpu) {
      const size_t out_bytes = sample_bytes * OutputElementBytes(options.output_type);
      host_normalizer->Run(dst, 1, transformer.out_height(), transformer.out_width(),
                           transformer.channels(),
                           slot.host_out_memory.get() + static_cast<size_t>(i) * out_bytes);
    }
    return Status::Ok();
  }

  // An encoded sample decoded into the worker's buffer, then transformed into `dst`. A
  // JPEG whose transform shrinks it twice or more is decoded smaller by DCT scaling
  // (LoaderOptions::decode_scaled). A file that does not decode is the record's
  // Corruption, named here; any other error is the transform's, about the shape.
  Status DecodeAndApply(const SampleView& view, uint64_t key, uint64_t index, uint8_t* dst,
                        WorkerScratch* scratch) {
    SHARDPACK_ASSIGN_OR_RETURN(read::SamplePlan plan,
                               transformer.Plan(view.height, view.width, key));
    const int denom = options.decode_scaled && view.encoding == ImageEncoding::kJpeg
                          ? transformer.ShrinkDenominator(plan)
                          : 1;
    const int height = image::ScaledSide(view.height, denom);
    const int width = image::ScaledSide(view.width, denom);
    const size_t bytes = static_cast<size_t>(height) * static_cast<size_t>(width) *
                         static_cast<size_t>(view.channels);
    if (scratch->decoded.size() < bytes) scratch->decoded.resize(bytes);
    Status d = image::DecodeExactScaled(view.encoded.data(), view.encoded.size(), view.height,
                                        view.width, view.channels, denom, scratch->decoded.data());
    if (!d.ok()) return CorruptionError(Where(index) + ": image/encoded: " + d.message());
    if (denom != 1) plan = read::ScalePlan(plan, denom, height, width);
    return transformer.ApplyPlan(scratch->decoded.data(), height, width, view.channels, plan, dst,
                                 &scratch->transform);
  }

  // "<shard file>: record N[ at offset X]" of a global sample index, as the shard reader
  // names its records in every other message.
  std::string Where(uint64_t index) const {
    auto loc = dataset->Locate(index);
    if (!loc.ok()) return dataset->dir();
    return dataset->shard(loc->shard).Where(loc->record);
  }

  // A sample whose shape the transform cannot take: the record is damaged or foreign.
  Status ShapeFault(uint64_t index, const SampleView& view, const std::string& why = "") {
    const std::string where = Where(index);
    std::string what = why.empty()
                           ? "sample is " + std::to_string(view.height) + "x" +
                                 std::to_string(view.width) + "x" + std::to_string(view.channels) +
                                 ", the loader needs " + std::to_string(transformer.out_height()) +
                                 "x" + std::to_string(transformer.out_width()) + "x" +
                                 std::to_string(transformer.channels())
                           : why;
    return CorruptionError(where + ": " + what);
  }

  // The batch is complete on the host: compact skipped samples, then (GPU) queue its copy.
  Status Publish(Batch::Slot& slot) {
    if (std::find(slot.bad.begin(), slot.bad.end(), 1) != slot.bad.end()) {
      const size_t out_bytes = sample_bytes * OutputElementBytes(options.output_type);
      int kept = 0;
      int kept_valid = 0;
      for (int i = 0; i < slot.size; ++i) {
        if (slot.bad[i]) continue;
        if (kept != i) {
          std::memmove(slot.host + static_cast<size_t>(kept) * sample_bytes,
                       slot.host + static_cast<size_t>(i) * sample_bytes, sample_bytes);
          if (normalize && !gpu) {
            std::memmove(slot.host_out_memory.get() + static_cast<size_t>(kept) * out_bytes,
                         slot.host_out_memory.get() + static_cast<size_t>(i) * out_bytes,
                         out_bytes);
          }
          slot.indices[kept] = slot.indices[i];
          slot.labels[kept] = slot.labels[i];
        }
        if (i < slot.valid) ++kept_valid;
        ++kept;
      }
      slot.size = kept;
      slot.valid = kept_valid;
      slot.indices.resize(kept);
      slot.labels.resize(kept);
    }
    if (!gpu || slot.size == 0) return Status::Ok();
    void* stream = slot.stream.get();
    if (slot.consumer_event_pending) {
      SHARDPACK_RETURN_IF_ERROR(cuda::StreamWaitEvent(stream, slot.consumer_done.get()));
      slot.consumer_event_pending = false;
    }
    const size_t bytes = static_cast<size_t>(slot.size) * sample_bytes;
    SHARDPACK_RETURN_IF_ERROR(
        cuda::CopyToDeviceAsync(slot.device_in.data(), slot.host, bytes, stream));
    if (normalize) {
      SHARDPACK_RETURN_IF_ERROR(cuda::NormalizeAsync(
          static_cast<const uint8_t*>(slot.device_in.data()), slot.size, transformer.out_height(),
          transformer.out_width(), transformer.channels(), norm,
          NormalizeTypeOf(options.output_type), slot.device_out.data(), stream));
    }
    SHARDPACK_RETURN_IF_ERROR(slot.copied.Record(stream));
    slot.copy_pending = true;
    return Status::Ok();
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
    if (gpu && ordered) {
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
int Batch::height() const { return loader_->impl_->transformer.out_height(); }
int Batch::width() const { return loader_->impl_->transformer.out_width(); }
int Batch::channels() const { return loader_->impl_->transformer.channels(); }
OutputType Batch::type() const { return loader_->impl_->options.output_type; }

const void* Batch::host_data() const {
  const Loader::Impl& impl = *loader_->impl_;
  if (impl.normalize && !impl.gpu) return slot_->host_out_memory.get();
  return slot_->host;
}

size_t Batch::host_bytes() const {
  const Loader::Impl& impl = *loader_->impl_;
  size_t element = impl.normalize && !impl.gpu ? OutputElementBytes(impl.options.output_type) : 1;
  return static_cast<size_t>(slot_->size) * impl.sample_bytes * element;
}

std::span<const int64_t> Batch::labels() const { return slot_->labels; }
std::span<const uint64_t> Batch::indices() const { return slot_->indices; }

void* Batch::device_data() const {
  const Loader::Impl& impl = *loader_->impl_;
  if (!impl.gpu) return nullptr;
  return impl.normalize ? slot_->device_out.data() : slot_->device_in.data();
}
void* Batch::cuda_stream() const { return loader_->impl_->gpu ? slot_->stream.get() : nullptr; }
void* Batch::cuda_event() const { return loader_->impl_->gpu ? slot_->copied.get() : nullptr; }

Status Batch::WaitOn(void* consumer_stream) {
  if (slot_ == nullptr) return FailedPreconditionError("batch: already released");
  if (!loader_->impl_->gpu) return Status::Ok();
  slot_->consumer_waited = true;
  slot_->consumer_stream = consumer_stream;
  if (!slot_->copy_pending) return Status::Ok();
  return cuda::StreamWaitEvent(consumer_stream, slot_->copied.get());
}

// ---- LoaderState ----

namespace {

const char* TailName(Tail t) {
  switch (t) {
    case Tail::kPartial:
      return "partial";
    case Tail::kDrop:
      return "drop";
    case Tail::kPad:
      return "pad";
  }
  return "?";
}

// The items of each state version, in the order ToString writes them.
constexpr std::array<std::string_view, 8> kStateItemsV1 = {
    "epoch", "next_batch", "seed", "num_samples", "rank", "world_size", "batch_size", "shuffle"};
constexpr std::array<std::string_view, 12> kStateItemsV2 = {
    "epoch",      "next_batch", "seed", "num_samples", "rank",         "world_size",
    "batch_size", "shuffle",    "tail", "block_size",  "block_window", "shard_layout"};

Status BadState(const std::string& what) { return InvalidArgumentError("loader state: " + what); }

// A decimal number in [min, max], the whole of `value`.
StatusOr<uint64_t> StateNumber(std::string_view key, const std::string& value, uint64_t min,
                               uint64_t max) {
  uint64_t v = 0;
  const char* end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || ptr != end) {
    return BadState(std::string(key) + "=" + value + ": not a decimal number in " +
                    std::to_string(min) + ".." + std::to_string(max));
  }
  if (v < min || v > max) {
    return BadState(std::string(key) + "=" + value + ": outside " + std::to_string(min) + ".." +
                    std::to_string(max));
  }
  return v;
}

}  // namespace

uint64_t ShardLayoutDigest(const Manifest& manifest) {
  std::string counts;
  for (const ShardEntry& e : manifest.shards) {
    uint8_t le[8];
    EncodeFixed64(le, e.records);
    counts.append(reinterpret_cast<const char*>(le), sizeof le);
  }
  const std::string hex = Xxh3Hex(counts.data(), counts.size());
  uint64_t digest = 0;
  std::from_chars(hex.data(), hex.data() + 16, digest, 16);
  return digest;
}

std::string LoaderState::ToString() const {
  char layout[17];
  std::snprintf(layout, sizeof layout, "%016llx", static_cast<unsigned long long>(shard_layout));
  std::ostringstream out;
  out << "shardpack-loader-state " << kVersion << " epoch=" << epoch << " next_batch=" << next_batch
      << " seed=" << seed << " num_samples=" << num_samples << " rank=" << rank
      << " world_size=" << world_size << " batch_size=" << batch_size
      << " shuffle=" << ShuffleName(shuffle) << " tail=" << TailName(tail)
      << " block_size=" << block_size << " block_window=" << block_window
      << " shard_layout=" << layout;
  return out.str();
}

StatusOr<LoaderState> LoaderState::Parse(const std::string& text) {
  std::istringstream in(text);
  std::string magic;
  std::string version;
  in >> magic >> version;
  if (magic != "shardpack-loader-state" || (version != "1" && version != "2")) {
    return BadState("expected \"shardpack-loader-state 2 ...\" (or version 1), found \"" +
                    text.substr(0, 40) + "\"");
  }
  LoaderState st;
  st.version = version == "1" ? 1 : 2;
  const std::span<const std::string_view> items =
      st.version == 1 ? std::span<const std::string_view>(kStateItemsV1)
                      : std::span<const std::string_view>(kStateItemsV2);
  std::vector<bool> seen(items.size(), false);
  constexpr uint64_t kIntMax = static_cast<uint64_t>(std::numeric_limits<int>::max());
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return BadState("\"" + item + "\" is not key=value");
    const std::string key = item.substr(0, eq);
    const std::string value = item.substr(eq + 1);
    const auto known = std::find(items.begin(), items.end(), key);
    if (known == items.end()) {
      return BadState("unknown item \"" + key + "\" in a version " + version + " state");
    }
    const size_t k = static_cast<size_t>(known - items.begin());
    if (seen[k]) return BadState("item \"" + key + "\" appears twice");
    seen[k] = true;
    if (key == "shuffle") {
      if (value == "none") {
        st.shuffle = ShuffleMode::kNone;
      } else if (value == "global") {
        st.shuffle = ShuffleMode::kGlobal;
      } else if (value == "block") {
        st.shuffle = ShuffleMode::kBlock;
      } else {
        return BadState("shuffle=" + value + ": expected none, global or block");
      }
    } else if (key == "tail") {
      if (value == "partial") {
        st.tail = Tail::kPartial;
      } else if (value == "drop") {
        st.tail = Tail::kDrop;
      } else if (value == "pad") {
        st.tail = Tail::kPad;
      } else {
        return BadState("tail=" + value + ": expected partial, drop or pad");
      }
    } else if (key == "shard_layout") {
      uint64_t v = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v, 16);
      if (value.size() != 16 || ec != std::errc() || ptr != value.data() + value.size()) {
        return BadState("shard_layout=" + value + ": expected 16 hex digits");
      }
      st.shard_layout = v;
    } else {
      const bool small = key == "rank" || key == "world_size" || key == "batch_size" ||
                         key == "block_size" || key == "block_window";
      const uint64_t min =
          key == "world_size" || key == "batch_size" || key == "block_size" || key == "block_window"
              ? 1
              : 0;
      SHARDPACK_ASSIGN_OR_RETURN(uint64_t v,
                                 StateNumber(key, value, min, small ? kIntMax : UINT64_MAX));
      if (key == "epoch") {
        st.epoch = v;
      } else if (key == "next_batch") {
        st.next_batch = v;
      } else if (key == "seed") {
        st.seed = v;
      } else if (key == "num_samples") {
        st.num_samples = v;
      } else if (key == "rank") {
        st.rank = static_cast<int>(v);
      } else if (key == "world_size") {
        st.world_size = static_cast<int>(v);
      } else if (key == "batch_size") {
        st.batch_size = static_cast<int>(v);
      } else if (key == "block_size") {
        st.block_size = static_cast<int>(v);
      } else {
        st.block_window = static_cast<int>(v);
      }
    }
  }
  std::string missing;
  for (size_t k = 0; k < items.size(); ++k) {
    if (!seen[k]) missing += (missing.empty() ? "" : ", ") + std::string(items[k]);
  }
  if (!missing.empty()) return BadState("missing " + missing);
  if (st.rank >= st.world_size) {
    return BadState("rank " + std::to_string(st.rank) + " is not below world_size " +
                    std::to_string(st.world_size));
  }
  return st;
}

std::string LoaderStats::ToString() const {
  char buf[256];
  const double s = seconds > 0 ? seconds : 1e-9;
  std::snprintf(buf, sizeof(buf),
                "%llu batches, %.0f samples/s, %.2f GB/s, waited %.1f%% of the time (%.2f s), "
                "%.2f batches ready on average, %llu corrupt samples skipped",
                static_cast<unsigned long long>(batches), samples / s, bytes / s / 1e9,
                100.0 * wait_seconds / s, wait_seconds, mean_ready_batches,
                static_cast<unsigned long long>(skipped_corrupt));
  return buf;
}

// ---- Loader ----

StatusOr<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<const Dataset> dataset,
                                                 const LoaderOptions& options,
                                                 const LoaderState* state) {
  if (dataset == nullptr) return InvalidArgumentError("loader: no dataset");
  const LoaderOptions& o = options;
  auto bad = [](const std::string& what) { return InvalidArgumentError("loader: " + what); };
  if (o.batch_size < 1) return bad("batch_size must be >= 1, not " + std::to_string(o.batch_size));
  if (o.prefetch < 1) return bad("prefetch must be >= 1, not " + std::to_string(o.prefetch));
  if (o.num_threads < 0) return bad("num_threads must be >= 0");
  if (o.io_depth < 1 || o.io_depth > 256) {
    return bad("io_depth must be in 1..256, not " + std::to_string(o.io_depth));
  }
  if (o.world_size < 1) return bad("world_size must be >= 1");
  if (o.rank < 0 || o.rank >= o.world_size) {
    return bad("rank " + std::to_string(o.rank) + " is outside [0, " +
               std::to_string(o.world_size) + ")");
  }
  if (o.block_size < 1 || o.block_window < 1)
    return bad("block_size and block_window must be >= 1");

  auto impl = std::make_unique<Impl>();
  impl->dataset = std::move(dataset);
  impl->options = o;
  impl->spec = read::OrderSpecOf(o);
  for (const ShardEntry& e : impl->dataset->manifest().shards) {
    impl->shard_records.push_back(e.records);
  }
  impl->shard_layout = ShardLayoutDigest(impl->dataset->manifest());
  auto transformer = read::SampleTransformer::Create(o, impl->dataset->manifest().image);
  if (!transformer.ok()) return transformer.status();
  impl->transformer = std::move(transformer).value();
  impl->num_classes = impl->dataset->manifest().classes.size();
  impl->sample_bytes = static_cast<size_t>(impl->transformer.out_height()) *
                       impl->transformer.out_width() * impl->transformer.channels();
  impl->normalize = o.output_type != OutputType::kUint8;
  impl->gpu = o.device >= 0;
  if (impl->normalize) {
    SHARDPACK_RETURN_IF_ERROR(read::CheckNormalizeStatistics(o.mean, o.std).WithPrefix("loader"));
    impl->norm = read::MakeNormalizeParams(o.mean, o.std);
    if (!impl->gpu) impl->host_normalizer.emplace(impl->norm, NormalizeTypeOf(o.output_type));
  }
  if (o.device < -1) return bad("device must be -1 (host) or a CUDA device number");
  if (impl->gpu) SHARDPACK_RETURN_IF_ERROR(cuda::CheckDevice(o.device));

  const uint64_t n = impl->dataset->size();
  if (state != nullptr) {
    // Every value the order depends on, as the state has it and as it is now.
    std::string differ;
    auto check = [&differ](const char* field, const std::string& saved, const std::string& now) {
      if (saved == now) return;
      differ += std::string(differ.empty() ? "" : "; ") + field + " is " + saved +
                " in the state, " + now + " now";
    };
    using std::to_string;
    check("seed", to_string(state->seed), to_string(o.seed));
    check("num_samples", to_string(state->num_samples), to_string(n));
    check("rank", to_string(state->rank), to_string(o.rank));
    check("world_size", to_string(state->world_size), to_string(o.world_size));
    check("batch_size", to_string(state->batch_size), to_string(o.batch_size));
    check("shuffle", ShuffleName(state->shuffle), ShuffleName(o.shuffle));
    if (state->version >= 2) {
      check("tail", TailName(state->tail), TailName(o.tail));
      if (o.shuffle == ShuffleMode::kBlock) {
        check("block_size", to_string(state->block_size), to_string(o.block_size));
        check("block_window", to_string(state->block_window), to_string(o.block_window));
        if (state->shard_layout != ShardLayoutDigest(impl->dataset->manifest())) {
          check("shard_layout (the shards' record counts)", "another", "these");
        }
      }
    }
    if (!differ.empty()) {
      return bad("the state was saved for another configuration: " + differ);
    }
    if (state->next_batch > read::BatchesPerEpoch(impl->spec, n)) {
      return bad("the state's next_batch " + std::to_string(state->next_batch) +
                 " is past the epoch's " + std::to_string(read::BatchesPerEpoch(impl->spec, n)) +
                 " batches");
    }
  }

  int threads = o.num_threads;
  if (threads == 0) {
    threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  }
  impl->chunk = std::clamp(o.batch_size / (2 * threads), 1, 64);
  SHARDPACK_RETURN_IF_ERROR(impl->dataset->ReserveReaders(threads));

  // The I/O path; the read-ahead, in batches of stored records (what the disk reads).
  uint64_t stored = 0;
  for (const ShardEntry& e : impl->dataset->manifest().shards) stored += e.data.bytes;
  impl->stored_bytes = stored;
  const uint64_t stored_batch = std::max<uint64_t>(1, (n > 0 ? stored / n : 0) * o.batch_size);
  bool read_ahead = o.io == IoPath::kReadAhead;
  std::string why = "forced";
  const read::IoChoice fit = read::ChooseIo(stored, read::PageCacheLimit());
  if (o.io == IoPath::kAuto) {
    read_ahead = fit.read_ahead;
    why = fit.why;
  }
  read::ReadAheadOptions ro;
  if (read_ahead) {
    // Units: batches, or under a block shuffle its windows of blocks, read whole, at least
    // three at a time: one being used, one being read, and one queued behind it, so that
    // the disk never waits for a window to be used up.
    const uint64_t batch = static_cast<uint64_t>(o.batch_size);
    const uint64_t window = static_cast<uint64_t>(o.block_size) * o.block_window;
    const bool windows = o.shuffle == ShuffleMode::kBlock;
    uint64_t buffer_bytes = o.io_buffer_bytes;
    if (buffer_bytes == 0) {
      buffer_bytes = kDefaultIoBufferBytes;
      if (windows) {
        buffer_bytes = std::clamp(3 * window * (stored_batch / batch), kDefaultIoBufferBytes,
                                  kMaxAutomaticIoBufferBytes);
      }
    }
    const uint64_t budget = batch * std::clamp<uint64_t>(buffer_bytes / stored_batch, 1, 64);
    impl->unit_cap = windows ? std::max(2 * batch, std::min(window, budget / 3)) : batch;
    impl->read_slots = std::max<uint64_t>(windows ? 3 : 1, budget / impl->unit_cap);
    ro.unit_samples = static_cast<int>(impl->unit_cap);
    ro.slots = static_cast<int>(impl->read_slots);
    ro.depth = o.io_depth;
    ro.direct = o.io_bypass_cache;
    ro.reuse_cache = o.io_reuse_page_cache;
    ro.queue = o.io_queue == IoQueue::kUring   ? read::QueueKind::kUring
               : o.io_queue == IoQueue::kPread ? read::QueueKind::kPread
                                               : read::QueueKind::kAuto;
  } else if (o.read_ahead_bytes > 0 && n > 0) {
    // At least one batch, at most 256.
    impl->read_ahead_batches = std::clamp<uint64_t>(o.read_ahead_bytes / stored_batch, 1, 256);
  }

  // Everything allocated from here on, checked against the budget first (loader.h,
  // "Memory"): the largest terms come from the output shape, which without a transform is
  // the dataset's claim.
  const ImageSpec& spec = impl->dataset->manifest().image;
  const uint64_t slots = static_cast<uint64_t>(o.prefetch) + 2;
  const uint64_t batch = static_cast<uint64_t>(o.batch_size);
  const size_t batch_bytes = static_cast<size_t>(o.batch_size) * impl->sample_bytes;
  const size_t out_bytes = batch_bytes * OutputElementBytes(o.output_type);
  const int max_h = spec.fixed() ? spec.height : spec.max_side;
  const int max_w = spec.fixed() ? spec.width : spec.max_side;
  // An encoded image is decoded whole before a transform; no image has more pixels than
  // the format's largest (format/example.cc refuses the record).
  size_t decoded_bytes = 0;
  if (spec.encoding != ImageEncoding::kRaw && !impl->transformer.pass_through()) {
    decoded_bytes =
        std::min<size_t>(static_cast<size_t>(max_h) * static_cast<size_t>(max_w), kMaxImagePixels) *
        static_cast<size_t>(spec.channels);
  }
  const uint64_t hinted = impl->read_ahead_batches + 1;
  const uint64_t slot_in = Times(batch, impl->sample_bytes);
  impl->memory.ring =
      Times(slots, Plus(PageRounded(slot_in),
                        impl->normalize && !impl->gpu
                            ? PageRounded(Times(slot_in, OutputElementBytes(o.output_type)))
                            : 0));
  impl->memory.workers = Times(static_cast<uint64_t>(threads),
                               Plus(impl->transformer.ReserveBytes(max_h, max_w), decoded_bytes));
  impl->memory.read_ahead = read_ahead ? read::ReadAhead::BufferBytes(*impl->dataset, ro) : 0;
  impl->memory.rest = Plus(Plus(Times(slots * 17, batch), Times(static_cast<uint64_t>(threads) + 1,
                                                                Times(hinted + 1, batch * 8))),
                           Times(n, 8));
  {
    const io::MemoryLimit budget =
        o.max_memory_bytes > 0
            ? io::MemoryLimit{o.max_memory_bytes, "LoaderOptions::max_memory_bytes"}
            : io::MemoryBudget();
    const std::string shape = std::to_string(impl->transformer.out_height()) + " x " +
                              std::to_string(impl->transformer.out_width()) + " x " +
                              std::to_string(impl->transformer.channels());
    std::string slot = "batch " + std::to_string(o.batch_size) + " x " + shape + " bytes";
    if (impl->normalize && !impl->gpu) {
      slot += ", and " + std::to_string(OutputElementBytes(o.output_type)) +
              " bytes a value more as " +
              (o.output_type == OutputType::kFloat16 ? "float16" : "float32");
    }
    const std::string ring_how = "prefetch " + std::to_string(o.prefetch) + " + 2 slots of " + slot;
    const std::string image_size =
        spec.fixed() ? " (" + std::to_string(spec.height) + " x " + std::to_string(spec.width) + ")"
                     : "";
    SHARDPACK_RETURN_IF_ERROR(io::CheckMemory(
        impl->memory.ring, budget, "loader: the ring", ring_how,
        "lower batch_size or prefetch, or check the manifest's image size" + image_size));
    SHARDPACK_RETURN_IF_ERROR(io::CheckMemory(
        impl->memory.total(), budget, "loader: its memory",
        "the ring " + std::to_string(impl->memory.ring) + " (" + ring_how + "), the " +
            std::to_string(threads) + " workers' scratch " + std::to_string(impl->memory.workers) +
            ", the read-ahead buffers " + std::to_string(impl->memory.read_ahead) +
            ", the batches' and the epoch's indices " + std::to_string(impl->memory.rest),
        "lower batch_size, prefetch, num_threads or io_buffer_bytes, or check the manifest's "
        "image size" +
            image_size));
  }

  if (read_ahead) {
    SHARDPACK_ASSIGN_OR_RETURN(impl->reads, read::ReadAhead::Create(*impl->dataset, ro));
    impl->io_description = "read-ahead: " + impl->reads->Describe() + " (" + why + ")";
  } else {
    impl->io_description = "mapped (" + why + ")";
    if (impl->read_ahead_batches > 0) {
      std::string obstacle;
      if (o.huge_pages == HugePages::kAuto) {
        obstacle = io::PopulateAndHugePagesWork()
                       ? io::HostReclaimsFreeMemory()
                       : "this kernel lacks MADV_POPULATE_READ or transparent huge pages";
      }
      const read::PagesChoice pages = read::ChoosePages(o.huge_pages, fit, obstacle);
      if (pages.huge) {
        // The populating threads read through LMDB's transactions too.
        SHARDPACK_RETURN_IF_ERROR(impl->dataset->ReserveReaders(threads + kPopulators));
        impl->dataset->PreferHugePages();
        impl->populator = std::make_unique<read::Populator>(impl->dataset.get(), kPopulators);
        // What the hints may hold at once: the batches ahead, and the one claimed.
        impl->populator->Reserve(static_cast<size_t>(impl->read_ahead_batches + 1) *
                                 static_cast<size_t>(o.batch_size));
      }
      impl->io_description += std::string(pages.huge ? "; uncached pages read 2 MiB at a time by " +
                                                           std::to_string(kPopulators) + " threads"
                                                     : "; uncached pages hinted 4 KiB at a time") +
                              " (" + pages.why + ")";
    }
  }

  // The ring, allocated once.
  for (uint64_t i = 0; i < slots; ++i) {
    auto slot = std::make_unique<Batch::Slot>();
    if (impl->gpu) {
      auto pinned = cuda::PinnedBuffer::Allocate(batch_bytes);
      if (!pinned.ok()) return pinned.status();
      slot->pinned = std::move(pinned).value();
      slot->host = static_cast<uint8_t*>(slot->pinned.data());
      auto in = cuda::DeviceBuffer::Allocate(o.device, batch_bytes);
      if (!in.ok()) return in.status();
      slot->device_in = std::move(in).value();
      if (impl->normalize) {
        auto out = cuda::DeviceBuffer::Allocate(o.device, out_bytes);
        if (!out.ok()) return out.status();
        slot->device_out = std::move(out).value();
      }
      auto stream = cuda::Stream::Create(o.device);
      if (!stream.ok()) return stream.status();
      slot->stream = std::move(stream).value();
      auto copied = cuda::Event::Create(o.device);
      if (!copied.ok()) return copied.status();
      slot->copied = std::move(copied).value();
      auto done = cuda::Event::Create(o.device);
      if (!done.ok()) return done.status();
      slot->consumer_done = std::move(done).value();
    } else {
      auto memory = AllocateAligned(batch_bytes);
      if (!memory.ok()) return memory.status();
      slot->host_memory = std::move(memory).value();
      slot->host = slot->host_memory.get();
      if (impl->normalize) {
        auto out = AllocateAligned(out_bytes);
        if (!out.ok()) return out.status();
        slot->host_out_memory = std::move(out).value();
      }
    }
    slot->indices.reserve(o.batch_size);
    slot->labels.reserve(o.batch_size);
    slot->bad.reserve(o.batch_size);
    impl->slots.push_back(std::move(slot));
  }

  {
    std::unique_lock<std::mutex> lock(impl->mu);
    impl->Restart(state != nullptr ? state->epoch : 0, state != nullptr ? state->next_batch : 0,
                  lock);
  }
  impl->scratches.resize(static_cast<size_t>(threads));
  for (Impl::WorkerScratch& worker : impl->scratches) {
    impl->transformer.Reserve(max_h, max_w, &worker.transform);
    worker.decoded.resize(decoded_bytes);
    worker.hint.reserve(static_cast<size_t>(hinted) * static_cast<size_t>(o.batch_size));
    worker.batch_indices.reserve(static_cast<size_t>(o.batch_size));
    worker.hint_batches.reserve(static_cast<size_t>(hinted));
    worker.unit_starts.reserve(static_cast<size_t>(impl->read_slots));
  }
  Impl* raw = impl.get();
  for (int i = 0; i < threads; ++i) {
    raw->workers.emplace_back([raw, i] { raw->Work(raw->scratches[static_cast<size_t>(i)]); });
  }
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
  m.stat_bytes += static_cast<uint64_t>(slot.size) * m.sample_bytes;
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
