#include "remote/shard_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <set>

#include "format/format.h"
#include "io/env.h"
#include "remote/http.h"
#include "remote/s3.h"
#include "util/hash.h"

namespace shardpack::remote {

namespace {

constexpr std::string_view kPartialSuffix = ".partial";
constexpr std::string_view kBadSuffix = ".bad";
constexpr char kReservedName[] = ".reserved";

// A published file's name ends in "." and 32 lower-case hex digits.
bool IsPublishedName(std::string_view name) {
  if (name.size() < 34 || name[name.size() - 33] != '.') return false;
  return name.substr(name.size() - 32).find_first_not_of("0123456789abcdef") ==
         std::string_view::npos;
}

// A dataset's directory in the cache is named by the XXH3-128 of its URL: 32 hex digits.
bool IsDatasetKey(std::string_view name) {
  return name.size() == 32 && name.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// An flock(2) on a file, held until destruction. flock (not fcntl) locks belong to the
// open file description, so they also exclude other threads of this process.
class FileLock {
 public:
  FileLock() = default;
  ~FileLock() { Release(); }
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileLock& operator=(FileLock&& o) noexcept {
    if (this != &o) {
      Release();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }

  // Blocks until the lock is held.
  static StatusOr<FileLock> Acquire(const std::string& path, bool exclusive) {
    FileLock l;
    SHARDPACK_RETURN_IF_ERROR(l.Open(path));
    while (::flock(l.fd_, exclusive ? LOCK_EX : LOCK_SH) != 0) {
      if (errno != EINTR) return ErrnoError(path + ": flock", errno);
    }
    return l;
  }

  // Takes the lock exclusively if nobody holds it; held() says whether it did.
  static StatusOr<FileLock> TryExclusive(const std::string& path) {
    FileLock l;
    SHARDPACK_RETURN_IF_ERROR(l.Open(path));
    if (::flock(l.fd_, LOCK_EX | LOCK_NB) != 0) {
      if (errno != EWOULDBLOCK) return ErrnoError(path + ": flock", errno);
      l.Release();
    }
    return l;
  }

  bool held() const { return fd_ >= 0; }
  // Gives the descriptor (and the lock with it) to the caller.
  int Leak() { return std::exchange(fd_, -1); }

 private:
  Status Open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0) return ErrnoError(path + ": open", errno);
    return Status::Ok();
  }
  void Release() {
    if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
    fd_ = -1;
  }
  int fd_ = -1;
};

Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoError(dir + ": mkdir", errno);
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(dir + ": open", errno);
  Status s = ::fsync(fd) == 0 ? Status::Ok() : ErrnoError(dir + ": fsync", errno);
  ::close(fd);
  return s;
}

StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError(dir + ": opendir", errno);
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The size of a regular file, or -1 when there is none at `path`.
int64_t SizeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return -1;
  return st.st_size;
}

std::string HumanBytes(uint64_t b) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%llu bytes (%.2f GiB)", static_cast<unsigned long long>(b),
                static_cast<double>(b) / static_cast<double>(1ull << 30));
  return buf;
}

// A published file that the evictor may remove.
struct Candidate {
  std::string path;
  uint64_t bytes;
  struct timespec mtime;
};

}  // namespace

CachedDataset::~CachedDataset() {
  for (const std::string& p : bad_files_) ::unlink(p.c_str());
  if (use_fd_ >= 0) ::close(use_fd_);
}

std::string CachedDataset::PathOf(const std::string& name) const {
  auto it = paths_.find(name);
  return it == paths_.end() ? std::string() : it->second;
}

std::string CachedDataset::UrlOf(const std::string& name) const {
  // An s3:// URL holds the key as it is (HttpClient encodes it); an http(s) one is a URL.
  return url_ + "/" + (IsS3Url(url_) ? name : EscapePathSegment(name));
}

// One fetch of one dataset into the cache.
class Fetcher {
 public:
  Fetcher(std::string cache_dir, uint64_t bound, int connections, const RemoteOptions& options,
          FetchMode mode)
      : cache_dir_(std::move(cache_dir)),
        bound_(bound),
        connections_(connections),
        options_(options),
        keep_bad_(mode == FetchMode::kVerify),
        refetch_(mode == FetchMode::kVerify) {}

