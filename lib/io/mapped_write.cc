#include "io/mapped_write.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "io/mapped_range.h"
#include "io/system_files.h"

namespace shardpack::io {
namespace {

// The file's space is set aside this much at a time (fallocate): on tmpfs, where that
// allocates and zeroes the pages under the file's lock, other writers wait for it.
constexpr uint64_t kAllocateStep = 2 << 20;
// The largest folio a page cache builds (PMD size on x86-64 and arm64 with 4 KiB pages).
constexpr uint64_t kFolio = 2 << 20;
// statfs's f_type of tmpfs (and of shmem files).
constexpr long kTmpfsMagic = 0x01021994;

// fallocate and ftruncate, again where a signal interrupted them (tmpfs's fallocate
// stops on any pending signal).
int Fallocate(int fd, int mode, uint64_t offset, uint64_t length) {
  int r;
  do {
    r = ::fallocate(fd, mode, static_cast<off_t>(offset), static_cast<off_t>(length));
  } while (r != 0 && errno == EINTR);
  return r;
}

int Ftruncate(int fd, uint64_t length) {
  int r;
  do {
    r = ::ftruncate(fd, static_cast<off_t>(length));
  } while (r != 0 && errno == EINTR);
  return r;
}

// One window of the file, mapped shared and writable, registered for SIGBUS.
class Window {
 public:
  Window(void* base, size_t size) : base_(static_cast<char*>(base)), size_(size) {
    range_.emplace(base, size, PROT_READ | PROT_WRITE);
  }
  ~Window() {
    range_.reset();  // unregistered before it is unmapped
    ::munmap(base_, size_);
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  char* base() const { return base_; }
  bool faulted() const { return range_->faulted(); }
  // Counts `n` more bytes written into the window; true for the write that filled it. Once
  // another thread's count has filled it, the window may be gone: nothing of it is read
  // after the addition.
  bool Filled(size_t n) {
    const size_t size = size_;
    return filled_.fetch_add(n, std::memory_order_acq_rel) + n == size;
  }

 private:
  char* const base_;
  const size_t size_;
  std::optional<MappedRange> range_;
  std::atomic<size_t> filled_{0};
};

class MappedWritableFile final : public WritableFile {
 public:
  MappedWritableFile(std::string path, int fd, bool populate)
      : path_(std::move(path)), fd_(fd), populate_(populate) {}
  ~MappedWritableFile() override {
    windows_.clear();
    if (fd_ >= 0) ::close(fd_);
  }

  Status Append(std::string_view data) override {
    const std::string_view pieces[] = {data};
    SHARDPACK_RETURN_IF_ERROR(WriteAt(appended_, pieces));
    appended_ += data.size();
    return Status::Ok();
  }

  Status WriteAt(uint64_t offset, std::span<const std::string_view> pieces) override {
    if (cut_.load(std::memory_order_relaxed)) {
      return FailedPreconditionError(path_ + ": write at offset " + std::to_string(offset) +
                                     " after the file was synced or closed");
    }
    uint64_t total = 0;
    for (std::string_view p : pieces) total += p.size();
    if (total == 0) return Status::Ok();
    const uint64_t end = offset + total;
    SHARDPACK_RETURN_IF_ERROR(Reserve(end));
    // The window of the last part copied: a record's pieces (its head, pixels and footer)
    // mostly share one, found once. Where populate_, the write's pages in a window are
    // mapped in one call when it is found, before its first copy.
    Window* window = nullptr;
    uint64_t window_index = 0;
    for (std::string_view piece : pieces) {
      const char* p = piece.data();
      size_t left = piece.size();
      while (left > 0) {
        const uint64_t index = offset / kMappedWriteWindow;
        const size_t at = static_cast<size_t>(offset % kMappedWriteWindow);
        const size_t take = std::min<size_t>(left, kMappedWriteWindow - at);
        if (window == nullptr || window_index != index) {
          window = Find(index);
          window_index = index;
          if (window == nullptr) {  // unmapped when filled: these bytes were written before
            return FailedPreconditionError(path_ + ": write at offset " + std::to_string(offset) +
                                           " over bytes already written");
          }
          if (populate_) {
            PopulatePagesForWriting(
                window->base() + at,
                static_cast<size_t>(std::min(end - offset, kMappedWriteWindow - at)));
          }
        }
        std::memcpy(window->base() + at, p, take);
        if (window->faulted()) {
          return IOError(path_ + ": write at offset " + std::to_string(offset) +
                         ": copying into the file's mapping raised SIGBUS (was the file "
                         "truncated by another process, or did the disk fail?)");
        }
        coverage_.Add(offset, take);
        if (window->Filled(take)) {
          Forget(index);
          window = nullptr;
        }
        offset += take;
        p += take;
        left -= take;
      }
    }
    return Status::Ok();
  }

  // Hands on whole 2 MiB pieces only: a folio sent to the disk while records are still
  // being copied into it would be written twice, and its pages faulted on again.
  void WrittenBefore(uint64_t end) override {
    StartWriteback(fd_, end / kFolio * kFolio, &handed_);
  }

  Status Sync() override {
    SHARDPACK_RETURN_IF_ERROR(Cut());
    // As PosixWritableFile's: an fsync error is reported, never retried.
    if (::fsync(fd_) != 0) return ErrnoError(path_ + ": fsync", errno);
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return Status::Ok();
    Status s = Cut();
    if (::close(fd_) != 0 && s.ok()) s = ErrnoError(path_ + ": close", errno);
    fd_ = -1;
    return s;
  }

  uint64_t Size() const override { return appended_; }

