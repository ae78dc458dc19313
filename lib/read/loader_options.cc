#include "read/loader_options.h"

#include <algorithm>
#include <thread>

#include "io/memory_budget.h"
#include "shardpack/limits.h"

namespace shardpack::read {
namespace {

// LoaderOptions::io_buffer_bytes = 0: 384 MiB, or three windows of a block shuffle (at
// most 1 GiB).
constexpr uint64_t kDefaultIoBufferBytes = 384ull << 20;
constexpr uint64_t kMaxAutomaticIoBufferBytes = 1ull << 30;

Status Bad(const std::string& what) { return InvalidArgumentError("loader: " + what); }

// a x b and a + b, or UINT64_MAX past it: the memory check must see a huge need as huge.
uint64_t Times(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(p);
}
uint64_t Plus(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// The stored bytes of a batch (what the disk reads for one), at least 1.
uint64_t StoredBatchBytes(const LoaderOptions& o, const IoPlan& io, uint64_t n) {
  return std::max<uint64_t>(1, (n > 0 ? io.stored_bytes / n : 0) * o.batch_size);
}

// The read-ahead path's units: batches, or under a block shuffle its windows of blocks,
// read whole, at least three at a time: one being used, one being read, and one queued
// behind it, so that the disk never waits for a window to be used up.
void PlanReadAhead(const LoaderOptions& o, uint64_t stored_batch, IoPlan* io) {
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
  io->unit_cap = windows ? std::max(2 * batch, std::min(window, budget / 3)) : batch;
  io->read_slots = std::max<uint64_t>(windows ? 3 : 1, budget / io->unit_cap);
  ReadAheadOptions& ro = io->read_ahead_options;
  ro.unit_samples = static_cast<int>(io->unit_cap);
  ro.slots = static_cast<int>(io->read_slots);
  ro.depth = o.io_depth;
  ro.direct = o.io_bypass_cache;
  ro.reuse_cache = o.io_reuse_page_cache;
  ro.queue = o.io_queue;
}

}  // namespace

Status CheckLoaderOptions(const LoaderOptions& o) {
  if (o.batch_size < 1) return Bad("batch_size must be >= 1, not " + std::to_string(o.batch_size));
  if (o.prefetch < 1 || o.prefetch > kMaxPrefetch) {
    return Bad("prefetch must be in 1.." + std::to_string(kMaxPrefetch) + ", not " +
               std::to_string(o.prefetch));
  }
  if (o.num_threads < 0 || o.num_threads > kMaxThreads) {
    return Bad("num_threads must be in 0.." + std::to_string(kMaxThreads) + ", not " +
               std::to_string(o.num_threads));
  }
  if (o.io_depth < 1 || o.io_depth > kMaxIoDepth) {
    return Bad("io_depth must be in 1.." + std::to_string(kMaxIoDepth) + ", not " +
               std::to_string(o.io_depth));
  }
  if (o.world_size < 1) return Bad("world_size must be >= 1");
  if (o.rank < 0 || o.rank >= o.world_size) {
    return Bad("rank " + std::to_string(o.rank) + " is outside [0, " +
               std::to_string(o.world_size) + ")");
  }
  if (o.block_size < 1 || o.block_window < 1) {
    return Bad("block_size and block_window must be >= 1");
  }
  if (o.device < -1) return Bad("device must be -1 (host) or a CUDA device number");
  return Status::Ok();
}

Status CheckResumeState(const LoaderState& state, const LoaderOptions& o, const Manifest& manifest,
                        const OrderSpec& spec) {
  // Every value the order depends on, as the state has it and as it is now.
  std::string differ;
  auto check = [&differ](const char* field, const std::string& saved, const std::string& now) {
    if (saved == now) return;
    differ += std::string(differ.empty() ? "" : "; ") + field + " is " + saved + " in the state, " +
              now + " now";
  };
  using std::to_string;
  const uint64_t n = manifest.num_samples;
  check("seed", to_string(state.seed), to_string(o.seed));
  check("num_samples", to_string(state.num_samples), to_string(n));
  check("rank", to_string(state.rank), to_string(o.rank));
  check("world_size", to_string(state.world_size), to_string(o.world_size));
  check("batch_size", to_string(state.batch_size), to_string(o.batch_size));
  check("shuffle", EnumName(state.shuffle), EnumName(o.shuffle));
  if (state.version >= 2) {
    check("tail", EnumName(state.tail), EnumName(o.tail));
    if (o.shuffle == ShuffleMode::kBlock) {
      check("block_size", to_string(state.block_size), to_string(o.block_size));
      check("block_window", to_string(state.block_window), to_string(o.block_window));
      if (state.shard_layout != ShardLayoutDigest(manifest)) {
        check("shard_layout (the shards' record counts)", "another", "these");
      }
    }
  }
  if (!differ.empty()) return Bad("the state was saved for another configuration: " + differ);
  const uint64_t batches = BatchesPerEpoch(spec, n);
  if (state.next_batch > batches) {
    return Bad("the state's next_batch " + std::to_string(state.next_batch) +
               " is past the epoch's " + std::to_string(batches) + " batches");
  }
  return Status::Ok();
}

int WorkerThreads(const LoaderOptions& o) {
  if (o.num_threads > 0) return o.num_threads;
  return static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
}

IoPlan PlanIo(const LoaderOptions& o, const Manifest& manifest) {
  IoPlan io;
  for (const ShardEntry& e : manifest.shards) io.stored_bytes += e.data.bytes;
  const uint64_t n = manifest.num_samples;
  const uint64_t stored_batch = StoredBatchBytes(o, io, n);
  io.read_ahead = o.io == IoPath::kReadAhead;
  io.why = "forced";
  io.fit = ChooseIo(io.stored_bytes, PageCacheLimit());
  if (o.io == IoPath::kAuto) {
    io.read_ahead = io.fit.read_ahead;
    io.why = io.fit.why;
  }
  if (io.read_ahead) {
    PlanReadAhead(o, stored_batch, &io);
  } else if (o.read_ahead_bytes > 0 && n > 0) {
    // At least one batch, at most 256.
    io.read_ahead_batches = std::clamp<uint64_t>(o.read_ahead_bytes / stored_batch, 1, 256);
  }
  return io;
}

uint64_t LoaderMemory::total() const { return Plus(Plus(ring, workers), Plus(read_ahead, rest)); }

LoaderMemory MemoryOf(const Dataset& dataset, const LoaderOptions& o, const SlotShape& shape,
                      int threads, uint64_t scratch_bytes, const IoPlan& io) {
  const uint64_t slots = static_cast<uint64_t>(o.prefetch) + 2;
  const uint64_t batch = static_cast<uint64_t>(o.batch_size);
  const uint64_t hinted = io.read_ahead_batches + 1;
  const uint64_t slot_in = Times(batch, shape.sample_bytes);
  LoaderMemory m;
  m.ring = Times(slots, Plus(AlignedBytes(slot_in),
                             shape.host_normalizes()
                                 ? AlignedBytes(Times(slot_in, OutputElementBytes(o.output_type)))
                                 : 0));
  m.workers = Times(static_cast<uint64_t>(threads), scratch_bytes);
  m.read_ahead = io.read_ahead ? ReadAhead::BufferBytes(dataset, io.read_ahead_options) : 0;
  m.rest = Plus(Plus(Times(slots * 17, batch),
                     Times(static_cast<uint64_t>(threads) + 1, Times(hinted + 1, batch * 8))),
                Times(dataset.size(), 8));
  return m;
}

Status CheckLoaderMemory(const LoaderMemory& memory, const LoaderOptions& o, const SlotShape& shape,
                         int threads, const ImageSpec& image) {
  const io::MemoryLimit budget =
      o.max_memory_bytes > 0
          ? io::MemoryLimit{o.max_memory_bytes, "LoaderOptions::max_memory_bytes"}
          : io::MemoryBudget();
  const std::string sample = std::to_string(shape.height) + " x " + std::to_string(shape.width) +
                             " x " + std::to_string(shape.channels);
  std::string slot = "batch " + std::to_string(o.batch_size) + " x " + sample + " bytes";
  if (shape.host_normalizes()) {
    slot += ", and " + std::to_string(OutputElementBytes(o.output_type)) +
            " bytes a value more as " +
            (o.output_type == OutputType::kFloat16 ? "float16" : "float32");
  }
  const std::string ring_how = "prefetch " + std::to_string(o.prefetch) + " + 2 slots of " + slot;
  const std::string image_size = image.fixed() ? " (" + std::to_string(image.height) + " x " +
                                                     std::to_string(image.width) + ")"
                                               : "";
  SHARDPACK_RETURN_IF_ERROR(io::CheckMemory(
      memory.ring, budget, "loader: the ring", ring_how,
      "lower batch_size or prefetch, or check the manifest's image size" + image_size));
  return io::CheckMemory(
      memory.total(), budget, "loader: its memory",
      "the ring " + std::to_string(memory.ring) + " (" + ring_how + "), the " +
          std::to_string(threads) + " workers' scratch " + std::to_string(memory.workers) +
          ", the read-ahead buffers " + std::to_string(memory.read_ahead) +
          ", the batches' and the epoch's indices " + std::to_string(memory.rest),
      "lower batch_size, prefetch, num_threads or io_buffer_bytes, or check the manifest's "
      "image size" +
          image_size);
}

}  // namespace shardpack::read
