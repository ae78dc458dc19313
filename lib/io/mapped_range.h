// Reads of memory-mapped files that survive the files shrinking underneath them.
//
// A dataset is immutable by contract, but a shard truncated while it is mapped (another
// process rewriting the dataset, a network file system losing a file) turns every read of
// the pages past its new end into SIGBUS, which kills the process: a week-long training
// job would die without a word about which file.
//
// A MappedRange registers a mapping in a process-wide table. A SIGBUS raised by a read of
// a registered range is absorbed where it happens: the handler marks the range faulted,
// maps a page of zeros over the page that is gone, and returns, so the read completes
// (reading zeros) and the code around it runs to its end as on any other bytes. Nothing
// jumps and nothing unwinds: the reading code may hold anything (a Status, a lock, an
// allocation). A SIGBUS anywhere else goes to the handler that was installed before (by
// default the process dies, as it would have).
//
// The rule for readers: bytes read from a registered range are the file's only if
// faulted() is still false after the last read of them. Check it after reading and before
// trusting what was read (a checksum over zeros fails as well, but the fault is the
// truth); report a faulted range with kShrunkWhileMapped, naming the file and where.
// Once faulted, a range stays faulted: the file must be opened again.
//
//   io::MappedRange range(base, size, PROT_READ);
//   uint32_t crc = crc32c::Value(base + offset, length);
//   if (range.faulted()) return IOError(path + ": record 7 at offset 123: " +
//                                       std::string(io::kShrunkWhileMapped));
//
// Thread-safety: ranges may be registered, read and dropped from any thread at once. A
// range must stay mapped while it is registered (unmap after the MappedRange is gone).
#ifndef SHARDPACK_IO_MAPPED_RANGE_H_
#define SHARDPACK_IO_MAPPED_RANGE_H_

#include <cstddef>
#include <string_view>

#include "shardpack/status.h"

namespace shardpack::io {

// How a read of a faulted range is reported, after the file and the place.
inline constexpr std::string_view kShrunkWhileMapped =
    "the file is shorter than when it was opened: reading its mapping raised SIGBUS (was the "
    "dataset modified while in use?)";
// The same, found by a size check before any read.
inline constexpr std::string_view kShrunkWhileOpen =
    "the file is shorter than when it was opened (was the dataset modified while in use?)";

namespace internal {
struct RangeSlot;
}

class MappedRange {
 public:
  // Registers [base, base + size), mapped with protection `prot` (PROT_READ, ...), which the
  // page of zeros replacing a lost page gets too. Installs the SIGBUS handler on first use.
  // A zero size registers nothing (and can never fault).
  MappedRange(const void* base, size_t size, int prot);
  ~MappedRange();
  MappedRange(const MappedRange&) = delete;
  MappedRange& operator=(const MappedRange&) = delete;

  // True once a read of the range has raised SIGBUS (and read zeros).
  bool faulted() const;

 private:
  internal::RangeSlot* slot_ = nullptr;
};

// Asks the kernel to read the pages under [p, p + n) of a file mapping into the page cache
// in the background (MADV_WILLNEED, 128 KiB a call: a device may read no more for one).
// A hint: it never fails.
void WillNeedPages(const void* p, size_t n);

// Maps the pages under [p, p + n) of a file mapping into the process's page tables in one
// call (MADV_POPULATE_READ), reading those not in the page cache, and returns when they
// are there: for threads that read ahead of the readers. Not for a reader's own first
// read of cached pages: there plain faults were faster (docs/LOADER.md, "The first epoch
// from the page cache"). A hint: it never fails (a lost page is left to the SIGBUS handling
// of the read that follows).
void PopulatePages(const void* p, size_t n);

// Maps the pages under [p, p + n) of a shared, writable file mapping into the process's
// page tables, writable, in one call (MADV_POPULATE_WRITE, Linux 5.14), allocating those
// the page cache lacks: for a writer about to copy into them, which then takes no page
// fault per 4 KiB page (on tmpfs, whose pages are 4 KiB, a quarter of a mapped write's CPU;
// docs/DESIGN.md, "Scaling model"). A hint: it never fails (a page it cannot map is left
// to the fault, and the SIGBUS handling, of the copy that follows).
void PopulatePagesForWriting(void* p, size_t n);

// Advises [p, p + n) of a file mapping MADV_HUGEPAGE: from then on, a fault on a page the
// page cache does not hold reads the aligned 2 MiB around it into one folio (where the
// file system keeps large folios) and maps it with one page-table entry, so that the next
// process to map those pages maps 2 MiB per entry (docs/LOADER.md, "The first epoch from
// the page cache"). Pages already cached keep their size. A hint: it never fails.
void PreferHugePages(const void* p, size_t n);

// Whether this kernel takes both MADV_POPULATE_READ (Linux 5.14) and MADV_HUGEPAGE
// (transparent huge pages built in), tried once on a page of its own. Where it lacks the
// first, PopulatePages does nothing and only faults read the pages.
bool PopulateAndHugePagesWork();

// Backs [p, p + n) of fresh anonymous memory (a buffer allocated once and reused) with
// pages now (MADV_POPULATE_WRITE, or touching each page where the kernel lacks it), so that
// its first use does not take a page fault per 4 KiB: buffers allocated at start-up then
// cost their start-up, not the first epoch. `p` and `n` need not be page-aligned.
void PrefaultWrite(void* p, size_t n);

// Whether the page holding `p` is in memory now (mincore); true where that cannot be told.
bool PageResident(const void* p);

// The mapping (from /proc/self/maps) holding address `inside`: where it begins and its
// size. For mappings made by a library that does not say where (LMDB's map), found from a
// pointer it returned. NotFound when no mapping holds it.
struct Mapping {
  const void* begin = nullptr;
  size_t size = 0;
};
StatusOr<Mapping> MappingAt(const void* inside);

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_MAPPED_RANGE_H_
