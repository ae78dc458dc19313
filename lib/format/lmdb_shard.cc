#include "format/lmdb_shard.h"

#include <lmdb.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "format/example.h"
#include "format/format.h"
#include "io/env.h"
#include "io/mapped_range.h"
#include "util/hash.h"
#include "util/location.h"
#include "util/text.h"

namespace shardpack::format {
namespace {

const char* LmdbCodeName(int rc) {
  switch (rc) {
    case MDB_KEYEXIST:
      return "MDB_KEYEXIST";
    case MDB_NOTFOUND:
      return "MDB_NOTFOUND";
    case MDB_PAGE_NOTFOUND:
      return "MDB_PAGE_NOTFOUND";
    case MDB_CORRUPTED:
      return "MDB_CORRUPTED";
    case MDB_PANIC:
      return "MDB_PANIC";
    case MDB_VERSION_MISMATCH:
      return "MDB_VERSION_MISMATCH";
    case MDB_INVALID:
      return "MDB_INVALID";
    case MDB_MAP_FULL:
      return "MDB_MAP_FULL";
    case MDB_DBS_FULL:
      return "MDB_DBS_FULL";
    case MDB_READERS_FULL:
      return "MDB_READERS_FULL";
    case MDB_TXN_FULL:
      return "MDB_TXN_FULL";
    case MDB_CURSOR_FULL:
      return "MDB_CURSOR_FULL";
    case MDB_PAGE_FULL:
      return "MDB_PAGE_FULL";
    case MDB_MAP_RESIZED:
      return "MDB_MAP_RESIZED";
    case MDB_INCOMPATIBLE:
      return "MDB_INCOMPATIBLE";
    case MDB_BAD_RSLOT:
      return "MDB_BAD_RSLOT";
    case MDB_BAD_TXN:
      return "MDB_BAD_TXN";
    case MDB_BAD_VALSIZE:
      return "MDB_BAD_VALSIZE";
    case MDB_BAD_DBI:
      return "MDB_BAD_DBI";
    default:
      return nullptr;
  }
}

// Owns a transaction; aborts it unless committed.
class Txn {
 public:
  Txn() = default;
  ~Txn() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
  }
  Txn(const Txn&) = delete;
  Txn& operator=(const Txn&) = delete;
  MDB_txn** out() { return &txn_; }
  MDB_txn* get() const { return txn_; }
  int Commit() {
    int rc = mdb_txn_commit(txn_);  // frees the txn whatever the result
    txn_ = nullptr;
    return rc;
  }
  void Abort() {
    if (txn_ != nullptr) mdb_txn_abort(txn_);
    txn_ = nullptr;
  }

 private:
  MDB_txn* txn_ = nullptr;
};

MDB_val Val(std::string_view s) { return MDB_val{s.size(), const_cast<char*>(s.data())}; }

// What a value costs an LMDB file beyond its bytes, at most: a node, and a page header per
// overflow chain.
constexpr uint64_t kValueOverheadBytes = 64 + 4096;

}  // namespace

Status LmdbError(std::string_view context, int rc) {
  std::string m(context);
  m += ": ";
  if (const char* name = LmdbCodeName(rc)) {
    m += name;
    m += ": ";
    m += mdb_strerror(rc);
    StatusCode code = rc == MDB_MAP_FULL || rc == MDB_READERS_FULL || rc == MDB_TXN_FULL
                          ? StatusCode::kResourceExhausted
                          : StatusCode::kCorruption;
    return Status(code, std::move(m));
  }
  if (rc > 0) return ErrnoError(context, rc);
  m += mdb_strerror(rc);
  return InternalError(std::move(m));
}

LmdbEnv::~LmdbEnv() { reset(); }
LmdbEnv& LmdbEnv::operator=(LmdbEnv&& o) noexcept {
  if (this != &o) {
    reset();
    env_ = o.env_;
    o.env_ = nullptr;
  }
  return *this;
}
void LmdbEnv::reset() {
  if (env_ != nullptr) mdb_env_close(env_);
  env_ = nullptr;
}

// ---------------------------------------------------------------------------------------

