#include "read/read_ahead.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "format/shard_reader.h"
#include "io/env.h"
#include "io/mapped_range.h"
#include "read/dataset_access.h"

namespace shardpack::read {
namespace {

constexpr size_t kAlign = io::RandomAccessFile::kDirectAlignment;
// Adjacent records are read together up to this many bytes: large enough for the disk's
// sequential rate (fio's sequential figure is taken at 1 MiB), small enough that a block's
// reads run in parallel and the device queue stays short. Against 4 MiB, a block shuffle
// out of core read 11,200 samples/s against 10,000 (medians of 10 alternating runs;
// docs/LOADER.md).
constexpr size_t kMaxReadBytes = 1 << 20;
// A record also joins the read before it across a gap of at most 1/kGapShare of its own
// length, read and thrown away: LMDB stores each large value in overflow pages of its
// own, so consecutive values lie 4 KiB apart at most (a page's padding and header), and
// without this a block shuffle's LMDB records were a read each (a 196 KiB value: up to
// 12 KiB of gap, 6% more bytes read).
constexpr uint64_t kGapShare = 16;

std::string Count(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// A FIFO over a ring of slots that grows (doubling) only when full: after the first
// batches it never allocates, unlike std::deque, which allocates and frees blocks as it
// moves.
template <typename T>
class RingQueue {
 public:
  bool empty() const { return count_ == 0; }
  T& front() { return slots_[head_]; }
  void pop_front() {
    head_ = (head_ + 1) % slots_.size();
    --count_;
  }
  void push_back(const T& v) {
    Reserve(count_ + 1);
    slots_[(head_ + count_) % slots_.size()] = v;
    ++count_;
  }
  void push_front(const T& v) {
    Reserve(count_ + 1);
    head_ = (head_ + slots_.size() - 1) % slots_.size();
    slots_[head_] = v;
    ++count_;
  }
  // Room for n entries.
  void Reserve(size_t n) {
    if (n <= slots_.size()) return;
    std::vector<T> bigger(std::max({n, size_t{64}, 2 * slots_.size()}));
    for (size_t i = 0; i < count_; ++i) bigger[i] = slots_[(head_ + i) % slots_.size()];
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t count_ = 0;
};

size_t AlignDown(uint64_t n) { return static_cast<size_t>(n / kAlign * kAlign); }
size_t AlignUp(uint64_t n) { return static_cast<size_t>((n + kAlign - 1) / kAlign * kAlign); }

// ---- pread threads ----

class PreadQueue final : public ReadQueue {
 public:
  PreadQueue(int threads, size_t queued, Done done) : done_(std::move(done)) {
    queue_.Reserve(queued);
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
  }
  ~PreadQueue() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void Submit(std::span<const ReadRequest> requests) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const ReadRequest& r : requests) queue_.push_back(r);
    }
    cv_.notify_all();
  }

  std::string Describe() const override {
    return "pread, " + std::to_string(threads_.size()) + " threads";
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to read
      const ReadRequest r = queue_.front();
      queue_.pop_front();
      lock.unlock();
      done_(r.tag, r.file->Read(r.offset, r.length, r.dst));
      lock.lock();
    }
  }

  Done done_;
  std::mutex mu_;
  std::condition_variable cv_;
  RingQueue<ReadRequest> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// ---- io_uring ----

// Submitters fill the submission queue under a mutex, up to `depth` reads in flight (the
// rest wait in a list); one thread reaps completions, resubmits the rest of a short read
// (a cached read may stop early) and tops the queue up from the list.
class UringQueue final : public ReadQueue {
 public:
  static StatusOr<std::unique_ptr<ReadQueue>> Create(int depth, size_t queued, Done done) {
    auto q = std::unique_ptr<UringQueue>(new UringQueue(depth, std::move(done)));
    q->waiting_.Reserve(queued);
    const int rc = io_uring_queue_init(static_cast<unsigned>(depth) + 1, &q->ring_, 0);
    if (rc < 0) return ErrnoError("io_uring_queue_init", -rc);
    q->ready_ = true;
    q->reaper_ = std::thread([p = q.get()] { p->Reap(); });
    return std::unique_ptr<ReadQueue>(std::move(q));
  }

