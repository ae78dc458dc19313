// The library's own readers' access to a Dataset: its shards as their formats read them,
// the file system its files are read through, and the page-cache hints the loader gives
// ahead of its reads (docs/LOADER.md, "I/O paths"). Not part of the public Dataset: these
// change how fast a reader is, never what it reads, and they follow the loader's design.
//
//   read::DatasetAccess access(dataset);
//   access.WillNeed(batch_indices);
//
// Every hint is a hint only: no error, no effect on what Get returns; indices past the end
// are ignored. Thread-safety: every method may be called from any number of threads.
// Lifetime: the Dataset must outlive the access.
#ifndef SHARDPACK_READ_DATASET_ACCESS_H_
#define SHARDPACK_READ_DATASET_ACCESS_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "shardpack/dataset.h"

namespace shardpack::format {
class ShardReader;
}

namespace shardpack::read {

class DatasetAccess {
 public:
  explicit DatasetAccess(const Dataset& dataset) : dataset_(&dataset) {}

  // Shard i of manifest().shards as its format reads it (format/shard_reader.h).
  const format::ShardReader& shard(size_t i) const;
  // Sample `index`'s shard reader and record in it: Dataset::Locate without the record's
  // offset, which a sample's read does not need. OutOfRange past the last sample.
  struct ShardRecord {
    const format::ShardReader* shard = nullptr;
    uint64_t record = 0;
  };
  StatusOr<ShardRecord> Find(uint64_t index) const;
  // The file system the shards are read through.
  io::Env* env() const;

  // Tells the kernel that these samples will be read soon: their records are read into
  // the page cache in the background, many at once (MADV_WILLNEED), instead of one page
  // fault at a time when Get touches them. What makes a dataset bigger than memory read
  // at the disk's speed.
  void WillNeed(std::span<const uint64_t> indices) const;
  // Starts bringing sample `index`'s record into the CPU caches (ShardReader::Prefetch:
  // stage 0 its location, stage 1 its first bytes, stage 2 the rest).
  void Prefetch(uint64_t index, int stage) const;
  // For a dataset the page cache holds nearly whole (a proactive reclaimer took a folio
  // here and there): finds the 2 MiB blocks of the shards that it lacks (two mincore
  // probes each) and asks the kernel to read them all in the background (MADV_WILLNEED).
  // Returns their bytes; 0, hinting nothing, when they pass `limit` (a cold dataset is
  // read ahead batch by batch, in the order it is read, instead). docs/LOADER.md, "A
  // cache that lacks a few blocks", says what it costs and saves.
  uint64_t WillNeedMissing(uint64_t limit) const;
  // Maps these samples' records into the process's page tables now, reading what the
  // page cache lacks, and returns when they are there (MADV_POPULATE_READ): for threads
  // that read ahead of the ones calling Get, which then find these samples mapped.
  void Populate(std::span<const uint64_t> indices) const;
  // From now on, reads of pages the page cache lacks bring in the aligned 2 MiB around
  // them as one large page (MADV_HUGEPAGE on every shard's mapping), so that a later
  // process maps them 2 MiB per page-table entry instead of 4 KiB (docs/LOADER.md). For a
  // dataset that fits in memory and is read whole: a sample alone costs a 2 MiB read. The
  // advice stays for the Dataset's life, for every reader of it.
  void PreferHugePages() const;
  // Whether the middle of sample `index`'s record (its pixels) is in memory now
  // (mincore): a cheap probe of whether the dataset sits in the page cache. True where
  // that cannot be told, false for an index past the end.
  bool Resident(uint64_t index) const;
  // Whether a batch of samples is in memory, as far as a cheap probe tells: Resident of 8
  // of them, evenly spaced (all of them when fewer). False for no samples. A dataset
  // bigger than the cache almost never has 8 random records resident at once.
  bool Resident(std::span<const uint64_t> indices) const;

 private:
  const Dataset* dataset_;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_DATASET_ACCESS_H_
