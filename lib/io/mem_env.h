// An in-memory Env for tests, with fault injection: the Nth append, fsync, close, rename
// or directory fsync fails with a chosen errno (ENOSPC, EIO, ...), so every I/O error
// path of the writers can be driven and checked. Modeled on leveldb's helpers/memenv and
// RocksDB's FaultInjectionTestFS.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPACK_IO_MEM_ENV_H_
#define SHARDPACK_IO_MEM_ENV_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "io/env.h"

namespace shardpack::io {

enum class FaultOp { kAppend, kSync, kClose, kRename, kSyncDir, kRead };

class MemEnv final : public Env {
 public:
  MemEnv() = default;

  // From now on, the `nth` call (1-based) of `op` fails with errno `err`; later calls
  // succeed again. A failed append writes nothing.
  void InjectFault(FaultOp op, int nth, int err);
  // How many times `op` has been called so far.
  int Count(FaultOp op) const;

  // Direct access for tests: replace or read a file's bytes.
  void SetFileContents(const std::string& path, std::string data);
  std::string FileContents(const std::string& path) const;

  StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& path, AccessPattern pattern,
                                                MapMode mode) override;
  // Reads see the file as it is at each read: SetFileContents with fewer bytes truncates
  // it under an open reader. Every Read counts as a FaultOp::kRead.
  StatusOr<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path,
                                                               bool direct) override;
  StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
  Status CreateDirs(const std::string& dir) override;
  StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override;
  StatusOr<uint64_t> FileSize(const std::string& path) override;
  bool FileExists(const std::string& path) override;

 private:
  friend class MemWritableFile;
  friend class MemRandomAccessFile;
  // Counts a call of `op`; returns the injected error if this call must fail.
  Status Tick(FaultOp op, const std::string& what);

  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::string>> files_;
  std::set<std::string> dirs_;
  std::map<FaultOp, int> counts_;
  std::map<FaultOp, std::pair<int, int>> faults_;  // op -> (call number, errno)
};

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_MEM_ENV_H_
