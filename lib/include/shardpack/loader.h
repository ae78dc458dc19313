// Loader: streams a dataset's samples, in batches, into a ring of batch slots allocated
// once (pinned host memory and device memory when a GPU is used, page-aligned host memory
// otherwise), with shuffling, prefetch, distributed ranks and exact resumption.
//
//   auto ds = Dataset::Open("data/caltech256");                           // StatusOr
//   LoaderOptions o;  o.batch_size = 256;  o.device = 0;
//   auto loader = Loader::Create(std::shared_ptr<Dataset>(std::move(*ds)), o);
//   for (int epoch = 0; epoch < 90; ++epoch) {
//     while (true) {
//       auto batch = (*loader)->Next();        // StatusOr<Batch>; OutOfRange: epoch done
//       if (!batch.ok()) break;
//       batch->WaitOn(my_stream);              // GPU: the consumer's stream waits, no sync
//       Train(batch->device_data(), my_stream);
//     }                                        // released: the slot is refilled once
//                                              // my_stream is past Train
//     (*loader)->StartEpoch(epoch + 1);
//   }
//
// Order. The samples of an epoch, for one rank, are a pure function of (seed, epoch,
// shuffle mode, block_size, block_window, rank, world_size, tail, the dataset's shard
// sizes): never of thread count, timing or prefetch depth. EpochOrder() returns it. How it
// is built (docs/LOADER.md has the details):
//   1. the epoch's permutation of all N samples (ShuffleMode);
//   2. ranks: kDrop cuts it to n = floor(N / W) * W; otherwise it is extended to
//      n = ceil(N / W) * W by repeating its first (n - N) entries, so that every rank gets
//      the same count. Rank r takes the contiguous part [r * n / W, (r + 1) * n / W);
//   3. batches of batch_size; the last, short one is dropped (kDrop), completed by
//      repeating the rank's first samples of the epoch (kPad; Batch::valid() counts the
//      new ones), or delivered short (kPartial).
// All ranks together therefore see every sample exactly once per epoch, plus at most
// W - 1 repeats (and the kPad batch fill), or minus at most W - 1 samples with kDrop.
//
// Per-sample transforms draw their randomness from (seed, epoch, global sample index)
// only, so the pixels are deterministic too.
//
// Resumption. state() names the next batch that Next() will return; a loader created with
// that state returns exactly the batches an uninterrupted run would have returned from
// there on, byte for byte.
//
// Errors. A damaged record (checksum, shape, framing) fails Next() with Corruption naming
// "<file>: record N at offset X: <what>" (OnCorrupt::kFail, the default), or is left out
// of its batch and counted (kSkip): the batch is then shorter, never late. I/O errors
// always fail Next(). After a failed Next() the loader can only be destroyed or given a
// new epoch.
//
// Thread-safety: one consumer thread calls Next(), StartEpoch(), state() and stats(); a
// Batch may be released from any thread. The Dataset may be shared with other readers.
#ifndef SHARDPACK_LOADER_H_
#define SHARDPACK_LOADER_H_

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/dataset.h"
#include "shardpack/limits.h"
#include "shardpack/resize_filter.h"
#include "shardpack/status.h"

