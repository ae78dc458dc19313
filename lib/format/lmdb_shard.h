// LMDB shards: one environment per shard file (MDB_NOSUBDIR), keys of 10 zero-padded
// decimal digits (the record's index in the shard), values the same Example payloads as
// TFRecord records (docs/FORMAT.md §4).
#ifndef SHARDPACK_FORMAT_LMDB_SHARD_H_
#define SHARDPACK_FORMAT_LMDB_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"
#include "format/lmdb_file.h"
#include "format/shard_file_writer.h"
#include "io/env.h"
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
// writer by construction), then Finish() syncs, closes and renames it to `path`. The
// temporary is created anew (io::CreateNewFile: a link planted at its name is removed,
// never written through) and liblmdb writes it through the descriptor's own name
// (/proc/self/fd/N, where /proc is mounted).
// Not thread-safe. Records are appended only (no Place: values go through one write
// transaction at a time); method() is kAuto.
class LmdbShardWriter final : public ShardFileWriter {
 public:
  static StatusOr<std::unique_ptr<LmdbShardWriter>> Create(std::string path,
                                                           LmdbWriterOptions options);
  ~LmdbShardWriter() override;

  // Appends one sample (`entries` from EncodeFeatureEntries) under the next record key;
  // `image_key` as TfrecordShardWriter::Append.
  Status Append(std::string_view entries, std::string_view pixels, uint32_t pixel_crc,
                std::string_view image_key) override;
  // Appends a value under `key` (a Caffe-schema shard: CaffeKey, EncodeCaffeDatum). Keys
  // must increase bytewise (MDB_APPEND) and fit kLmdbMaxKeySize; a key out of order fails
  // the batch's commit with MDB_KEYEXIST.
  Status AppendValue(std::string key, std::string value) override;
  static uint64_t RecordSizeBound(std::string_view entries, uint64_t pixel_bytes,
                                  uint32_t pixel_alignment);
  // The same with this shard's alignment.
  uint64_t RecordSizeBound(std::string_view entries, uint64_t image_bytes) const override {
    return RecordSizeBound(entries, image_bytes, options_.pixel_alignment);
  }
  // The key and value plus LMDB's per-value cost: a node, and a page header per overflow
  // chain.
  uint64_t ValueSizeBound(uint64_t key_bytes, uint64_t value_bytes) const override;

  uint64_t records() const override { return records_; }
  // Payload bytes appended (the file is larger by LMDB's page overhead).
  uint64_t bytes() const override { return bytes_; }
  int map_growths() const { return growths_; }

  Status Finish(FileEntry* data);
  // Finish(data); *index is nullopt (an LMDB shard is its own index).
  Status Finish(FileEntry* data, std::optional<FileEntry>* index) override;
  void Abandon() override;

 private:
  LmdbShardWriter(std::string path, LmdbWriterOptions options, LmdbEnv env, int fd);
  Status CommitBatch();
  void CloseFile();

  std::string path_;
  LmdbWriterOptions options_;
  LmdbEnv env_;
  int fd_;  // the temporary's descriptor, open until it is published
  uint64_t map_bytes_;
  std::vector<std::pair<std::string, std::string>> batch_;  // key, value
  uint64_t batch_bytes_ = 0;
  uint64_t committed_ = 0;
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
  int growths_ = 0;
  bool done_ = false;
};

// A shard read without liblmdb (format/lmdb_file.h): the file is mapped read-only and its
// pages are checked before use, so a damaged or crafted file is a Corruption naming the
// file, the record and the page, never a crash. Values returned by Get point into the map
// and stay valid until the reader is destroyed. Thread-safe; reading allocates nothing.
class LmdbShardReader {
 public:
  // Which keys Open accepts in the first record.
  enum class Keys {
    kRecordNumbers,  // "0000000000"...: the Example schema, the only one Get reads
    kAny,            // any (verify, which checks every key itself)
  };
  // NotFound for a missing file, InvalidArgument for one that is no regular file,
  // Corruption for one that is no LMDB file, is damaged or truncated (its meta pages are
  // checked here, the other pages as they are read); NotSupported with kRecordNumbers when
  // the first key is not a record number (for a Caffe-schema shard, "00000000_path" keys,
  // the message says so).
  static StatusOr<std::unique_ptr<LmdbShardReader>> Open(const std::string& path,
                                                         bool random_access,
                                                         Keys keys = Keys::kRecordNumbers);

