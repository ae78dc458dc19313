// The file-system seam. Every file the writers and the TFRecord reader touch goes through
// an Env, so tests can swap in MemEnv (io/mem_env.h) and inject a failing write, fsync or
// rename at any point. LMDB talks to the file system itself and always uses real files.
//
// Thread-safety: Env implementations are safe for concurrent use; a WritableFile is used
// by one thread at a time; a MappedFile is immutable and may be read from any thread.
#ifndef SHARDPACK_IO_ENV_H_
#define SHARDPACK_IO_ENV_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/status.h"

namespace shardpack::io {

// A file being written. Append may buffer; Sync flushes and makes the bytes durable
// (fsync). Close flushes and releases the handle; a Close that fails means the bytes may
// not be in the file. The destructor closes without reporting: callers that care about
// the data call Close() and check it.
//
// Positional writes: a file written only through WriteAt (never Append) may have
// several WriteAt calls running at once, from any threads, for ranges that do not overlap;
// Sync and Close come after the last of them has returned.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view data) = 0;
  // Writes `pieces` one after another, starting at byte `offset` of the file (a file
  // grows to hold them), unbuffered. A failure names the file and the offset.
  virtual Status WriteAt(uint64_t offset, std::span<const std::string_view> pieces) = 0;
  // Every byte before `end` has been written with WriteAt: a hint that the file may start
  // writing them back to the disk, as Append does on its own. One thread at a time.
  virtual void WrittenBefore(uint64_t end) { (void)end; }
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
  // Bytes appended so far (Append only).
  virtual uint64_t Size() const = 0;
};

// Every kWritebackChunk bytes written, a file's new dirty pages are handed to the disk
// (sync_file_range, SYNC_FILE_RANGE_WRITE: start writeback, do not wait), so that Sync's
// fsync finds little left to write instead of a whole shard: the disk works while the
// writer goes on.
inline constexpr uint64_t kWritebackChunk = 8 << 20;

// For the files of the POSIX environment (posix_env.cc): hands [*handed, end) of
// `fd` to the disk once it holds kWritebackChunk bytes or more, and moves *handed to `end`.
// A hint: where it fails (a file system without it), Sync still does the work.
void StartWriteback(int fd, uint64_t end, uint64_t* handed);

// What positional writes (WritableFile::WriteAt, from any threads) have covered of a file
// written from its start: the bytes written and one past the last. For files that must be
// whole when they are synced (io/chunked_file.h, io/mapped_write.h); read after the
// writes (the threads joined, or the callers' own ordering).
class WriteCoverage {
 public:
  // `n` bytes were written at `offset`.
  void Add(uint64_t offset, uint64_t n);
  // One past the last byte written.
  uint64_t end() const { return end_.load(std::memory_order_relaxed); }
  // OK where every byte before end() was written once; else FailedPrecondition naming
  // `path` and what is missing (or written twice), `what` saying what such a file must be
  // ("a chunked file").
  Status Whole(const std::string& path, std::string_view what) const;

 private:
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> end_{0};
};

// A whole file mapped read-only. data() stays valid for the object's lifetime.
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  virtual const uint8_t* data() const = 0;
  virtual uint64_t size() const = 0;
  // True once a read of data() found part of the file gone (the file shrank while mapped):
  // that read and every later one of the lost pages read zeros (io/mapped_range.h). Bytes
  // read from data() are the file's only if this is still false after reading them;
  // report it with io::kShrunkWhileMapped.
  virtual bool faulted() const { return false; }
  // Asks the kernel to read [offset, offset + length) into the page cache in the
  // background (MADV_WILLNEED), so that later reads find it there instead of faulting
  // page by page. A hint: it never fails and never changes what is read.
  virtual void WillNeed(uint64_t offset, uint64_t length) const {
    (void)offset;
    (void)length;
  }
  // Maps [offset, offset + length) into the page tables in one call, reading what is not
  // cached (io::PopulatePages). A hint: it never fails and never changes what is read.
  virtual void Populate(uint64_t offset, uint64_t length) const {
    (void)offset;
    (void)length;
  }
  // Faults on pages not yet cached read the aligned 2 MiB around them into one folio from
  // now on (io::PreferHugePages). A hint: it never fails and never changes what is read.
  virtual void PreferHugePages() const {}
  // Whether the page holding byte `offset` is in memory now (mincore); true where that
  // cannot be told (memory that is no file mapping).
  virtual bool Resident(uint64_t offset) const {
    (void)offset;
    return true;
  }
};

