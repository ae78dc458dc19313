#include "format/lmdb_file.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "util/text.h"

namespace shardpack::format {
namespace {

// liblmdb 0.9's constants (mdb.c), for 64-bit builds.
constexpr uint64_t kPageHeaderBytes = 16;  // PAGEHDRSZ
constexpr uint64_t kNodeHeaderBytes = 8;   // NODESIZE
constexpr uint32_t kMagic = 0xBEEFC0DE;    // MDB_MAGIC
constexpr uint32_t kDataVersion = 1;       // MDB_DATA_VERSION
constexpr uint32_t kMinPageSize = 512;
constexpr uint32_t kMaxPageSize = 0x8000;  // MAX_PAGESIZE
constexpr uint64_t kMetaBytes = 136;       // sizeof(MDB_meta)

// Page flags (MDB_page.mp_flags).
constexpr uint16_t kBranch = 0x01;
constexpr uint16_t kLeaf = 0x02;
constexpr uint16_t kOverflow = 0x04;
constexpr uint16_t kMeta = 0x08;
constexpr uint16_t kLeaf2 = 0x20;
constexpr uint16_t kSubPage = 0x40;
// The bits that say what a page is; the others (P_DIRTY, P_LOOSE, P_KEEP) are liblmdb's
// bookkeeping in memory.
constexpr uint16_t kPageKind = kBranch | kLeaf | kOverflow | kMeta | kLeaf2 | kSubPage;

// Leaf node flags (MDB_node.mn_flags).
constexpr uint16_t kBigData = 0x01;
constexpr uint16_t kSubData = 0x02;
constexpr uint16_t kDupData = 0x04;

// Database flags that change the key order or add duplicates (MDB_REVERSEKEY,
// MDB_DUPSORT, MDB_INTEGERKEY, MDB_DUPFIXED, MDB_INTEGERDUP, MDB_REVERSEDUP).
constexpr uint16_t kOtherKindOfDatabase = 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40;

// Offsets in a meta page (MDB_meta after the page header; MDB_db is 48 bytes).
constexpr uint64_t kMetaMagic = 16;
constexpr uint64_t kMetaVersion = 20;
constexpr uint64_t kFreeDb = 40;
constexpr uint64_t kMainDb = 88;
constexpr uint64_t kMetaLastPage = 136;
constexpr uint64_t kMetaTxnid = 144;
// Offsets in an MDB_db.
constexpr uint64_t kDbPad = 0;
constexpr uint64_t kDbFlags = 4;
constexpr uint64_t kDbDepth = 6;
constexpr uint64_t kDbBranchPages = 8;
constexpr uint64_t kDbLeafPages = 16;
constexpr uint64_t kDbOverflowPages = 24;
constexpr uint64_t kDbEntries = 32;
constexpr uint64_t kDbRoot = 40;

// Every field is read once, by value: the bytes may change under a mapping, and a value
// checked must be the value used.
uint16_t Load16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* KindName(uint16_t kind) {
  switch (kind) {
    case kBranch:
      return "a branch page";
    case kLeaf:
      return "a leaf page";
    case kOverflow:
      return "an overflow page";
    case kMeta:
      return "a meta page";
    case kLeaf2:
      return "a LEAF2 page";
    default:
      return "no page of a known kind";
  }
}

// liblmdb's default key order (mdb_cmp_memn): bytewise, then the shorter first.
int CompareKeys(std::string_view a, std::string_view b) { return a.compare(b); }

std::string ShowKey(std::string_view key) {
  std::string shown = EscapeBytes(key.substr(0, 40));
  if (key.size() > 40) shown += "...";
  return "\"" + shown + "\"";
}

// Node i's key, for a binary search: false when the node or its key does not lie in the
// page between `upper` and `psize` (ReadNode then says why). Each field is read once.
inline bool ProbeKey(const uint8_t* page, uint32_t upper, uint32_t psize, uint32_t i,
                     std::string_view* key) {
  const uint32_t at = Load16(page + kPageHeaderBytes + 2 * static_cast<uint64_t>(i));
  if (at < upper || at > psize - kNodeHeaderBytes) return false;
  const uint32_t key_size = Load16(page + at + 6);
  if (key_size > psize - at - kNodeHeaderBytes) return false;
  *key = std::string_view(reinterpret_cast<const char*>(page + at + kNodeHeaderBytes), key_size);
  return true;
}

}  // namespace

struct LmdbFile::Page {
  uint64_t pgno = 0;
  const uint8_t* bytes = nullptr;
  uint32_t keys = 0;
  uint32_t upper = 0;  // node bodies lie in [upper, page size)
  bool leaf = false;
};

StatusOr<LmdbFile> LmdbFile::Open(const uint8_t* data, uint64_t size) {
  LmdbMeta metas[2];
  uint64_t offset = 0;
  for (int i = 0; i < 2; ++i) {
    const std::string where =
        "meta page " + std::to_string(i) + " (offset " + std::to_string(offset) + ")";
    if (offset > size || size - offset < kPageHeaderBytes + kMetaBytes) {
      return CorruptionError("the file is " + std::to_string(size) + " bytes: too short for " +
                             where + " of an LMDB file");
    }
    const uint8_t* p = data + offset;
    const uint16_t flags = Load16(p + 10);
    if ((flags & kPageKind) != kMeta) {
      return CorruptionError(where + ": page flags " + Hex(flags) +
                             ", not those of a meta page: not an LMDB file, or a damaged one");
    }
    const uint32_t magic = Load32(p + kMetaMagic);
    if (magic != kMagic) {
      return CorruptionError(where + ": magic " + Hex(magic) + ", expected " + Hex(kMagic) +
                             " (a 64-bit little-endian LMDB file)");
    }
    const uint32_t version = Load32(p + kMetaVersion);
    if (version != kDataVersion) {
      return CorruptionError(where + ": data format version " + std::to_string(version) +
                             ", expected " + std::to_string(kDataVersion));
    }
    const uint64_t pgno = Load64(p);
    if (pgno != static_cast<uint64_t>(i)) {
      return CorruptionError(where + ": the page says it is page " + std::to_string(pgno));
    }
    LmdbMeta& m = metas[i];
    m.meta_page = i;
    m.page_size = Load32(p + kFreeDb + kDbPad);
    if (m.page_size < kMinPageSize || m.page_size > kMaxPageSize ||
        (m.page_size & (m.page_size - 1)) != 0) {
      return CorruptionError(where + ": page size " + std::to_string(m.page_size) +
                             ", not a power of two from " + std::to_string(kMinPageSize) + " to " +
                             std::to_string(kMaxPageSize));
    }
    if (i == 1 && m.page_size != metas[0].page_size) {
      return CorruptionError(where + ": page size " + std::to_string(m.page_size) +
                             ", meta page 0 says " + std::to_string(metas[0].page_size));
    }
    const uint8_t* db = p + kMainDb;
    m.last_page = Load64(p + kMetaLastPage);
    m.txnid = Load64(p + kMetaTxnid);
    m.root = Load64(db + kDbRoot);
    m.depth = Load16(db + kDbDepth);
    m.entries = Load64(db + kDbEntries);
    m.branch_pages = Load64(db + kDbBranchPages);
    m.leaf_pages = Load64(db + kDbLeafPages);
    m.overflow_pages = Load64(db + kDbOverflowPages);
    const uint16_t db_flags = Load16(db + kDbFlags);
    if ((db_flags & kOtherKindOfDatabase) != 0) {
      return NotSupportedError(where + ": the main database has flags " + Hex(db_flags) +
                               " (duplicate values or another key order), which shardpack's "
                               "shards never have");
    }
    offset = m.page_size;
  }
  // liblmdb's choice (mdb_env_pick_meta): the later transaction.
  const LmdbMeta& m = metas[0].txnid < metas[1].txnid ? metas[1] : metas[0];
  const std::string where = "meta page " + std::to_string(m.meta_page);
  const uint64_t pages_in_file = size / m.page_size;
  if (m.last_page < 1 || m.last_page >= pages_in_file) {
    const bool too_few = m.last_page >= 1;
    std::string holds = m.last_page < (uint64_t{1} << 40)
                            ? std::to_string(m.last_page + 1) + " pages of " +
                                  std::to_string(m.page_size) + " bytes (" +
                                  std::to_string((m.last_page + 1) * m.page_size) + " bytes)"
                            : "last page " + std::to_string(m.last_page);
    return CorruptionError(too_few ? "the file is " + std::to_string(size) + " bytes, but its " +
                                         where + " says it holds " + holds + ": it is truncated"
                                   : where + ": last page " + std::to_string(m.last_page) +
                                         ", but pages 0 and 1 are the meta pages");
  }
  // Every entry takes a node of at least 8 bytes and its 2-byte offset in a leaf page: a
  // count beyond that is a claim the file cannot back (readers size things by it).
  const uint64_t most_entries =
      (m.last_page - 1) * ((m.page_size - kPageHeaderBytes) / (kNodeHeaderBytes + 2));
  if (m.entries > most_entries) {
    return CorruptionError(where + ": the main database claims " + std::to_string(m.entries) +
                           " entries, more than its " + std::to_string(m.last_page - 1) +
                           " pages can hold (" + std::to_string(most_entries) + ")");
  }
  if (m.root == kNoPage) {
    if (m.depth != 0 || m.entries != 0) {
      return CorruptionError(where + ": the main database has no root page but depth " +
                             std::to_string(m.depth) + " and " + std::to_string(m.entries) +
                             " entries");
    }
  } else {
    if (m.root < 2 || m.root > m.last_page) {
      return CorruptionError(where + ": root page " + std::to_string(m.root) +
                             " is outside pages 2.." + std::to_string(m.last_page));
    }
    if (m.depth < 1 || m.depth > kMaxDepth) {
      return CorruptionError(where + ": tree depth " + std::to_string(m.depth) + ", not in 1.." +
                             std::to_string(kMaxDepth));
    }
  }
  return LmdbFile(data, m);
}

std::string LmdbFile::PageName(uint64_t pgno) const {
  if (pgno > meta_.last_page) return "page " + std::to_string(pgno);
  return "page " + std::to_string(pgno) + " (offset " + std::to_string(pgno * meta_.page_size) +
         ")";
}

Status LmdbFile::ReadPage(uint64_t pgno, uint16_t want, Page* page) const {
  if (pgno < 2 || pgno > meta_.last_page) {
    return CorruptionError("a reference to page " + std::to_string(pgno) + ", outside pages 2.." +
                           std::to_string(meta_.last_page));
  }
  const uint32_t psize = meta_.page_size;
  const uint8_t* p = data_ + pgno * psize;  // Open proved (last_page + 1) * psize <= the size
  const uint64_t said = Load64(p);
  if (said != pgno) {
    return CorruptionError(PageName(pgno) + ": the page says it is page " + std::to_string(said));
  }
  const uint16_t flags = Load16(p + 10);
  if ((flags & kPageKind) != want) {
    return CorruptionError(PageName(pgno) + ": " + KindName(flags & kPageKind) + " (flags " +
                           Hex(flags) + ") where the tree needs " + KindName(want));
  }
  const uint32_t lower = Load16(p + 12);
  const uint32_t upper = Load16(p + 14);
  if (lower < kPageHeaderBytes || (lower - kPageHeaderBytes) % 2 != 0 || lower > upper ||
      upper > psize) {
    return CorruptionError(PageName(pgno) + ": free space bounds " + std::to_string(lower) + ".." +
                           std::to_string(upper) + " do not fit a page of " +
                           std::to_string(psize) + " bytes");
  }
  page->pgno = pgno;
  page->bytes = p;
  page->keys = static_cast<uint32_t>((lower - kPageHeaderBytes) / 2);
  page->upper = upper;
  page->leaf = want == kLeaf;
  if (page->keys == 0) return CorruptionError(PageName(pgno) + ": a tree page with no nodes");
  return Status::Ok();
}

Status LmdbFile::ReadNode(const Page& page, uint32_t i, std::string_view* key,
                          std::string_view* value, uint64_t* child, uint64_t* overflow_pgno,
                          uint64_t* overflow_pages) const {
  const uint32_t psize = meta_.page_size;
  const uint8_t* p = page.bytes;
  const uint32_t at = Load16(p + kPageHeaderBytes + 2 * static_cast<uint64_t>(i));
  auto fault = [&](const std::string& what) {
    return CorruptionError(PageName(page.pgno) + ": node " + std::to_string(i) + " at " +
                           std::to_string(at) + ": " + what);
  };
  if (at < page.upper || at > psize - kNodeHeaderBytes) {
    return fault("outside the page's nodes (" + std::to_string(page.upper) + ".." +
                 std::to_string(psize) + ")");
  }
  const uint8_t* node = p + at;
  const uint32_t lo = Load16(node);
  const uint32_t hi = Load16(node + 2);
  const uint16_t flags = Load16(node + 4);
  const uint32_t key_size = Load16(node + 6);
  const uint64_t key_at = at + kNodeHeaderBytes;
  if (key_size > psize - key_at) {
    return fault("a key of " + std::to_string(key_size) + " bytes runs past the page's end");
  }
  *key = std::string_view(reinterpret_cast<const char*>(node + kNodeHeaderBytes), key_size);
  const uint64_t data_at = key_at + key_size;
  if (!page.leaf) {
    *child = lo | (uint64_t{hi} << 16) | (uint64_t{flags} << 32);
    return Status::Ok();
  }
  const uint64_t data_size = lo | (uint64_t{hi} << 16);
  if ((flags & (kSubData | kDupData)) != 0) {
    return NotSupportedError(
        PageName(page.pgno) + ": node " + std::to_string(i) + " (key " + ShowKey(*key) +
        ") holds " + ((flags & kDupData) != 0 ? "duplicate values" : "a named database") +
        " (node flags " + Hex(flags) + "), which shardpack's shards never have");
  }
  if ((flags & ~kBigData) != 0) return fault("unknown node flags " + Hex(flags));
  if ((flags & kBigData) == 0) {
    if (data_size > psize - data_at) {
      return fault("a value of " + std::to_string(data_size) + " bytes runs past the page's end");
    }
    *value = std::string_view(reinterpret_cast<const char*>(p + data_at), data_size);
    if (overflow_pages != nullptr) *overflow_pages = 0;
    return Status::Ok();
  }
  if (sizeof(uint64_t) > psize - data_at) {
    return fault("the overflow page number runs past the page's end");
  }
  const uint64_t first = Load64(p + data_at);
  if (first < 2 || first > meta_.last_page) {
    return fault("the value's overflow page " + std::to_string(first) + " is outside pages 2.." +
                 std::to_string(meta_.last_page));
  }
  const uint8_t* run = data_ + first * psize;
  *value = std::string_view(reinterpret_cast<const char*>(run + kPageHeaderBytes), data_size);
  if (overflow_pages == nullptr) {
    // A lookup: the value must lie in the file, which is all a read of it needs. The run's
    // header is not read (nor does liblmdb read it): its page is not touched before the
    // value is, so that hints about a value (WillNeed, Resident) cost no fault of their own.
    if (data_size > (meta_.last_page - first + 1) * psize - kPageHeaderBytes) {
      return fault("a value of " + std::to_string(data_size) + " bytes at overflow page " +
                   std::to_string(first) + " runs past the last page " +
                   std::to_string(meta_.last_page));
    }
    return Status::Ok();
  }
  // The walk: the run's header too, whose length says which pages the value owns.
  const uint64_t said = Load64(run);
  const uint16_t run_flags = Load16(run + 10);
  const uint64_t pages = Load32(run + 12);
  auto run_fault = [&](const std::string& what) {
    return fault("the value's overflow " + PageName(first) + " " + what);
  };
  if (said != first) return run_fault("says it is page " + std::to_string(said));
  if ((run_flags & kPageKind) != kOverflow) {
    return run_fault("is " + std::string(KindName(run_flags & kPageKind)) + " (flags " +
                     Hex(run_flags) + ")");
  }
  if (pages < 1 || pages > meta_.last_page - first + 1) {
    return run_fault("claims a run of " + std::to_string(pages) + " pages, past the last page " +
                     std::to_string(meta_.last_page));
  }
  if (data_size > pages * psize - kPageHeaderBytes) {
    return fault("a value of " + std::to_string(data_size) +
                 " bytes does not fit its overflow run of " + std::to_string(pages) +
                 " pages at page " + std::to_string(first));
  }
  if (overflow_pgno != nullptr) *overflow_pgno = first;
  *overflow_pages = pages;
  return Status::Ok();
}

Status LmdbFile::Find(std::string_view key, std::string_view* value) const {
  if (meta_.root == kNoPage)
    return NotFoundError("key " + ShowKey(key) + ": the database is empty");
  uint64_t pgno = meta_.root;
  for (int level = 0; level < meta_.depth; ++level) {
    const bool leaf = level + 1 == meta_.depth;
    Page page;
    SHARDPACK_RETURN_IF_ERROR(ReadPage(pgno, leaf ? kLeaf : kBranch, &page));
    if (leaf) return SearchLeaf(page, key, value);
    std::string_view k, v;
    uint64_t child = 0;
    // The child is that of the last node whose key is not above `key`; node 0's key
    // stands for every key below node 1's.
    uint32_t lo = 1, hi = page.keys;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo) / 2;
      SHARDPACK_RETURN_IF_ERROR(ProbeNode(page, mid, &k));
      if (CompareKeys(k, key) <= 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    SHARDPACK_RETURN_IF_ERROR(ReadNode(page, lo - 1, &k, &v, &child));
    pgno = child;
  }
  return InternalError("LMDB lookup fell through");  // depth >= 1 ends at a leaf
}

// The probes read keys alone; the node found is read whole (ReadNode), as is one that does
// not lie in its page, for the message.
Status LmdbFile::ProbeNode(const Page& page, uint32_t i, std::string_view* key) const {
  if (ProbeKey(page.bytes, page.upper, meta_.page_size, i, key)) return Status::Ok();
  std::string_view value;
  uint64_t child = 0;
  Status s = ReadNode(page, i, key, &value, &child);
  return s.ok() ? CorruptionError(PageName(page.pgno) + ": node " + std::to_string(i) +
                                  " changed while it was read")
                : s;
}

Status LmdbFile::SearchLeaf(const Page& page, std::string_view key, std::string_view* value) const {
  std::string_view k;
  uint64_t child = 0;
  uint32_t lo = 0, hi = page.keys;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    SHARDPACK_RETURN_IF_ERROR(ProbeNode(page, mid, &k));
    const int c = CompareKeys(k, key);
    if (c == 0) {
      SHARDPACK_RETURN_IF_ERROR(ReadNode(page, mid, &k, value, &child));
      if (k != key)
        return CorruptionError(PageName(page.pgno) + ": node " + std::to_string(mid) +
                               " changed while it was read");
      return Status::Ok();
    }
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return NotFoundError("key " + ShowKey(key) + " is not in the database");
}

Status LmdbFile::FindInLeaf(uint64_t pgno, uint32_t node, std::string_view key,
                            std::string_view* value) const {
  Page page;
  SHARDPACK_RETURN_IF_ERROR(ReadPage(pgno, kLeaf, &page));
  if (node < page.keys) {
    std::string_view k;
    uint64_t child = 0;
    if (ReadNode(page, node, &k, value, &child).ok() && k == key) return Status::Ok();
  }
  return SearchLeaf(page, key, value);
}

Status LmdbFile::ForEachLeaf(
    const std::function<Status(std::string_view low_key, uint64_t pgno)>& fn) const {
  if (meta_.root == kNoPage) return Status::Ok();
  if (meta_.depth <= 1) return fn(std::string_view(), meta_.root);
  std::string last;
  bool any = false;
  return WalkBranch(meta_.root, 0, std::string_view(), fn, &last, &any);
}

Status LmdbFile::WalkBranch(uint64_t pgno, int level, std::string_view low,
                            const std::function<Status(std::string_view, uint64_t)>& fn,
                            std::string* last, bool* any) const {
  Page page;
  SHARDPACK_RETURN_IF_ERROR(ReadPage(pgno, kBranch, &page));
  const bool leaves_below = level + 2 == meta_.depth;
  for (uint32_t i = 0; i < page.keys; ++i) {
    std::string_view key, value;
    uint64_t child = 0;
    SHARDPACK_RETURN_IF_ERROR(ReadNode(page, i, &key, &value, &child));
    // Node 0's key stands for everything below node 1's: its entries start at `low`.
    const std::string_view child_low = i == 0 ? low : key;
    if (!leaves_below) {
      SHARDPACK_RETURN_IF_ERROR(WalkBranch(child, level + 1, child_low, fn, last, any));
      continue;
    }
    if (*any && CompareKeys(child_low, *last) <= 0) {
      return CorruptionError(PageName(pgno) + ": node " + std::to_string(i) + ": key " +
                             ShowKey(child_low) + " does not follow the key before it, " +
                             ShowKey(*last));
    }
    last->assign(child_low);
    *any = true;
    SHARDPACK_RETURN_IF_ERROR(fn(child_low, child));
  }
  return Status::Ok();
}

namespace {

// Software prefetches of [from, to), a line at a time, into the second-level cache.
void PrefetchRange(const uint8_t* from, const uint8_t* to) {
  for (const uint8_t* at = from; at < to; at += 64) __builtin_prefetch(at, 0, 1);
}

}  // namespace

void LmdbFile::PrefetchNode(uint64_t pgno, uint32_t node, int stage) const {
  const uint32_t psize = meta_.page_size;
  if (pgno < 2 || pgno > meta_.last_page) return;
  const uint8_t* p = data_ + pgno * psize;
  const uint64_t slot = kPageHeaderBytes + 2 * uint64_t{node};
  if (slot + 2 > psize) return;
  if (stage == 0) {
    __builtin_prefetch(p, 0, 1);
    __builtin_prefetch(p + slot, 0, 1);
    return;
  }
  // Every field read once and checked, as ReadPage and ReadNode do.
  const uint32_t lower = Load16(p + 12);
  const uint32_t upper = Load16(p + 14);
  if (slot + 2 > lower || upper > psize) return;
  const uint32_t at = Load16(p + slot);
  if (at < upper || at > psize - kNodeHeaderBytes) return;
  const uint8_t* n = p + at;
  if (stage == 1) {
    PrefetchRange(n, n + std::min<uint64_t>(64, psize - at));
    return;
  }
  const uint64_t size = Load16(n) | (uint64_t{Load16(n + 2)} << 16);
  const uint64_t data_at = at + kNodeHeaderBytes + Load16(n + 6);
  const uint8_t* value = nullptr;
  if (Load16(n + 4) == kBigData) {
    if (data_at + sizeof(uint64_t) > psize) return;
    const uint64_t run = Load64(p + data_at);
    if (run < 2 || run > meta_.last_page) return;
    value = data_ + run * psize + kPageHeaderBytes;
  } else {
    if (data_at > psize) return;
    value = p + data_at;
  }
  const uint8_t* end = std::min(value + size, data_ + (meta_.last_page + 1) * psize);
  if (end <= value) return;
  const uint8_t* whole = std::min(end, value + 4096);
  PrefetchRange(value, whole);
  const auto page_of = [](const uint8_t* a) {
    return reinterpret_cast<const uint8_t*>((reinterpret_cast<uintptr_t>(a) + 4095) &
                                            ~uintptr_t{4095});
  };
  for (const uint8_t* page = page_of(whole); page < end; page += 4096) {
    PrefetchRange(page, std::min(end, page + 512));
  }
  PrefetchRange(end - 1, end);
}

Status LmdbFile::First(std::string_view* key) const {
  if (meta_.root == kNoPage) return NotFoundError("the database is empty");
  uint64_t pgno = meta_.root;
  for (int level = 0; level < meta_.depth; ++level) {
    const bool leaf = level + 1 == meta_.depth;
    Page page;
    SHARDPACK_RETURN_IF_ERROR(ReadPage(pgno, leaf ? kLeaf : kBranch, &page));
    std::string_view value;
    SHARDPACK_RETURN_IF_ERROR(ReadNode(page, 0, key, &value, &pgno));
  }
  return Status::Ok();
}

// The in-order walk of ForEach: every key lies in the range its branch keys give it and
// is above the one before, so a page reached twice (or a cycle) is found at its first key.
class LmdbFile::Walker {
 public:
  using Fn = std::function<Status(std::string_view, std::string_view)>;
  Walker(const LmdbFile& file, const Fn& fn, bool audit) : file_(file), fn_(fn), audit_(audit) {
    if (audit_) used_.assign(file.meta_.last_page / 64 + 1, 0);
  }

