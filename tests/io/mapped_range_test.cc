#include "io/mapped_range.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace shardpack::io {
namespace {

using shardpack::testing::TempDir;

// A file of `pages` pages, each filled with its page number + 1, mapped read-only.
struct MappedTestFile {
  MappedTestFile(const std::string& path, size_t pages) : path(path) {
    page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size = pages * page;
    std::string bytes;
    for (size_t p = 0; p < pages; ++p) bytes.append(page, static_cast<char>(p + 1));
    testing::WriteFileOrDie(path, bytes);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0);
    base =
        static_cast<const volatile uint8_t*>(::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
    ::close(fd);
  }
  ~MappedTestFile() { ::munmap(const_cast<uint8_t*>(base), size); }
  void TruncateTo(size_t pages) const { ASSERT_EQ(::truncate(path.c_str(), pages * page), 0); }

  std::string path;
  size_t page = 0;
  size_t size = 0;
  const volatile uint8_t* base = nullptr;
};

TEST(MappedRangeTest, AReadPastTheShrunkEndReadsZerosAndMarksOnlyItsRange) {
  TempDir dir;
  MappedTestFile a(dir.Join("a"), 3), b(dir.Join("b"), 3);
  auto range_a = std::make_unique<MappedRange>(const_cast<uint8_t*>(a.base), a.size, PROT_READ);
  MappedRange range_b(const_cast<uint8_t*>(b.base), b.size, PROT_READ);
  EXPECT_EQ(a.base[2 * a.page + 5], 3);
  EXPECT_FALSE(range_a->faulted());

  a.TruncateTo(1);
  EXPECT_EQ(a.base[10], 1) << "the page still in the file reads its bytes";
  EXPECT_FALSE(range_a->faulted());
  EXPECT_EQ(a.base[a.page + 7], 0) << "a lost page reads zeros";
  EXPECT_TRUE(range_a->faulted());
  EXPECT_EQ(a.base[2 * a.page], 0);
  EXPECT_EQ(a.base[a.page + 7], 0) << "and keeps reading them";
  EXPECT_TRUE(range_a->faulted()) << "the mark stays";
  EXPECT_EQ(b.base[2 * b.page], 3);
  EXPECT_FALSE(range_b.faulted()) << "another file's range is not marked";

  // A slot given back and taken again starts clean.
  range_a.reset();
  MappedRange again(const_cast<uint8_t*>(b.base), b.size, PROT_READ);
  EXPECT_FALSE(again.faulted());
}

TEST(MappedRangeTest, FaultsOnManyThreadsAtOnceAreAllAbsorbed) {
  TempDir dir;
  constexpr size_t kPages = 64;
  MappedTestFile f(dir.Join("f"), kPages);
  MappedRange range(const_cast<uint8_t*>(f.base), f.size, PROT_READ);
  f.TruncateTo(0);
  std::vector<std::thread> threads;
  std::vector<unsigned> sums(4, 1);
  for (size_t t = 0; t < sums.size(); ++t) {
    threads.emplace_back([&, t] {
      unsigned sum = 0;
      for (size_t p = 0; p < kPages; ++p) sum += f.base[((p + t * 16) % kPages) * f.page + t];
      sums[t] = sum;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, std::vector<unsigned>(4, 0));
  EXPECT_TRUE(range.faulted());
}

TEST(MappedRangeTest, ManyMoreRangesThanTheFirstChunkHolds) {
  TempDir dir;
  MappedTestFile f(dir.Join("f"), 2);
  std::vector<std::unique_ptr<MappedRange>> ranges;
  // 2500 one-byte ranges elsewhere fill the first chunk of slots: the file's range lands
  // in a later chunk, which the handler must find as well.
  int fake_base = 0;
  for (int i = 0; i < 2500; ++i) {
    ranges.push_back(std::make_unique<MappedRange>(&fake_base + i, 1, PROT_READ));
  }
  MappedRange range(const_cast<uint8_t*>(f.base), f.size, PROT_READ);
  f.TruncateTo(0);
  EXPECT_EQ(f.base[f.page], 0);
  EXPECT_TRUE(range.faulted());
  for (const auto& r : ranges) EXPECT_FALSE(r->faulted());
}

TEST(MappedRangeDeathTest, ASigbusOutsideEveryRangeStillKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir dir;
  MappedTestFile registered(dir.Join("registered"), 2);
  MappedRange range(const_cast<uint8_t*>(registered.base), registered.size, PROT_READ);
  MappedTestFile other(dir.Join("other"), 2);
  other.TruncateTo(0);
  // Passed on to the handler installed before (a sanitizer's reports and exits non-zero),
  // or to the default action: the process dies either way, it never reads on.
  auto died_of_the_fault = [](int status) {
    return (WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) ||
           (WIFEXITED(status) && WEXITSTATUS(status) != 0);
  };
  EXPECT_EXIT((void)other.base[other.page], died_of_the_fault, "");
  registered.TruncateTo(0);
  EXPECT_EQ(registered.base[0], 0);
}

}  // namespace
}  // namespace shardpack::io