  StatusOr<std::unique_ptr<CachedDataset>> Run(const std::string& url) {
    out_.reset(new CachedDataset());
    out_->url_ = url;
    SHARDPACK_ASSIGN_OR_RETURN(auto client, HttpClient::Create(options_));
    clients_.push_back(std::move(client));
    const std::string manifest_url = url + "/" + std::string(format::kManifestName);
    SHARDPACK_ASSIGN_OR_RETURN(std::string text, clients_[0]->Get(manifest_url, kMaxManifestBytes));
    SHARDPACK_ASSIGN_OR_RETURN(out_->manifest_, ParseManifest(text, manifest_url));
    out_->manifest_bytes_ = text.size();

    std::vector<const FileEntry*> files;
    uint64_t total = 0;
    for (const ShardEntry& s : out_->manifest_.shards) {
      files.push_back(&s.data);
      if (s.index) files.push_back(&*s.index);
    }
    for (const FileEntry* f : files) {
      // A hostile manifest must not wrap the total past the bound (nor an off_t).
      if (f->bytes > static_cast<uint64_t>(INT64_MAX) - total) {
        return CorruptionError(url + "/manifest.json: " + f->file + ": " +
                               std::to_string(f->bytes) + " bytes: the sizes overflow");
      }
      total += f->bytes;
    }
    if (total > bound_) {
      return ResourceExhaustedError(url + ": the dataset is " + HumanBytes(total) +
                                    ", more than the cache bound of " + HumanBytes(bound_) +
                                    " (raise it with --cache-bytes or SHARDPACK_CACHE_BYTES)");
    }

    SHARDPACK_RETURN_IF_ERROR(io::Env::Posix()->CreateDirs(cache_dir_));
    dir_ = io::JoinPath(cache_dir_, Xxh3Hex(url.data(), url.size()));
    SHARDPACK_RETURN_IF_ERROR(MakeDir(dir_));
    // Shared for as long as the dataset is read: the evictor leaves these files alone.
    SHARDPACK_ASSIGN_OR_RETURN(FileLock use, FileLock::Acquire(io::JoinPath(dir_, ".use"), false));
    // Exclusive while downloading: ranks starting together download once, the others wait
    // here and then find every file published.
    SHARDPACK_ASSIGN_OR_RETURN(FileLock fetch,
                               FileLock::Acquire(io::JoinPath(dir_, ".fetch"), true));
    if (SizeOf(io::JoinPath(dir_, "url")) < 0) {
      SHARDPACK_RETURN_IF_ERROR(
          io::WriteFileAtomically(io::Env::Posix(), io::JoinPath(dir_, "url"), url + "\n"));
    }

    std::vector<const FileEntry*> wanted;
    uint64_t need = 0;  // bytes the cache grows by: files it lacks
    for (const FileEntry* f : files) {
      const std::string path = PublishedPath(*f);
      out_->paths_[f->file] = path;
      const int64_t size = SizeOf(path);
      if (size == static_cast<int64_t>(f->bytes)) {
        // verify proves what the server holds now, so it downloads cached files again
        // (and publishes them over the cached copy, which takes no more room).
        if (refetch_) wanted.push_back(f);
        continue;
      }
      // Published files are never rewritten; a wrong size means someone damaged it.
      if (size >= 0) ::unlink(path.c_str());
      wanted.push_back(f);
      lacking_.insert(f->file);
      need += f->bytes;
    }
    for (const FileEntry* f : files) current_.insert(f->file + "." + f->xxh3_128);

    if (!wanted.empty()) {
      reserved_path_ = io::JoinPath(dir_, kReservedName);
      SHARDPACK_RETURN_IF_ERROR(Reserve(need));
      Status s = FetchAll(wanted, need);
      out_->bytes_downloaded_ = bytes_downloaded_.load();
      Status r = Unreserve();
      SHARDPACK_RETURN_IF_ERROR(s);
      SHARDPACK_RETURN_IF_ERROR(r);
    }
    // Last use, for the LRU order of eviction. The clock, not UTIME_NOW: file systems
    // stamp "now" from a coarse clock (one tick is milliseconds), which would make
    // datasets used one after the other look equally old.
    struct timespec now[2];
    ::clock_gettime(CLOCK_REALTIME, &now[0]);
    now[1] = now[0];
    for (const FileEntry* f : files) {
      const std::string& p = out_->paths_[f->file];
      if (!p.empty() && std::string_view(p).ends_with(f->xxh3_128))
        ::utimensat(AT_FDCWD, p.c_str(), now, 0);
    }
    for (const auto& c : clients_) out_->requests_ += c->requests();
    out_->use_fd_ = use.Leak();
    return std::move(out_);
  }