  // Walks the subtree of `pgno` at `level`, whose keys must be >= `low` (when `has_low`)
  // and < `high` (when `has_high`).
  Status Walk(uint64_t pgno, int level, bool has_low, std::string_view low, bool has_high,
              std::string_view high) {
    const bool leaf = level + 1 == file_.meta_.depth;
    Page page;
    SHARDPACK_RETURN_IF_ERROR(file_.ReadPage(pgno, leaf ? kLeaf : kBranch, &page));
    SHARDPACK_RETURN_IF_ERROR(Use(pgno, 1, file_.PageName(pgno)));
    auto outside = [&](uint32_t i, std::string_view key) -> Status {
      if ((has_low && CompareKeys(key, low) < 0) || (has_high && CompareKeys(key, high) >= 0)) {
        return CorruptionError(file_.PageName(pgno) + ": node " + std::to_string(i) + "'s key " +
                               ShowKey(key) + " is outside the range its parent page gives it");
      }
      return Status::Ok();
    };
    std::string_view key, value;
    uint64_t child = 0;
    if (!leaf) {
      ++counts.branch_pages;
      // Node i's child holds the keys from node i's key (node 0: from `low`) up to node
      // i + 1's (the last: up to `high`). The keys must increase for a lookup's binary
      // search to go where this walk goes; a key out of its range in a leaf is found there.
      std::string_view previous, next;
      uint64_t ignored = 0;
      for (uint32_t i = 0; i < page.keys; ++i) {
        SHARDPACK_RETURN_IF_ERROR(file_.ReadNode(page, i, &key, &value, &child));
        if (i >= 2 && CompareKeys(key, previous) <= 0) {
          return CorruptionError(file_.PageName(pgno) + ": node " + std::to_string(i) + "'s key " +
                                 ShowKey(key) + " is not above the key before it");
        }
        const bool last = i + 1 == page.keys;
        if (!last) SHARDPACK_RETURN_IF_ERROR(file_.ReadNode(page, i + 1, &next, &value, &ignored));
        SHARDPACK_RETURN_IF_ERROR(Walk(child, level + 1, i == 0 ? has_low : true,
                                       i == 0 ? low : key, last ? has_high : true,
                                       last ? high : next));
        previous = key;
      }
      return Status::Ok();
    }
    ++counts.leaf_pages;
    for (uint32_t i = 0; i < page.keys; ++i) {
      uint64_t run = 0, run_pages = 0;
      SHARDPACK_RETURN_IF_ERROR(file_.ReadNode(page, i, &key, &value, &child, &run, &run_pages));
      SHARDPACK_RETURN_IF_ERROR(outside(i, key));
      if (has_last_ && CompareKeys(key, last_) <= 0) {
        return CorruptionError(file_.PageName(pgno) + ": node " + std::to_string(i) + "'s key " +
                               ShowKey(key) + " is not above the key before it, " + ShowKey(last_) +
                               " (a page reached twice, or keys out of order)");
      }
      last_ = key;
      has_last_ = true;
      if (run_pages > 0) {
        SHARDPACK_RETURN_IF_ERROR(
            Use(run, run_pages, "the overflow run at " + file_.PageName(run)));
        counts.overflow_pages += run_pages;
      }
      ++counts.entries;
      SHARDPACK_RETURN_IF_ERROR(fn_(key, value));
    }
    return Status::Ok();
  }