namespace shardpack {

enum class ShuffleMode {
  // Dataset order (shard by shard, record by record).
  kNone,
  // A full uniform permutation of all samples per epoch.
  kGlobal,
  // For slow disks: the dataset is cut into blocks of block_size consecutive records
  // (never across a shard boundary), the blocks are permuted, and the samples of each
  // group of block_window consecutive blocks of that order are permuted among themselves.
  // Reads are block_size-long runs of one file, and a batch still mixes samples from
  // block_window places of the dataset.
  kBlock,
};

// What happens to the last, incomplete batch of an epoch and to a sample count that does
// not divide by world_size (see the order rules above).
enum class Tail { kPartial, kDrop, kPad };

// Per-sample transform to the output shape.
enum class Transform {
  // Fixed-size datasets: the samples as stored (output shape = the dataset's). Variable-
  // size datasets: not allowed (Create fails with InvalidArgument).
  kNone,
  // Evaluation: resize the shorter side to resize_shorter (default: output side * 8 / 7,
  // as 256 for 224) and take the centre output_height x output_width.
  kCenterCrop,
  // Training: Inception-style random-resized-crop (area fraction in [rrc_scale_min,
  // rrc_scale_max], aspect ratio in [rrc_ratio_min, rrc_ratio_max], log-uniform; ten
  // tries, then a centre crop of the clamped ratio, as torchvision does) resized to the
  // output shape.
  kRandomResizedCrop,
  // Fixed-size datasets: a random output_height x output_width window of the sample.
  kRandomCrop,
};

// What a damaged record does to its batch (a Corruption: a checksum, a payload that does
// not parse, an image that does not decode, a label outside the manifest's classes):
// kFail fails Next() naming it; kSkip leaves the sample out and counts it
// (LoaderStats::skipped_corrupt). Labels delivered are always class indices.
enum class OnCorrupt { kFail, kSkip };

// Optional normalisation of every batch: uint8 NHWC -> float NCHW,
//   out[n][c][y][x] = fmaf(in[n][y][x][c], scale[c], bias[c]),
//   scale[c] = 1 / (255 * std[c]),  bias[c] = -mean[c] / std[c]
// (mean and std in 0..1 units, torchvision's convention), then rounded to nearest even
// for float16. On a GPU a CUDA kernel does it on the slot's stream after the copy; on the
// host path the same arithmetic runs on the worker threads. Both give identical bits.
enum class OutputType { kUint8, kFloat32, kFloat16 };

enum class IoPath { kAuto, kMapped, kReadAhead };
enum class IoQueue { kAuto, kUring, kPread };
enum class HugePages { kAuto, kOn, kOff };

// The names of each option enum above, in enum order: the CLI, the loader's state, bench
// and the Python package spell the values so, and take these lists from here.
//   ShuffleMode  "none", "global", "block"        Tail       "partial", "drop", "pad"
//   Transform    "none", "center_crop", "random_resized_crop", "random_crop"
//   OnCorrupt    "fail", "skip"                    OutputType "uint8", "float32", "float16"
//   IoPath       "auto", "mapped", "readahead"     IoQueue    "auto", "uring", "pread"
//   HugePages    "auto", "on", "off"
// EnumName returns "?" for a value outside the enum (a cast integer). ParseEnum returns
// InvalidArgument "<what>=<name>: expected a, b or c" for a name not in the list.
template <typename E>
std::span<const std::string_view> EnumNames();
template <>
std::span<const std::string_view> EnumNames<ShuffleMode>();
template <>
std::span<const std::string_view> EnumNames<Tail>();
template <>
std::span<const std::string_view> EnumNames<Transform>();
template <>
std::span<const std::string_view> EnumNames<OnCorrupt>();
template <>
std::span<const std::string_view> EnumNames<OutputType>();
template <>
std::span<const std::string_view> EnumNames<IoPath>();
template <>
std::span<const std::string_view> EnumNames<IoQueue>();
template <>
std::span<const std::string_view> EnumNames<HugePages>();

template <typename E>
const char* EnumName(E value) {
  const std::span<const std::string_view> names = EnumNames<E>();
  const auto i = static_cast<size_t>(value);
  return i < names.size() ? names[i].data() : "?";
}

// Implementation of ParseEnum: the index of `name` in `names`, or its error.
StatusOr<size_t> ParseEnumIndex(std::span<const std::string_view> names, std::string_view name,
                                std::string_view what);

template <typename E>
StatusOr<E> ParseEnum(std::string_view name, std::string_view what) {
  SHARDPACK_ASSIGN_OR_RETURN(const size_t i, ParseEnumIndex(EnumNames<E>(), name, what));
  return static_cast<E>(i);
}

struct LoaderOptions {
  // Samples per batch (>= 1; default 256).
  int batch_size = 256;
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  // kBlock only: records per block (>= 1; default 64) and blocks mixed together (>= 1;
  // default 16).
  int block_size = 64;
  int block_window = 16;
  // Seed of the shuffles and of the random transforms (default 0).
  uint64_t seed = 0;
  // Worker threads that copy and transform samples (0..kMaxThreads, 4096; 0, the default:
  // all cores, at most 8).
  int num_threads = 0;
  // Batches prepared ahead of the consumer (1..kMaxPrefetch, which is 64; default 2). The
  // ring has prefetch + 2 slots: the one the consumer holds, the one being released, and
  // prefetch more.
  int prefetch = 2;
  // How the shards are read (docs/LOADER.md, "Two I/O paths"):
  //   kMapped: zero-copy from the mapped shards, the page cache serving the reads; best
  //     while the dataset fits in memory.
  //   kReadAhead: the epoch's next records are read ahead, io_depth reads in flight, into
  //     buffers allocated once (io_buffer_bytes of them), bypassing the page cache; for
  //     datasets bigger than memory. A shard that shrinks is a short read.
  //   kAuto (default): kMapped while the dataset fits in 75% of what the page cache may
  //     hold for this process (MemAvailable, and the cgroup's memory limit where one is
  //     set), kReadAhead otherwise. LoaderStats::io says which and why.
  // Both paths deliver the same batches, bytes and errors.
  IoPath io = IoPath::kAuto;
  // kMapped: how far ahead of the batches being filled the kernel is asked to read the
  // epoch's next samples into the page cache (MADV_WILLNEED), in bytes of stored records;
  // 0 turns that off (default 128 MiB, bench/out_of_core.sh measures it).
  uint64_t read_ahead_bytes = 128ull << 20;
  // kMapped with read_ahead_bytes: the size of the pages an epoch reads into the page cache,
  // which decides what the next process's first epoch pays to map them (docs/LOADER.md,
  // "The first epoch from the page cache"):
  //   kOn: the shard mappings are advised MADV_HUGEPAGE and 8 threads of the loader map the
  //     read-ahead's records in place of the MADV_WILLNEED hints: each read brings the
  //     aligned 2 MiB around a record in as one large page, and the next process maps the
  //     cache 2 MiB per page-table entry. For a dataset that fits in memory (a record read
  //     alone costs a 2 MiB read).
  //   kOff: the hints (4 KiB pages).
  //   kAuto (default): kOn where the dataset fits in memory (as kAuto's io rule says), the
  //     kernel has MADV_POPULATE_READ (5.14) and transparent huge pages, and the host of
  //     this virtual machine does not take its free memory back (virtio balloon free page
  //     reporting, where each fresh 2 MiB block costs a host fault: the cold epoch ran at
  //     half speed), kOff otherwise. LoaderStats::io says which and why. Where the file
  //     system keeps no large folios (ext4 before Linux 6.16), kOn still reads 2 MiB at a
  //     time but caches 4 KiB pages.
  // Either way the same batches and bytes. On advises the Dataset for good
  // (its shards keep MADV_HUGEPAGE): a later loader over the same Dataset object reads uncached
  // pages 2 MiB at a time too, even with kOff (it hints them, as kOff does).
  HugePages huge_pages = HugePages::kAuto;
  // kReadAhead: the buffers the records are read into, in bytes, allocated once (at least
  // a batch of stored records, at most 64). 0 (default): automatic, 384 MiB, or under a
  // block shuffle three windows of blocks (at most 1 GiB). A block shuffle reads whole
  // windows (block_size x block_window samples), each into a buffer of its own; with
  // fewer than three windows' bytes the windows are cut into parts and read in smaller
  // pieces. At 256 samples of 256x256x3, 384 MiB is 7 batches, which kept the disk at its
  // random-read rate (128 MiB, 2 batches, left it idle between batches); three windows of
  // 16 blocks of 64 are 600 MB, and two left it idle between windows
  // (bench/out_of_core.sh, docs/LOADER.md).
  uint64_t io_buffer_bytes = 0;
  // kReadAhead: reads in flight at once (io_uring's queue depth, or pread threads where
  // io_uring is unavailable), 1..kMaxIoDepth (256), default 32.
  int io_depth = 32;
  // kReadAhead: keep the shards out of the page cache (default on): O_DIRECT where the
  // file system allows it, else each read's pages dropped after it (POSIX_FADV_DONTNEED).
  bool io_bypass_cache = true;
  // kReadAhead: records found in the page cache already (each probed with mincore) are
  // read from there through the mapping, zero-copy, as on the mapped path, and only the
  // others from storage (default on). Off: every batch is read from storage (to measure
  // that path).
  bool io_reuse_page_cache = true;
  // kReadAhead: kUring or kPread forces a queue (tests); kAuto takes io_uring where the
  // kernel allows it.
  IoQueue io_queue = IoQueue::kAuto;
  Tail tail = Tail::kPartial;
  // Distributed training: this process's rank in [0, world_size) (defaults 0 and 1).
  int rank = 0;
  int world_size = 1;
  // CUDA device to deliver batches to; -1 (default): the host. A device that does not
  // exist, or a build without CUDA, fails Create with Unavailable.
  int device = -1;
  // The most bytes the loader's buffers may take (the formula under "Memory" above Loader).
  // 0 (default): io::MemoryBudget, 7/8 of what this process may hold: MemAvailable, lowered
  // to the memory limit of its cgroup (v2 memory.max, v1 memory.limit_in_bytes) and of each
  // cgroup above it. Create refuses more with ResourceExhausted before allocating any of it.
  uint64_t max_memory_bytes = 0;
  // Check every record's checksums while copying it (default on).
  bool verify_crc = true;
  OnCorrupt on_corrupt = OnCorrupt::kFail;

