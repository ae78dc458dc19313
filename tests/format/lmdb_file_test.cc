#include "format/lmdb_file.h"

#include <gtest/gtest.h>
#include <lmdb.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "io/mapped_range.h"
#include "test_util.h"

namespace shardpack::format {
namespace {

using Entries = std::map<std::string, std::string>;

// liblmdb's own calls, failing the test on an error.
#define LMDB_OK(call) ASSERT_EQ((call), 0) << #call

// What the file at `path` holds, by liblmdb, and the address of its map.
struct LiblmdbView {
  std::vector<std::pair<std::string, uint64_t>> offsets;  // key, value offset in the file
  Entries entries;
};

// Writes `path` with liblmdb: one transaction per element of `steps`, each putting the
// entries it holds (an empty value deletes the key). Returns what the last state holds.
void WriteWithLiblmdb(const std::string& path, const std::vector<Entries>& steps,
                      Entries* final_state) {
  MDB_env* env = nullptr;
  LMDB_OK(mdb_env_create(&env));
  LMDB_OK(mdb_env_set_mapsize(env, 64ull << 20));
  LMDB_OK(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK, 0644));
  for (const Entries& step : steps) {
    MDB_txn* txn = nullptr;
    LMDB_OK(mdb_txn_begin(env, nullptr, 0, &txn));
    MDB_dbi dbi;
    LMDB_OK(mdb_dbi_open(txn, nullptr, 0, &dbi));
    for (const auto& [k, v] : step) {
      MDB_val key{k.size(), const_cast<char*>(k.data())};
      if (v.empty()) {
        LMDB_OK(mdb_del(txn, dbi, &key, nullptr));
        final_state->erase(k);
      } else {
        MDB_val val{v.size(), const_cast<char*>(v.data())};
        LMDB_OK(mdb_put(txn, dbi, &key, &val, 0));
        (*final_state)[k] = v;
      }
    }
    LMDB_OK(mdb_txn_commit(txn));
  }
  mdb_env_close(env);
}

// Where liblmdb finds each value, as an offset in the file.
void OffsetsByLiblmdb(const std::string& path, std::map<std::string, uint64_t>* offsets) {
  MDB_env* env = nullptr;
  LMDB_OK(mdb_env_create(&env));
  LMDB_OK(mdb_env_open(env, path.c_str(), MDB_NOSUBDIR | MDB_NOLOCK | MDB_RDONLY, 0444));
  MDB_txn* txn = nullptr;
  LMDB_OK(mdb_txn_begin(env, nullptr, MDB_RDONLY, &txn));
  MDB_dbi dbi;
  LMDB_OK(mdb_dbi_open(txn, nullptr, 0, &dbi));
  MDB_cursor* cursor = nullptr;
  LMDB_OK(mdb_cursor_open(txn, dbi, &cursor));
  MDB_val k, v;
  const char* map = nullptr;  // liblmdb does not say where it maps: the first key lies there
  for (int rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
    if (map == nullptr) {
      auto mapping = io::MappingAt(k.mv_data);
      ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
      map = static_cast<const char*>(mapping->begin);
    }
    (*offsets)[std::string(static_cast<const char*>(k.mv_data), k.mv_size)] =
        static_cast<uint64_t>(static_cast<const char*>(v.mv_data) - map);
  }
  mdb_cursor_close(cursor);
  mdb_txn_abort(txn);
  mdb_env_close(env);
}

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }

// Keys "k0000" upward with values of `value_bytes` (a value above about half a page goes
// to an overflow run).
Entries Numbered(int n, size_t key_bytes, size_t value_bytes, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  Entries e;
  for (int i = 0; i < n; ++i) {
    std::string key = "k" + std::to_string(100000 + i);
    key.resize(std::max(key.size(), key_bytes), '.');
    std::string value(value_bytes, '\0');
    for (char& c : value) c = static_cast<char>(rng());
    value[0] = 'v';  // never empty
    e[key] = value;
  }
  return e;
}

uint64_t Load64At(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}
void Store64At(std::vector<uint8_t>* b, size_t at, uint64_t v) {
  std::memcpy(b->data() + at, &v, 8);
}
void Store16At(std::vector<uint8_t>* b, size_t at, uint16_t v) {
  std::memcpy(b->data() + at, &v, 2);
}
uint16_t Load16At(const std::vector<uint8_t>& b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data() + at, 2);
  return v;
}

