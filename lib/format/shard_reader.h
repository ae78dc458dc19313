// One shard as its format sees it: where each record's bytes are in the file, and what
// they mean. How the bytes arrive is the caller's business: through the shard's mapping
// (Get, zero-copy from the page cache), or read by the loader's read-ahead path into its
// own buffers (Extent, then Parse over what was read). Both give the same samples and the
// same messages: "<file>: record N[ at offset X]: <what>".
//
// One implementation per format: TFRecord (a mapped file located through its .idx) and
// LMDB (a read-only environment; a record's extent is its value's bytes, which LMDB keeps
// contiguous in the file).
//
// Thread-safety: every method may be called from any number of threads at once.
#ifndef SHARDPACK_FORMAT_SHARD_READER_H_
#define SHARDPACK_FORMAT_SHARD_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shardpack/manifest.h"
#include "shardpack/sample.h"
#include "shardpack/status.h"
#include "util/crc32c.h"

namespace shardpack::io {
class Env;
}

namespace shardpack::format {

// The bytes of a shard's file that hold one record.
struct RecordExtent {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Bytes of a shard's file: [offset, offset + length).
struct FileRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Where a caller wants a sample's pixels (the loader's ring slot). Checking a sample's
// checksums reads its pixels; given a target, Get and Parse copy them there in the same
// pass (crc32c::CopyAndExtend), which costs about what the copy alone does, and set
// `copied`. They do so only when they check the pixel checksum and the sample has exactly
// `bytes` pixel bytes; otherwise `copied` stays false and the copy is the caller's. An
// encoded image whose pixels are exactly `bytes` is decoded there (checksum checked or
// not), and `copied` set; a decode that fails is the record's Corruption.
// `stores`: kStreaming (or kStreamingUnfenced, the caller fencing) where nothing reads the
// copy right after (crc32c.h says why).
struct CopyTarget {
  uint8_t* dst = nullptr;
  uint64_t bytes = 0;
  crc32c::CopyStores stores = crc32c::CopyStores::kCached;
  bool copied = false;
};

class ShardReader {
 public:
  virtual ~ShardReader() = default;

  // The manifest's name of the file (in messages) and the path to open to read it.
  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }
  uint64_t records() const { return records_; }

  // The mapped path. Get reads record `record` through the mapping; Corruption naming
  // Where(record) for a damaged one, IOError when the file shrank under the mapping.
  // With `copy` (may be null), the pixels are copied as CopyTarget says.
  virtual Status Get(uint64_t record, bool verify_crc, SampleView* out, CopyTarget* copy) const = 0;
  Status Get(uint64_t record, bool verify_crc, SampleView* out) const {
    return Get(record, verify_crc, out, nullptr);
  }
  virtual void WillNeed(uint64_t record) const = 0;
  // Brings the CPU caches what a Get of `record` reads, without waiting: at stage 0 where
  // the record is (its index line), at stage 1 the record's first bytes (which reads the
  // index line: call it a few records after stage 0), at stage 2 the rest of them (call
  // it a few records after stage 1). Mapped pages only; a hint that never faults or
  // fails. The default does nothing.
  virtual void Prefetch(uint64_t record, int stage) const {}
  // Maps record `record`'s pages now, reading those not cached; it waits for the reads
  // (for threads that read ahead of the ones calling Get). A hint: it never fails.
  virtual void Populate(uint64_t record) const = 0;
  // Faults on the shard's uncached pages read 2 MiB folios from now on (io::PreferHugePages).
  virtual void PreferHugePages() const = 0;
  virtual bool Resident(uint64_t record) const = 0;
  // The mapped path: appends to `out` the blocks of `block` bytes of the file (aligned in
  // it) of which the first or the middle page is not in memory (mincore), adjacent ones
  // merged, taking their bytes from `*budget`; false as soon as they pass it. Nothing
  // where residence cannot be told. Two probes a block: a page cache of 2 MiB folios loses
  // them whole, and a record read back by faults since (smaller than half a block) makes
  // at most one of them resident again.
  virtual bool MissingBlocks(uint64_t block, uint64_t* budget,
                             std::vector<FileRange>* out) const = 0;
  // Asks the kernel to read `range` of the file in the background (MADV_WILLNEED).
  virtual void WillNeedRange(const FileRange& range) const = 0;
  // OK, or the IOError of a shard whose mapping lost pages (io/mapped_range.h).
  virtual Status CheckIntact(uint64_t record) const = 0;
  // Prepares for `threads` threads calling Get at once (LMDB's read transactions).
  virtual Status ReserveReaders(int threads) const {
    (void)threads;
    return Status::Ok();
  }

