#include "io/mapped_write.h"

#include <gtest/gtest.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "io/system_files.h"
#include "test_util.h"

namespace shardpack::io {
namespace {

using shardpack::testing::TempDir;

// Helpers have names of their own: the tests are compiled eight files to a translation unit
// (tests/CMakeLists.txt), beside chunked_file_test.cc's.

// `n` bytes that differ with `rng`'s next draw and from word to word (splitmix64: cheap
// enough for tens of MiB in a sanitizer build at -O0).
std::string MappedTestBytes(size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  uint64_t x = rng();
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(s.data() + i, &z, std::min<size_t>(8, n - i));
  }
  return s;
}

std::unique_ptr<WritableFile> NewMappedFileOrDie(const std::string& path,
                                                 MappedPages pages = MappedPages::kAuto) {
  auto file = NewMappedWritableFile(path, pages);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(file).value() : nullptr;
}

// The file's size from stat, or -1.
int64_t MappedTestFileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// The file's bytes, read in one call: ReadFileOrDie reads a character at a time, seconds
// for these files in the sanitizer builds (test code at -O0).
std::string MappedTestFileBytes(const std::string& path) {
  std::string bytes(static_cast<size_t>(std::max<int64_t>(MappedTestFileSize(path), 0)), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(in.good()) << path;
  return bytes;
}

// Bytes of `path` this process maps now (/proc/self/maps, the file found by its inode and
// name), as [offset in the file, length] pairs.
std::vector<std::pair<uint64_t, uint64_t>> MappedPartsOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  const std::string name = "/" + std::filesystem::path(path).filename().string();
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    // "begin-end perms offset dev inode path"; the numbers but the inode are hexadecimal.
    std::istringstream fields(line);
    std::string range, perms, offset, dev;
    uint64_t inode = 0;
    fields >> range >> perms >> offset >> dev >> inode;
    std::string mapped_path;
    std::getline(fields >> std::ws, mapped_path);
    if (inode != st.st_ino || mapped_path.size() < name.size() ||
        mapped_path.compare(mapped_path.size() - name.size(), name.size(), name) != 0) {
      continue;
    }
    const size_t dash = range.find('-');
    const uint64_t begin = std::stoull(range.substr(0, dash), nullptr, 16);
    const uint64_t end = std::stoull(range.substr(dash + 1), nullptr, 16);
    parts.emplace_back(std::stoull(offset, nullptr, 16), end - begin);
  }
  std::sort(parts.begin(), parts.end());
  return parts;
}

// A temporary directory under /dev/shm where that is a tmpfs; null elsewhere.
std::unique_ptr<TempDir> TmpfsTempDir() {
  constexpr long kTmpfsMagic = 0x01021994;
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != kTmpfsMagic) return nullptr;
  return std::make_unique<TempDir>("/dev/shm");
}

// Records laid end to end, written by four threads in a scrambled order, each in three
// pieces (the first empty for a record of one or two bytes), then synced and closed: the
// file holds exactly their bytes, and ends where the last of them does.
void WriteScrambledRecordsAndCheck(const std::string& path, uint64_t at_least, uint32_t seed,
                                   MappedPages pages = MappedPages::kAuto) {
  std::mt19937_64 rng(seed);
  std::vector<std::string> records;
  std::vector<uint64_t> offsets;
  uint64_t size = 0;
  while (size < at_least) {
    const uint64_t kind = rng() % 8;
    size_t n = kind < 3   ? 1 + rng() % 64
               : kind < 7 ? 1 + rng() % (256 << 10)
                          : 1 + rng() % (3 << 20);
    // One record longer than a window, so that it spans one whole window and two edges.
    if (records.size() == 20) n = kMappedWriteWindow + 12345;
    records.push_back(MappedTestBytes(n, rng));
    offsets.push_back(size);
    size += n;
  }
  ASSERT_NE(size % kMappedWriteWindow, 0u) << "the end must not be a window's edge";
  uint64_t edges_crossed = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const uint64_t last = offsets[i] + records[i].size() - 1;
    edges_crossed += last / kMappedWriteWindow - offsets[i] / kMappedWriteWindow;
  }
  ASSERT_EQ(edges_crossed, size / kMappedWriteWindow) << "each window's edge within a record";

  std::vector<size_t> order(records.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path, pages);
  ASSERT_NE(file, nullptr);
  constexpr int kThreads = 4;
  std::vector<Status> failures(kThreads, Status::Ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t k = t; k < order.size(); k += kThreads) {
        const size_t i = order[k];
        const std::string_view r = records[i];
        const size_t a = r.size() / 3, b = r.size() / 2;
        const std::string_view pieces[] = {r.substr(0, a), r.substr(a, b - a), r.substr(b)};
        Status s = file->WriteAt(offsets[i], pieces);
        if (!s.ok()) {
          failures[t] = std::move(s);
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : failures) ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_OK(file->Sync());
  ASSERT_OK(file->Close());

  EXPECT_EQ(MappedTestFileSize(path), static_cast<int64_t>(size))
      << "cut to the end written, not to a window's";
  std::string expected;
  expected.reserve(size);
  for (const std::string& r : records) expected += r;
  const std::string got = MappedTestFileBytes(path);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "first difference at byte "
                               << std::mismatch(got.begin(), got.end(), expected.begin()).first -
                                      got.begin();
}

