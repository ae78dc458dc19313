// A WritableFile whose positional writes are copies into a shared mapping of the file.
//
// Every Linux file system takes a file's buffered writes (write, pwrite) one at a time,
// under the file's inode lock, so threads writing records into one shard queue there: on
// 16 cores, about 2 GB/s into one file (docs/DESIGN.md, "Scaling model"). A copy into a
// shared mapping takes no inode lock: each thread's page faults run beside the others'.
//
// Before a write's bytes are copied, fallocate sets the file's space aside up to their end
// (2 MiB at a time, or just what the write needs where less is left) and extends the file,
// so a full file system is an error of that call (ENOSPC, naming the file), never a SIGBUS
// in the middle of a copy. The file is mapped in windows of kMappedWriteWindow bytes, with
// MADV_HUGEPAGE, so that a page cache building large folios (ext4, xfs) holds the file in
// 2 MiB folios as the chunked writes of io/chunked_file.h do. On tmpfs, whose pages are 4
// KiB, a write maps its pages of a window in one call before it copies
// (io::PopulatePagesForWriting, MappedPages). A window is unmapped by the
// write that completes it, so the process maps little more than the windows being
// written. Sync and Close cut the file back to the end of what was written (the space set
// aside beyond it is given back), after checking that every byte before that end was
// written: a gap is reported, not filled. Writes must not overlap; where they do, the
// bytes counted are checked against the end, a check of the contract, not a guarantee
// (an overlap can unmap a window under another thread's copy).
//
// The bytes in the file are those a pwrite of the same data would leave. A SIGBUS while
// copying (the file truncated by another process, or an I/O error) is absorbed
// (io/mapped_range.h) and reported as an error of that write.
//
// Thread-safety: as WritableFile's. WriteAt may run on several threads at once for ranges
// that do not overlap; Append, Sync and Close on one thread, after the last WriteAt. Sync
// is final: writes after it are refused.
#ifndef SHARDPACK_IO_MAPPED_WRITE_H_
#define SHARDPACK_IO_MAPPED_WRITE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "io/env.h"

namespace shardpack::io {

// The size of the windows a mapped file is written through: 8 MiB, a multiple of 2 MiB.
inline constexpr uint64_t kMappedWriteWindow = uint64_t{8} << 20;

// How a write brings in the pages of the mapping it copies into.
enum class MappedPages {
  // Where the file system holds files in 4 KiB pages (tmpfs, MappedWritesPopulate), mapped
  // in one call before the copy (MADV_POPULATE_WRITE): a fault per page was a quarter of
  // the write's CPU there. Elsewhere (ext4, xfs, whose faults map 2 MiB folios; populating
  // changed nothing there) by the copy's own faults, which on Linux 6.4+ take only the
  // mapping's lock where populating takes the process's mmap lock.
  kAuto,
  // By the copy's own faults everywhere: to measure what populating gives (write_scaling).
  kFaulted,
};

// Creates `path` anew (io::CreateNewFile: a link at the name is removed, never followed)
// and returns it for writing through a mapping. NotSupported
// (naming the file and the reason) where its file system cannot set space aside
// (fallocate), which the mapping needs to report a full disk as an error: the caller then
// writes the file with Env::NewWritableFile. The file is left created and empty then.
StatusOr<std::unique_ptr<WritableFile>> NewMappedWritableFile(
    const std::string& path, MappedPages pages = MappedPages::kAuto);

// True where `dir`'s file system is tmpfs, where MappedPages::kAuto populates a write's
// pages before copying. False where `dir` cannot be examined.
bool MappedWritesPopulate(const std::string& dir);

// statfs's f_type of the file systems MappedWritesMeasuredOn takes: ext4's (ext2 and ext3
// share it, and refuse fallocate) and xfs's.
inline constexpr long kExt4Magic = 0xEF53;
inline constexpr long kXfsMagic = 0x58465342;

// True where `dir`'s file system is one whose mapped writes were measured as fast as its
// writes with one writer and cheaper with two on one file: ext4 and xfs (on xfs its
// writes also left fewer 2 MiB folios than the mapping); not tmpfs, where a mapped page is
// zeroed before it is copied into. False where `dir` cannot be examined.
bool MappedWritesMeasuredOn(const std::string& dir);

// `auto`'s rule: MappedWritesMeasuredOn(dir), and not where the host takes free memory
// back (HostReclaimsFreeMemory, io/system_files.h): the faults through the mapping build
// 2 MiB folios, whose fresh blocks cost the host a fault per page there, more than writes
// do (docs/DESIGN.md, "Scaling model").
bool MappedWritesPreferred(const std::string& dir);

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_MAPPED_WRITE_H_
