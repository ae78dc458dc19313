// LMDB shards: one environment per shard file (MDB_NOSUBDIR), keys of 10 zero-padded
// decimal digits (the record's index in the shard), values the same Example payloads as
// TFRecord records (docs/FORMAT.md §4).
#ifndef SHARDPACK_FORMAT_LMDB_SHARD_H_
#define SHARDPACK_FORMAT_LMDB_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"
#include "io/mapped_range.h"
#include "shardpack/manifest.h"
#include "shardpack/status.h"

typedef struct MDB_env MDB_env;

namespace shardpack::format {

// Translates an LMDB return code: "<context>: MDB_MAP_FULL: Environment mapsize limit
// reached". ENOENT becomes NotFound, other errno values IOError, MDB_* codes Corruption
// or ResourceExhausted.
Status LmdbError(std::string_view context, int rc);

// Owns an MDB_env; closes it on destruction.
class LmdbEnv {
 public:
  LmdbEnv() = default;
  explicit LmdbEnv(MDB_env* env) : env_(env) {}
  ~LmdbEnv();
  LmdbEnv(LmdbEnv&& o) noexcept : env_(o.env_) { o.env_ = nullptr; }
  LmdbEnv& operator=(LmdbEnv&& o) noexcept;
  LmdbEnv(const LmdbEnv&) = delete;
  LmdbEnv& operator=(const LmdbEnv&) = delete;
  MDB_env* get() const { return env_; }
  void reset();

 private:
  MDB_env* env_ = nullptr;
};

struct LmdbWriterOptions {
  // Initial map size; doubled (abort, grow, replay the batch) on MDB_MAP_FULL.
  uint64_t initial_map_bytes = 1ull << 30;
  // Values buffered per write transaction (also the replay unit after a map growth).
  uint64_t batch_bytes = 64ull << 20;
  // Pixels of large values start at map addresses that are multiples of this (an
  // image/pad entry as in TFRecord shards; 1: no padding). See kLmdbValueOffset.
  uint32_t pixel_alignment = 64;
};

// Bulk-loads one shard with MDB_APPEND into "<path>.tmp" (no lock file: MDB_NOLOCK, one
// writer by construction), then Finish() syncs, closes and renames it to `path`.
// Not thread-safe.
class LmdbShardWriter {
 public:
  static StatusOr<std::unique_ptr<LmdbShardWriter>> Create(std::string path,
                                                           LmdbWriterOptions options);
  ~LmdbShardWriter();

  // Appends one sample (`entries` from EncodeFeatureEntries) under the next record key;
  // `image_key` as TfrecordShardWriter::Append.
  Status Append(std::string_view entries, std::string_view pixels, uint32_t pixel_crc,
                std::string_view image_key = kKeyRaw);
  // Appends a value under `key` (a Caffe-schema shard: CaffeKey, EncodeCaffeDatum). Keys
  // must increase bytewise (MDB_APPEND) and fit kLmdbMaxKeySize; a key out of order fails
  // the batch's commit with MDB_KEYEXIST.
  Status AppendValue(std::string key, std::string value);
  static uint64_t RecordSizeBound(std::string_view entries, uint64_t pixel_bytes,
                                  uint32_t pixel_alignment);

  uint64_t records() const { return records_; }
  // Payload bytes appended (the file is larger by LMDB's page overhead).
  uint64_t bytes() const { return bytes_; }
  int map_growths() const { return growths_; }

  Status Finish(FileEntry* data);
  void Abandon();

 private:
  LmdbShardWriter(std::string path, LmdbWriterOptions options, LmdbEnv env);
  Status CommitBatch();