TEST(MappedWritableFileTest, RecordsWrittenFromThreadsInAnyOrderGiveExactlyTheirBytes) {
  TempDir dir;
  WriteScrambledRecordsAndCheck(dir.Join("shard.tfrecord.tmp"), 20 << 20, 1);
}

TEST(MappedWritableFileTest, WritesOnTmpfsGiveTheSameBytes) {
  std::unique_ptr<TempDir> dir = TmpfsTempDir();
  if (dir == nullptr) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  // Populated before each copy (auto, on tmpfs) and faulted in by the copies.
  WriteScrambledRecordsAndCheck(dir->Join("shard.tfrecord.tmp"), 2 * kMappedWriteWindow + 4096, 2);
  WriteScrambledRecordsAndCheck(dir->Join("faulted.tfrecord.tmp"), 2 * kMappedWriteWindow + 4096, 5,
                                MappedPages::kFaulted);
}

// Page faults this thread takes in `f` (a software perf counter: faults raised by the
// copies, not those the kernel takes inside a populating madvise), or -1 where the kernel
// does not let the process count them.
template <typename F>
int64_t PageFaultsOf(F&& f) {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_SOFTWARE;
  attr.size = sizeof(attr);
  attr.config = PERF_COUNT_SW_PAGE_FAULTS;
  attr.disabled = 1;
  attr.exclude_hv = 1;
  const int fd = static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
  if (fd < 0) return -1;
  ::ioctl(fd, PERF_EVENT_IOC_RESET, 0);
  ::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  f();
  ::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  int64_t count = -1;
  if (::read(fd, &count, sizeof(count)) != sizeof(count)) count = -1;
  ::close(fd);
  return count;
}

TEST(MappedWritableFileTest, OnTmpfsAWritesPagesAreMappedBeforeItCopies) {
  std::unique_ptr<TempDir> dir = TmpfsTempDir();
  if (dir == nullptr) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  EXPECT_TRUE(MappedWritesPopulate(dir->path()));
  TempDir other;
  struct statfs fs {};
  ASSERT_EQ(::statfs(other.path().c_str(), &fs), 0);
  EXPECT_EQ(MappedWritesPopulate(other.path()), fs.f_type == 0x01021994)
      << "f_type 0x" << std::hex << fs.f_type;
  EXPECT_FALSE(MappedWritesPopulate(other.Join("no-such-dir")));
  // A 1 MiB write, 256 pages: populated first, the copy takes no fault of its own; faulted
  // in, one a page. Compared with each other: the write's other faults (its bookkeeping's
  // memory; a sanitizer's shadow pages, 39 of them in the ASan build) are in both.
  std::mt19937_64 rng(6);
  const std::string bytes = MappedTestBytes(1 << 20, rng);
  const std::string_view pieces[] = {bytes};
  int64_t faults[2] = {0, 0};
  for (MappedPages pages : {MappedPages::kAuto, MappedPages::kFaulted}) {
    const std::string path =
        dir->Join(pages == MappedPages::kAuto ? "populated.tmp" : "faulted.tmp");
    std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path, pages);
    ASSERT_NE(file, nullptr);
    Status s;
    faults[pages == MappedPages::kAuto ? 0 : 1] =
        PageFaultsOf([&] { s = file->WriteAt(0, pieces); });
    ASSERT_OK(s);
    ASSERT_OK(file->Close());
    EXPECT_TRUE(MappedTestFileBytes(path) == bytes);
  }
  if (faults[0] < 0 || faults[1] < 0) GTEST_SKIP() << "no software perf counter for this process";
  EXPECT_GE(faults[1] - faults[0], 192)
      << "populated " << faults[0] << " faults, faulted in " << faults[1]
      << ": populating should spare the copy about one fault a page";
}

