// LMDB data files read without liblmdb, trusting nothing in them.
//
// liblmdb follows the page numbers, offsets and sizes it finds in a file without checking
// them against the file: it was made for databases that trusted processes write. A damaged
// or crafted page makes it read outside its map, assert or loop (SIGSEGV, SIGABRT, SIGBUS).
// A shardpack dataset may come from anyone, so its readers walk the B+tree themselves over
// the file's bytes, and check every field of every page against the file before using it:
// a fault is a Corruption naming the page, its offset and what is wrong, never a read
// outside the bytes given. liblmdb still writes the shards (lib/format/lmdb_shard.cc), and
// files written by any LMDB 0.9 build on a 64-bit little-endian machine read here.
//
// The layout read (liblmdb 0.9 mdb.c; docs/FORMAT.md §4), little-endian throughout:
//
//   page     16-byte header: pgno u64, pad u16, flags u16, then lower u16 and upper u16
//            (branch and leaf pages) or a page count u32 (the first page of an overflow
//            run). Pages 0 and 1 are meta pages; the others are numbered from the file's
//            start in units of the page size.
//   meta     at offset 16 of pages 0 and 1: magic u32 0xBEEFC0DE, version u32 1, address
//            u64, map size u64, two database records (free pages, then the main
//            database: pad u32, whose free-page copy is the page size, flags u16, depth
//            u16, branch pages u64, leaf pages u64, overflow pages u64, entries u64, root
//            u64), last page u64, transaction id u64. The meta page with the higher
//            transaction id is the current one.
//   nodes    a branch or leaf page holds (lower - 16) / 2 node offsets u16 after its
//            header; a node is lo u16, hi u16, flags u16, key size u16, the key, then (leaf)
//            the value of lo | hi << 16 bytes, or (flag 0x01) the u64 number of the
//            overflow run that holds it after its 16-byte header. A branch node's child
//            page is lo | hi << 16 | flags << 32; the first node's key of a branch page is
//            ignored (it covers every key below the second's).
//
// What is checked, beyond every offset and size lying inside the page or the file: both
// meta pages (magic, version, equal power-of-two page sizes, the current one's last page
// inside the file, a depth of at most 32, a main database with LMDB's default key order
// and no duplicate values); every page reached (its own page number, its type for its
// level: branch pages above the leaves and leaves at the depth the meta page states, at
// least one node); every value inside the file. The walk (ForEach) also checks each
// overflow run's header (its page number, kind and length), and that keys strictly
// increase and lie within the range their branch keys give them, which bounds the walk
// over any page graph (a cycle or a page reached twice repeats keys); its audit mode also
// counts pages and entries against the meta page and refuses a page that two references
// share. A lookup (Find) checks what it follows, as liblmdb's reads what it follows: the
// pages from the root to the leaf, and not the header of the overflow run it points
// into, whose page the reader of the value touches next.
//
// Not supported (NotSupported): named databases and duplicate values (F_SUBDATA,
// F_DUPDATA, MDB_DUPSORT), and custom key orders (MDB_INTEGERKEY, MDB_REVERSEKEY), which
// shardpack's writer never makes; 32-bit and big-endian LMDB files, which fail the checks.
#ifndef SHARDPACK_FORMAT_LMDB_FILE_H_
#define SHARDPACK_FORMAT_LMDB_FILE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "shardpack/status.h"

namespace shardpack::format {

// What the current meta page says.
struct LmdbMeta {
  uint32_t page_size = 0;
  uint64_t last_page = 0;  // the highest page number in use
  uint64_t txnid = 0;
  int meta_page = 0;  // which of pages 0 and 1 is current
  // The main database.
  uint64_t root = 0;  // kNoPage for an empty database
  uint16_t depth = 0;
  uint64_t entries = 0;
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
};

// What a walk in audit mode found, to compare with LmdbMeta.
struct LmdbTreeCounts {
  uint64_t entries = 0;
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
};

// A view of an LMDB data file's bytes. Copyable; the bytes must outlive it and every view
// it returns. Thread-safe: nothing it holds changes after Open.
//
// The bytes may change while they are read (a file rewritten under its mapping): every
// field is read once and checked before use, so that a change is at worst a Corruption
// or wrong bytes in a value, which the value's own checksums catch, never a read outside.
class LmdbFile {
 public:
  static constexpr uint64_t kNoPage = ~uint64_t{0};
  static constexpr int kMaxDepth = 32;  // liblmdb's CURSOR_STACK

