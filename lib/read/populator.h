// Threads that map the records the loader's workers will read next, ahead of them
// (DatasetAccess::Populate), for the mapped path reading a dataset into huge pages
// (LoaderOptions::huge_pages, docs/LOADER.md "The first epoch from the page cache").
//
// MADV_WILLNEED reads in the background but brings pages in 4 KiB at a time whatever the
// mapping's advice; a fault (or MADV_POPULATE_READ) on a mapping advised MADV_HUGEPAGE
// reads the aligned 2 MiB around the page into one folio, but waits for it. So the read
// ahead is done by threads of its own that wait on the disk in parallel, a record at a
// time, in the order the records were added: each takes the next record, maps it and takes
// another. A record a worker reaches first is mapped by that worker's faults, and the
// populate after it finds its pages mapped.
//
// Thread-safety: Add and Clear may be called from any thread.
#ifndef SHARDPACK_READ_POPULATOR_H_
#define SHARDPACK_READ_POPULATOR_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace shardpack {
class Dataset;
}

namespace shardpack::read {

class Populator {
 public:
  // `dataset` must outlive the populator.
  Populator(const Dataset* dataset, int threads);
  // Stops after the records being mapped (what is queued is dropped).
  ~Populator();
  Populator(const Populator&) = delete;
  Populator& operator=(const Populator&) = delete;

  // Room for this many queued samples, so that Add allocates nothing below it.
  void Reserve(size_t samples);
  // Queues these samples (global indices) behind those queued already.
  void Add(std::span<const uint64_t> indices);
  // Drops what is queued (a new epoch's order replaces it).
  void Clear();
  // Returns once nothing is queued and no record is being mapped.
  void Drain();

 private:
  void Run();

  const Dataset* dataset_;
  std::mutex mu_;
  std::condition_variable cv_;       // threads: work queued, or stopping
  std::condition_variable idle_cv_;  // Drain: the queue ran dry and no thread is busy
  // The queue is queue_[head_..]: a vector emptied once all is taken, so that it keeps
  // its capacity.
  std::vector<uint64_t> queue_;
  size_t head_ = 0;
  int busy_ = 0;  // threads mapping a record now
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_POPULATOR_H_