TEST(MappedWritableFileTest, AppendsGiveTheBytesAndTheSize) {
  TempDir dir;
  const std::string path = dir.Join("f");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  std::mt19937_64 rng(3);
  std::string expected;
  // The fourth append ends on the first window's last byte; the sixth crosses the second's.
  for (size_t n : {size_t{1}, size_t{4095}, size_t{4096}, kMappedWriteWindow - 8192, size_t{0},
                   kMappedWriteWindow + 17, size_t{3}}) {
    const std::string s = MappedTestBytes(n, rng);
    ASSERT_OK(file->Append(s));
    expected += s;
    EXPECT_EQ(file->Size(), expected.size());
  }
  ASSERT_OK(file->Close());
  EXPECT_EQ(MappedTestFileSize(path), static_cast<int64_t>(expected.size()));
  EXPECT_TRUE(MappedTestFileBytes(path) == expected);
}

TEST(MappedWritableFileTest, AGapIsReportedBySyncAndClose) {
  TempDir dir;
  const std::string path = dir.Join("shard.tfrecord.tmp");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  const std::string a(100, 'a'), b(100, 'b');
  const std::string_view first[] = {a};
  const std::string_view second[] = {b};
  ASSERT_OK(file->WriteAt(0, first));
  ASSERT_OK(file->WriteAt(200, second));
  const Status s = file->Sync();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(path + ": 100 bytes missing before offset 300"), std::string::npos)
      << s.message();
  EXPECT_EQ(file->Close().code(), StatusCode::kFailedPrecondition);
}

// Writes must not overlap: a byte written twice is reported by Sync, and a write over a
// window already filled (and unmapped) is refused, naming the offset, not a crash.
TEST(MappedWritableFileTest, BytesWrittenTwiceAreReported) {
  TempDir dir;
  const std::string path = dir.Join("f");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  const std::string a(100, 'a');
  const std::string_view pieces[] = {a};
  ASSERT_OK(file->WriteAt(0, pieces));
  ASSERT_OK(file->WriteAt(50, pieces));
  const Status s = file->Sync();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(path + ": 50 bytes written twice"), std::string::npos) << s.message();

  std::unique_ptr<WritableFile> filled = NewMappedFileOrDie(path);
  ASSERT_NE(filled, nullptr);
  const std::string window(kMappedWriteWindow, 'w');
  const std::string_view whole[] = {window};
  ASSERT_OK(filled->WriteAt(0, whole));
  const Status again = filled->WriteAt(10, pieces);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.message().find(path + ": write at offset 10 over bytes already written"),
            std::string::npos)
      << again.message();
}

TEST(MappedWritableFileTest, AFileNotWrittenFromItsStartIsReported) {
  TempDir dir;
  const std::string path = dir.Join("f");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  const std::string b(10, 'b');
  const std::string_view pieces[] = {b};
  ASSERT_OK(file->WriteAt(kMappedWriteWindow, pieces));
  const Status s = file->Close();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(
      s.message().find(path + ": " + std::to_string(kMappedWriteWindow) +
                       " bytes missing before offset " + std::to_string(kMappedWriteWindow + 10)),
      std::string::npos)
      << s.message();
}

TEST(MappedWritableFileTest, WritesAfterSyncOrCloseAreRefused) {
  TempDir dir;
  const std::string path = dir.Join("shard.tfrecord.tmp");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  const std::string a(100, 'a');
  const std::string_view pieces[] = {a};
  ASSERT_OK(file->WriteAt(0, pieces));
  ASSERT_OK(file->Sync());
  const Status s = file->WriteAt(100, pieces);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find(path + ": write at offset 100 after the file was synced"),
            std::string::npos)
      << s.message();
  ASSERT_OK(file->Close());
  EXPECT_EQ(file->Append(a).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(MappedTestFileSize(path), 100);
  EXPECT_EQ(MappedTestFileBytes(path), a);
}

TEST(MappedWritableFileTest, AFileNeverWrittenIsEmpty) {
  TempDir dir;
  const std::string path = dir.Join("f");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(file->Size(), 0u);
  ASSERT_OK(file->Sync());
  ASSERT_OK(file->Close());
  EXPECT_EQ(MappedTestFileSize(path), 0);
}

TEST(MappedWritableFileTest, TheFileIsCreatedEmptyOrTruncated) {
  TempDir dir;
  const std::string path = dir.Join("f");
  testing::WriteFileOrDie(path, std::string(5000, 'x'));
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(MappedTestFileSize(path), 0);
  ASSERT_OK(file->Append("new"));
  ASSERT_OK(file->Close());
  EXPECT_EQ(MappedTestFileBytes(path), "new");

  const auto missing = NewMappedWritableFile(dir.Join("no-such-dir/f"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.Join("no-such-dir/f")), std::string::npos)
      << missing.status().message();
}