 private:
  // Sets the file's space aside and maps it until both reach `end`. One thread grows the
  // file at a time (grow_mu_); writes into what is ready go on meanwhile (mu_ is held only
  // to add a window).
  Status Reserve(uint64_t end) {
    if (end <= ready_.load(std::memory_order_acquire)) return Status::Ok();
    std::lock_guard<std::mutex> grow(grow_mu_);
    const uint64_t ready = ready_.load(std::memory_order_relaxed);
    if (end <= ready) return Status::Ok();
    // kAllocateStep at a time, or no more than this write needs where the file system has
    // not that much left (mode 0 extends the file as well).
    uint64_t to = std::max(end, ready + kAllocateStep);
    if (Fallocate(fd_, 0, ready, to - ready) != 0) {
      int err = errno;
      if (err == ENOSPC && to > end) {
        to = end;
        err = Fallocate(fd_, 0, ready, to - ready) != 0 ? errno : 0;
      }
      if (err != 0) {
        return ErrnoError(path_ + ": setting aside bytes " + std::to_string(ready) + " to " +
                              std::to_string(to) + " (fallocate)",
                          err);
      }
    }
    // The windows over the new space. A window may reach past the file's end: nothing is
    // copied there before the file has grown over it.
    for (uint64_t at = mapped_; at < to; at += kMappedWriteWindow) {
      void* base = ::mmap(nullptr, kMappedWriteWindow, PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                          static_cast<off_t>(at));
      if (base == MAP_FAILED) return ErrnoError(path_ + ": mmap for writing", errno);
      // Large folios where the page cache builds them from faults (a hint: may fail).
      (void)::madvise(base, kMappedWriteWindow, MADV_HUGEPAGE);
      auto window = std::make_unique<Window>(base, static_cast<size_t>(kMappedWriteWindow));
      {
        std::lock_guard<std::mutex> lock(mu_);
        windows_.emplace(at / kMappedWriteWindow, std::move(window));
      }
      mapped_ = at + kMappedWriteWindow;
    }
    ready_.store(to, std::memory_order_release);
    return Status::Ok();
  }

  // The window `index`, or null once it has been filled and unmapped.
  Window* Find(uint64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = windows_.find(index);
    return it == windows_.end() ? nullptr : it->second.get();
  }

  // Unmaps a window once it is whole: no write can reach it any more.
  void Forget(uint64_t index) {
    std::unique_ptr<Window> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = windows_.find(index);
      if (it == windows_.end()) return;  // a misuse: writes that overlapped filled it twice
      gone = std::move(it->second);
      windows_.erase(it);
    }
  }

  // Unmaps every window and cuts the file back to the end of what was written, once every
  // byte before that end has been written. Once only: later writes are refused.
  Status Cut() {
    if (cut_.exchange(true, std::memory_order_relaxed)) return cut_status_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      windows_.clear();
    }
    cut_status_ = coverage_.Whole(path_, "a mapped file");
    const uint64_t end = coverage_.end();
    if (cut_status_.ok() && Ftruncate(fd_, end) != 0) {
      cut_status_ = ErrnoError(path_ + ": cutting to " + std::to_string(end) + " bytes", errno);
    }
    return cut_status_;
  }

  const std::string path_;
  int fd_;
  const bool populate_;  // MappedPages: populate a write's pages before copying
  uint64_t appended_ = 0;
  uint64_t handed_ = 0;  // bytes before this were handed to the disk
  WriteCoverage coverage_;
  std::atomic<uint64_t> ready_{0};  // set aside and mapped below this offset
  uint64_t mapped_ = 0;             // windows are mapped below this offset (grow_mu_)
  std::atomic<bool> cut_{false};
  Status cut_status_ = Status::Ok();
  std::mutex grow_mu_;                                   // one thread grows the file at a time
  std::mutex mu_;                                        // windows_
  std::map<uint64_t, std::unique_ptr<Window>> windows_;  // by index, until filled
};

}  // namespace

StatusOr<std::unique_ptr<WritableFile>> NewMappedWritableFile(const std::string& path,
                                                              MappedPages pages) {
  SHARDPACK_ASSIGN_OR_RETURN(const int fd, CreateNewFile(path, O_RDWR));
  // A file system without fallocate (some network and FUSE ones) could only report a full
  // disk by SIGBUS here: the caller writes such files with pwrite instead. Probed as the
  // writes will call it (mode 0, which extends the file), then cut back.
  if (Fallocate(fd, 0, 0, 4096) != 0 || Ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    if (err == EOPNOTSUPP || err == ENOSYS) {
      return NotSupportedError(path + ": its file system cannot set space aside (fallocate)");
    }
    return ErrnoError(path + ": setting space aside (fallocate)", err);
  }
  struct statfs fs {};
  const bool populate =
      pages == MappedPages::kAuto && ::fstatfs(fd, &fs) == 0 && fs.f_type == kTmpfsMagic;
  return std::unique_ptr<WritableFile>(new MappedWritableFile(path, fd, populate));
}

bool MappedWritesMeasuredOn(const std::string& dir) {
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return false;
  return fs.f_type == kExt4Magic || fs.f_type == kXfsMagic;
}

bool MappedWritesPopulate(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type == kTmpfsMagic;
}

bool MappedWritesPreferred(const std::string& dir) {
  if (!MappedWritesMeasuredOn(dir)) return false;
  // The machine's, for the process's life (the loader asks again for each dataset; a
  // conversion opens a shard every 64 MiB).
  static const bool host_reclaims = !HostReclaimsFreeMemory().empty();
  return !host_reclaims;
}

}  // namespace shardpack::io