// A file read at explicit offsets (pread), from any thread at once. For the loader's
// read-ahead path: the bytes land in the caller's buffer, never in a mapping, so a file
// that shrinks gives a short read (an error naming the file), never SIGBUS.
class RandomAccessFile {
 public:
  // Offsets, lengths and buffer addresses of reads from a direct file are multiples of
  // this (the logical block size of every device seen; 4096 covers 512-byte ones too).
  static constexpr size_t kDirectAlignment = 4096;

  virtual ~RandomAccessFile() = default;
  // Reads up to `n` bytes at `offset` into `dst`, going on after short reads and EINTR:
  // fewer than `n` only where the file ends. An error names the file and the errno.
  virtual StatusOr<size_t> Read(uint64_t offset, size_t n, uint8_t* dst) const = 0;
  // True when reads bypass the page cache (O_DIRECT): then offset, n and dst must be
  // multiples of kDirectAlignment.
  virtual bool direct() const { return false; }
  // Drops [offset, offset + n) from the page cache (POSIX_FADV_DONTNEED), for a cached
  // file read once. A hint: it never fails.
  virtual void DontNeed(uint64_t offset, uint64_t n) const {
    (void)offset;
    (void)n;
  }
  // The file descriptor, for callers that queue reads themselves (io_uring); -1 where the
  // file is not one (MemEnv).
  virtual int fd() const { return -1; }
};

// How a mapping will be read, passed to the kernel as a read-ahead hint.
enum class AccessPattern { kNormal, kSequential, kRandom };

// What a write into a mapping does. kReadOnly: the pages are read-only and a write is a
// segfault. kCopyOnWrite: a write changes a private copy of its page, never the file nor
// what other readers see; reading costs the same. Where the kernel will not map a large
// file copy-on-write (strict overcommit), MapFile falls back to kReadOnly.
enum class MapMode { kReadOnly, kCopyOnWrite };

class Env {
 public:
  virtual ~Env() = default;

  // The process-wide POSIX environment.
  static Env* Posix();