StatusOr<std::unique_ptr<LmdbShardWriter>> LmdbShardWriter::Create(std::string path,
                                                                   LmdbWriterOptions options) {
  const std::string tmp = path + ".tmp";
  // A stale temporary, or a link planted at its name, is removed and the file made anew.
  // liblmdb opens its file by name, twice, following links: it is given the descriptor's
  // own name, which is this inode whatever appears at `tmp` meanwhile.
  SHARDPACK_ASSIGN_OR_RETURN(const int fd, io::CreateNewFile(tmp, O_RDWR));
  const std::string own_name = "/proc/self/fd/" + std::to_string(fd);
  const bool by_descriptor = ::access(own_name.c_str(), F_OK) == 0;  // no /proc: by name
  auto fail = [&](Status s) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return fail(LmdbError(tmp + ": mdb_env_create", rc));
  LmdbEnv env(raw);
  rc = mdb_env_set_mapsize(raw, options.initial_map_bytes);
  if (rc != 0) return fail(LmdbError(tmp + ": mdb_env_set_mapsize", rc));
  // NOSYNC while loading: the file is a temporary until Finish() syncs it explicitly.
  rc = mdb_env_open(raw, by_descriptor ? own_name.c_str() : tmp.c_str(),
                    MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC | MDB_NOMETASYNC, 0644);
  if (rc != 0) return fail(LmdbError(tmp + ": mdb_env_open", rc));
  return std::unique_ptr<LmdbShardWriter>(
      new LmdbShardWriter(std::move(path), options, std::move(env), fd));
}

LmdbShardWriter::LmdbShardWriter(std::string path, LmdbWriterOptions options, LmdbEnv env, int fd)
    : path_(std::move(path)),
      options_(options),
      env_(std::move(env)),
      fd_(fd),
      map_bytes_(options.initial_map_bytes) {}

LmdbShardWriter::~LmdbShardWriter() { Abandon(); }

void LmdbShardWriter::Abandon() {
  if (done_) return;
  done_ = true;
  env_.reset();
  CloseFile();
  ::unlink((path_ + ".tmp").c_str());
}

void LmdbShardWriter::CloseFile() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

uint64_t LmdbShardWriter::RecordSizeBound(std::string_view entries, uint64_t pixel_bytes,
                                          uint32_t pixel_alignment) {
  // Payload (image/pad adds less than 2 * alignment + 8) plus LMDB's per-value cost.
  return EncodePayloadPrefix(entries, pixel_bytes, 0, 1).size() + 2ull * pixel_alignment + 8 +
         pixel_bytes + kValueOverheadBytes;
}

uint64_t LmdbShardWriter::ValueSizeBound(uint64_t key_bytes, uint64_t value_bytes) const {
  return key_bytes + value_bytes + kValueOverheadBytes;
}

Status LmdbShardWriter::Append(std::string_view entries, std::string_view pixels,
                               uint32_t /*pixel_crc: the Example carries it; LMDB has no
                                          record checksum of its own*/
                               ,
                               std::string_view image_key) {
  if (done_) return FailedPreconditionError(path_ + ": append after finish");
  std::string value = EncodePayloadPrefix(entries, pixels.size(), kLmdbValueOffset,
                                          options_.pixel_alignment, image_key);
  value.append(pixels);
  return AppendValue(LmdbKey(records_), std::move(value));
}

Status LmdbShardWriter::AppendValue(std::string key, std::string value) {
  if (done_) return FailedPreconditionError(path_ + ": append after finish");
  bytes_ += value.size();
  batch_bytes_ += value.size();
  batch_.emplace_back(std::move(key), std::move(value));
  ++records_;
  if (batch_bytes_ >= options_.batch_bytes) return CommitBatch();
  return Status::Ok();
}

Status LmdbShardWriter::CommitBatch() {
  if (batch_.empty()) return Status::Ok();
  const std::string tmp = path_ + ".tmp";
  for (;;) {
    Txn txn;
    int rc = mdb_txn_begin(env_.get(), nullptr, 0, txn.out());
    if (rc != 0) return LmdbError(tmp + ": mdb_txn_begin", rc);
    MDB_dbi dbi;
    rc = mdb_dbi_open(txn.get(), nullptr, 0, &dbi);
    if (rc != 0) return LmdbError(tmp + ": mdb_dbi_open", rc);
    for (size_t i = 0; i < batch_.size() && rc == 0; ++i) {
      MDB_val k = Val(batch_[i].first);
      MDB_val v = Val(batch_[i].second);
      rc = mdb_put(txn.get(), dbi, &k, &v, MDB_APPEND);
    }
    if (rc == 0) rc = txn.Commit();
    if (rc == MDB_MAP_FULL) {
      // A transaction that hit MDB_MAP_FULL is unusable: abort it (a failed commit has
      // already freed it). With no transaction active the map may grow, then the whole
      // batch is replayed.
      txn.Abort();
      map_bytes_ *= 2;
      ++growths_;
      int grow = mdb_env_set_mapsize(env_.get(), map_bytes_);
      if (grow != 0) return LmdbError(tmp + ": mdb_env_set_mapsize", grow);
      continue;
    }
    if (rc == EIO) {
      // LMDB reports a short write (what a full file system gives) as EIO: say what the
      // file system has left, which is usually the cause.
      struct statvfs fs {};
      if (::statvfs(tmp.c_str(), &fs) == 0) {
        const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
        return IOError(tmp + ": writing records: Input/output error (EIO) with " +
                       std::to_string(free_bytes) + " bytes free on its file system" +
                       (free_bytes < (16ull << 20) ? ": the file system is full (ENOSPC)" : ""));
      }
    }
    if (rc != 0) return LmdbError(tmp + ": writing records", rc);
    break;
  }
  committed_ += batch_.size();
  batch_.clear();
  batch_bytes_ = 0;
  return Status::Ok();
}

