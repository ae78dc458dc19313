#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "io/env.h"
#include "io/mapped_range.h"
#include "io/mapped_write.h"

namespace shardpack::io {
namespace {

// "a FIFO", "a directory", ...: what a path that should be a regular file is instead.
const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a file";
}

constexpr size_t kWriteBufferSize = 1 << 20;
// Appends at least this large (a record's pixels) go to the file with what is buffered in
// one writev, instead of being copied into the buffer first: the copy was 1.3% of a
// conversion of 256x256 images.
constexpr size_t kDirectWriteSize = 64 << 10;

// Writes a, then b, whole: one writev while both remain, then plain writes.
Status WriteBoth(int fd, std::string_view a, std::string_view b, const std::string& path) {
  while (!a.empty()) {
    iovec iov[2] = {{const_cast<char*>(a.data()), a.size()},
                    {const_cast<char*>(b.data()), b.size()}};
    const ssize_t w = ::writev(fd, iov, 2);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path + ": write", errno);
    }
    const size_t n = static_cast<size_t>(w);
    if (n < a.size()) {
      a.remove_prefix(n);
    } else {
      b.remove_prefix(n - a.size());
      a = {};
    }
  }
  return WriteAll(fd, b.data(), b.size(), path);
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    buffer_.reserve(kWriteBufferSize);
  }
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return FailedPreconditionError(path_ + ": append after close");
    size_ += data.size();
    if (data.size() >= kDirectWriteSize) {
      Status s = WriteBoth(fd_, buffer_, data, path_);
      buffer_.clear();
      if (s.ok()) StartWriteback();
      return s;
    }
    if (buffer_.size() + data.size() <= kWriteBufferSize) {
      buffer_.append(data);
      return Status::Ok();
    }
    SHARDPACK_RETURN_IF_ERROR(Flush());
    if (data.size() >= kWriteBufferSize) {
      SHARDPACK_RETURN_IF_ERROR(WriteAll(fd_, data.data(), data.size(), path_));
      StartWriteback();
      return Status::Ok();
    }
    buffer_.append(data);
    return Status::Ok();
  }

  Status WriteAt(uint64_t offset, std::span<const std::string_view> pieces) override {
    if (fd_ < 0) return FailedPreconditionError(path_ + ": write after close");
    constexpr size_t kMaxPieces = 8;
    if (pieces.size() > kMaxPieces) return InvalidArgumentError(path_ + ": too many pieces");
    iovec iov[kMaxPieces];
    size_t count = 0;
    for (std::string_view p : pieces) {
      if (!p.empty()) iov[count++] = {const_cast<char*>(p.data()), p.size()};
    }
    size_t first = 0;
    while (first < count) {
      const ssize_t w =
          ::pwritev(fd_, iov + first, static_cast<int>(count - first), static_cast<off_t>(offset));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(path_ + ": write at offset " + std::to_string(offset), errno);
      }
      if (w == 0)
        return IOError(path_ + ": write at offset " + std::to_string(offset) + " wrote nothing");
      // A short write: go on after what went.
      offset += static_cast<uint64_t>(w);
      for (size_t n = static_cast<size_t>(w); n > 0;) {
        const size_t take = std::min(n, iov[first].iov_len);
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + take;
        iov[first].iov_len -= take;
        n -= take;
        if (iov[first].iov_len == 0) ++first;
      }
    }
    return Status::Ok();
  }

  void WrittenBefore(uint64_t end) override { io::StartWriteback(fd_, end, &handed_); }

  Status Sync() override {
    SHARDPACK_RETURN_IF_ERROR(Flush());
    // An fsync error means the data may be lost whatever a retry says (fsyncgate): it is
    // reported, never retried.
    if (::fsync(fd_) != 0) return ErrnoError(path_ + ": fsync", errno);
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    Status s = Flush();
    if (::close(fd_) != 0 && s.ok()) s = ErrnoError(path_ + ": close", errno);
    fd_ = -1;
    return s;
  }

  uint64_t Size() const override { return size_; }

 private:
  Status Flush() {
    Status s = WriteAll(fd_, buffer_.data(), buffer_.size(), path_);
    buffer_.clear();
    if (s.ok()) StartWriteback();
    return s;
  }

  // After an Append's bytes reached the file: the same hint for what has been written.
  void StartWriteback() { WrittenBefore(size_ - buffer_.size()); }

  std::string path_;
  int fd_;
  std::string buffer_;
  uint64_t size_ = 0;
  uint64_t handed_ = 0;  // bytes before this offset were handed to StartWriteback's disk
};