TEST(MappedWritableFileTest, PosixEnvMakesMappedFiles) {
  TempDir dir;
  const std::string path = dir.Join("f");
  auto file = Env::Posix()->NewMappedWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const std::string b(kMappedWriteWindow + 1, 'b');
  const std::string_view pieces[] = {b};
  ASSERT_OK((*file)->WriteAt(0, pieces));
  ASSERT_OK((*file)->Close());
  EXPECT_EQ(MappedTestFileSize(path), static_cast<int64_t>(b.size()));
}

TEST(MappedWritableFileTest, AFileTruncatedUnderTheMappingIsAnErrorNotACrash) {
  TempDir dir;
  const std::string path = dir.Join("shard.tfrecord.tmp");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  const std::string a(4096, 'a');
  const std::string_view pieces[] = {a};
  ASSERT_OK(file->WriteAt(0, pieces));
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  // The first window is still mapped: the copy faults past the file's new end.
  const Status s = file->WriteAt(4 * 4096, pieces);
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(path + ": write at offset 16384"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("SIGBUS"), std::string::npos) << s.message();
  // Grown again, the file has its page back; the window stays faulted all the same.
  ASSERT_EQ(::truncate(path.c_str(), 1 << 20), 0);
  EXPECT_EQ(file->WriteAt(8192, pieces).code(), StatusCode::kIOError) << "the window stays faulted";
  (void)file->Close();
}

// tests/xfs_test.sh runs this (and every test here) with the temporary directory on xfs.
TEST(MappedWritableFileTest, MappedWritesArePreferredOnExt4AndXfsWhereTheHostLeavesMemoryAlone) {
  TempDir dir;
  EXPECT_FALSE(MappedWritesMeasuredOn(dir.Join("no-such-dir")));
  EXPECT_FALSE(MappedWritesPreferred(dir.Join("no-such-dir")));
  struct statfs fs {};
  ASSERT_EQ(::statfs(dir.path().c_str(), &fs), 0);
  // Where the host takes free memory back, nowhere (this machine's answer is the one its
  // files give: the rule is tested on laid-out folders in huge_pages_test.cc).
  const bool host_reclaims = !HostReclaimsFreeMemory().empty();
  const bool measured = fs.f_type == 0xEF53 || fs.f_type == 0x58465342;  // ext4, xfs
  EXPECT_EQ(MappedWritesMeasuredOn(dir.path()), measured) << "f_type 0x" << std::hex << fs.f_type;
  EXPECT_EQ(MappedWritesPreferred(dir.path()), !host_reclaims && measured)
      << "f_type 0x" << std::hex << fs.f_type << ", host reclaims: " << host_reclaims;
  if (std::unique_ptr<TempDir> tmpfs = TmpfsTempDir(); tmpfs != nullptr) {
    EXPECT_FALSE(MappedWritesMeasuredOn(tmpfs->path())) << "tmpfs";
    EXPECT_FALSE(MappedWritesPreferred(tmpfs->path())) << "tmpfs";
  }
}

TEST(MappedWritableFileTest, AWindowIsUnmappedByTheWriteThatFillsIt) {
  TempDir dir;
  const std::string path = dir.Join("f");
  std::unique_ptr<WritableFile> file = NewMappedFileOrDie(path);
  ASSERT_NE(file, nullptr);
  std::mt19937_64 rng(4);
  const std::string a = MappedTestBytes(kMappedWriteWindow - 1, rng);
  const std::string b = MappedTestBytes(4097, rng);
  const std::string_view first[] = {a};
  const std::string_view second[] = {b};
  using Parts = std::vector<std::pair<uint64_t, uint64_t>>;
  ASSERT_OK(file->WriteAt(0, first));
  EXPECT_EQ(MappedPartsOf(path), (Parts{{0, kMappedWriteWindow}})) << "one byte short";
  // Fills the first window's last byte and goes on into the second.
  ASSERT_OK(file->WriteAt(kMappedWriteWindow - 1, second));
  EXPECT_EQ(MappedPartsOf(path), (Parts{{kMappedWriteWindow, kMappedWriteWindow}}));
  ASSERT_OK(file->Close());
  EXPECT_EQ(MappedPartsOf(path), Parts{});
  EXPECT_TRUE(MappedTestFileBytes(path) == a + b);
}

}  // namespace
}  // namespace shardpack::io