  // Output shape: 0 (default) takes the dataset's fixed shape. Required for variable-
  // size datasets. Channels are always the dataset's.
  int output_height = 0;
  int output_width = 0;
  Transform transform = Transform::kNone;
  // Mirror each sample left-right with probability 1/2 (default off).
  bool random_flip = false;
  // kCenterCrop: shorter side before the crop, in pixels (0: round(8/7 * output side)).
  int resize_shorter = 0;
  float rrc_scale_min = 0.08f;
  float rrc_scale_max = 1.0f;
  float rrc_ratio_min = 3.0f / 4.0f;
  float rrc_ratio_max = 4.0f / 3.0f;
  ResizeFilter filter = ResizeFilter::kBilinear;
  // Encoded (JPEG) datasets: a sample whose transform shrinks it to half or less on both
  // axes is decoded at 1/2, 1/4 or 1/8 of its size by libjpeg's DCT scaling (the largest
  // scale at which the crop is still at least the output), then resampled from there,
  // as Pillow's draft mode does (default on). Off: every sample is decoded at full size.
  // docs/LOADER.md gives the cost and the difference in pixels.
  bool decode_scaled = true;

  OutputType output_type = OutputType::kUint8;
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
};

// This process's place in a distributed job, as its launcher announces it in the
// environment (docs/SCALE.md): torchrun's RANK and WORLD_SIZE, then Open MPI's
// OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, then PMI_RANK and PMI_SIZE (MPICH, Intel
// MPI), then Slurm's SLURM_PROCID and SLURM_NTASKS (srun); the first pair set wins.
// {0, 1, "none"} when none is. InvalidArgument, naming the variables, when only one of a
// pair is set or the values are not integers with 0 <= rank < world_size.
//   auto r = RankFromEnvironment();
//   options.rank = r->rank; options.world_size = r->world_size;
struct DistributedRank {
  int rank = 0;
  int world_size = 1;
  std::string source = "none";  // "torchrun", "openmpi", "pmi", "slurm" or "none"
};
StatusOr<DistributedRank> RankFromEnvironment();

// Where a loader stands: the next batch Next() returns. Small and plain, so it can be
// saved with a checkpoint (ToString / Parse: one line of text, docs/LOADER.md).
//
// It carries everything the order depends on (the order rules above), and Create refuses
// a state whose values differ from the options and dataset it is given, naming each field
// that differs (in the state vs now). Text format, version 2:
//   shardpack-loader-state 2 epoch=E next_batch=B seed=S num_samples=N rank=R
//     world_size=W batch_size=BS shuffle=none|global|block tail=partial|drop|pad
//     block_size=K block_window=G shard_layout=<16 hex digits>
// (one line; items in any order, each exactly once). Parse rejects a text that is not
// that: another magic or version, a missing, unknown or repeated item, a value that is not
// a decimal number in range or not one of the names. Version 1 texts (written before
// tail, the block geometry and the shard layout were recorded) still parse: their
// `version` is 1, and Create checks only the eight items they carry.
struct LoaderState {
  static constexpr int kVersion = 2;