class PosixMappedFile final : public MappedFile {
 public:
  PosixMappedFile(void* base, uint64_t size, int prot)
      : base_(base), size_(size), range_(std::make_unique<MappedRange>(base, size, prot)) {}
  ~PosixMappedFile() override {
    range_.reset();  // unregistered before it is unmapped
    if (base_ != nullptr) ::munmap(base_, size_);
  }
  const uint8_t* data() const override { return static_cast<const uint8_t*>(base_); }
  uint64_t size() const override { return size_; }
  bool faulted() const override { return range_->faulted(); }
  bool Resident(uint64_t offset) const override {
    return base_ == nullptr || offset >= size_ || PageResident(data() + offset);
  }
  void WillNeed(uint64_t offset, uint64_t length) const override {
    if (base_ == nullptr || offset >= size_) return;
    WillNeedPages(data() + offset, std::min(length, size_ - offset));
  }
  void Populate(uint64_t offset, uint64_t length) const override {
    if (base_ == nullptr || offset >= size_) return;
    PopulatePages(data() + offset, std::min(length, size_ - offset));
  }
  void PreferHugePages() const override { io::PreferHugePages(base_, size_); }

 private:
  void* base_;
  uint64_t size_;
  std::unique_ptr<MappedRange> range_;
};

// Opens `path` for reading without blocking (a FIFO or a device would block in open or
// read) and refuses anything that is not a regular file, naming it.
StatusOr<int> OpenRegularFile(const std::string& path, struct stat* st) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError(path + ": open", errno);
  if (::fstat(fd, st) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoError(path + ": stat", err);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return InvalidArgumentError(path + ": not a regular file but " + FileTypeName(st->st_mode));
  }
  return fd;
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, bool direct)
      : path_(std::move(path)), fd_(fd), direct_(direct) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  StatusOr<size_t> Read(uint64_t offset, size_t n, uint8_t* dst) const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(
            path_ + ": read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset),
            errno);
      }
      if (r == 0) break;  // the end of the file
      done += static_cast<size_t>(r);
      // A direct read ends short only at the end of the file: the rest is not block-sized.
      if (direct_ && done % kDirectAlignment != 0) break;
    }
    return done;
  }
  bool direct() const override { return direct_; }
  void DontNeed(uint64_t offset, uint64_t n) const override {
    if (!direct_) {
      ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
    }
  }
  int fd() const override { return fd_; }

 private:
  std::string path_;
  int fd_;
  bool direct_;
};

}  // namespace

StatusOr<int> CreateNewFile(const std::string& path, int flags) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoError(path + ": removing what is at the name before creating it", errno);
  }
  const int fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd >= 0) return fd;
  if (errno == EEXIST) {
    return AlreadyExistsError(path +
                              ": created by someone else between its removal and its creation "
                              "(is another process writing into this directory?)");
  }
  return ErrnoError(path + ": create", errno);
}

Status RequireRegularFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return ErrnoError(path + ": stat", errno);
  if (!S_ISREG(st.st_mode)) {
    return InvalidArgumentError(path + ": not a regular file but " + FileTypeName(st.st_mode));
  }
  return Status::Ok();
}

namespace {

class PosixEnv final : public Env {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    SHARDPACK_ASSIGN_OR_RETURN(const int fd, CreateNewFile(path, O_WRONLY));
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }

  StatusOr<std::unique_ptr<WritableFile>> NewMappedWritableFile(const std::string& path) override {
    return io::NewMappedWritableFile(path);
  }

  StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& path, AccessPattern pattern,
                                                MapMode mode) override {
    struct stat st {};
    SHARDPACK_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
    uint64_t size = static_cast<uint64_t>(st.st_size);
    void* base = nullptr;
    int prot = PROT_READ;
    if (size > 0) {
      // No MAP_POPULATE: populating whole shards up front serialises threads on the
      // process's mmap lock (verify at 2 threads: 11.0 GB/s with it, 13.2 GB/s without,
      // bench/verify_bench); fault-around maps 64 KiB per fault anyway.
      if (mode == MapMode::kCopyOnWrite) {
        // MAP_NORESERVE: no swap is set aside for pages nobody writes.
        base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
        if (base != MAP_FAILED) prot = PROT_READ | PROT_WRITE;
      }
      if (base == nullptr || base == MAP_FAILED) {
        base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      }
      if (base == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        return ErrnoError(path + ": mmap", err);
      }
      int advice = pattern == AccessPattern::kSequential ? MADV_SEQUENTIAL
                   : pattern == AccessPattern::kRandom   ? MADV_RANDOM
                                                         : MADV_NORMAL;
      ::madvise(base, size, advice);  // a hint; failure changes nothing but speed
    }
    ::close(fd);  // the mapping keeps the file referenced
    return std::unique_ptr<MappedFile>(new PosixMappedFile(base, size, prot));
  }

  StatusOr<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path,
                                                               bool direct) override {
    struct stat st {};
    SHARDPACK_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
    // Reads block from here on. O_DIRECT is switched on after the checks, on the same
    // descriptor: EINVAL where the file system has no direct I/O (tmpfs), and the file
    // then stays cached.
    const int flags = ::fcntl(fd, F_GETFL);
    const bool is_direct =
        direct && flags >= 0 && ::fcntl(fd, F_SETFL, (flags | O_DIRECT) & ~O_NONBLOCK) == 0;
    if (!is_direct && flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, fd, is_direct));
  }

  StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override {
    struct stat st {};
    SHARDPACK_ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
    std::string out;
    char buf[65536];
    for (;;) {
      ssize_t r = ::read(fd, buf, sizeof buf);
      if (r < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        return ErrnoError(path + ": read", err);
      }
      if (r == 0) break;
      if (out.size() + static_cast<size_t>(r) > max_bytes) {
        ::close(fd);
        return ResourceExhaustedError(path + ": larger than the " + std::to_string(max_bytes) +
                                      "-byte limit for this kind of file");
      }
      out.append(buf, static_cast<size_t>(r));
    }
    ::close(fd);
    return out;
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoError("rename " + from + " to " + to, errno);
    }
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoError(path + ": unlink", errno);
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoError(dir + ": open directory", errno);
    Status s;
    if (::fsync(fd) != 0) s = ErrnoError(dir + ": fsync directory", errno);
    ::close(fd);
    return s;
  }

  Status CreateDirs(const std::string& dir) override {
    if (dir.empty()) return Status::Ok();
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return Status::Ok();
      return AlreadyExistsError(dir + ": exists and is not a directory");
    }
    std::string parent = DirName(dir);
    if (parent != dir && parent != "." && parent != "/") {
      SHARDPACK_RETURN_IF_ERROR(CreateDirs(parent));
    }
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return ErrnoError(dir + ": mkdir", errno);
    }
    return Status::Ok();
  }

  StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoError(dir + ": open directory", errno);
    std::vector<std::string> names;
    while (struct dirent* e = ::readdir(d)) {
      std::string_view n = e->d_name;
      if (n != "." && n != "..") names.emplace_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<uint64_t> FileSize(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return ErrnoError(path + ": stat", errno);
    return static_cast<uint64_t>(st.st_size);
  }

  bool FileExists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
};

}  // namespace

void StartWriteback(int fd, uint64_t end, uint64_t* handed) {
  if (fd < 0 || end < *handed + kWritebackChunk) return;
  (void)::sync_file_range(fd, static_cast<off_t>(*handed), static_cast<off_t>(end - *handed),
                          SYNC_FILE_RANGE_WRITE);
  *handed = end;
}

Env* Env::Posix() {
  static PosixEnv env;
  return &env;
}

Status WriteAll(int fd, const void* data, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path + ": write", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status PwriteAll(int fd, const void* data, size_t n, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(path + ": pwrite at offset " + std::to_string(offset), errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

}  // namespace shardpack::io
