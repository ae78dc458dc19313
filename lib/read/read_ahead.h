// The loader's read-ahead I/O path, for datasets bigger than the page cache.
//
// The epoch's order is known in advance, so the records of the next samples are read
// ahead, many reads in flight, into buffers allocated once. The order is cut into units,
// runs of consecutive positions read together: a batch, or under a block shuffle a window
// of blocks (whose samples are a permutation of whole blocks). A unit's stored records go
// into a read slot, `slots` of them (the byte budget decides how many). The loader's
// workers then parse and copy each sample out of its slot's buffer exactly as they would
// out of a mapping (format::ShardReader::Parse). A shard that shrinks gives a short read,
// reported as an IOError naming the file, record and offset.
//
// Planning a unit: each sample's record extent (format::ShardReader::Extent); runs of records that
// follow each other in the same file and in the unit are coalesced into one read of up to
// kMaxReadBytes (1 MiB), so a window's blocks are read whole, several reads each, wherever
// their records fall in the batches. With direct I/O each read covers the block-aligned
// superset of its records and lands at an aligned place in the buffer.
//
// Reads go to a ReadQueue: io_uring where the kernel allows it, else a pool of threads
// calling pread (both behind the same interface, both tested).
//
// Thread-safety: all methods may be called from any thread, except SetUnits (only while
// nothing is started); the loader starts units in order and finishes every position it
// was given once.
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

#include "format/shard_reader.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
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

// The queue LoaderOptions::io_queue names. kAuto: io_uring if it can be set up here (and every file
// has a descriptor), else pread threads. kUring fails where it cannot be set up, naming why. Room
// for `queued` reads waiting beyond the depth is made at once (more grows it).
StatusOr<std::unique_ptr<ReadQueue>> MakeReadQueue(IoQueue kind, int depth, size_t queued,
                                                   ReadQueue::Done done);

// The units of an epoch: positions [0, total) of its order (the positions its batches
// read) cut into runs, written as their ends to `ends`. Without windows (`windows`
// empty: global shuffle, no shuffle), one unit per batch of `batch`. Under a block
// shuffle, one per window of blocks (EpochPlan::window_ends), a window smaller than a
// batch joined to the next and one bigger than `cap` (>= 2 * batch) cut into equal
// parts, so that every unit but the last holds at least a batch and no batch spans more
// than two units.
void ReadUnits(std::span<const uint64_t> windows, uint64_t total, uint64_t batch, uint64_t cap,
               std::vector<uint64_t>* ends);

struct ReadAheadOptions {
  int unit_samples = 256;   // the most samples of a unit (the buffers are sized for it)
  int slots = 2;            // units read ahead (>= 1)
  int depth = 16;           // reads in flight
  bool direct = true;       // bypass the page cache (O_DIRECT, else DONTNEED after reading)
  bool reuse_cache = true;  // read records found in the page cache through the mapping
  IoQueue queue = IoQueue::kAuto;
};

class ReadAhead {
 public:
  // Opens every shard of `dataset` for reading (through its Env) and allocates the slots'
  // buffers for units of typical records (a unit of larger ones grows its slot once).
  // Unit u is read into slot u % slots.
  static StatusOr<std::unique_ptr<ReadAhead>> Create(const Dataset& dataset,
                                                     const ReadAheadOptions& options);
  // The bytes of the buffers Create allocates: slots x unit_samples x (the dataset's
  // stored bytes per sample + 8 KiB), rounded up to the direct-I/O alignment.
  static uint64_t BufferBytes(const Dataset& dataset, const ReadAheadOptions& options);
  ~ReadAhead();

  // The epoch's units: unit u holds the positions [ends[u - 1], ends[u]) of the order
  // (ends[-1] = 0), ascending, at most unit_samples each. Only after Reset (or Create).
  void SetUnits(std::span<const uint64_t> ends);
  size_t num_units() const { return ends_.size(); }
  // The unit holding `position` (num_units() past the last), and where it ends.
  uint64_t UnitOf(uint64_t position) const;
  uint64_t UnitEnd(uint64_t unit) const { return ends_[unit]; }

  // Takes unit `unit`'s slot for it if the slot's previous unit is finished (or the unit
  // has it already): then the unit is to be started, by Start, and nothing else may take
  // the slot meanwhile. False: not yet.
  bool Reserve(uint64_t unit);
  // Plans and queues the reads of positions [first, UnitEnd(unit)) of unit `unit`
  // (reserved; first is its start, or a resume point inside it), whose samples are
  // `indices`. An extent that cannot be found (a damaged LMDB shard) fails only that
  // sample, when Sample asks.
  void Start(uint64_t unit, uint64_t first, std::span<const uint64_t> indices);
  // Waits until the sample at `position` (its unit started) is read, then parses it into
  // `out`, whose pointers stay valid until the position is finished.
  Status Sample(uint64_t position, bool verify_crc, SampleView* out,
                format::CopyTarget* copy = nullptr);
  // Positions [first, first + count) are done with; a unit all of whose started positions
  // are frees its slot for the unit `slots` later. Returns whether a slot was freed.
  bool Finish(uint64_t first, uint64_t count);
  // Waits for every read in flight, then frees every slot (a restart of the loader).
  void Reset();
  // Every Sample waiting, and every one until Reset, fails at once: the loader is
  // restarting or stopping, and a unit that a failed batch left unfinished may never
  // start.
  void Cancel();

  // "io_uring, depth 16, O_DIRECT, 2 units of up to 1024 samples ahead".
  std::string Describe() const;
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }
  // Units found in the page cache whole and read through the mapping instead (a unit
  // found there in part reads the rest from storage).
  uint64_t cached_units() const { return cached_units_.load(std::memory_order_relaxed); }
  // Reads queued so far (adjacent records coalesce into one).
  uint64_t reads_issued() const { return reads_issued_.load(std::memory_order_relaxed); }

 private:
  struct Slot;
  ReadAhead(const Dataset& dataset, const ReadAheadOptions& options);
  void Completed(uint64_t tag, StatusOr<size_t> result);
  Slot& SlotOf(uint64_t unit) const { return *slots_[unit % slots_.size()]; }

  const Dataset& dataset_;
  ReadAheadOptions options_;
  std::vector<std::unique_ptr<io::RandomAccessFile>> files_;  // one per shard
  bool direct_ = false;                                       // every file opened direct
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<uint64_t> ends_;  // the units' ends (SetUnits)
  std::unique_ptr<ReadQueue> queue_;

  mutable std::mutex mu_;
  std::condition_variable cv_;  // a read completed, or a unit started
  int in_flight_ = 0;
  bool cancelled_ = false;
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> reads_issued_{0};
  std::atomic<uint64_t> cached_units_{0};
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_READ_AHEAD_H_