// Reads `bytes` every way a reader does; returns the first error, or OK. Every value
// returned must lie inside the bytes.
Status ReadEveryWay(const std::vector<uint8_t>& bytes, const Entries& keys, bool audit) {
  auto file = LmdbFile::Open(bytes.data(), bytes.size());
  if (!file.ok()) return file.status();
  const auto* begin = reinterpret_cast<const char*>(bytes.data());
  const auto* end = begin + bytes.size();
  auto inside = [&](std::string_view v) {
    EXPECT_TRUE(v.empty() || (v.data() >= begin && v.data() + v.size() <= end));
  };
  Status first;
  std::string_view key;
  first = file->First(&key);
  if (first.ok()) inside(key);
  for (const auto& [k, v] : keys) {
    std::string_view value;
    Status s = file->Find(k, &value);
    if (s.ok()) inside(value);
    if (!s.ok() && first.ok()) first = s;
  }
  // The leaf index's way (LmdbShardReader::IndexLeaves): the leaves the branch pages give;
  // each key looked up in the leaf its low keys say, at its rank there and at a node past
  // the page's; the prefetch stages of a leaf's first nodes and of every page's first.
  std::vector<std::pair<std::string, uint64_t>> leaves;
  Status indexed = file->ForEachLeaf([&](std::string_view low, uint64_t pgno) {
    inside(low);
    leaves.emplace_back(std::string(low), pgno);
    return leaves.size() > 1000 ? OutOfRangeError("too many leaves") : Status::Ok();
  });
  if (indexed.ok() && !leaves.empty()) {
    size_t leaf = 0;
    uint32_t rank = 0;
    for (const auto& [k, v] : keys) {
      while (leaf + 1 < leaves.size() && k >= leaves[leaf + 1].first) {
        ++leaf;
        rank = 0;
      }
      std::string_view value;
      for (uint32_t node : {rank++, 1000u}) {
        if (file->FindInLeaf(leaves[leaf].second, node, k, &value).ok()) inside(value);
      }
    }
    for (const auto& [low, pgno] : leaves) {
      for (uint32_t node = 0; node < 3; ++node) {
        for (int stage : {0, 1, 2}) file->PrefetchNode(pgno, node, stage);
      }
    }
  }
  for (uint64_t pgno = 0; pgno < bytes.size() / 4096 + 2; ++pgno) {
    for (int stage : {0, 1, 2}) file->PrefetchNode(pgno, 0, stage);
  }
  LmdbTreeCounts counts;
  Status walk = file->ForEach(
      [&](std::string_view k, std::string_view v) {
        inside(k);
        inside(v);
        return Status::Ok();
      },
      audit, &counts);
  if (!walk.ok()) {
    EXPECT_FALSE(walk.message().empty());
    return walk;
  }
  return first;
}