  // The entries the meta page claims (checked against the tree only by Audit).
  uint64_t entries() const { return file_.meta().entries; }
  const LmdbMeta& meta() const { return file_.meta(); }
  // True once a read of the map found no file under it: the file shrank while open. Those
  // reads, in Get or of the values it returned, read zeros (io/mapped_range.h).
  bool faulted() const { return map_->faulted(); }
  // Why faulted() is true (io::kShrunkWhileMapped).
  std::string FaultMessage() const;
  // The value of record `index`: Corruption naming the record when its key is missing or a
  // page on the way is damaged; IOError once faulted().
  Status Get(uint64_t index, std::string_view* value) const;
  // For random reads of a shard of `records` records (the Example schema): notes which leaf
  // page holds each record, and at which node if the leaf's keys run on from its first,
  // from the branch pages (LmdbFile::ForEachLeaf), so that Get reads one page and one node
  // instead of a search per level, and Prefetch can follow a record ahead of Get. 8 bytes
  // a record. A tree whose leaves do not start at record keys, a walk that fails and
  // more records than the file could hold leave it out: Get then searches the tree, as it
  // does for any record its leaf page does not hold (and for the messages of every fault).
  void IndexLeaves(uint64_t records);
  // Prefetch hints for record `index` (ShardReader::Prefetch's stages, as
  // LmdbFile::PrefetchNode takes them); nothing without IndexLeaves.
  void Prefetch(uint64_t index, int stage) const;
  // Where `value` (from Get) begins in the file.
  uint64_t FileOffset(std::string_view value) const {
    return static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(value.data()) - map_->data());
  }
  // Asks the kernel to read the pages under `value` (from Get) in the background.
  void WillNeed(std::string_view value) const { map_->WillNeed(FileOffset(value), value.size()); }
  // Maps the pages under `value` (from Get) into the page tables in one call.
  void Populate(std::string_view value) const { map_->Populate(FileOffset(value), value.size()); }
  // Faults on the map's uncached pages read 2 MiB folios from now on (io::PreferHugePages).
  void PreferHugePages() const { map_->PreferHugePages(); }
  // Whether the first page under `value` (from Get, or a part of it) is in memory now.
  bool Resident(std::string_view value) const {
    return value.empty() || map_->Resident(FileOffset(value));
  }
  // The same by offset in the file: the page holding byte `offset`, and a hint to read
  // [offset, offset + length) (past the file's size: up to it).
  bool ResidentAt(uint64_t offset) const { return map_->Resident(offset); }
  void WillNeedAt(uint64_t offset, uint64_t length) const { map_->WillNeed(offset, length); }
  // The file's size when opened: the bytes of the map.
  uint64_t file_bytes() const { return map_->size(); }

  // Visits every key/value in key order; stops at the first error of `fn` or of the file
  // (a Corruption prefixed with the file's path).
  Status ForEach(const std::function<Status(std::string_view, std::string_view)>& fn) const;
  // ForEach for verify: also refuses a page that two references share, and tree counts
  // (entries, branch, leaf and overflow pages) other than the meta page's.
  Status Audit(const std::function<Status(std::string_view, std::string_view)>& fn) const;

 private:
  LmdbShardReader(std::string path, std::unique_ptr<io::MappedFile> map, LmdbFile file)
      : path_(std::move(path)), map_(std::move(map)), file_(file) {}
  // "<path>: record N".
  std::string RecordName(uint64_t index) const;
  Status Walk(const std::function<Status(std::string_view, std::string_view)>& fn,
              bool audit) const;

  std::string path_;
  std::unique_ptr<io::MappedFile> map_;
  LmdbFile file_;  // over map_'s bytes
  // IndexLeaves: record -> its leaf page and node there, or empty.
  struct LeafNode {
    uint32_t pgno;
    uint32_t node;
  };
  std::vector<LeafNode> leaf_of_;
};

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_LMDB_SHARD_H_
