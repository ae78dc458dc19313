// Damaged and crafted LMDB shards whose checksums their author recomputed: verify, the
// Dataset and the Loader name the fault, never crash, and never deliver a sample from a
// dataset that verify faults while passing one that they refuse.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "format/lmdb_file.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "shardpack/verify.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;

// What each reader made of a dataset.
struct Outcome {
  bool verify_clean = false;
  std::string verify_faults;
  Status open;
  int get_errors = 0;
  Status loader;
};

Outcome ReadEveryWay(const std::string& dir) {
  Outcome out;
  auto report = VerifyDataset(dir, {.num_threads = 1});
  EXPECT_TRUE(report.ok()) << report.status().ToString();
  if (report.ok()) {
    out.verify_clean = report->ok();
    for (const VerifyFault& f : report->faults) out.verify_faults += FormatFault(f) + "\n";
  }
  auto ds = Dataset::Open(dir);
  out.open = ds.status();
  if (!ds.ok()) return out;
  std::shared_ptr<const Dataset> dataset = std::move(ds).value();
  for (uint64_t i = 0; i < dataset->size(); ++i) {
    SampleView view;
    Status s = dataset->Get(i, &view);
    if (!s.ok()) {
      ++out.get_errors;
      EXPECT_FALSE(s.message().empty());
    }
  }
  LoaderOptions o;
  o.batch_size = 5;
  o.prefetch = 1;
  o.num_threads = 1;
  auto loader = Loader::Create(dataset, o);
  out.loader = loader.status();
  if (!loader.ok()) return out;
  for (;;) {
    auto batch = (*loader)->Next();
    if (!batch.ok()) {
      if (batch.status().code() != StatusCode::kOutOfRange) out.loader = batch.status();
      break;
    }
  }
  return out;
}

struct Shard {
  std::string path;
  std::string bytes;
  uint32_t psize = 0;
};

Shard FirstShard(const std::string& dir, const Manifest& m) {
  Shard s;
  s.path = dir + "/" + m.shards[0].data.file;
  s.bytes = testing::ReadFileOrDie(s.path);
  auto file = format::LmdbFile::Open(reinterpret_cast<const uint8_t*>(s.bytes.data()),
                                     s.bytes.size());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  s.psize = file.ok() ? file->meta().page_size : 4096;
  return s;
}

TEST(HostileLmdbTest, DamagedPagesWithResealedChecksumsAreNamedByEveryReaderNeverACrash) {
  TempDir dir;
  // 32x32x3 values (3 KiB) go to overflow runs, and 30 records make a tree of two levels.
  const Manifest m = testing::WriteTestDataset(
      dir.path(), {.backend = Backend::kLmdb, .samples = 40, .height = 32, .width = 32,
                   .max_shard_records = 30});
  const Shard shard = FirstShard(dir.path(), m);
  std::mt19937 rng(11);
  int faulted = 0;
  for (int trial = 0; trial < 150; ++trial) {
    std::string bytes = shard.bytes;
    // Damage where the structure is: a page's header or node table, a node, a meta page.
    const size_t pages = bytes.size() / shard.psize;
    for (int k = 0; k < 1 + trial % 3; ++k) {
      const size_t page = rng() % pages;
      const size_t at = page * shard.psize + rng() % (trial % 2 == 0 ? 160 : shard.psize);
      bytes[at] = static_cast<char>(trial % 5 == 0 ? 0 : rng());
    }
    testing::WriteFileOrDie(shard.path, bytes);
    testing::ResealDataset(dir.path());
    const Outcome out = ReadEveryWay(dir.path());
    if (!out.verify_clean) {
      ++faulted;
      EXPECT_NE(out.verify_faults.find(m.shards[0].data.file), std::string::npos)
          << out.verify_faults;
    } else {
      // Whatever verify passes, every reader reads.
      EXPECT_TRUE(out.open.ok()) << "trial " << trial << ": " << out.open.ToString();
      EXPECT_EQ(out.get_errors, 0) << "trial " << trial;
      EXPECT_TRUE(out.loader.ok()) << "trial " << trial << ": " << out.loader.ToString();
    }
  }
  EXPECT_GT(faulted, 100) << "most damage to the structure must be found";
}

void Store64(std::string* bytes, size_t at, uint64_t v) { std::memcpy(bytes->data() + at, &v, 8); }

// LMDB ignores bytes past its last page; the manifest's size does not.
TEST(HostileLmdbTest, AShardOfAnotherSizeThanTheManifestSaysIsRefusedAtOpen) {
  TempDir dir;
  const Manifest m = testing::WriteTestDataset(
      dir.path(), {.backend = Backend::kLmdb, .samples = 4, .max_shard_records = 0});
  Shard shard = FirstShard(dir.path(), m);
  testing::WriteFileOrDie(shard.path, shard.bytes + std::string(4096, '\0'));
  auto ds = Dataset::Open(dir.path());
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kCorruption);
  EXPECT_NE(ds.status().message().find(std::to_string(shard.bytes.size() + 4096) +
                                       " bytes, the manifest says " +
                                       std::to_string(shard.bytes.size())),
            std::string::npos)
      << ds.status().message();
}

// The meta page's entry count, and a manifest that agrees with it.
Manifest ClaimEntries(const std::string& dir, uint64_t entries) {
  Manifest m = testing::WriteTestDataset(
      dir, {.backend = Backend::kLmdb, .samples = 12, .max_shard_records = 0});
  Shard shard = FirstShard(dir, m);
  for (size_t meta : {size_t{0}, size_t{shard.psize}}) {
    Store64(&shard.bytes, meta + 88 + 32, entries);  // the main database's md_entries
  }
  testing::WriteFileOrDie(shard.path, shard.bytes);
  m.classes[0].count += entries - m.num_samples;
  m.shards[0].records = entries;
  m.num_samples = entries;
  testing::WriteFileOrDie(dir + "/manifest.json", SerializeManifest(m));
  return testing::ResealDataset(dir);
}

TEST(HostileLmdbTest, AnEntryCountThatTheTreeDoesNotHoldIsAVerifyFault) {
  TempDir dir;
  ClaimEntries(dir.path(), 13);
  const Outcome out = ReadEveryWay(dir.path());
  EXPECT_FALSE(out.verify_clean);
  EXPECT_NE(out.verify_faults.find("claims entries 13 (the tree has 12)"), std::string::npos)
      << out.verify_faults;
  // The readers open it (the claim is plausible) and refuse the record that is not there.
  ASSERT_TRUE(out.open.ok()) << out.open.ToString();
  EXPECT_EQ(out.get_errors, 1);
  EXPECT_EQ(out.loader.code(), StatusCode::kCorruption) << out.loader.ToString();
  EXPECT_NE(out.loader.message().find("key 0000000012 is missing"), std::string::npos)
      << out.loader.message();
}

TEST(HostileLmdbTest, AnEntryCountBeyondWhatTheFileCanHoldIsRefusedAtOpen) {
  TempDir dir;
  ClaimEntries(dir.path(), 1ull << 63);
  const Outcome out = ReadEveryWay(dir.path());
  EXPECT_FALSE(out.verify_clean);
  EXPECT_NE(out.verify_faults.find("claims 9223372036854775808 entries, more than its"),
            std::string::npos)
      << out.verify_faults;
  EXPECT_EQ(out.open.code(), StatusCode::kCorruption) << out.open.ToString();
  EXPECT_NE(out.open.message().find("more than its"), std::string::npos) << out.open.message();
}

}  // namespace
}  // namespace shardpack
