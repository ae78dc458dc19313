#include "io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "io/env.h"

namespace shardpack::io {
namespace {

// What the holder wrote into the lock file: "<purpose> (pid N)", or a fallback.
std::string Holder(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  std::string text = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "another shardpack process (just starting)" : text;
}

}  // namespace

StatusOr<std::unique_ptr<DirLock>> DirLock::Acquire(const std::string& dir,
                                                    std::string_view purpose) {
  SHARDPACK_RETURN_IF_ERROR(Env::Posix()->CreateDirs(dir));
  const std::string path = JoinPath(dir, kLockFileName);
  // A holder removes the file before it unlocks: one that locked the file just removed (or
  // replaced) holds nothing, and tries again on the file now at the path.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno == ELOOP) {
      // A symlink at the name, which is never followed: it is removed and the file made.
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return ErrnoError(path + ": removing a symlink in place of the lock file", errno);
      }
      continue;
    }
    if (fd < 0) return ErrnoError(path + ": open", errno);
    // A second name for the file (a hard link planted here, to a file elsewhere) would get
    // the holder's text written into that file: the name is removed and made anew. A lock
    // file that shardpack made has one name only.
    struct stat opened {};
    if (::fstat(fd, &opened) != 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoError(path + ": stat", err);
    }
    if (!S_ISREG(opened.st_mode) || opened.st_nlink != 1) {
      ::close(fd);
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        return ErrnoError(path + ": removing a lock file with another name elsewhere", errno);
      }
      continue;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) {
        ::close(fd);
        return ErrnoError(path + ": flock", err);
      }
      const std::string holder = Holder(fd);
      ::close(fd);
      return FailedPreconditionError(
          dir + ": locked by " + holder +
          ", which is writing into it; wait for it to end (a killed process releases the lock "
          "by itself)");
    }
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) != 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoError(path + ": stat", err);
    }
    if (::stat(path.c_str(), &now) != 0 || now.st_ino != held.st_ino || now.st_dev != held.st_dev) {
      ::close(fd);
      continue;
    }
    const std::string text = std::string(purpose) + " (pid " + std::to_string(::getpid()) + ")\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) < 0) {
      const int err = errno;
      ::unlink(path.c_str());
      ::close(fd);
      return ErrnoError(path + ": write", err);
    }
    return std::unique_ptr<DirLock>(new DirLock(path, fd));
  }
  return InternalError(path + ": the lock file kept being replaced while locking it");
}

DirLock::~DirLock() {
  ::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace shardpack::io
