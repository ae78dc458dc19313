// The loader's read-ahead I/O path, for datasets bigger than the page cache.
//
// The epoch's order is known in advance, so the records of the next batches are read
// ahead, many reads in flight, into buffers allocated once: a batch of stored records per
// read slot, `slots` of them (the byte budget decides how many). The loader's workers then
// parse and copy each sample out of its slot's buffer exactly as they would out of a
// mapping (read::ShardReader::Parse). A shard that shrinks gives a short read, reported as
// an IOError naming the file, record and offset.
//
// Planning a batch: each sample's record extent (ShardReader::Extent); runs of records
// that follow each other in the same file and in the batch (block shuffle, no shuffle) are
// coalesced into one read of up to kMaxReadBytes. With direct I/O each read covers the
// block-aligned superset of its records and lands at an aligned place in the buffer.
//
// Reads go to a ReadQueue: io_uring where the kernel allows it, else a pool of threads
// calling pread (both behind the same interface, both tested).
//
// Thread-safety: all methods may be called from any thread; the loader calls Start in
// batch order and Finish once per started batch.
#ifndef SHARDPACK_READ_READ_AHEAD_H_
#define SHARDPACK_READ_READ_AHEAD_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "shardpack/dataset.h"
#include "shardpack/status.h"

namespace shardpack::io {
class RandomAccessFile;
}

namespace shardpack::read {

// One read of `length` bytes at `offset` of `file` into `dst`; `tag` comes back with its
// completion.
struct ReadRequest {
  const io::RandomAccessFile* file = nullptr;
  uint64_t offset = 0;
  size_t length = 0;
  uint8_t* dst = nullptr;
  uint64_t tag = 0;
};

// Runs reads asynchronously, up to its depth at once, and reports each completion (the
// bytes read, fewer only at the end of the file, or the error) to the callback given at
// creation, from its own thread(s).
class ReadQueue {
 public:
  using Done = std::function<void(uint64_t tag, StatusOr<size_t> result)>;
  virtual ~ReadQueue() = default;
  virtual void Submit(std::span<const ReadRequest> requests) = 0;
  // "io_uring, depth 16" or "pread, 16 threads".
  virtual std::string Describe() const = 0;
};

enum class QueueKind { kAuto, kUring, kPread };

// kAuto: io_uring if it can be set up here (and every file has a descriptor), else pread
// threads. kUring fails where it cannot be set up, naming why.
StatusOr<std::unique_ptr<ReadQueue>> MakeReadQueue(QueueKind kind, int depth, ReadQueue::Done done);

struct ReadAheadOptions {
  int batch_size = 256;
  int slots = 2;            // batches read ahead (>= 1)
  int depth = 16;           // reads in flight
  bool direct = true;       // bypass the page cache (O_DIRECT, else DONTNEED after reading)
  bool reuse_cache = true;  // read batches found in the page cache through the mapping
  QueueKind queue = QueueKind::kAuto;
};

class ReadAhead {
 public:
  // Opens every shard of `dataset` for reading (through its Env) and allocates the slots'
  // buffers for batches of typical records (a batch of larger ones grows its slot once).
  static StatusOr<std::unique_ptr<ReadAhead>> Create(const Dataset& dataset,
                                                     const ReadAheadOptions& options);
  ~ReadAhead();

  // Whether batch `batch` may start now: its slot's previous batch is finished.
  bool CanStart(uint64_t batch) const;
  // Plans and queues the reads of batch `batch`, whose samples are `indices`. An extent
  // that cannot be found (a damaged LMDB shard) fails only that sample, when Sample asks.
  void Start(uint64_t batch, std::span<const uint64_t> indices);
  // Waits until sample `position` of batch `batch` (started) is read, then parses it into
  // `out`, whose pointers stay valid until Finish(batch).
  Status Sample(uint64_t batch, int position, bool verify_crc, SampleView* out);
  // Every sample of `batch` is done with: its slot may take batch + slots.
  void Finish(uint64_t batch);
  // Waits for every read in flight, then frees every slot (a restart of the loader).
  void Reset();

  std::string Describe() const;  // "io_uring, depth 16, O_DIRECT, 2 batches ahead"
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  // Batches found in the page cache and read through the mapping instead.
  uint64_t cached_batches() const { return cached_batches_.load(std::memory_order_relaxed); }
  // Reads queued so far (adjacent records coalesce into one).
  uint64_t reads_issued() const { return reads_issued_.load(std::memory_order_relaxed); }

 private:
  struct Slot;
  ReadAhead(const Dataset& dataset, const ReadAheadOptions& options);
  void Completed(uint64_t tag, StatusOr<size_t> result);
  Slot& SlotOf(uint64_t batch) const;

  const Dataset& dataset_;
  ReadAheadOptions options_;
  std::vector<std::unique_ptr<io::RandomAccessFile>> files_;  // one per shard
  bool direct_ = false;                                       // every file opened direct
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<ReadQueue> queue_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // a read completed, or a batch started
  int in_flight_ = 0;
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> reads_issued_{0};
  std::atomic<uint64_t> cached_batches_{0};
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_READ_AHEAD_H_
