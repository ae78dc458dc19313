// LoaderOptions::huge_pages: the choice, the same batches either way, the populating
// threads, and the page cache left in 2 MiB folios where the kernel keeps them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "io/mapped_range.h"
#include "io/system_files.h"
#include "read/dataset_access.h"
#include "read/delivered_batch.h"
#include "read/io_choice.h"
#include "read/populator.h"
#include "shardpack/loader.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::OpenDatasetOrDie;
using testing::TempDir;
using testing::TestDatasetSpec;

void WriteSysText(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// ---- the choice ----

TEST(HugePagesChoiceTest, AHostTakingBackFreeMemoryIsFoundByItsBalloonsReportingFeature) {
  TempDir root;
  EXPECT_EQ(io::HostReclaimsFreeMemory(root.path()), "");  // no virtio bus
  // A network device with bit 5 set, and a balloon without it: neither reports.
  const std::string bit5 = std::string(5, '0') + "1" + std::string(58, '0');
  WriteSysText(root.Join("sys/bus/virtio/devices/virtio0/device"), "0x0001\n");
  WriteSysText(root.Join("sys/bus/virtio/devices/virtio0/features"), bit5 + "\n");
  WriteSysText(root.Join("sys/bus/virtio/devices/virtio1/device"), "0x0005\n");
  WriteSysText(root.Join("sys/bus/virtio/devices/virtio1/features"),
               "0110000" + bit5.substr(7) + "\n");
  EXPECT_EQ(io::HostReclaimsFreeMemory(root.path()), "");
  // The balloon with free page reporting (a VM's line: bits 1, 2, 5, 7 and 32), the
  // kernel's default order: reported.
  WriteSysText(root.Join("sys/bus/virtio/devices/virtio1/features"),
               "0110010100000000000000000000000010000000000000000000000000000000\n");
  EXPECT_EQ(io::HostReclaimsFreeMemory(root.path()),
            "free memory is reported to the host: virtio balloon free page reporting");
  WriteSysText(root.Join("sys/module/page_reporting/parameters/page_reporting_order"), "9\n");
  EXPECT_EQ(io::HostReclaimsFreeMemory(root.path()),
            "free memory is reported to the host: virtio balloon free page reporting, "
            "page_reporting_order 9");
  // Order 10, the largest block where /proc/buddyinfo cannot be read: a freed 2 MiB block
  // merges into such blocks, which are reported.
  WriteSysText(root.Join("sys/module/page_reporting/parameters/page_reporting_order"), "10\n");
  EXPECT_NE(io::HostReclaimsFreeMemory(root.path()), "");
  // Above the largest block the kernel keeps (11 columns: orders 0 to 10): nothing is.
  WriteSysText(root.Join("sys/module/page_reporting/parameters/page_reporting_order"), "11\n");
  EXPECT_EQ(io::HostReclaimsFreeMemory(root.path()), "");
  WriteSysText(root.Join("proc/buddyinfo"),
               "Node 0, zone      DMA      0      0      0      0      0      0      0      0"
               "      1      1      3 \n");
  EXPECT_EQ(io::HostReclaimsFreeMemory(root.path()), "");
  // A kernel keeping blocks up to order 12 (13 columns) reports them at order 11.
  WriteSysText(root.Join("proc/buddyinfo"),
               "Node 0, zone   Normal 1 2 3 4 5 6 7 8 9 10 11 12 13\n");
  EXPECT_NE(io::HostReclaimsFreeMemory(root.path()), "");
}

TEST(HugePagesChoiceTest, AutoTakesHugePagesWhereTheDatasetFitsAndTheHostKeepsItsHandsOff) {
  const read::IoChoice fits{false, "dataset 3.0 GB <= 75% of ..."};
  const read::IoChoice big{true, "dataset 5.0 GB > 75% of ..."};
  const std::string host = "free memory is reported to the host: ...";
  read::PagesChoice c = read::ChoosePages(HugePages::kAuto, fits, "");
  EXPECT_TRUE(c.huge);
  EXPECT_EQ(c.why, "the dataset fits in memory");
  c = read::ChoosePages(HugePages::kAuto, big, "");
  EXPECT_FALSE(c.huge);
  EXPECT_EQ(c.why, "the dataset may not fit in memory");
  c = read::ChoosePages(HugePages::kAuto, fits, host);
  EXPECT_FALSE(c.huge);
  EXPECT_EQ(c.why, host);
  c = read::ChoosePages(HugePages::kOn, big, host);
  EXPECT_TRUE(c.huge);
  EXPECT_EQ(c.why, "forced");
  c = read::ChoosePages(HugePages::kOff, fits, "");
  EXPECT_FALSE(c.huge);
  EXPECT_EQ(c.why, "forced");
}

// ---- the loader ----

// Every shard file of the dataset in `dir`, evicted.
void EvictShards(const TempDir& dir) {
  const auto ds = OpenDatasetOrDie(dir.path());
  for (const ShardEntry& e : ds->manifest().shards) {
    const std::filesystem::path p = dir.Join(e.data.file);
    if (std::filesystem::is_directory(p)) {
      for (const auto& f : std::filesystem::directory_iterator(p))
        testing::EvictFromPageCache(f.path().string());
    } else {
      testing::EvictFromPageCache(p.string());
    }
  }
}

TestDatasetSpec SmallSpec(Backend backend) {
  TestDatasetSpec s;
  s.backend = backend;
  s.samples = 45;
  s.height = 6;
  s.width = 5;
  s.max_shard_records = 7;
  return s;
}

std::vector<testing::Got> ReadTwoEpochs(std::shared_ptr<const Dataset> ds, const LoaderOptions& o,
                                        std::string* io) {
  auto loader = Loader::Create(ds, o);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  if (!loader.ok()) return {};
  std::vector<testing::Got> out = testing::ReadRest(**loader);
  EXPECT_OK((*loader)->StartEpoch(1));
  const std::vector<testing::Got> next = testing::ReadRest(**loader);
  out.insert(out.end(), next.begin(), next.end());
  *io = (*loader)->stats().io;
  return out;
}

class HugePagesLoaderTest : public ::testing::TestWithParam<Backend> {};

TEST_P(HugePagesLoaderTest, OnAndOffDeliverTheSameBatchesAndTheStatsSayWhich) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), SmallSpec(GetParam()));
  LoaderOptions o;
  o.batch_size = 4;
  o.seed = 3;
  o.num_threads = 3;
  o.io = IoPath::kMapped;
  o.read_ahead_bytes = 1;  // one batch ahead
  std::string io_on, io_off, io_none;
  // Evicted first, so that the batches are read ahead (a cached batch is not).
  o.huge_pages = HugePages::kOn;
  EvictShards(dir);
  const auto on = ReadTwoEpochs(OpenDatasetOrDie(dir.path()), o, &io_on);
  o.huge_pages = HugePages::kOff;
  EvictShards(dir);
  const auto off = ReadTwoEpochs(OpenDatasetOrDie(dir.path()), o, &io_off);
  EXPECT_EQ(on.size(), 2u * 12);
  EXPECT_TRUE(on == off);
  EXPECT_EQ(io_on, "mapped (forced); uncached pages read 2 MiB at a time by 8 threads (forced)");
  EXPECT_EQ(io_off, "mapped (forced); uncached pages hinted 4 KiB at a time (forced)");
  // No read-ahead: nothing is read ahead in pages of any size.
  o.read_ahead_bytes = 0;
  o.huge_pages = HugePages::kOn;
  const auto none = ReadTwoEpochs(OpenDatasetOrDie(dir.path()), o, &io_none);
  EXPECT_TRUE(none == off);
  EXPECT_EQ(io_none, "mapped (forced)");
  // Automatic: a small dataset fits; what the host does decides.
  o.read_ahead_bytes = 1;
  o.huge_pages = HugePages::kAuto;
  std::string io_auto;
  EXPECT_TRUE(ReadTwoEpochs(OpenDatasetOrDie(dir.path()), o, &io_auto) == off);
  const std::string obstacle =
      io::PopulateAndHugePagesWork()
          ? io::HostReclaimsFreeMemory()
          : "this kernel lacks MADV_POPULATE_READ or transparent huge pages";
  EXPECT_EQ(io_auto,
            obstacle.empty()
                ? "mapped (forced); uncached pages read 2 MiB at a time by 8 threads "
                  "(the dataset fits in memory)"
                : "mapped (forced); uncached pages hinted 4 KiB at a time (" + obstacle + ")");
}