  std::string path_;
  LmdbWriterOptions options_;
  LmdbEnv env_;
  uint64_t map_bytes_;
  std::vector<std::pair<std::string, std::string>> batch_;  // key, value
  uint64_t batch_bytes_ = 0;
  uint64_t committed_ = 0;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
  int growths_ = 0;
  bool done_ = false;
};

// A shard opened read-only without locks (MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS). The
// dataset is immutable by contract, so values returned by Get point into the read-only
// map and stay valid until the reader is destroyed. Thread-safe. Get reuses read
// transactions (reset, then renewed) from a small pool, so reading allocates nothing once
// the pool holds one transaction per concurrent reader.
class LmdbShardReader {
 public:
  // Which keys Open accepts in the first record.
  enum class Keys {
    kRecordNumbers,  // "0000000000"...: the Example schema, the only one Get reads
    kAny,            // any (verify, which checks every key itself)
  };
  // NotSupported with kRecordNumbers when the first key is not a record number; for a
  // Caffe-schema shard ("00000000_path" keys) the message says so.
  static StatusOr<std::unique_ptr<LmdbShardReader>> Open(const std::string& path,
                                                         bool random_access,
                                                         Keys keys = Keys::kRecordNumbers);
  ~LmdbShardReader();

  uint64_t entries() const { return entries_; }
  // True once a read of the map found no file under it: the file shrank while open, or a
  // damaged page reference pointed past its end. Those reads, in Get or of the values it
  // returned, read zeros (io/mapped_range.h); FaultMessage() says which it was.
  bool faulted() const { return range_ != nullptr && range_->faulted(); }
  // Why faulted() is true: io::kShrunkWhileMapped when the file is shorter than when it was
  // opened, else that the file is damaged.
  std::string FaultMessage() const;
  // The value of record `index`.
  Status Get(uint64_t index, std::string_view* value) const;
  // Where `value` (from Get) begins in the file: LMDB maps the file from its first byte.
  uint64_t FileOffset(std::string_view value) const {
    return static_cast<uint64_t>(value.data() - map_);
  }
  // Asks the kernel to read the pages under `value` (from Get) in the background.
  void WillNeed(std::string_view value) const;
  // Maps the pages under `value` (from Get) into the page tables in one call.
  void Populate(std::string_view value) const;
  // Faults on the map's uncached pages read 2 MiB folios from now on (io::PreferHugePages).
  void PreferHugePages() const;
  // Whether the first page under `value` (from Get, or a part of it) is in memory now.
  bool Resident(std::string_view value) const;
  // The same by offset in the file: the page holding byte `offset`, and a hint to read
  // [offset, offset + length) (past the file's size: up to it).
  bool ResidentAt(uint64_t offset) const;
  void WillNeedAt(uint64_t offset, uint64_t length) const;
  // The file's size when opened: the bytes of the map.
  uint64_t file_bytes() const { return file_bytes_; }
  // Opens read transactions until the pool has made `readers` of them, so that that many
  // threads calling Get at once allocate nothing.
  Status ReserveReaders(int readers) const;

  // Visits every key/value in key order; stops at the first error of `fn` or of LMDB.
  template <typename Fn>
  Status ForEach(Fn&& fn) const {
    return Walk([&](std::string_view k, std::string_view v) { return fn(k, v); });
  }

 private:
  LmdbShardReader(std::string path, LmdbEnv env, const void* map, unsigned dbi, uint64_t entries,
                  uint64_t file_bytes, std::unique_ptr<io::MappedRange> range)
      : path_(std::move(path)),
        env_(std::move(env)),
        range_(std::move(range)),
        map_(static_cast<const char*>(map)),
        dbi_(dbi),
        entries_(entries),
        file_bytes_(file_bytes) {}
  // IOError when the file is now shorter than when it was opened.
  Status CheckNotShrunk() const;
  // IOError "<path>: record N: " + FaultMessage().
  Status FaultStatus(uint64_t index) const;
  // "<path>: record N".
  std::string RecordName(uint64_t index) const;
  Status Walk(const std::function<Status(std::string_view, std::string_view)>& fn) const;

  std::string path_;
  LmdbEnv env_;
  // The environment's map, registered so that a read of a lost page is absorbed;
  // unregistered (destroyed) before env_ unmaps it.
  std::unique_ptr<io::MappedRange> range_;
  const char* map_;  // where the map starts
  unsigned dbi_;     // MDB_dbi of the main database
  uint64_t entries_;
  uint64_t file_bytes_;  // the file's size when opened
  // Every read transaction this reader made (MDB_txn*), aborted by the destructor, and
  // those of them that are reset and ready for mdb_txn_renew.
  mutable std::mutex pool_mu_;
  mutable std::vector<void*> all_txns_;
  mutable std::vector<void*> idle_txns_;
};

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_LMDB_SHARD_H_
