// Dataset: a shardpack dataset opened by its manifest, with random access to any sample
// by global index, zero-copy: TFRecord shards are memory-mapped and located through their
// .idx files; LMDB shards are read through read-only, lock-free environments.
//
//   auto ds = Dataset::Open("data/caltech256");           // StatusOr
//   SampleView s;
//   Status st = (*ds)->Get(1207, &s);   // s.pixels points into the mapped shard
//
// Lifetime: a SampleView's pointers stay valid while the Dataset lives; the files must not
// be modified meanwhile (a dataset is immutable once its manifest is published). A shard
// that shrinks anyway does not crash the reader: the lost pages read as zeros and Get and
// CheckIntact report an IOError naming the file (io/mapped_range.h).
// Thread-safety: Get may be called from any number of threads at once.
#ifndef SHARDPACK_DATASET_H_
#define SHARDPACK_DATASET_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "shardpack/limits.h"
#include "shardpack/manifest.h"
#include "shardpack/remote.h"
#include "shardpack/status.h"

namespace shardpack {

namespace io {
class Env;
}
namespace read {
class ShardReader;
}

struct DatasetOptions {
  // Check each record's payload checksum (and the pixel checksum) on Get. Default on: a
  // bit flip surfaces as an error naming the file, record and offset, never as pixels.
  bool verify_crc = true;
  // Records claiming a longer payload are rejected before any byte is read (default:
  // the largest image the format allows, 89,478,485 pixels x 3 bytes, plus 1 MiB).
  uint64_t max_record_bytes = kMaxRecordBytes;
  // Hint for the kernel: random access (the default) disables read-ahead.
  bool random_access = true;
  // TFRecord shards mapped copy-on-write: a write through a SampleView's pixels (an
  // in-place augmentation of a tensor made from it) changes a private copy of that page,
  // never the file nor other readers' bytes, instead of crashing on a read-only page.
  // Reading is as fast. Python's Dataset sets it. LMDB maps stay read-only (the Python
  // binding copies LMDB pixels instead). Under strict overcommit the kernel may refuse
  // a copy-on-write mapping of a large file; the shard is then mapped read-only.
  bool copy_on_write = false;
  // File system for TFRecord datasets; nullptr: POSIX.
  io::Env* env = nullptr;
  // For a dataset at an http(s):// URL: the local cache and the network policy
  // (shardpack/remote.h).
  RemoteOptions remote;
};

struct SampleView {
  std::span<const uint8_t> pixels;  // HWC uint8; empty for an encoded image
  // A dataset of encoded images (manifest().image.encoding jpeg or png): the sample's
  // JPEG or PNG file, its checksum checked like pixels; height x width x channels is what
  // it decodes to (Dataset::GetPixels, the Loader). Empty for raw datasets.
  std::span<const uint8_t> encoded;
  ImageEncoding encoding = ImageEncoding::kRaw;
  int height = 0;
  int width = 0;
  int channels = 0;
  int64_t label = 0;
  std::string_view class_text;
  std::string_view filename;
};

// Where a sample lives, for messages and for readers that batch by shard.
struct SampleLocation {
  size_t shard = 0;     // index into manifest().shards
  uint64_t record = 0;  // ordinal within the shard
  uint64_t offset = 0;  // TFRecord: file offset of the record; LMDB: 0
};

class Dataset {
 public:
  // Reads and checks DIR/manifest.json, maps every shard, loads TFRecord indexes and
  // checks them against the manifest's record counts and the file sizes. Does not read
  // the records themselves: `shardpack verify` does that.
  //
  // DIR may be an http:// or https:// URL: the manifest is fetched, every file it lists
  // is downloaded into the cache of options.remote (unless already there) and checked
  // against the manifest's size and XXH3-128, and the cached copy is opened. While the
  // Dataset lives, no process evicts its files from the cache. Errors name the URL, the
  // file and the byte range (shardpack/remote.h, docs/REMOTE.md); dir() is the URL.
  static StatusOr<std::unique_ptr<Dataset>> Open(const std::string& dir,
                                                 const DatasetOptions& options = {});
  ~Dataset();
  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const Manifest& manifest() const;
  const std::string& dir() const;
  uint64_t size() const;