 private:
  std::string PublishedPath(const FileEntry& f) const {
    return io::JoinPath(dir_, f.file + "." + f.xxh3_128);
  }

  // Makes room for `need` more bytes and records them in .reserved, so that other
  // processes reserving at the same time count them.
  Status Reserve(uint64_t need) {
    SHARDPACK_ASSIGN_OR_RETURN(FileLock global,
                               FileLock::Acquire(io::JoinPath(cache_dir_, ".lock"), true));
    SHARDPACK_RETURN_IF_ERROR(MakeRoom(need));
    return SetReserved(need);
  }

  Status SetReserved(uint64_t bytes) {
    // Created anew each time (readers take its size under the same lock): a link planted
    // at the name is removed, never truncated through.
    SHARDPACK_ASSIGN_OR_RETURN(const int fd, io::CreateNewFile(reserved_path_, O_WRONLY));
    // Sparse: it takes no disk space, only its size is read.
    Status s = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0
                   ? Status::Ok()
                   : ErrnoError(reserved_path_ + ": ftruncate", errno);
    ::close(fd);
    return s;
  }

  Status Unreserve() {
    SHARDPACK_ASSIGN_OR_RETURN(FileLock global,
                               FileLock::Acquire(io::JoinPath(cache_dir_, ".lock"), true));
    if (::unlink(reserved_path_.c_str()) != 0 && errno != ENOENT) {
      return ErrnoError(reserved_path_ + ": unlink", errno);
    }
    return Status::Ok();
  }