  LmdbTreeCounts counts;

 private:
  // In audit mode, marks pages [first, first + n) as reached, refusing one reached before.
  Status Use(uint64_t first, uint64_t n, const std::string& what) {
    if (!audit_) return Status::Ok();
    for (uint64_t pgno = first; pgno < first + n; ++pgno) {
      uint64_t& word = used_[pgno / 64];
      const uint64_t bit = uint64_t{1} << (pgno % 64);
      if ((word & bit) != 0) {
        return CorruptionError(what + ": page " + std::to_string(pgno) +
                               " is already part of the tree (two references share it)");
      }
      word |= bit;
    }
    return Status::Ok();
  }

  const LmdbFile& file_;
  const Fn& fn_;
  const bool audit_;
  std::vector<uint64_t> used_;  // a bit per page, in audit mode
  std::string_view last_;
  bool has_last_ = false;
};

Status LmdbFile::ForEach(const std::function<Status(std::string_view, std::string_view)>& fn,
                         bool audit, LmdbTreeCounts* counts) const {
  Walker walker(*this, fn, audit);
  Status s;
  if (meta_.root != kNoPage) s = walker.Walk(meta_.root, 0, false, {}, false, {});
  if (counts != nullptr) *counts = walker.counts;
  return s;
}

}  // namespace shardpack::format
