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
#include "shardpack/sample.h"
#include "shardpack/status.h"

namespace shardpack {

namespace io {
class Env;
}
namespace read {
class DatasetAccess;
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

  // Prepares for `threads` threads calling Get at once, so that Get allocates nothing
  // afterwards: LMDB datasets open that many read transactions per shard up front
  // (TFRecord datasets need nothing). Optional; the Loader calls it. Thread-safe.
  Status ReserveReaders(int threads) const;

 private:
  // The library's readers take the shards and the page-cache hints through it
  // (read/dataset_access.h).
  friend class read::DatasetAccess;
  class Impl;
  explicit Dataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardpack

#endif  // SHARDPACK_DATASET_H_