Status LmdbShardWriter::Finish(FileEntry* data, std::optional<FileEntry>* index) {
  index->reset();
  return Finish(data);
}

Status LmdbShardWriter::Finish(FileEntry* data) {
  if (done_) return FailedPreconditionError(path_ + ": finished twice");
  const std::string tmp = path_ + ".tmp";
  Status s = CommitBatch();
  if (s.ok()) {
    int rc = mdb_env_sync(env_.get(), 1);
    if (rc != 0) s = LmdbError(tmp + ": mdb_env_sync", rc);
  }
  if (!s.ok()) {
    Abandon();
    return s;
  }
  env_.reset();
  // The bytes hashed and the file published are those written: read through the
  // descriptor, and `tmp` still names it (not a file put in its place meanwhile).
  io::Env* fs = io::Env::Posix();
  struct stat written {};
  struct stat named {};
  if (::fstat(fd_, &written) != 0) s = ErrnoError(tmp + ": stat", errno);
  if (s.ok() && ::lstat(tmp.c_str(), &named) != 0) s = ErrnoError(tmp + ": stat", errno);
  if (s.ok() && (written.st_dev != named.st_dev || written.st_ino != named.st_ino)) {
    s = IOError(tmp + ": replaced by another file while it was written");
  }
  if (!s.ok()) {
    Abandon();
    return s;
  }
  const std::string own_name = "/proc/self/fd/" + std::to_string(fd_);
  auto mapped = fs->MapFile(::access(own_name.c_str(), F_OK) == 0 ? own_name : tmp,
                            io::AccessPattern::kSequential);
  if (!mapped.ok()) {
    Abandon();
    return mapped.status();
  }
  FileEntry entry{std::string(io::BaseName(path_)), (*mapped)->size(),
                  Xxh3Hex((*mapped)->data(), (*mapped)->size())};
  mapped->reset();
  CloseFile();
  s = io::PublishFile(fs, tmp, path_);
  if (!s.ok()) {
    Abandon();
    return s;
  }
  done_ = true;
  *data = std::move(entry);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------

namespace {

bool IsRecordNumberKey(std::string_view key) {
  return key.size() == kLmdbKeySize && key.find_first_not_of("0123456789") == std::string::npos;
}

bool IsCaffeKey(std::string_view key) {
  return key.size() > 8 && key[8] == '_' &&
         key.substr(0, 8).find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

StatusOr<std::unique_ptr<LmdbShardReader>> LmdbShardReader::Open(const std::string& path,
                                                                 bool random_access, Keys keys) {
  SHARDPACK_ASSIGN_OR_RETURN(
      auto map, io::Env::Posix()->MapFile(path, random_access ? io::AccessPattern::kRandom
                                                              : io::AccessPattern::kSequential));
  auto file = LmdbFile::Open(map->data(), map->size());
  if (map->faulted()) return IOError(path + ": " + std::string(io::kShrunkWhileMapped));
  if (!file.ok()) return file.status().WithPrefix(path);
  if (keys == Keys::kRecordNumbers && file->meta().entries > 0) {
    // The first key says which schema the shard holds.
    std::string_view first;
    Status s = file->First(&first);
    if (map->faulted()) return IOError(path + ": " + std::string(io::kShrunkWhileMapped));
    if (!s.ok()) return s.WithPrefix(path);
    if (!IsRecordNumberKey(first)) {
      const std::string shown = EscapeBytes(first.substr(0, 40));
      if (IsCaffeKey(first)) {
        return NotSupportedError(
            path + ": first key \"" + shown +
            "\" is a Caffe key: this shard holds Caffe Datum values (lmdb_schema \"caffe\"), "
            "which shardpack's Dataset and Loader do not read; convert without "
            "--lmdb-schema caffe to read it here");
      }
      return NotSupportedError(path + ": first key \"" + shown +
                               "\" is not a shardpack record key (10 decimal digits)");
    }
  }
  return std::unique_ptr<LmdbShardReader>(new LmdbShardReader(path, std::move(map), *file));
}

void LmdbShardReader::IndexLeaves(uint64_t records) {
  // A leaf entry takes at least its node header, its 10-byte key and its offset's 2 bytes.
  constexpr uint64_t kLeastEntryBytes = 20;
  leaf_of_.clear();
  if (records == 0 || records > file_bytes() / kLeastEntryBytes ||
      file_.meta().last_page > UINT32_MAX) {
    return;
  }
  std::vector<std::pair<uint64_t, uint32_t>> leaves;  // first record, page
  Status s = file_.ForEachLeaf([&](std::string_view low, uint64_t pgno) -> Status {
    uint64_t first = 0;
    if (!low.empty()) {
      if (!IsRecordNumberKey(low)) return CorruptionError("not a record key");
      for (char c : low) first = first * 10 + static_cast<uint64_t>(c - '0');
    }
    // Keys strictly increase (ForEachLeaf), and ten digits compare as their numbers.
    if (first >= records || leaves.size() >= records) return OutOfRangeError("past the records");
    leaves.emplace_back(first, static_cast<uint32_t>(pgno));
    return Status::Ok();
  });
  if (!s.ok() || faulted() || leaves.empty() || leaves.front().first != 0) return;
  leaf_of_.resize(records);
  for (size_t i = 0; i < leaves.size(); ++i) {
    const uint64_t end = i + 1 < leaves.size() ? leaves[i + 1].first : records;
    for (uint64_t r = leaves[i].first; r < end; ++r) {
      const uint64_t node = std::min<uint64_t>(r - leaves[i].first, UINT32_MAX);
      leaf_of_[r] = {leaves[i].second, static_cast<uint32_t>(node)};
    }
  }
}

void LmdbShardReader::Prefetch(uint64_t index, int stage) const {
  if (index >= leaf_of_.size()) return;
  const LeafNode at = leaf_of_[index];
  file_.PrefetchNode(at.pgno, at.node, stage);
}

Status LmdbShardReader::Get(uint64_t index, std::string_view* value) const {
  if (faulted()) return IOError(RecordName(index) + ": " + FaultMessage());
  // Ten digits and no allocation (the short-string buffer).
  const std::string key = LmdbKey(index);
  // The record's leaf page, where IndexLeaves noted it; the tree's search otherwise, and
  // for every answer but a value found, so that each fault has one message.
  if (index < leaf_of_.size() &&
      file_.FindInLeaf(leaf_of_[index].pgno, leaf_of_[index].node, key, value).ok() && !faulted()) {
    return Status::Ok();
  }
  Status s = file_.Find(key, value);
  // A lookup that read zeros where the file shrank is reported as what it is.
  if (faulted()) return IOError(RecordName(index) + ": " + FaultMessage());
  if (s.code() == StatusCode::kNotFound) {
    return CorruptionError(RecordName(index) + ": key " + key + " is missing");
  }
  return s.ok() ? s : s.WithPrefix(RecordName(index));
}

std::string LmdbShardReader::RecordName(uint64_t index) const {
  return RecordLocation{path_, static_cast<int64_t>(index)}.ToString();
}

std::string LmdbShardReader::FaultMessage() const { return std::string(io::kShrunkWhileMapped); }

Status LmdbShardReader::ForEach(
    const std::function<Status(std::string_view, std::string_view)>& fn) const {
  return Walk(fn, /*audit=*/false);
}

Status LmdbShardReader::Audit(
    const std::function<Status(std::string_view, std::string_view)>& fn) const {
  return Walk(fn, /*audit=*/true);
}

Status LmdbShardReader::Walk(const std::function<Status(std::string_view, std::string_view)>& fn,
                             bool audit) const {
  // The file's faults are prefixed with its path; `fn`'s go back as they are.
  Status from_fn;
  LmdbTreeCounts found;
  Status s = file_.ForEach(
      [&](std::string_view key, std::string_view value) {
        from_fn = fn(key, value);
        return from_fn;
      },
      audit, &found);
  if (faulted()) return IOError(path_ + ": " + FaultMessage());
  if (!from_fn.ok()) return from_fn;
  if (!s.ok()) return s.WithPrefix(path_);
  if (!audit) return Status::Ok();
  const LmdbMeta& m = file_.meta();
  std::string differ;
  auto check = [&](const char* what, uint64_t claimed, uint64_t counted) {
    if (claimed == counted) return;
    differ += std::string(differ.empty() ? "" : ", ") + what + " " + std::to_string(claimed) +
              " (the tree has " + std::to_string(counted) + ")";
  };
  check("entries", m.entries, found.entries);
  check("branch pages", m.branch_pages, found.branch_pages);
  check("leaf pages", m.leaf_pages, found.leaf_pages);
  check("overflow pages", m.overflow_pages, found.overflow_pages);
  if (!differ.empty()) {
    return CorruptionError(path_ + ": meta page " + std::to_string(m.meta_page) + " claims " +
                           differ);
  }
  return Status::Ok();
}

}  // namespace shardpack::format