  ~UringQueue() override {
    if (!ready_) return;
    {
      // The owner destroys the queue with no read in flight; a no-op wakes the reaper.
      std::lock_guard<std::mutex> lock(mu_);
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe != nullptr) {
        io_uring_prep_nop(sqe);
        sqe->user_data = kStop;
        io_uring_submit(&ring_);
      }
    }
    reaper_.join();
    io_uring_queue_exit(&ring_);
  }

  void Submit(std::span<const ReadRequest> requests) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ReadRequest& r : requests) waiting_.push_back({r, 0});
    Fill();
  }

  std::string Describe() const override { return "io_uring, depth " + std::to_string(depth_); }

 private:
  static constexpr uint64_t kStop = std::numeric_limits<uint64_t>::max();
  struct Entry {
    ReadRequest request;
    size_t done = 0;  // bytes read so far
  };

  UringQueue(int depth, Done done)
      : depth_(depth), done_(std::move(done)), entries_(static_cast<size_t>(depth)) {
    for (int i = depth - 1; i >= 0; --i) free_.push_back(i);
  }

  // Under mu_: moves waiting reads into the ring while it has room.
  void Fill() {
    bool queued = false;
    while (!waiting_.empty() && !free_.empty()) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      const int e = free_.back();
      free_.pop_back();
      entries_[static_cast<size_t>(e)] = waiting_.front();
      waiting_.pop_front();
      Prepare(sqe, e);
      queued = true;
    }
    if (queued) io_uring_submit(&ring_);
  }

  void Prepare(io_uring_sqe* sqe, int e) {
    const Entry& entry = entries_[static_cast<size_t>(e)];
    const ReadRequest& r = entry.request;
    io_uring_prep_read(sqe, r.file->fd(), r.dst + entry.done,
                       static_cast<unsigned>(r.length - entry.done), r.offset + entry.done);
    sqe->user_data = static_cast<uint64_t>(e);
  }

  void Reap() {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR) continue;
      if (rc < 0) std::abort();  // the ring itself broke: nothing sensible remains
      const uint64_t id = cqe->user_data;
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (id == kStop) return;
      const int e = static_cast<int>(id);
      // Entries are written under the mutex by the submitting threads; read them under it
      // too (the kernel orders the two, but no tool can see that).
      std::unique_lock<std::mutex> lock(mu_);
      Entry& entry = entries_[static_cast<size_t>(e)];
      const ReadRequest& r = entry.request;
      bool finished = true;
      StatusOr<size_t> result = size_t{0};
      if (res == -EINTR || res == -EAGAIN) {
        finished = false;
      } else if (res < 0) {
        result = ErrnoError(
            "read of " + std::to_string(r.length) + " bytes at offset " + std::to_string(r.offset),
            -res);
      } else {
        entry.done += static_cast<size_t>(res);
        const bool at_end = res == 0 || (r.file->direct() && entry.done % kAlign != 0);
        finished = at_end || entry.done == r.length;
        result = entry.done;
      }
      if (!finished) {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe != nullptr) {
          Prepare(sqe, e);
          io_uring_submit(&ring_);
          continue;
        }
        waiting_.push_front(entry);  // no room: back to the head of the list
        free_.push_back(e);
        Fill();
        continue;
      }
      const ReadRequest done = r;
      free_.push_back(e);
      Fill();
      lock.unlock();
      done_(done.tag, std::move(result));
    }
  }

  const int depth_;
  Done done_;
  io_uring ring_{};
  bool ready_ = false;
  std::mutex mu_;
  std::vector<Entry> entries_;  // by id, the reads in the ring
  std::vector<int> free_;       // ids not in the ring
  RingQueue<Entry> waiting_;    // reads beyond the depth
  std::thread reaper_;
};

}  // namespace

StatusOr<std::unique_ptr<ReadQueue>> MakeReadQueue(IoQueue kind, int depth, size_t queued,
                                                   ReadQueue::Done done) {
  depth = std::max(1, depth);
  if (kind != IoQueue::kPread) {
    auto uring = UringQueue::Create(depth, queued, done);
    if (uring.ok() || kind == IoQueue::kUring) return uring;
  }
  return std::unique_ptr<ReadQueue>(new PreadQueue(depth, queued, std::move(done)));
}