INSTANTIATE_TEST_SUITE_P(Backends, HugePagesLoaderTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb),
                         [](const auto& info) {
                           return info.param == Backend::kTfrecord ? "Tfrecord" : "Lmdb";
                         });

// ---- the page cache ----

// The KiB of `path` this process maps 2 MiB per entry (/proc/self/smaps).
long FilePmdMappedKib(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  long total = 0;
  bool ours = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {
      // A mapping's header: "begin-end perms offset dev inode [path]".
      std::string perms, offset, dev, inode, name;
      fields >> perms >> offset >> dev >> inode >> name;
      ours = name == path;
    } else if (ours && first == "FilePmdMapped:") {
      long kib = 0;
      fields >> kib;
      total += kib;
    }
  }
  return total;
}

// 24 samples of 256x256x3 in one TFRecord shard: 4.7 MB, two whole 2 MiB regions.
TestDatasetSpec LargeSpec() {
  TestDatasetSpec s;
  s.samples = 24;
  s.height = 256;
  s.width = 256;
  s.max_shard_records = 24;
  return s;
}

std::string ShardPath(const TempDir& dir, const Dataset& ds) {
  return std::filesystem::canonical(dir.Join(ds.manifest().shards.at(0).data.file)).string();
}

TEST(PopulatorTest, MapsTheQueuedRecordsAndStopsWithWorkQueued) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), LargeSpec());
  EvictShards(dir);
  auto ds = OpenDatasetOrDie(dir.path());
  std::vector<uint64_t> all(ds->size());
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  if (read::DatasetAccess(*ds).Resident(all))
    GTEST_SKIP() << "the page cache kept the shard after POSIX_FADV_DONTNEED";
  {
    read::Populator populator(ds.get(), 2);
    populator.Add(all);
    populator.Drain();
    for (const uint64_t i : all)
      EXPECT_TRUE(read::DatasetAccess(*ds).Resident(i)) << "sample " << i;
  }
  // Destroyed with records queued: it returns.
  read::Populator busy(ds.get(), 1);
  for (int i = 0; i < 100; ++i) busy.Add(all);
  busy.Clear();
  busy.Add(all);
  busy.Add(all);
}

