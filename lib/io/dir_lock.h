// An exclusive lock on an output directory, held while a command writes into it.
//
// Two conversions into one directory at once interleave their shards and one of them can
// end "successfully" on a dataset that fails verify. Every command that writes a dataset
// directory (convert, resume, merge, adopt) holds a DirLock on it for its whole run; a
// second one fails at once, naming the process that holds it and what it is doing.
//
//   SHARDPACK_ASSIGN_OR_RETURN(auto lock, io::DirLock::Acquire(dst, "convert"));
//   ... write dst ...
//   // released (and its file removed) when `lock` goes
//
// The lock is flock(2) on the file <dir>/.shardpack-lock, which holds the holder's pid and
// purpose. flock locks belong to the open file, so the kernel releases a killed holder's
// lock: a stale file never blocks anyone, it is simply locked again. Locks are advisory:
// they keep shardpack commands apart, not other programs.
#ifndef SHARDPACK_IO_DIR_LOCK_H_
#define SHARDPACK_IO_DIR_LOCK_H_

#include <memory>
#include <string>
#include <string_view>

#include "shardpack/status.h"

namespace shardpack::io {

inline constexpr const char* kLockFileName = ".shardpack-lock";

class DirLock {
 public:
  // Creates `dir` (and its parents) if needed and locks it for `purpose` ("convert", ...).
  // FailedPrecondition "<dir>: locked by <purpose> (pid N) ..." when another holder has it,
  // in this process or another; never waits.
  static StatusOr<std::unique_ptr<DirLock>> Acquire(const std::string& dir,
                                                    std::string_view purpose);
  // Removes the lock file, then releases the lock.
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  DirLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_DIR_LOCK_H_