// ---- ReadAhead ----

void ReadUnits(std::span<const uint64_t> windows, uint64_t total, uint64_t batch, uint64_t cap,
               std::vector<uint64_t>* ends) {
  ends->clear();
  batch = std::max<uint64_t>(1, batch);
  cap = std::max(cap, 2 * batch);
  if (windows.empty()) {
    for (uint64_t end = batch; end < total; end += batch) ends->push_back(end);
  } else {
    uint64_t begin = 0;
    for (const uint64_t window_end : windows) {
      const uint64_t end = std::min(window_end, total);
      if (end - begin < batch && end < total) continue;  // joined to the next window
      const uint64_t size = end - begin;
      const uint64_t parts = (size + cap - 1) / cap;  // each at least cap / 2 >= batch
      for (uint64_t k = 1; k < parts; ++k) ends->push_back(begin + size * k / parts);
      if (end > begin) ends->push_back(end);
      begin = end;
      if (end == total) break;
    }
  }
  if (total > 0 && (ends->empty() || ends->back() != total)) ends->push_back(total);
}

struct ReadAhead::Slot {
  static constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
  struct Item {  // one sample of the unit
    size_t shard = 0;
    uint64_t record = 0;
    size_t at = 0;        // where its bytes begin in the buffer
    uint64_t offset = 0;  // and in its file
    uint64_t length = 0;
    int read = -1;        // its read; -1: its extent was not found, or it is mapped
    bool mapped = false;  // in the page cache: read through the mapping
    Status status;        // why its extent was not found
  };
  struct Read {
    size_t need = 0;  // bytes the read must deliver for its records to be whole
    bool done = false;
    Status status;
  };

  uint64_t unit = kNone;  // the unit it holds, kNone when free
  uint64_t first = 0;     // its first position started
  uint64_t count = 0;     // positions started
  uint64_t finished = 0;  // of them, finished
  bool started = false;
  bool cached = false;      // its records are in the page cache: read through the mapping
  int pending = 0;          // reads in flight
  std::vector<Item> items;  // the positions' samples, in order
  std::vector<Read> reads;
  std::vector<ReadRequest> requests;  // planning scratch, kept for its capacity
  std::vector<size_t> starts;         // where each read's first record lands in the buffer
  std::vector<uint32_t> order;        // planning scratch: positions in file order
  uint8_t* buffer = nullptr;
  size_t capacity = 0;

  ~Slot() { std::free(buffer); }
  bool Grow(size_t bytes) {
    if (bytes <= capacity) return true;
    std::free(buffer);
    capacity = AlignUp(bytes);
    buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, capacity));
    if (buffer == nullptr) capacity = 0;
    io::PrefaultWrite(buffer, capacity);  // the first units then take no page faults
    return buffer != nullptr;
  }
};

namespace {

// One slot's buffer as Create allocates it: a unit of typical records.
size_t SlotBytes(const Dataset& dataset, int unit_samples) {
  const Manifest& m = dataset.manifest();
  uint64_t stored = 0;
  for (const ShardEntry& e : m.shards) stored += e.data.bytes;
  const uint64_t typical = m.num_samples > 0 ? stored / m.num_samples : 0;
  return static_cast<size_t>(std::max(1, unit_samples)) * AlignUp(typical + 2 * kAlign);
}

}  // namespace

uint64_t ReadAhead::BufferBytes(const Dataset& dataset, const ReadAheadOptions& options) {
  return static_cast<uint64_t>(std::max(1, options.slots)) *
         SlotBytes(dataset, options.unit_samples);
}

ReadAhead::ReadAhead(const Dataset& dataset, const ReadAheadOptions& options)
    : dataset_(dataset), options_(options) {}

ReadAhead::~ReadAhead() {
  if (queue_ == nullptr) return;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return in_flight_ == 0; });
  }
  // Joins the queue's threads: the last completion may still be notifying cv_.
  queue_.reset();
}

