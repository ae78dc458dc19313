#include "format/lmdb_shard.h"

#include <lmdb.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "format/example.h"
#include "format/format.h"
#include "io/env.h"
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
std::string_view View(const MDB_val& v) {
  return std::string_view(static_cast<const char*>(v.mv_data), v.mv_size);
}

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
  ::unlink(tmp.c_str());  // a stale temporary from an interrupted run
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return LmdbError(tmp + ": mdb_env_create", rc);
  LmdbEnv env(raw);
  rc = mdb_env_set_mapsize(raw, options.initial_map_bytes);
  if (rc != 0) return LmdbError(tmp + ": mdb_env_set_mapsize", rc);
  // NOSYNC while loading: the file is a temporary until Finish() syncs it explicitly.
  rc =
      mdb_env_open(raw, tmp.c_str(), MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOSYNC | MDB_NOMETASYNC, 0644);
  if (rc != 0) return LmdbError(tmp + ": mdb_env_open", rc);
  return std::unique_ptr<LmdbShardWriter>(
      new LmdbShardWriter(std::move(path), options, std::move(env)));
}

LmdbShardWriter::LmdbShardWriter(std::string path, LmdbWriterOptions options, LmdbEnv env)
    : path_(std::move(path)),
      options_(options),
      env_(std::move(env)),
      map_bytes_(options.initial_map_bytes) {}

LmdbShardWriter::~LmdbShardWriter() { Abandon(); }

void LmdbShardWriter::Abandon() {
  if (done_) return;
  done_ = true;
  env_.reset();
  ::unlink((path_ + ".tmp").c_str());
}