  // Under the global lock: removes what dead processes left, counts what the cache holds
  // and evicts least recently used files until `need` more bytes fit under the bound.
  Status MakeRoom(uint64_t need) {
    SHARDPACK_ASSIGN_OR_RETURN(std::vector<std::string> keys, ListDir(cache_dir_));
    uint64_t used = 0;
    uint64_t pinned = 0;  // published bytes of datasets other processes are reading
    std::vector<Candidate> candidates;
    std::vector<FileLock> held;  // .use locks of the datasets we may evict from
    for (const std::string& key : keys) {
      // Only dataset directories (named by 32 hex digits, not symbolic links): a cache
      // directory shared with other tools keeps their files.
      if (!IsDatasetKey(key)) continue;
      const std::string dir = io::JoinPath(cache_dir_, key);
      struct stat st;
      if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
      const bool own = dir == dir_;
      // Our own locks are held through other descriptors, so these fail for our dataset.
      SHARDPACK_ASSIGN_OR_RETURN(FileLock fetch,
                                 FileLock::TryExclusive(io::JoinPath(dir, ".fetch")));
      SHARDPACK_ASSIGN_OR_RETURN(FileLock use, FileLock::TryExclusive(io::JoinPath(dir, ".use")));
      SHARDPACK_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(dir));
      for (const std::string& name : names) {
        const std::string path = io::JoinPath(dir, name);
        struct stat fs;
        if (::stat(path.c_str(), &fs) != 0 || !S_ISREG(fs.st_mode)) continue;
        const auto bytes = static_cast<uint64_t>(fs.st_size);
        if (std::string_view(name).ends_with(kPartialSuffix) || name == kReservedName) {
          // A live download's bytes are counted by its reservation, not by its partials.
          // Ours are left over from a dead process too: we hold .fetch and have not
          // started.
          if (fetch.held() || own) {
            ::unlink(path.c_str());
          } else if (name == kReservedName) {
            used += bytes;
          }
        } else if (std::string_view(name).ends_with(kBadSuffix)) {
          if (use.held()) {
            ::unlink(path.c_str());
          } else {
            used += bytes;
          }
        } else if (IsPublishedName(name)) {
          used += bytes;
          if ((!own && use.held()) || (own && current_.count(name) == 0)) {
            candidates.push_back({path, bytes, fs.st_mtim});
          } else if (!own) {
            pinned += bytes;
          }
        }
      }
      if (use.held()) held.push_back(std::move(use));
    }
    if (used + need <= bound_) return Status::Ok();
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
      if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
      return a.path < b.path;
    });
    for (const Candidate& c : candidates) {
      if (used + need <= bound_) break;
      if (::unlink(c.path.c_str()) != 0 && errno != ENOENT) {
        return ErrnoError(c.path + ": unlink", errno);
      }
      used -= c.bytes;
    }
    if (used + need > bound_) {
      return ResourceExhaustedError(
          out_->url_ + ": the cache " + cache_dir_ + " cannot make room for " + HumanBytes(need) +
          " under its bound of " + HumanBytes(bound_) + ": it holds " + HumanBytes(used) +
          " that cannot be evicted (" + HumanBytes(pinned) +
          " of datasets other processes are reading, and downloads in progress)");
    }
    return Status::Ok();
  }

  // One file being downloaded: its ranges are fetched by any connection and written at
  // their offsets; the last range to end checks the file and publishes it.
  struct FileJob {
    const FileEntry* entry = nullptr;
    std::string url, partial, final_path;
    std::atomic<size_t> ranges_left{0};
    std::mutex mu;  // fd, error
    int fd = -1;    // opened by the first range to start
    Status error;   // the first range's error
  };
  struct RangeJob {
    FileJob* file;
    uint64_t begin, end;
  };

  // Downloads `files` in ranges of chunk_bytes, over up to `connections_` connections at
  // once, the ranges taken in the manifest's order (so files finish about in that order
  // and few are open at a time). The first failure stops the others (no file of theirs
  // is published) and is returned.
  Status FetchAll(const std::vector<const FileEntry*>& files, uint64_t reserved) {
    reserved_ = reserved;
    const uint64_t chunk = std::max<uint64_t>(1, options_.chunk_bytes);
    std::vector<std::unique_ptr<FileJob>> jobs;
    std::vector<RangeJob> ranges;
    for (const FileEntry* f : files) {
      auto job = std::make_unique<FileJob>();
      job->entry = f;
      job->url = out_->UrlOf(f->file);
      job->final_path = PublishedPath(*f);
      job->partial = job->final_path + std::string(kPartialSuffix);
      size_t n = 0;
      for (uint64_t begin = 0; begin < f->bytes || n == 0; begin += chunk, ++n) {
        ranges.push_back({job.get(), begin, std::min(f->bytes, begin + chunk)});  // empty: none
      }
      job->ranges_left = n;
      jobs.push_back(std::move(job));
    }
    std::atomic<size_t> next{0};
    Status first_error;
    auto work = [&](HttpClient* client) {
      for (size_t i; !stop_.load() && (i = next.fetch_add(1)) < ranges.size();) {
        FileJob& job = *ranges[i].file;
        FetchRange(ranges[i], client);
        if (--job.ranges_left != 0) continue;
        Status s = Finish(&job);
        if (s.ok() || Tolerated(*job.entry, s)) continue;
        // Only the first: the others' are mostly the stop itself.
        if (!stop_.exchange(true)) first_error = std::move(s);
      }
    };
    SHARDPACK_RETURN_IF_ERROR(RunOverConnections(
        &clients_, std::min<size_t>(static_cast<size_t>(connections_), ranges.size()), options_,
        work));
    // Files left unfinished by a stop.
    for (const auto& job : jobs) {
      if (job->fd >= 0) {
        ::close(job->fd);
        ::unlink(job->partial.c_str());
      }
    }
    return first_error;
  }

  // verify's case: the server lacks the file or has one of another size; it is reported
  // and the fetch goes on. (Checksum faults do not come here: the bad copy is kept.)
  bool Tolerated(const FileEntry& f, const Status& s) {
    const bool data_fault =
        s.code() == StatusCode::kNotFound || s.code() == StatusCode::kCorruption;
    if (!keep_bad_ || !data_fault || stop_.load()) return false;
    std::lock_guard<std::mutex> lock(mu_);
    out_->paths_[f.file].clear();
    out_->failures_[f.file] = s;
    return true;
  }

  // Downloads one range of a file into its <file>.<xxh3>.partial, at its offset. Errors
  // are kept in the file's job; a file that failed already skips its other ranges.
  void FetchRange(const RangeJob& r, HttpClient* client) {
    FileJob& job = *r.file;
    int fd;
    {
      std::lock_guard<std::mutex> lock(job.mu);
      if (!job.error.ok()) return;
      if (job.fd < 0) {
        // Created anew: a link planted at the name is removed, never written through.
        auto fd_or = io::CreateNewFile(job.partial, O_RDWR);
        if (!fd_or.ok()) {
          job.error = fd_or.status();
          return;
        }
        job.fd = *fd_or;
      }
      fd = job.fd;
    }
    if (r.begin == r.end) return;  // an empty file
    uint64_t offset = r.begin;
    const Sink sink = [&](const uint8_t* data, size_t n) {
      // Another file failed: this one is abandoned (FetchAll drops its status).
      if (stop_.load(std::memory_order_relaxed)) return IOError(job.url + ": download stopped");
      SHARDPACK_RETURN_IF_ERROR(io::PwriteAll(fd, data, n, offset, job.partial));
      offset += n;
      return Status::Ok();
    };
    Status s = client->GetRange(job.url, r.begin, r.end, job.entry->bytes, sink);
    bytes_downloaded_ += offset - r.begin;
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(job.mu);
      if (job.error.ok()) job.error = std::move(s);
    }
  }

  // Once every range of `job` ended: checks the file's XXH3-128 (read back from the
  // page cache), makes it durable and publishes it; or removes it.
  Status Finish(FileJob* job) {
    const FileEntry& f = *job->entry;
    const int fd = std::exchange(job->fd, -1);
    Status s = stop_.load() ? IOError(job->url + ": download stopped") : job->error;
    bool bad = false;  // whole, but not the file the manifest describes
    if (s.ok()) {
      auto actual = HashFile(fd, job->partial);
      if (!actual.ok()) {
        s = actual.status();
      } else if (*actual != f.xxh3_128) {
        s = CorruptionError(job->url + ": xxh3_128 checksum " + *actual + ", the manifest says " +
                            f.xxh3_128 + " (" + std::to_string(f.bytes) + " bytes downloaded)");
        bad = true;
      }
    }
    // Durable before it is published: a crash must not leave a published name over bytes
    // that never reached the disk.
    if (s.ok() && ::fsync(fd) != 0) s = ErrnoError(job->partial + ": fsync", errno);
    if (fd >= 0 && ::close(fd) != 0 && s.ok()) s = ErrnoError(job->partial + ": close", errno);
    if (!s.ok() && !(bad && keep_bad_)) {
      ::unlink(job->partial.c_str());
      return s;
    }
    const std::string publish_as =
        bad ? job->final_path + std::string(kBadSuffix) : job->final_path;
    std::lock_guard<std::mutex> lock(mu_);
    auto global = FileLock::Acquire(io::JoinPath(cache_dir_, ".lock"), true);
    if (!global.ok()) {
      ::unlink(job->partial.c_str());
      return global.status();
    }
    if (::rename(job->partial.c_str(), publish_as.c_str()) != 0) {
      Status e = ErrnoError(job->partial + ": rename to " + publish_as, errno);
      ::unlink(job->partial.c_str());
      return e;
    }
    SHARDPACK_RETURN_IF_ERROR(SyncDir(dir_));
    if (lacking_.count(f.file) != 0) {
      reserved_ -= f.bytes;
      SHARDPACK_RETURN_IF_ERROR(SetReserved(reserved_));
    }
    if (!s.ok()) {
      // verify reads the bad copy and names the damaged records; then it is removed.
      out_->bad_files_.push_back(publish_as);
      out_->paths_[f.file] = publish_as;
      out_->failures_[f.file] = s;
    }
    return Status::Ok();
  }

  // The XXH3-128 of the file open at `fd`, read from its start.
  static StatusOr<std::string> HashFile(int fd, const std::string& path) {
    Xxh3Hasher hasher;
    std::vector<uint8_t> buf(1 << 20);
    for (off_t offset = 0;;) {
      const ssize_t n = ::pread(fd, buf.data(), buf.size(), offset);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(path + ": pread", errno);
      }
      if (n == 0) break;
      hasher.Update(buf.data(), static_cast<size_t>(n));
      offset += n;
    }
    return hasher.HexDigest();
  }

  const std::string cache_dir_;
  const uint64_t bound_;
  const int connections_;
  const RemoteOptions& options_;
  const bool keep_bad_;  // keep a file failing its checksum as .bad; list missing ones
  const bool refetch_;   // download every file, cached or not
  std::string dir_;
  std::set<std::string> lacking_;  // files the cache lacked: the reservation covers them
  std::string reserved_path_;
  std::set<std::string> current_;  // published names the manifest lists
  // One per connection; [0] also fetched the manifest.
  std::vector<std::unique_ptr<HttpClient>> clients_;
  std::unique_ptr<CachedDataset> out_;
  // FetchAll's threads share these.
  std::atomic<bool> stop_{false};  // a file failed: the others stop
  std::atomic<uint64_t> bytes_downloaded_{0};
  std::mutex mu_;          // publishing; out_'s maps; reserved_
  uint64_t reserved_ = 0;  // bytes .reserved still holds for this download
};