StatusOr<std::unique_ptr<ReadAhead>> ReadAhead::Create(const Dataset& dataset,
                                                       const ReadAheadOptions& options) {
  auto ra = std::unique_ptr<ReadAhead>(new ReadAhead(dataset, options));
  io::Env* env = DatasetAccess(dataset).env();
  bool all_direct = true;
  bool all_fds = true;
  const size_t shards = dataset.manifest().shards.size();
  for (size_t i = 0; i < shards; ++i) {
    SHARDPACK_ASSIGN_OR_RETURN(
        auto file, env->OpenRandomAccess(DatasetAccess(dataset).shard(i).path(), options.direct));
    all_direct = all_direct && file->direct();
    all_fds = all_fds && file->fd() >= 0;
    ra->files_.push_back(std::move(file));
  }
  ra->direct_ = options.direct && all_direct && shards > 0;
  IoQueue kind = options.queue;
  if (!all_fds) {
    if (kind == IoQueue::kUring) {
      return InvalidArgumentError("read-ahead: io_uring needs files with descriptors");
    }
    kind = IoQueue::kPread;
  }
  ReadAhead* raw = ra.get();
  // At most a read per record of every slot waits at once.
  const size_t queued = static_cast<size_t>(std::max(1, options.slots)) *
                        static_cast<size_t>(std::max(1, options.unit_samples));
  SHARDPACK_ASSIGN_OR_RETURN(ra->queue_, MakeReadQueue(kind, options.depth, queued,
                                                       [raw](uint64_t tag, StatusOr<size_t> r) {
                                                         raw->Completed(tag, std::move(r));
                                                       }));
  // Buffers for units of typical records; a unit of larger ones grows its slot once.
  ra->options_.unit_samples = std::max(1, options.unit_samples);
  const size_t samples = static_cast<size_t>(ra->options_.unit_samples);
  const size_t bytes = SlotBytes(dataset, ra->options_.unit_samples);
  for (int i = 0; i < std::max(1, options.slots); ++i) {
    auto slot = std::make_unique<Slot>();
    if (!slot->Grow(bytes)) {
      return ResourceExhaustedError("read-ahead: cannot allocate " + std::to_string(bytes) +
                                    " bytes for a unit of records");
    }
    slot->items.reserve(samples);
    slot->reads.reserve(samples);
    slot->requests.reserve(samples);
    slot->order.reserve(samples);
    ra->slots_.push_back(std::move(slot));
  }
  return ra;
}

void ReadAhead::SetUnits(std::span<const uint64_t> ends) { ends_.assign(ends.begin(), ends.end()); }

uint64_t ReadAhead::UnitOf(uint64_t position) const {
  return static_cast<uint64_t>(std::upper_bound(ends_.begin(), ends_.end(), position) -
                               ends_.begin());
}

bool ReadAhead::Reserve(uint64_t unit) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = SlotOf(unit);
  if (slot.unit == unit) return true;
  if (slot.unit != Slot::kNone) return false;
  slot.unit = unit;
  slot.started = false;
  return true;
}

namespace {

// Start's plan, in file order (shard, offset): runs of records that follow each other in a
// file become one read each (a window's blocks come whole); each item of `order` notes
// its read and where it begins in it. Templates over ReadAhead's private Slot, which
// these cannot name.
template <typename Slot>
void GroupIntoReads(const std::vector<std::unique_ptr<io::RandomAccessFile>>& files, Slot& slot) {
  std::vector<uint32_t>& order = slot.order;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const auto& x = slot.items[a];
    const auto& y = slot.items[b];
    return x.shard != y.shard ? x.shard < y.shard : x.offset < y.offset;
  });
  uint64_t run_end = 0;  // where the open read's last record ends in its file
  for (const uint32_t position : order) {
    auto& item = slot.items[position];
    ReadRequest* open = slot.requests.empty() ? nullptr : &slot.requests.back();
    const bool joins = open != nullptr && open->file == files[item.shard].get() &&
                       item.offset >= run_end && item.offset - run_end <= item.length / kGapShare &&
                       item.offset + item.length - open->offset <= kMaxReadBytes;
    if (joins) {
      item.read = static_cast<int>(slot.requests.size()) - 1;
      item.at = static_cast<size_t>(item.offset - open->offset);  // relative for now
      run_end = item.offset + item.length;
      open->length = static_cast<size_t>(run_end - open->offset);
    } else {
      ReadRequest r;
      r.file = files[item.shard].get();
      r.offset = item.offset;
      r.length = static_cast<size_t>(item.length);
      item.read = static_cast<int>(slot.requests.size());
      item.at = 0;
      run_end = item.offset + item.length;
      slot.requests.push_back(r);
    }
  }
}