TEST(LmdbFileTest, ReadsWhatLiblmdbWroteAcrossTransactionsDeletesAndOverflowValues) {
  testing::TempDir dir;
  const std::string path = dir.Join("mixed.lmdb");
  // Keys of 1 to 300 bytes, values inline and in overflow runs, over many transactions;
  // then deletes, and overwrites that shrink overflow values (liblmdb keeps their runs).
  std::mt19937 rng(7);
  std::vector<Entries> steps;
  std::vector<std::string> keys;
  for (int t = 0; t < 12; ++t) {
    Entries step;
    for (int i = 0; i < 400; ++i) {
      std::string key(1 + rng() % 300, '\0');
      for (char& c : key) c = static_cast<char>(rng());
      const size_t value_bytes = rng() % 4 == 0 ? 2048 + rng() % 20000 : 1 + rng() % 600;
      std::string value(value_bytes, static_cast<char>('a' + t));
      value[0] = static_cast<char>(rng());
      step[key] = value;
      keys.push_back(key);
    }
    steps.push_back(step);
  }
  Entries change;
  for (size_t i = 0; i < keys.size(); i += 7) change[keys[i]] = "";  // delete
  for (size_t i = 3; i < keys.size(); i += 11) change[keys[i]] = std::string(3000, 'o');
  steps.push_back(change);
  Entries expected;
  WriteWithLiblmdb(path, steps, &expected);
  std::map<std::string, uint64_t> offsets;
  OffsetsByLiblmdb(path, &offsets);
  ASSERT_EQ(offsets.size(), expected.size());

  const std::vector<uint8_t> bytes = Bytes(testing::ReadFileOrDie(path));
  auto file = LmdbFile::Open(bytes.data(), bytes.size());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->meta().entries, expected.size());
  EXPECT_GE(file->meta().depth, 3) << "the test means a tree of several branch levels";
  EXPECT_GT(file->meta().overflow_pages, 0u);
  for (const auto& [k, v] : expected) {
    std::string_view value;
    ASSERT_TRUE(file->Find(k, &value).ok());
    EXPECT_EQ(value, v);
    EXPECT_EQ(static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(value.data()) - bytes.data()),
              offsets[k]);
  }
  for (const std::string& probe : {std::string(), std::string(1, '\0'), std::string(400, '\xff')}) {
    std::string_view value;
    if (expected.count(probe) == 0) {
      EXPECT_EQ(file->Find(probe, &value).code(), StatusCode::kNotFound);
    }
  }
  auto it = expected.begin();
  LmdbTreeCounts counts;
  ASSERT_TRUE(file->ForEach(
                      [&](std::string_view k, std::string_view v) {
                        EXPECT_NE(it, expected.end());
                        if (it == expected.end()) return InternalError("too many");
                        EXPECT_EQ(k, it->first);
                        EXPECT_EQ(v, it->second);
                        ++it;
                        return Status::Ok();
                      },
                      /*audit=*/true, &counts)
                  .ok());
  EXPECT_EQ(it, expected.end());
  // liblmdb's page counts are exact: the audit compares them with the tree.
  EXPECT_EQ(counts.entries, file->meta().entries);
  EXPECT_EQ(counts.branch_pages, file->meta().branch_pages);
  EXPECT_EQ(counts.leaf_pages, file->meta().leaf_pages);
  EXPECT_EQ(counts.overflow_pages, file->meta().overflow_pages);
  std::string_view first;
  ASSERT_TRUE(file->First(&first).ok());
  EXPECT_EQ(first, expected.begin()->first);
}

TEST(LmdbFileTest, AnEmptyDatabaseHasNoEntries) {
  testing::TempDir dir;
  Entries expected;
  WriteWithLiblmdb(dir.Join("e.lmdb"), {Entries{}}, &expected);
  const std::vector<uint8_t> bytes = Bytes(testing::ReadFileOrDie(dir.Join("e.lmdb")));
  auto file = LmdbFile::Open(bytes.data(), bytes.size());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->meta().entries, 0u);
  std::string_view v;
  EXPECT_EQ(file->Find("a", &v).code(), StatusCode::kNotFound);
  EXPECT_EQ(file->First(&v).code(), StatusCode::kNotFound);
  int seen = 0;
  EXPECT_TRUE(file->ForEach([&](std::string_view, std::string_view) {
                    ++seen;
                    return Status::Ok();
                  })
                  .ok());
  EXPECT_EQ(seen, 0);
}

TEST(LmdbFileTest, FilesThatAreNoLmdbOrTooShortAreCorruptionNamingTheReason) {
  const std::vector<uint8_t> junk(8192, 'j');
  auto file = LmdbFile::Open(junk.data(), junk.size());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
  EXPECT_NE(file.status().message().find("meta page 0"), std::string::npos)
      << file.status().message();
  file = LmdbFile::Open(nullptr, 0);
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("too short"), std::string::npos)
      << file.status().message();
}

// A small file of two levels: a root branch page over leaf pages, and overflow values.
struct SmallFile {
  std::vector<uint8_t> bytes;
  Entries entries;
  uint32_t psize = 0;
  uint64_t root = 0;
  int current_meta = 0;

  // Offset of the current meta page's field at `field` (from the page's start).
  size_t Meta(size_t field) const { return current_meta * psize + field; }
  // Offset of node i of `pgno`.
  size_t Node(uint64_t pgno, int i) const {
    return pgno * psize + Load16At(bytes, pgno * psize + 16 + 2 * i);
  }
  uint64_t Child(int i) const {
    const size_t n = Node(root, i);
    return Load16At(bytes, n) | (uint64_t{Load16At(bytes, n + 2)} << 16) |
           (uint64_t{Load16At(bytes, n + 4)} << 32);
  }
  void SetChild(int i, uint64_t pgno) {
    const size_t n = Node(root, i);
    Store16At(&bytes, n, pgno & 0xffff);
    Store16At(&bytes, n + 2, (pgno >> 16) & 0xffff);
    Store16At(&bytes, n + 4, (pgno >> 32) & 0xffff);
  }
  int Keys(uint64_t pgno) const { return (Load16At(bytes, pgno * psize + 12) - 16) / 2; }
};