uint64_t LmdbShardWriter::RecordSizeBound(std::string_view entries, uint64_t pixel_bytes,
                                          uint32_t pixel_alignment) {
  // Payload (image/pad adds less than 2 * alignment + 8) plus LMDB's per-value cost: a
  // node, and a page header per overflow chain.
  return EncodePayloadPrefix(entries, pixel_bytes, 0, 1).size() + 2ull * pixel_alignment + 8 +
         pixel_bytes + 64 + 4096;
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
  io::Env* fs = io::Env::Posix();
  auto mapped = fs->MapFile(tmp, io::AccessPattern::kSequential);
  if (!mapped.ok()) {
    Abandon();
    return mapped.status();
  }
  FileEntry entry{std::string(io::BaseName(path_)), (*mapped)->size(),
                  Xxh3Hex((*mapped)->data(), (*mapped)->size())};
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
  if (::access(path.c_str(), R_OK) != 0) return ErrnoError(path + ": open", errno);
  // LMDB's open of a FIFO would block for a writer; a directory is no shard either.
  SHARDPACK_RETURN_IF_ERROR(io::RequireRegularFile(path));
  MDB_env* raw = nullptr;
  int rc = mdb_env_create(&raw);
  if (rc != 0) return LmdbError(path + ": mdb_env_create", rc);
  LmdbEnv env(raw);
  unsigned flags = MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK | MDB_NOTLS;
  if (random_access) flags |= MDB_NORDAHEAD;
  rc = mdb_env_open(raw, path.c_str(), flags, 0444);
  if (rc != 0) return LmdbError(path + ": mdb_env_open", rc);
  MDB_envinfo info;
  rc = mdb_env_info(raw, &info);
  if (rc != 0) return LmdbError(path + ": mdb_env_info", rc);
  MDB_stat env_stat;
  rc = mdb_env_stat(raw, &env_stat);
  if (rc != 0) return LmdbError(path + ": mdb_env_stat", rc);
  mdb_filehandle_t fd = -1;
  struct stat st {};
  if (mdb_env_get_fd(raw, &fd) != 0 || ::fstat(fd, &st) != 0) {
    return ErrnoError(path + ": stat", errno);
  }
  // The meta page names the last page in use: a shorter file lost its tail (a truncated
  // copy), and reading those pages would find nothing.
  const uint64_t needed = (static_cast<uint64_t>(info.me_last_pgno) + 1) * env_stat.ms_psize;
  if (static_cast<uint64_t>(st.st_size) < needed) {
    return CorruptionError(path + ": the file is " + std::to_string(st.st_size) +
                           " bytes, but its meta page says it holds " +
                           std::to_string(info.me_last_pgno + 1) + " pages of " +
                           std::to_string(env_stat.ms_psize) + " bytes (" + std::to_string(needed) +
                           " bytes): it is truncated");
  }
  std::unique_ptr<io::MappedRange> range;  // unregistered before env unmaps the map
  const char* map = nullptr;
  Txn txn;
  rc = mdb_txn_begin(raw, nullptr, MDB_RDONLY, txn.out());
  if (rc != 0) return LmdbError(path + ": mdb_txn_begin", rc);
  MDB_dbi dbi;
  rc = mdb_dbi_open(txn.get(), nullptr, 0, &dbi);
  if (rc != 0) return LmdbError(path + ": mdb_dbi_open", rc);
  MDB_stat db_stat;
  rc = mdb_stat(txn.get(), dbi, &db_stat);
  if (rc != 0) return LmdbError(path + ": mdb_stat", rc);
  if (db_stat.ms_entries > 0) {
    MDB_cursor* cursor = nullptr;
    rc = mdb_cursor_open(txn.get(), dbi, &cursor);
    if (rc != 0) return LmdbError(path + ": mdb_cursor_open", rc);
    MDB_val k, v;
    rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST);
    mdb_cursor_close(cursor);
    if (rc != 0) return LmdbError(path + ": reading the first record", rc);
    // LMDB does not say where its map is; the first key lies in it. Registered, the map
    // survives the file shrinking under it: lost pages read zeros and mark the reader
    // faulted instead of killing the process (io/mapped_range.h).
    auto mapping = io::MappingAt(k.mv_data);
    if (!mapping.ok()) return mapping.status().WithPrefix(path);
    map = static_cast<const char*>(mapping->begin);
    range = std::make_unique<io::MappedRange>(mapping->begin, mapping->size, PROT_READ);
    const std::string_view key = View(k);
    if (keys == Keys::kRecordNumbers && !IsRecordNumberKey(key)) {
      const std::string shown = EscapeBytes(key.substr(0, 40));
      if (IsCaffeKey(key)) {
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
  // Committing the transaction that opened the handle keeps the handle for later ones.
  rc = txn.Commit();
  if (rc != 0) return LmdbError(path + ": mdb_txn_commit", rc);
  return std::unique_ptr<LmdbShardReader>(
      new LmdbShardReader(path, std::move(env), map, dbi, db_stat.ms_entries,
                          static_cast<uint64_t>(st.st_size), std::move(range)));
}

LmdbShardReader::~LmdbShardReader() {
  for (void* txn : all_txns_) mdb_txn_abort(static_cast<MDB_txn*>(txn));
}

Status LmdbShardReader::Get(uint64_t index, std::string_view* value) const {
  // LMDB asserts (and aborts) on some pages of zeros, such as a meta page naming root page
  // 0: once the map has read zeros anywhere, nothing of this file goes through LMDB again.
  if (faulted()) return FaultStatus(index);
  MDB_txn* txn = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    if (!idle_txns_.empty()) {
      txn = static_cast<MDB_txn*>(idle_txns_.back());
      idle_txns_.pop_back();
    }
  }
  int rc = 0;
  if (txn != nullptr) {
    rc = mdb_txn_renew(txn);
    if (rc != 0) {
      // A reset transaction that cannot be renewed stays out of the idle list; the
      // destructor frees it with the others.
      return LmdbError(path_ + ": mdb_txn_renew", rc);
    }
  } else {
    // A file known to have shrunk gets no new transaction (its meta pages may read as
    // zeros); the hot path relies on faulted() instead, which the caller checks.
    if (!CheckNotShrunk().ok()) {
      return IOError(RecordName(index) + ": " + std::string(io::kShrunkWhileOpen));
    }
    rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return LmdbError(path_ + ": mdb_txn_begin", rc);
    std::lock_guard<std::mutex> lock(pool_mu_);
    all_txns_.push_back(txn);
    idle_txns_.reserve(all_txns_.size());
  }
  // Back to the pool on every path: reset releases the snapshot, keeps the memory.
  struct Return {
    const LmdbShardReader* reader;
    MDB_txn* txn;
    ~Return() {
      mdb_txn_reset(txn);
      std::lock_guard<std::mutex> lock(reader->pool_mu_);
      reader->idle_txns_.push_back(txn);
    }
  } give_back{this, txn};
  if (faulted()) return FaultStatus(index);  // the meta pages the transaction read were zeros
  const std::string key = LmdbKey(index);
  MDB_val k = Val(key), v;
  rc = mdb_get(txn, dbi_, &k, &v);
  if (rc == MDB_NOTFOUND) {
    return CorruptionError(RecordName(index) + ": key " + key + " is missing");
  }
  if (rc != 0) return LmdbError(RecordName(index), rc);
  // A damaged node can claim a value longer than the file (an overflow value's length is
  // 32 bits): reading it would run off the map.
  const uint64_t value_offset = static_cast<uint64_t>(static_cast<const char*>(v.mv_data) - map_);
  if (map_ == nullptr || value_offset > file_bytes_ || v.mv_size > file_bytes_ - value_offset) {
    return CorruptionError(RecordName(index) + ": a value of " + std::to_string(v.mv_size) +
                           " bytes at offset " + std::to_string(value_offset) +
                           " runs past the end of the file (" + std::to_string(file_bytes_) +
                           " bytes)");
  }
  // The map is read-only and nobody writes the dataset, so the bytes stay where they are
  // after the transaction ends.
  *value = View(v);
  return Status::Ok();
}

void LmdbShardReader::WillNeed(std::string_view value) const {
  if (map_ != nullptr) io::WillNeedPages(value.data(), value.size());
}

void LmdbShardReader::Populate(std::string_view value) const {
  if (map_ != nullptr) io::PopulatePages(value.data(), value.size());
}

void LmdbShardReader::PreferHugePages() const {
  if (map_ != nullptr) io::PreferHugePages(map_, file_bytes_);
}

bool LmdbShardReader::Resident(std::string_view value) const {
  return map_ == nullptr || value.empty() || io::PageResident(value.data());
}

bool LmdbShardReader::ResidentAt(uint64_t offset) const {
  return map_ == nullptr || offset >= file_bytes_ || io::PageResident(map_ + offset);
}

void LmdbShardReader::WillNeedAt(uint64_t offset, uint64_t length) const {
  if (map_ == nullptr || offset >= file_bytes_) return;
  io::WillNeedPages(map_ + offset, std::min(length, file_bytes_ - offset));
}

std::string LmdbShardReader::RecordName(uint64_t index) const {
  return RecordLocation{path_, static_cast<int64_t>(index)}.ToString();
}

Status LmdbShardReader::FaultStatus(uint64_t index) const {
  return IOError(RecordName(index) + ": " + FaultMessage());
}

std::string LmdbShardReader::FaultMessage() const {
  if (!CheckNotShrunk().ok()) return std::string(io::kShrunkWhileMapped);
  return "a page past the end of the file was read (the file is damaged): reading its "
         "mapping raised SIGBUS";
}

Status LmdbShardReader::CheckNotShrunk() const {
  mdb_filehandle_t fd = -1;
  struct stat st {};
  if (mdb_env_get_fd(env_.get(), &fd) != 0 || ::fstat(fd, &st) != 0) {
    return ErrnoError(path_ + ": stat", errno);
  }
  if (static_cast<uint64_t>(st.st_size) < file_bytes_) {
    return IOError(path_ + ": the file shrank from " + std::to_string(file_bytes_) + " to " +
                   std::to_string(st.st_size) + " bytes while open");
  }
  return Status::Ok();
}

Status LmdbShardReader::ReserveReaders(int readers) const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  const size_t wanted = static_cast<size_t>(std::max(readers, 0));
  all_txns_.reserve(std::max(wanted, all_txns_.size()));
  idle_txns_.reserve(std::max(wanted, all_txns_.size()));
  while (all_txns_.size() < wanted) {
    MDB_txn* txn = nullptr;
    const int rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, &txn);
    if (rc != 0) return LmdbError(path_ + ": mdb_txn_begin", rc);
    mdb_txn_reset(txn);
    all_txns_.push_back(txn);
    idle_txns_.push_back(txn);
  }
  return Status::Ok();
}

Status LmdbShardReader::Walk(
    const std::function<Status(std::string_view, std::string_view)>& fn) const {
  Txn txn;
  int rc = mdb_txn_begin(env_.get(), nullptr, MDB_RDONLY, txn.out());
  if (rc != 0) return LmdbError(path_ + ": mdb_txn_begin", rc);
  MDB_cursor* cursor = nullptr;
  rc = mdb_cursor_open(txn.get(), dbi_, &cursor);
  if (rc != 0) return LmdbError(path_ + ": mdb_cursor_open", rc);
  MDB_val k, v;
  Status s;
  for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0 && s.ok();
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    s = fn(View(k), View(v));
  }
  mdb_cursor_close(cursor);
  if (!s.ok()) return s;
  if (rc != MDB_NOTFOUND) return LmdbError(path_ + ": reading records", rc);
  return Status::Ok();
}

}  // namespace shardpack::format