  // The sample at global index `index` (0 <= index < size()). OutOfRange beyond the end;
  // Corruption naming "<file>: record N at offset X: <what>" for a damaged record, or one
  // whose label is outside the manifest's classes (out->label is always a class index).
  Status Get(uint64_t index, SampleView* out) const;
  // The same, checking the checksums or not whatever the DatasetOptions say (the loader's
  // LoaderOptions::verify_crc decides for the records it reads).
  Status Get(uint64_t index, SampleView* out, bool verify_crc) const;

  // Get, then the sample's pixels into `dst` (at least height x width x channels bytes,
  // HWC): an encoded image decoded (its declared size bounds the decode; one that does not
  // decode, or decodes to another size, is Corruption naming the file and record), raw
  // pixels copied. out->pixels then points at them in `dst`. InvalidArgument when `dst` is
  // too small.
  Status GetPixels(uint64_t index, std::span<uint8_t> dst, SampleView* out) const;

  StatusOr<SampleLocation> Locate(uint64_t index) const;

  // Whether the bytes of sample `index` that a caller read through a SampleView were the
  // file's: call it after reading them (Get checks what Get reads itself). IOError
  // "<file>: record N[ at offset X]: the file is shorter than when it was opened: ...
  // SIGBUS ..." once the shard holding it shrank while mapped (those reads found zeros);
  // OK otherwise. Lock-free; a load and a compare.
  Status CheckIntact(uint64_t index) const;

  // Tells the kernel that these samples will be read soon: their records are read into
  // the page cache in the background, many at once (MADV_WILLNEED), instead of one page
  // fault at a time when Get touches them. What makes a dataset bigger than memory read at
  // the disk's speed; a hint only (no error, no effect on what Get returns). Indices past
  // the end are ignored. Thread-safe.
  void WillNeed(std::span<const uint64_t> indices) const;
  // Starts bringing sample `index`'s record into the CPU caches (read::ShardReader::Prefetch:
  // stage 0 its location, stage 1 its first bytes). A hint; out of range: nothing.
  void Prefetch(uint64_t index, int stage) const;
  // For a dataset the page cache holds nearly whole (a proactive reclaimer took a folio
  // here and there): finds the 2 MiB blocks of the shards that it lacks (two mincore
  // probes each) and asks the kernel to read them all in the background (MADV_WILLNEED).
  // Returns their bytes; 0, hinting nothing, when they pass `limit` (a cold dataset is
  // read ahead batch by batch, in the order it is read, instead). docs/LOADER.md, "A cache
  // that lacks a few blocks", says what it costs and saves. A hint only. Thread-safe.
  uint64_t WillNeedMissing(uint64_t limit) const;
  // Maps these samples' records into the process's page tables now, reading what the page
  // cache lacks, and returns when they are there (MADV_POPULATE_READ): for threads that
  // read ahead of the ones calling Get, which then find these samples mapped. A hint
  // only; indices past the end are ignored. Thread-safe.
  void Populate(std::span<const uint64_t> indices) const;
  // From now on, reads of pages the page cache lacks bring in the aligned 2 MiB around
  // them as one large page (MADV_HUGEPAGE on every shard's mapping), so that a later
  // process maps them 2 MiB per page-table entry instead of 4 KiB (docs/LOADER.md, "The
  // first epoch from the page cache"). For a dataset that fits in memory and is read
  // whole: a sample alone costs a 2 MiB read. The advice stays for the Dataset's life, for
  // every reader of it (loaders, Get). A hint only. Thread-safe.
  void PreferHugePages() const;
  // Whether the middle of sample `index`'s record (its pixels) is in memory now (mincore):
  // a cheap probe of whether the dataset sits in the page cache. True where that cannot be told,
  // false for an index past the end.
  bool Resident(uint64_t index) const;
  // Whether a batch of samples is in memory, as far as a cheap probe tells: Resident of 8
  // of them, evenly spaced (all of them when fewer). False for no samples. A dataset
  // bigger than the cache almost never has 8 random records resident at once.
  bool Resident(std::span<const uint64_t> indices) const;

  // Prepares for `threads` threads calling Get at once, so that Get allocates nothing
  // afterwards: LMDB datasets open that many read transactions per shard up front
  // (TFRecord datasets need nothing). Optional; the Loader calls it. Thread-safe.
  Status ReserveReaders(int threads) const;

  // For readers inside the library (the loader's read-ahead path): shard i of
  // manifest().shards as its format reads it (read/shard_reader.h), and the file system
  // its files are read through.
  const read::ShardReader& shard(size_t i) const;
  io::Env* env() const;

 private:
  class Impl;
  explicit Dataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardpack

#endif  // SHARDPACK_DATASET_H_