SmallFile MakeSmallFile(const std::string& dir) {
  SmallFile f;
  Entries big = Numbered(6, 20, 3000, 2);  // overflow runs
  Entries small = Numbered(60, 60, 100, 3);
  Entries all = small;
  for (auto& [k, v] : big) all["z" + k] = v;
  Entries state;
  WriteWithLiblmdb(dir + "/small.lmdb", {all}, &state);
  f.entries = state;
  f.bytes = Bytes(testing::ReadFileOrDie(dir + "/small.lmdb"));
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  f.psize = file->meta().page_size;
  f.root = file->meta().root;
  f.current_meta = file->meta().meta_page;
  EXPECT_EQ(file->meta().depth, 2);
  return f;
}

// Every byte of every page changed in four ways (and the file cut at every page) is read
// by every path: each is OK or an error with a message, and nothing is read outside the
// file (AddressSanitizer checks that in the sanitizer build: the bytes are a heap
// block of exactly the file's size).
TEST(LmdbFileTest, EveryByteOfEveryPageDamagedIsReadSafely) {
  testing::TempDir dir;
  const SmallFile f = MakeSmallFile(dir.path());
  int errors = 0, runs = 0;
  for (size_t at = 0; at < f.bytes.size(); ++at) {
    // Every byte of the tree's pages and of the headers of meta and overflow pages; the
    // rest (overflow values, the meta pages' unused tail) is data, not structure.
    const size_t pgno = at / f.psize, in_page = at % f.psize;
    const uint16_t kind = Load16At(f.bytes, pgno * f.psize + 10) & 0x0f;
    const bool tree = kind == 0x01 || kind == 0x02;
    if (!tree && in_page >= (kind == 0x08 ? 160u : 16u)) continue;
    for (int how = 0; how < 4; ++how) {
      std::vector<uint8_t> bytes = f.bytes;
      const uint8_t was = bytes[at];
      bytes[at] = how == 0 ? was ^ 0x01 : how == 1 ? was ^ 0x80 : how == 2 ? 0x00 : 0xff;
      if (bytes[at] == was) continue;
      ++runs;
      if (!ReadEveryWay(bytes, f.entries, how % 2 == 0).ok()) ++errors;
    }
  }
  for (size_t cut = 0; cut < f.bytes.size(); cut += f.psize / 2) {
    std::vector<uint8_t> bytes(f.bytes.begin(), f.bytes.begin() + cut);
    ++runs;
    if (!ReadEveryWay(bytes, f.entries, true).ok()) ++errors;
  }
  EXPECT_GT(runs, 10000);
  EXPECT_GT(errors, runs / 10) << "most structural damage must be found";
}

// ForEachLeaf gives the leaves in key order with their low keys, and each key is found in
// its leaf at the node its rank there says, as Find finds it.
TEST(LmdbFileTest, TheLeavesAndTheirLowKeysLeadToWhatFindFinds) {
  testing::TempDir dir;
  const SmallFile f = MakeSmallFile(dir.path());
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  ASSERT_TRUE(file.ok());
  std::vector<std::pair<std::string, uint64_t>> leaves;
  ASSERT_OK(file->ForEachLeaf([&](std::string_view low, uint64_t pgno) {
    leaves.emplace_back(std::string(low), pgno);
    return Status::Ok();
  }));
  ASSERT_GE(leaves.size(), 2u);
  EXPECT_EQ(leaves[0].first, "");
  EXPECT_EQ(leaves[0].second, f.Child(0));
  size_t leaf = 0;
  uint32_t node = 0;
  for (const auto& [k, v] : f.entries) {  // in key order
    while (leaf + 1 < leaves.size() && k >= leaves[leaf + 1].first) {
      ++leaf;
      node = 0;
    }
    std::string_view found, direct;
    ASSERT_OK(file->Find(k, &found));
    ASSERT_TRUE(file->FindInLeaf(leaves[leaf].second, node, k, &direct).ok()) << k;
    EXPECT_EQ(found.data(), direct.data()) << k;
    // A wrong node hint still finds it (the leaf's search); another leaf does not.
    ASSERT_OK(file->FindInLeaf(leaves[leaf].second, node + 1, k, &direct));
    EXPECT_EQ(found.data(), direct.data()) << k;
    const uint64_t other = leaves[(leaf + 1) % leaves.size()].second;
    EXPECT_EQ(file->FindInLeaf(other, node, k, &direct).code(), StatusCode::kNotFound) << k;
    ++node;
  }
  std::string_view v;
  EXPECT_EQ(file->FindInLeaf(f.root, 0, f.entries.begin()->first, &v).code(),
            StatusCode::kCorruption)
      << "the root is a branch page";
}