  // Replaces whatever is at `path` with a new, empty file for writing (CreateNewFile): a
  // symlink or a hard link found there is removed, never written through.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // The same, for positional writes copied into a shared mapping of the file, which
  // writers on several threads do without queueing on the file's lock
  // (io/mapped_write.h); its Sync is final (later writes are refused). NotSupported where
  // the environment or the file system cannot (then no file is left): write with
  // NewWritableFile.
  virtual StatusOr<std::unique_ptr<WritableFile>> NewMappedWritableFile(const std::string& path) {
    return NotSupportedError(path + ": no mapped writes in this environment");
  }
  virtual StatusOr<std::unique_ptr<MappedFile>> MapFile(const std::string& path,
                                                        AccessPattern pattern,
                                                        MapMode mode = MapMode::kReadOnly) = 0;
  // Opens `path` for RandomAccessFile reads. `direct`: bypass the page cache (O_DIRECT)
  // where the file system allows it; where it does not (tmpfs, some network file
  // systems), the file is opened cached and direct() says so. Refuses what MapFile does.
  virtual StatusOr<std::unique_ptr<RandomAccessFile>> OpenRandomAccess(const std::string& path,
                                                                       bool direct) = 0;
  // Reads a whole file into memory; refuses files above `max_bytes`. MapFile and ReadFile
  // open without blocking and refuse anything but a regular file (a FIFO, a device, a
  // directory) with InvalidArgument naming what it is.
  virtual StatusOr<std::string> ReadFile(const std::string& path, uint64_t max_bytes) = 0;
  // Atomically replaces `to` with `from` (same directory, same file system).
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // fsync of a directory: makes renames and creations in it durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // Creates `dir` and its parents; OK when it exists.
  virtual Status CreateDirs(const std::string& dir) = 0;
  // Names (not paths) of the entries of `dir`, sorted.
  virtual StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual StatusOr<uint64_t> FileSize(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
};

// Creates `path` as a new, empty regular file and opens it with `flags` (O_WRONLY or O_RDWR;
// O_CLOEXEC is added), mode 0644, returning the descriptor. Whatever was at `path` first is
// unlinked: a file, or a symlink or a hard link that someone planted there. Then the name
// is created with O_CREAT | O_EXCL | O_NOFOLLOW, which never follows a link, so no file
// outside `path`'s directory is truncated or written through it. For the temporaries of
// the writers ("<name>.tmp", "<name>.partial"), which are published by rename(2) (that
// replaces a link at the final name instead of following it).
// Errors name `path`: AlreadyExists when something appeared at the name between the unlink
// and the creation (another process writing the same temporary); the errno's error
// otherwise (EISDIR: a directory is in the way).
StatusOr<int> CreateNewFile(const std::string& path, int flags);

// OK for a regular file; InvalidArgument "<path>: not a regular file but a FIFO" (a
// directory, a device, ...) otherwise, for code that opens files itself (LMDB would block
// in open on a FIFO). Does not open the file.
Status RequireRegularFile(const std::string& path);

// What a path given as a dataset or source location may be, for CheckPathScheme.
enum class PathKind {
  kLocal,    // a local file or directory only: convert's SRC (and DST, but for s3://
             // URLs, which Convert takes before checking), merge, adopt
  kDataset,  // also an http://, https:// or s3:// URL: a dataset read (Loader, verify, info)
};

// Refuses a path that begins with a URL scheme ("s3://", "gs://", "hdfs://", "file://", any
// RFC 3986 scheme followed by "://") that `kind` does not take, so that no such path is
// taken as a local directory named "s3:": InvalidArgument naming the path, the scheme and
// what is supported (for an s3:// path where only a local one is taken: that datasets are
// read from s3:// URLs and convert writes its DST to one). OK for every other path. A
// local directory whose name looks like a URL can be given as ./NAME.
Status CheckPathScheme(std::string_view path, PathKind kind);

// Joins a directory and a file name.
std::string JoinPath(std::string_view dir, std::string_view name);
// The part of a path after the last '/'.
std::string_view BaseName(std::string_view path);
// The part of a path before the last '/', or "." when there is none.
std::string DirName(std::string_view path);

// Publishes `data` at `path` so that a reader sees either the old file or the whole new
// one, never a part, even across a crash or power loss: write "<path>.tmp", fsync, close,
// rename over `path`, fsync the directory. On failure the temporary file is removed and
// `path` is untouched.
Status WriteFileAtomically(Env* env, const std::string& path, std::string_view data);

// Publishes a finished temporary file: fsync'd and closed by the caller, renamed here
// and the directory fsync'd.
Status PublishFile(Env* env, const std::string& tmp_path, const std::string& final_path);

// Writes all `n` bytes to the file descriptor `fd`, going on after short writes and EINTR;
// an error names `path` and the errno.
Status WriteAll(int fd, const void* data, size_t n, const std::string& path);
// The same at `offset` (pwrite(2)): the file position is not used, so threads may write
// parts of one file at once.
Status PwriteAll(int fd, const void* data, size_t n, uint64_t offset, const std::string& path);

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_ENV_H_