// Places the reads in the buffer, one after another (block-aligned supersets when
// direct): each request's tag is its place until the buffer is known, slot.starts where
// its first record lands. Returns the bytes they take.
template <typename Slot>
size_t PlaceReads(Slot& slot) {
  size_t total = 0;
  std::vector<size_t>& starts = slot.starts;
  starts.clear();
  for (ReadRequest& r : slot.requests) {
    const bool direct = r.file->direct();
    const uint64_t begin = direct ? AlignDown(r.offset) : r.offset;
    const uint64_t end = direct ? AlignUp(r.offset + r.length) : r.offset + r.length;
    total = AlignUp(total);
    starts.push_back(total + static_cast<size_t>(r.offset - begin));
    typename Slot::Read read;
    read.need = static_cast<size_t>(r.offset + r.length - begin);
    slot.reads.push_back(read);
    r.tag = total;
    r.length = static_cast<size_t>(end - begin);
    r.offset = begin;
    total += r.length;
  }
  return total;
}

}  // namespace

void ReadAhead::Start(uint64_t unit, uint64_t first, std::span<const uint64_t> indices) {
  Slot& slot = SlotOf(unit);
  {
    // A unit that failed part-way may have left reads in flight into this buffer.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return slot.pending == 0; });
    slot.unit = unit;  // reserved already, unless the caller skipped Reserve
    slot.first = first;
    slot.count = indices.size();
    slot.finished = 0;
    slot.started = false;
  }
  slot.items.clear();
  slot.reads.clear();
  slot.requests.clear();
  // Records in the page cache already are read from there, zero-copy: a dataset that fits
  // in memory after all, or the part of one that another reader brought in, costs no
  // second read, and a unit whose records all are there none at all. Each record is
  // probed (a mincore, about 1 us: against its read from storage, 196 KB at 1.3 GB/s, 150
  // us), so a unit that lacks a few records (a reclaimer took their folios) reads those
  // few from storage, neither the whole unit nor them by synchronous 4 KiB faults.
  bool any_mapped = false;
  // Plan: each sample's extent; then the reads (GroupIntoReads, PlaceReads).
  std::vector<uint32_t>& order = slot.order;
  order.clear();
  for (const uint64_t index : indices) {
    Slot::Item item;
    auto loc = dataset_.Locate(index);
    if (!loc.ok()) {
      item.status = loc.status();
    } else {
      item.shard = loc->shard;
      item.record = loc->record;
      if (options_.reuse_cache && DatasetAccess(dataset_).Resident(index)) {
        item.mapped = true;
        any_mapped = true;
        slot.items.push_back(std::move(item));
        continue;
      }
      auto extent = DatasetAccess(dataset_).shard(item.shard).Extent(item.record);
      if (extent.ok()) {
        item.offset = extent->offset;
        item.length = extent->length;
        order.push_back(static_cast<uint32_t>(slot.items.size()));
      } else {
        item.status = extent.status();
      }
    }
    slot.items.push_back(std::move(item));
  }
  slot.cached = any_mapped && order.empty();
  if (slot.cached) {
    cached_units_.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      slot.started = true;
    }
    cv_.notify_all();
    return;
  }
  GroupIntoReads(files_, slot);
  const size_t total = PlaceReads(slot);
  Status grown = slot.Grow(total)
                     ? Status::Ok()
                     : ResourceExhaustedError("read-ahead: cannot allocate " +
                                              std::to_string(total) + " bytes for a unit");
  const uint64_t slot_index = unit % slots_.size();
  for (size_t k = 0; k < slot.requests.size(); ++k) {
    ReadRequest& r = slot.requests[k];
    r.dst = slot.buffer + r.tag;
    r.tag = slot_index << 32 | k;
  }
  for (Slot::Item& item : slot.items) {
    if (item.read >= 0) item.at += slot.starts[static_cast<size_t>(item.read)];
    if (!grown.ok() && item.read >= 0) {
      item.status = grown;
      item.read = -1;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot.started = true;
    if (grown.ok()) {
      slot.pending = static_cast<int>(slot.requests.size());
      in_flight_ += slot.pending;
    }
  }
  cv_.notify_all();
  if (grown.ok() && !slot.requests.empty()) {
    reads_issued_.fetch_add(slot.requests.size(), std::memory_order_relaxed);
    queue_->Submit(slot.requests);
  }
}