  // The read-ahead path: the bytes to read for `record`, then the sample in them. `bytes`
  // holds exactly Extent(record).length bytes read from Extent(record).offset; out's
  // pointers point into them.
  virtual StatusOr<RecordExtent> Extent(uint64_t record) const = 0;
  virtual Status Parse(uint64_t record, const uint8_t* bytes, uint64_t n, bool verify_crc,
                       SampleView* out, CopyTarget* copy) const = 0;
  Status Parse(uint64_t record, const uint8_t* bytes, uint64_t n, bool verify_crc,
               SampleView* out) const {
    return Parse(record, bytes, n, verify_crc, out, nullptr);
  }

  // TFRecord: the record's offset in the file; LMDB: 0 (a key, not an offset, finds it).
  virtual uint64_t LocationOffset(uint64_t record) const = 0;
  // "<name>: record N at offset X" (TFRecord) or "<name>: record N" (LMDB).
  std::string Where(uint64_t record) const;
  // `s` with Where(record) in front of its message, its code kept.
  Status Fault(uint64_t record, const Status& s) const;

 protected:
  ShardReader(std::string name, std::string path, uint64_t records, bool offsets,
              ImageEncoding encoding)
      : name_(std::move(name)),
        path_(std::move(path)),
        records_(records),
        offsets_(offsets),
        encoding_(encoding) {}

  // What every record must hold (ShardOpenOptions::encoding).
  ImageEncoding encoding() const { return encoding_; }

 private:
  std::string name_;
  std::string path_;
  uint64_t records_;
  bool offsets_;  // whether Where names an offset
  ImageEncoding encoding_;
};

// The pixels of an encoded sample (view.encoded, of view's height x width x channels),
// decoded at 1/denominator of that size (1, 2, 4 or 8; image::DecodeExactScaled) into
// `dst`, which holds ScaledSide(height) x ScaledSide(width) x channels bytes. Every reader
// of encoded samples decodes through here: Corruption "image/encoded: <the decoder's
// reason>" when the bytes do not decode to that shape, unnamed (callers put the record's
// place in front: ShardReader::Fault).
Status DecodeSampleInto(const SampleView& view, int denominator, uint8_t* dst);

struct ShardOpenOptions {
  io::Env* env = nullptr;  // TFRecord files; LMDB always reads real files
  // What every record must hold (the manifest's image.encoding); a record of another kind
  // is Corruption.
  ImageEncoding encoding = ImageEncoding::kRaw;
  bool random_access = true;
  bool copy_on_write = false;
  uint64_t max_record_bytes = 0;
};

// Opens the shard described by `entry` at `path` (and its index at `index_path`), named
// `shown` in messages, and checks it against the manifest: file size, index lines,
// record count.
StatusOr<std::unique_ptr<ShardReader>> OpenTfrecordShard(
    const ShardEntry& entry, const std::string& path, const std::string& shown,
    const std::string& index_path, const std::string& index_shown, const ShardOpenOptions& options);
StatusOr<std::unique_ptr<ShardReader>> OpenLmdbShard(const ShardEntry& entry,
                                                     const std::string& path,
                                                     const std::string& shown,
                                                     const ShardOpenOptions& options);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_SHARD_READER_H_