// ---- a page cache that lacks a few blocks (DatasetAccess::WillNeedMissing) ----

const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));

// Pages of [offset, offset + length) of `path` in the page cache, those being read
// included (cachestat, Linux 6.5); nullopt where the kernel or the C library lacks it.
std::optional<uint64_t> CachedPages(const std::string& path, uint64_t offset, uint64_t length) {
#if defined(SYS_cachestat)
  constexpr long kCachestat = SYS_cachestat;
#elif defined(__x86_64__) || defined(__aarch64__)
  constexpr long kCachestat = 451;  // older C libraries' headers lack the name
#else
  constexpr long kCachestat = -1;
#endif
  if (kCachestat < 0) return std::nullopt;
  struct Range {
    uint64_t off, len;
  } range{offset, length};
  struct Stat {
    uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
  } stat{};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const long rc = ::syscall(kCachestat, fd, &range, &stat, 0);
  ::close(fd);
  if (rc != 0) return std::nullopt;
  return stat.nr_cache;
}

// Whether the page of `path` holding byte `offset` is in memory (a mapping of its own,
// never touched: mincore).
bool FilePageResident(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const auto size = static_cast<size_t>(::lseek(fd, 0, SEEK_END));
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return false;
  unsigned char in_core = 0;
  const bool probed =
      ::mincore(static_cast<uint8_t*>(map) + offset / kPage * kPage, 1, &in_core) == 0;
  ::munmap(map, size);
  return probed && (in_core & 1) != 0;
}

// Reads [offset, offset + length) of `path` and no page around it (POSIX_FADV_RANDOM, as a
// fault on the loader's MADV_RANDOM mappings reads), waiting for pages being read.
void ReadRange(const std::string& path, uint64_t offset, uint64_t length) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  std::string bytes(length, '\0');
  EXPECT_EQ(::pread(fd, bytes.data(), length, static_cast<off_t>(offset)),
            static_cast<ssize_t>(length))
      << path;
  ::close(fd);
}

class MissingBlocksTest : public ::testing::TestWithParam<Backend> {};