StatusOr<std::unique_ptr<CachedDataset>> FetchDataset(const std::string& url,
                                                      const RemoteOptions& options,
                                                      FetchMode mode) {
  SHARDPACK_ASSIGN_OR_RETURN(std::string base, NormalizeDatasetUrl(url));
  SHARDPACK_ASSIGN_OR_RETURN(std::string dir, ResolveCacheDir(options));
  SHARDPACK_ASSIGN_OR_RETURN(uint64_t bound, ResolveCacheBytes(options));
  SHARDPACK_ASSIGN_OR_RETURN(int connections, ResolveConnections(options));
  Fetcher fetcher(dir, bound, connections, options, mode);
  return fetcher.Run(base);
}

StatusOr<std::string> ResolveCacheDir(const RemoteOptions& options) {
  if (!options.cache_dir.empty()) return options.cache_dir;
  if (std::string d = ProcessEnv("SHARDPACK_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = ProcessEnv("XDG_CACHE_HOME"); !d.empty()) {
    return io::JoinPath(d, "shardpack");
  }
  if (std::string d = ProcessEnv("HOME"); !d.empty()) return io::JoinPath(d, ".cache/shardpack");
  return InvalidArgumentError(
      "no cache directory for remote datasets: set SHARDPACK_CACHE_DIR (or --cache-dir)");
}

StatusOr<uint64_t> ResolveCacheBytes(const RemoteOptions& options) {
  if (options.cache_bytes > 0) return options.cache_bytes;
  const char* v = std::getenv("SHARDPACK_CACHE_BYTES");
  if (v == nullptr || *v == '\0') return kDefaultCacheBytes;
  auto bytes = ParseByteSize(v);
  if (!bytes.ok()) return bytes.status().WithPrefix("SHARDPACK_CACHE_BYTES");
  return bytes;
}

StatusOr<int> ResolveConnections(const RemoteOptions& options) {
  auto check = [](int64_t n, const std::string& what) -> StatusOr<int> {
    if (n < 1 || n > kMaxConnections) {
      return InvalidArgumentError(what + ": " + std::to_string(n) + " connections; it takes 1 to " +
                                  std::to_string(kMaxConnections));
    }
    return static_cast<int>(n);
  };
  if (options.connections != 0) return check(options.connections, "RemoteOptions::connections");
  const char* v = std::getenv("SHARDPACK_CONNECTIONS");
  if (v == nullptr || *v == '\0') return kDefaultConnections;
  const std::string text(v);
  if (text.size() > 4 || text.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgumentError("SHARDPACK_CONNECTIONS: \"" + text +
                                "\" is not a number of connections (1 to " +
                                std::to_string(kMaxConnections) + ")");
  }
  return check(std::stoi(text), "SHARDPACK_CONNECTIONS");
}

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  const std::string original(text);
  auto bad = [&] {
    return InvalidArgumentError("\"" + original +
                                "\" is not a size (bytes, or a number with K, M, G or T)");
  };
  size_t digits = 0;
  uint64_t v = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    const uint64_t d = static_cast<uint64_t>(text[digits] - '0');
    if (v > (UINT64_MAX - d) / 10) return bad();
    v = v * 10 + d;
    ++digits;
  }
  if (digits == 0) return bad();
  std::string unit(text.substr(digits));
  std::transform(unit.begin(), unit.end(), unit.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  int shift = 0;
  if (unit.empty() || unit == "b") {
    shift = 0;
  } else {
    const std::string prefixes = "kmgt";
    const size_t p = prefixes.find(unit[0]);
    const std::string rest = unit.substr(1);
    if (p == std::string::npos || !(rest.empty() || rest == "b" || rest == "ib")) return bad();
    shift = 10 * static_cast<int>(p + 1);
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return bad();
  return v << shift;
}

StatusOr<std::string> NormalizeDatasetUrl(std::string_view url) {
  if (!IsRemotePath(url)) {
    return InvalidArgumentError(std::string(url) + ": not an http(s):// or s3:// URL");
  }
  if (IsS3Url(url)) {
    // The bucket is checked here, before anything is fetched; a key may hold any byte.
    SHARDPACK_RETURN_IF_ERROR(ParseS3Url(url).status());
  } else if (url.find_first_of("?#") != std::string_view::npos) {
    return InvalidArgumentError(std::string(url) +
                                ": a dataset URL names a directory; it cannot have a query or "
                                "fragment");
  }
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  return std::string(url);
}

}  // namespace shardpack::remote