  int version = kVersion;  // of the text it was parsed from; ToString writes kVersion
  uint64_t epoch = 0;
  uint64_t next_batch = 0;  // batch index within the epoch
  // What the order depends on, checked when a loader is created from this state.
  uint64_t seed = 0;
  uint64_t num_samples = 0;
  int rank = 0;
  int world_size = 1;
  int batch_size = 0;
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  Tail tail = Tail::kPartial;
  // kBlock's geometry; recorded whatever the shuffle, checked for kBlock only.
  int block_size = 64;
  int block_window = 16;
  // ShardLayoutDigest of the dataset's shard record counts: blocks never cross a shard
  // boundary, so kBlock's order depends on them (checked for kBlock only).
  uint64_t shard_layout = 0;

  std::string ToString() const;
  static StatusOr<LoaderState> Parse(const std::string& text);
};

// A 64-bit digest of a dataset's shard record counts (the first half of the XXH3-128 of
// the counts as little-endian uint64s), as LoaderState::shard_layout records it.
uint64_t ShardLayoutDigest(const Manifest& manifest);

struct LoaderStats {
  uint64_t batches = 0;
  uint64_t samples = 0;
  uint64_t bytes = 0;             // pixel bytes copied into the ring
  uint64_t skipped_corrupt = 0;   // OnCorrupt::kSkip
  double seconds = 0;             // since Create
  double wait_seconds = 0;        // time Next() spent waiting for a batch
  double mean_ready_batches = 0;  // queue occupancy seen by Next(), averaged
  // The I/O path and why: "mapped (dataset 0.1 GB <= 75% of ...)", "read-ahead: io_uring,
  // depth 32, O_DIRECT, 7 units of up to 256 samples ahead (dataset 5.9 GB > ...)" or
  // "... (forced)".
  std::string io;
  uint64_t bytes_read = 0;  // read-ahead: bytes read from storage (mapped: 0, not counted)
  // Read-ahead: read units (batches; a block shuffle's windows) found in the page cache
  // whole and read through the mapping (io_reuse_page_cache; of the other units, the
  // records found there are read so too, the rest counted in bytes_read).
  uint64_t batches_from_page_cache = 0;
  // Mapped: bytes of the shards found outside the page cache and read ahead at once, by
  // the scan (DatasetAccess::WillNeedMissing) that a worker's first wait for the disk in an
  // epoch starts; none with read_ahead_bytes 0 (docs/LOADER.md, "A cache that lacks a few
  // blocks").
  uint64_t bytes_found_missing = 0;
  std::string ToString() const;  // "12034 samples/s, 2.37 GB/s, waited 0.4% ..."
};

class Loader;

// One batch, holding its ring slot until released (destroyed, moved from, or Release()).
class Batch {
 public:
  Batch() = default;
  Batch(Batch&& other) noexcept;
  Batch& operator=(Batch&& other) noexcept;
  ~Batch();