TEST_P(MissingBlocksTest, FindsTheBlocksTheCacheLacksAndHintsThemWithinTheLimit) {
  constexpr uint64_t kBlock = 2ull << 20;
  TempDir dir;
  TestDatasetSpec spec = LargeSpec();
  spec.backend = GetParam();
  testing::WriteTestDataset(dir.path(), spec);
  auto ds = OpenDatasetOrDie(dir.path());
  const std::string file = dir.Join(ds->manifest().shards.at(0).data.file);
  const uint64_t size = std::filesystem::file_size(file);
  ASSERT_GE(size, 2 * kBlock) << file;

  // Written just now: cached whole.
  EXPECT_EQ(read::DatasetAccess(*ds).WillNeedMissing(1ull << 30), 0u);

  // The second 2 MiB block dropped.
  testing::EvictFromPageCache(file, kBlock, kBlock);
  if (FilePageResident(file, kBlock)) {
    GTEST_SKIP() << "the page cache kept " << file << " after POSIX_FADV_DONTNEED";
  }
  // More than the limit is missing: nothing is hinted.
  EXPECT_EQ(read::DatasetAccess(*ds).WillNeedMissing(kBlock - 1), 0u);
  if (const auto cached = CachedPages(file, kBlock, kBlock)) {
    EXPECT_EQ(*cached, 0u);
  }
  // A fault since has brought the block's first page back (a record read by faults does
  // that): the middle probe still finds the block missing.
  ReadRange(file, kBlock, 1);
  ASSERT_TRUE(FilePageResident(file, kBlock));
  // Within the limit: the block's bytes, all of them in the page cache at once (being
  // read) when the call returns.
  EXPECT_EQ(read::DatasetAccess(*ds).WillNeedMissing(kBlock), kBlock);
  if (const auto cached = CachedPages(file, kBlock, kBlock)) {
    EXPECT_EQ(*cached, kBlock / kPage);
  }

  // Blocks side by side, the file's short last one included: all their bytes. The read
  // just started is waited for first (a page being read cannot be dropped). Pages the
  // dataset has mapped stay: LMDB's open reads its meta and first leaf pages.
  ReadRange(file, kBlock, kBlock);
  testing::EvictFromPageCache(file, kBlock, 0);
  uint64_t missing = 0;
  for (uint64_t offset = kBlock; offset < size; offset += kBlock) {
    const uint64_t middle = offset + kBlock / 2;
    if (!FilePageResident(file, offset) || (middle < size && !FilePageResident(file, middle))) {
      missing += std::min(kBlock, size - offset);
    }
  }
  EXPECT_GT(missing, kBlock);
  EXPECT_EQ(read::DatasetAccess(*ds).WillNeedMissing(1ull << 30), missing);
  // A TFRecord shard's pages were all gone (its open reads only the index file), and all
  // are being read now, not only a device's largest request of each run of blocks.
  if (GetParam() == Backend::kTfrecord) {
    EXPECT_EQ(missing, size - kBlock);
    if (const auto cached = CachedPages(file, kBlock, size - kBlock)) {
      EXPECT_EQ(*cached, (size - kBlock + kPage - 1) / kPage);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MissingBlocksTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb),
                         [](const auto& info) {
                           return info.param == Backend::kTfrecord ? "Tfrecord" : "Lmdb";
                         });

TEST(HugePagesCacheTest, AnEpochWithHugePagesLeavesTheShardIn2MiBFolios) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), LargeSpec());
  std::string shard;
  {
    auto ds = OpenDatasetOrDie(dir.path());
    shard = ShardPath(dir, *ds);
  }
  // Whether this kernel and file system read 2 MiB folios at all: one mapping advised
  // MADV_HUGEPAGE, populated over its first 2 MiB.
  testing::EvictFromPageCache(shard);
  {
    const int fd = ::open(shard.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const size_t bytes = std::filesystem::file_size(shard);
    void* map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    ASSERT_NE(map, MAP_FAILED);
    const bool advised = ::madvise(map, bytes, MADV_HUGEPAGE) == 0;
    // The first whole 2 MiB of the file (the mapping need not start on a 2 MiB boundary).
    ::madvise(map, 4u << 20, MADV_POPULATE_READ);
    const long kib = FilePmdMappedKib(shard);
    ::munmap(map, bytes);
    if (!advised || kib == 0) {
      GTEST_SKIP() << "this kernel or file system keeps no 2 MiB folios for " << shard;
    }
  }
  testing::EvictFromPageCache(shard);
  auto ds = OpenDatasetOrDie(dir.path());
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  o.io = IoPath::kMapped;
  o.huge_pages = HugePages::kOn;
  auto loader = Loader::Create(ds, o);
  ASSERT_OK(loader.status());
  while ((*loader)->Next().ok()) {
  }
  // The shard is 4.7 MB: whichever 2 MiB regions lie wholly inside it are one entry each.
  EXPECT_GE(FilePmdMappedKib(shard), 2048) << (*loader)->stats().io;
}

}  // namespace
}  // namespace shardpack