void ReadAhead::Completed(uint64_t tag, StatusOr<size_t> result) {
  Slot& slot = *slots_[tag >> 32];
  const size_t k = tag & 0xffffffffu;
  const ReadRequest& r = slot.requests[k];
  if (result.ok()) {
    bytes_read_.fetch_add(*result, std::memory_order_relaxed);
    if (options_.direct) r.file->DontNeed(r.offset, r.length);  // cached files only
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    Slot::Read& read = slot.reads[k];
    read.done = true;
    if (!result.ok()) {
      read.status = result.status();
    } else if (*result < read.need) {
      read.status = IOError(std::string(io::kShrunkWhileOpen));
    }
    --slot.pending;
    --in_flight_;
  }
  cv_.notify_all();
}

Status ReadAhead::Sample(uint64_t position, bool verify_crc, SampleView* out,
                         format::CopyTarget* copy) {
  const uint64_t unit = UnitOf(position);
  Slot& slot = SlotOf(unit);
  const Slot::Item* item = nullptr;
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] {
      if (cancelled_) return true;
      if (slot.unit != unit || !slot.started) return false;
      const Slot::Item& it = slot.items[static_cast<size_t>(position - slot.first)];
      return slot.cached || it.mapped || it.read < 0 ||
             slot.reads[static_cast<size_t>(it.read)].done;
    });
    if (cancelled_) {
      return FailedPreconditionError("read-ahead: cancelled while waiting for a record");
    }
    item = &slot.items[static_cast<size_t>(position - slot.first)];
    if (slot.cached || item->mapped) {
      if (!item->status.ok()) return item->status;
      lock.unlock();
      return DatasetAccess(dataset_).shard(item->shard).Get(item->record, verify_crc, out, copy);
    }
    if (item->read < 0) return item->status;
    const Status& s = slot.reads[static_cast<size_t>(item->read)].status;
    if (!s.ok()) return DatasetAccess(dataset_).shard(item->shard).Fault(item->record, s);
  }
  return DatasetAccess(dataset_)
      .shard(item->shard)
      .Parse(item->record, slot.buffer + item->at, item->length, verify_crc, out, copy);
}

bool ReadAhead::Finish(uint64_t first, uint64_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  bool freed = false;
  for (uint64_t unit = UnitOf(first); count > 0 && unit < ends_.size(); ++unit) {
    const uint64_t n = std::min(count, ends_[unit] - first);
    Slot& slot = SlotOf(unit);
    if (slot.unit == unit && (slot.finished += n) >= slot.count) {
      slot.unit = Slot::kNone;
      slot.started = false;
      freed = true;
    }
    first += n;
    count -= n;
  }
  return freed;
}

void ReadAhead::Reset() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return in_flight_ == 0; });
  for (auto& slot : slots_) {
    slot->unit = Slot::kNone;
    slot->started = false;
  }
  cancelled_ = false;
}

void ReadAhead::Cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

std::string ReadAhead::Describe() const {
  return queue_->Describe() +
         (direct_           ? ", O_DIRECT"
          : options_.direct ? ", cached then dropped"
                            : ", cached") +
         ", " + Count(slots_.size(), "unit", "units") + " of up to " +
         Count(static_cast<size_t>(options_.unit_samples), "sample", "samples") + " ahead";
}

}  // namespace shardpack::read