  uint64_t epoch() const;
  uint64_t index() const;  // batch index within the epoch
  int size() const;        // samples in the batch (N)
  int valid() const;       // samples that are not kPad repeats (the first valid() ones)
  int height() const;
  int width() const;
  int channels() const;
  OutputType type() const;

  // Host copy of the batch: N x H x W x C uint8 (kUint8) or N x C x H x W float / half
  // (other output types), contiguous. On the GPU path it holds the bytes that were
  // copied; with normalisation there, host_data() is the uint8 input and only the device
  // buffer holds the floats.
  const void* host_data() const;
  size_t host_bytes() const;
  std::span<const int64_t> labels() const;
  std::span<const uint64_t> indices() const;  // global sample indices

  // GPU path only (nullptr otherwise): the batch in device memory (the output type), and
  // the CUDA stream (cudaStream_t) and event (cudaEvent_t) that complete it.
  void* device_data() const;
  void* cuda_stream() const;
  void* cuda_event() const;
  // Makes `consumer_stream` (a cudaStream_t; nullptr: the legacy default stream) wait for
  // the batch without blocking the host, and remembers it as the stream that uses the
  // batch (see Release). No-op on the host path.
  Status WaitOn(void* consumer_stream);
  // Gives the slot back. On the GPU path the slot's device memory is overwritten only
  // after the work queued so far on the consumer's stream is done (an event recorded now,
  // waited for by the next copy on the GPU; no host wait): the stream last given to
  // WaitOn. Without a WaitOn, nothing orders the reuse: the consumer must have finished
  // with device_data() itself (e.g. synchronised). The destructor releases this way.
  void Release();
  // The same, with the work queued on `consumer_stream` (nullptr: the legacy default
  // stream) as what the reuse waits for.
  void Release(void* consumer_stream);