// A branch key out of order is refused by the leaf walk, which is what bounds it.
TEST(LmdbFileTest, TheLeafWalkRefusesBranchKeysOutOfOrder) {
  testing::TempDir dir;
  SmallFile f = MakeSmallFile(dir.path());
  ASSERT_GE(f.Keys(f.root), 3);
  f.SetChild(2, f.Child(1));  // the same leaf twice: its low keys still increase
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  ASSERT_TRUE(file.ok());
  int calls = 0;
  ASSERT_OK(file->ForEachLeaf([&](std::string_view, uint64_t) {
    ++calls;
    return Status::Ok();
  }));
  EXPECT_EQ(calls, f.Keys(f.root));
  // Node 2's key made equal to node 1's.
  SmallFile g = MakeSmallFile(dir.path());
  const uint64_t root = g.root * g.psize;
  const uint16_t one = Load16At(g.bytes, root + 16 + 2), two = Load16At(g.bytes, root + 16 + 4);
  const uint16_t key_size = Load16At(g.bytes, root + one + 6);
  ASSERT_EQ(key_size, Load16At(g.bytes, root + two + 6));
  std::copy_n(g.bytes.begin() + root + one + 8, key_size, g.bytes.begin() + root + two + 8);
  auto bad = LmdbFile::Open(g.bytes.data(), g.bytes.size());
  ASSERT_TRUE(bad.ok());
  Status walk = bad->ForEachLeaf([](std::string_view, uint64_t) { return Status::Ok(); });
  EXPECT_EQ(walk.code(), StatusCode::kCorruption);
  EXPECT_NE(walk.message().find("does not follow the key before it"), std::string::npos)
      << walk.message();
}