  // Reads and checks both meta pages of the `size` bytes at `data` (the whole file) and
  // picks the current one. Corruption on a file that is no LMDB file or is damaged (the
  // message names the page and the field), NotSupported on a main database of another
  // kind (flags), Corruption "truncated" on a file shorter than its last page.
  static StatusOr<LmdbFile> Open(const uint8_t* data, uint64_t size);

  const LmdbMeta& meta() const { return meta_; }

  // Looks `key` up in the main database (keys compare as liblmdb's default: bytewise, then
  // shorter first). Ok with `*value` pointing into the bytes; NotFound when the tree does
  // not hold the key; Corruption naming the page when one on the way is damaged. Reads one
  // page per level of the tree and allocates nothing.
  Status Find(std::string_view key, std::string_view* value) const;

  // The smallest key: NotFound in an empty database, Corruption naming the page when one
  // on the way is damaged.
  Status First(std::string_view* key) const;

  // The leaf pages of the main database in key order, each with the lowest key its branch
  // keys give it ("" for the first): fn(low_key, pgno) for each. Reads the branch pages
  // alone, checked as Find checks them, and refuses (Corruption) low keys that do not
  // strictly increase, which bounds the walk over any page graph as ForEach's order check
  // does. An empty database calls nothing; a tree of one level, fn("", root).
  Status ForEachLeaf(
      const std::function<Status(std::string_view low_key, uint64_t pgno)>& fn) const;
  // Find within leaf page `pgno` alone (from ForEachLeaf), trying its node `node` first
  // (where the leaf's keys run on from its low key): NotFound when the page does not hold
  // `key`; Corruption when it is no leaf or is damaged. One page read, as Find's last.
  Status FindInLeaf(uint64_t pgno, uint32_t node, std::string_view key,
                    std::string_view* value) const;
  // A hint that node `node` of leaf `pgno` will be read, in stages a few records apart,
  // each reading what the one before brought the CPU caches: stage 0 the page's header and
  // the node's offset, 1 the node, 2 its value (its first 4 KiB, the head of each later
  // page and its last line; in the leaf or in an overflow run). Never fails; each field it
  // reads is checked against the page and the file first, and on anything amiss it stops.
  void PrefetchNode(uint64_t pgno, uint32_t node, int stage) const;

  // Calls `fn` with every key and value of the main database in key order, and stops at
  // the first error of `fn`'s or of the file's (Corruption naming the page). With `audit`,
  // also refuses a page reached twice (or inside an overflow run) and fills `counts`
  // (pages by kind and entries, to be compared with meta()); its memory is one bit per
  // page of the file.
  Status ForEach(const std::function<Status(std::string_view key, std::string_view value)>& fn,
                 bool audit = false, LmdbTreeCounts* counts = nullptr) const;

 private:
  class Walker;
  struct Page;

  LmdbFile(const uint8_t* data, const LmdbMeta& meta) : data_(data), meta_(meta) {}
  // The page `pgno` of the kind `want` (P_BRANCH or P_LEAF), checked: its header and the
  // bounds of its node table.
  Status ReadPage(uint64_t pgno, uint16_t want, Page* page) const;
  // Node `i` of `page` (checked to lie in the page): its key and, for a leaf, its value
  // (resolved through its overflow run, which must lie in the file), or for a branch, its
  // child page. With `overflow_pages` (the walk), also the run's header is checked, and
  // its first page and length returned (0 pages for a value inside the leaf).
  Status ReadNode(const Page& page, uint32_t i, std::string_view* key, std::string_view* value,
                  uint64_t* child, uint64_t* overflow_pgno = nullptr,
                  uint64_t* overflow_pages = nullptr) const;
  std::string PageName(uint64_t pgno) const;
  // Node i's key for a binary search, or the fault ReadNode finds in the node.
  Status ProbeNode(const Page& page, uint32_t i, std::string_view* key) const;
  // Find's search of a leaf page.
  Status SearchLeaf(const Page& page, std::string_view key, std::string_view* value) const;
  // ForEachLeaf below branch page `pgno` at `level` (0: the root), whose entries are
  // bounded below by `low`; `last` and `any`: the last low key given to fn.
  Status WalkBranch(uint64_t pgno, int level, std::string_view low,
                    const std::function<Status(std::string_view, uint64_t)>& fn, std::string* last,
                    bool* any) const;

  const uint8_t* data_;  // (meta_.last_page + 1) * meta_.page_size bytes at least
  LmdbMeta meta_;
};

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_LMDB_FILE_H_