 private:
  friend class Loader;
  struct Slot;
  Batch(Loader* loader, Slot* slot);
  Loader* loader_ = nullptr;
  Slot* slot_ = nullptr;
};

// Memory. Create allocates everything the loader holds, once, after checking the sum
// against LoaderOptions::max_memory_bytes (default: io::MemoryBudget). With S = prefetch +
// 2 slots, B = batch_size, T = worker threads, H x W x C the output shape (the options'
// output_height x output_width, or the dataset's fixed size with Transform::kNone, which
// ParseManifest bounds by the largest image and, for raw pixels, by the shards' bytes):
//   ring        S x B x H x W x C bytes, and S x B x H x W x C x 4 (float32) or x 2
//               (float16) more when the host normalises, each buffer rounded up to 4 KiB
//               pages; on a GPU the S x B x H x W x C are pinned host memory (the device
//               buffers are the device's, and cudaMalloc refuses what it lacks)
//   workers     T x (the resize scratch of a transform from the dataset's largest side,
//               image::ResizeScratch::ReserveBytes; none without a transform, and, for
//               encoded images under a transform, min(H_max x W_max, kMaxImagePixels) x C
//               to decode into)
//   read-ahead  (kReadAhead only) the units' buffers, ReadAhead::BufferBytes: slots x unit
//               x (stored bytes per sample + 8 KiB), about io_buffer_bytes
//   the rest    S x B x 17 bytes (each slot's indices, labels, flags), (T + 1) x (A + 2) x
//               B x 8 bytes (the samples hinted ahead, A batches of them on the mapped
//               path: read_ahead_bytes / (B x stored bytes per sample), 1 to 256, else 0),
//               and 8 bytes per sample of the dataset (the epoch's order)
// H_max x W_max: the dataset's fixed size, or its max_side squared. None of it grows with
// what the records hold, except a variable-size dataset that promises no max_side, whose
// workers' scratch grows to the largest sample read (at most kMaxImagePixels).
class Loader {
 public:
  // Starts the workers on `state`'s epoch and batch (default: epoch 0, batch 0).
  // InvalidArgument for bad options or a state made for another configuration;
  // Unavailable for a device that cannot be used; ResourceExhausted, naming both numbers
  // and what to lower, when its memory (above) would exceed LoaderOptions::max_memory_bytes
  // or the memory available to the process, before any of it is allocated.
  static StatusOr<std::unique_ptr<Loader>> Create(std::shared_ptr<const Dataset> dataset,
                                                  const LoaderOptions& options,
                                                  const LoaderState* state = nullptr);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch of the current epoch; OutOfRange when the epoch is done.
  // FailedPrecondition if the consumer still holds the batch whose slot it needs (it
  // holds prefetch + 2 batches; batches held across StartEpoch count too).
  StatusOr<Batch> Next();
  // Waits at most `timeout` until Next() would return without blocking (a batch ready,
  // the epoch over, a failed batch, or its slot still held): true then, false on timeout.
  // For callers that must stay responsive while waiting (e.g. to signals). The time
  // waited counts in LoaderStats::wait_seconds.
  bool WaitReady(std::chrono::milliseconds timeout);
  // Moves to `epoch` (batch 0), dropping what was prefetched.
  Status StartEpoch(uint64_t epoch);

  LoaderState state() const;
  LoaderStats stats() const;
  uint64_t batches_per_epoch() const;
  const LoaderOptions& options() const;

  // The global sample indices this rank reads in `epoch`, in order, without the kPad
  // batch fill (the order rules above).
  std::vector<uint64_t> EpochOrder(uint64_t epoch) const;

  class Impl;

 private:
  friend class Batch;
  explicit Loader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardpack

#endif  // SHARDPACK_LOADER_H_