TEST(LmdbFileTest, ABranchPointingAtItselfIsCorruptionNotALoop) {
  testing::TempDir dir;
  SmallFile f = MakeSmallFile(dir.path());
  f.SetChild(1, f.root);
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  ASSERT_TRUE(file.ok());
  // Every key of the second leaf now leads back to the branch page.
  Status walk = file->ForEach([](std::string_view, std::string_view) { return Status::Ok(); });
  EXPECT_EQ(walk.code(), StatusCode::kCorruption);
  EXPECT_NE(walk.message().find("a branch page (flags 0x1) where the tree needs a leaf page"),
            std::string::npos)
      << walk.message();
  int refused = 0;
  for (const auto& [k, v] : f.entries) {
    std::string_view value;
    Status s = file->Find(k, &value);
    if (!s.ok()) {
      ++refused;
      EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    } else {
      EXPECT_EQ(value, v);
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(LmdbFileTest, ALeafReachedTwiceIsCorruptionAndTheAuditNamesThePage) {
  testing::TempDir dir;
  SmallFile f = MakeSmallFile(dir.path());
  ASSERT_GE(f.Keys(f.root), 3);
  f.SetChild(2, f.Child(1));
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  ASSERT_TRUE(file.ok());
  for (bool audit : {false, true}) {
    Status walk =
        file->ForEach([](std::string_view, std::string_view) { return Status::Ok(); }, audit);
    EXPECT_EQ(walk.code(), StatusCode::kCorruption);
    EXPECT_NE(walk.message().find(audit ? "already part of the tree" : "outside the range"),
              std::string::npos)
        << walk.message();
  }
}

TEST(LmdbFileTest, AnOverflowRunOrAValuePastTheLastPageIsCorruption) {
  testing::TempDir dir;
  const SmallFile f = MakeSmallFile(dir.path());
  // The last key is a "z..." key with an overflow value.
  const std::string last = f.entries.rbegin()->first;
  const uint64_t last_leaf = f.Child(f.Keys(f.root) - 1);
  const size_t node = f.Node(last_leaf, f.Keys(last_leaf) - 1);
  const uint64_t run = Load64At(f.bytes, node + 8 + Load16At(f.bytes, node + 6));
  auto walk = [](const std::vector<uint8_t>& bytes) {
    auto file = LmdbFile::Open(bytes.data(), bytes.size());
    EXPECT_TRUE(file.ok());
    return file->ForEach([](std::string_view, std::string_view) { return Status::Ok(); });
  };
  // The run's header claims more pages than the file has: the walk reads the header.
  std::vector<uint8_t> bytes = f.bytes;
  std::memcpy(bytes.data() + run * f.psize + 12, "\xff\xff\xff\x7f", 4);
  Status s = walk(bytes);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("claims a run of 2147483647 pages"), std::string::npos) << s.message();
  // The node claims a value longer than the rest of the file: refused by the lookup too.
  bytes = f.bytes;
  Store16At(&bytes, node, 0xffff);
  Store16At(&bytes, node + 2, 0xffff);
  auto file = LmdbFile::Open(bytes.data(), bytes.size());
  ASSERT_TRUE(file.ok());
  std::string_view value;
  s = file->Find(last, &value);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("a value of 4294967295 bytes at overflow page"), std::string::npos)
      << s.message();
  EXPECT_EQ(walk(bytes).code(), StatusCode::kCorruption);
}

TEST(LmdbFileTest, MetaPageClaimsOutsideTheFileAreCorruption) {
  testing::TempDir dir;
  const SmallFile f = MakeSmallFile(dir.path());
  struct Case {
    size_t field;
    uint64_t value;
    const char* message;
  };
  for (const Case& c : {Case{136, uint64_t{1} << 62, "it is truncated"},
                        Case{88 + 40, 0, "root page 0 is outside pages 2.."},
                        Case{88 + 40, 1, "root page 1 is outside"},
                        Case{88 + 40, 1000000, "root page 1000000 is outside"}}) {
    std::vector<uint8_t> bytes = f.bytes;
    Store64At(&bytes, f.Meta(c.field), c.value);
    auto file = LmdbFile::Open(bytes.data(), bytes.size());
    ASSERT_FALSE(file.ok()) << c.message;
    EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
    EXPECT_NE(file.status().message().find(c.message), std::string::npos)
        << file.status().message();
  }
  std::vector<uint8_t> bytes = f.bytes;
  Store16At(&bytes, f.Meta(88 + 6), 40);  // depth
  auto file = LmdbFile::Open(bytes.data(), bytes.size());
  ASSERT_FALSE(file.ok());
  EXPECT_NE(file.status().message().find("tree depth 40"), std::string::npos);
  bytes = f.bytes;
  Store16At(&bytes, f.Meta(88 + 4), 0x04);  // MDB_DUPSORT
  file = LmdbFile::Open(bytes.data(), bytes.size());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotSupported);
}

TEST(LmdbFileTest, AnEntryCountThatTheTreeDoesNotHoldIsFoundByTheAudit) {
  testing::TempDir dir;
  SmallFile f = MakeSmallFile(dir.path());
  Store64At(&f.bytes, f.Meta(88 + 32), f.entries.size() + 1);
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->meta().entries, f.entries.size() + 1);
  LmdbTreeCounts counts;
  ASSERT_TRUE(
      file->ForEach([](std::string_view, std::string_view) { return Status::Ok(); }, true, &counts)
          .ok());
  EXPECT_EQ(counts.entries, f.entries.size());
}

TEST(LmdbFileTest, AnEntryCountBeyondWhatThePagesCanHoldIsCorruptionAtOpen) {
  testing::TempDir dir;
  SmallFile f = MakeSmallFile(dir.path());
  Store64At(&f.bytes, f.Meta(88 + 32), uint64_t{1} << 63);
  auto file = LmdbFile::Open(f.bytes.data(), f.bytes.size());
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kCorruption);
  EXPECT_NE(file.status().message().find("claims 9223372036854775808 entries, more than its"),
            std::string::npos)
      << file.status().message();
}

}  // namespace
}  // namespace shardpack::format
