#include "io/memory_budget.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace shardpack::io {
namespace {

using testing::TempDir;

void WriteSystemFile(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// The smallest of MemAvailable and the memory limits of the process's cgroup and the
// cgroups above it, v1 and v2; "no limit" (v2 "max", v1's huge number) is none.
TEST(MemoryBudgetTest, AvailableMemoryIsTheSmallestOfMemAvailableAndTheCgroupLimits) {
  TempDir root;
  WriteSystemFile(root.Join("proc/meminfo"), "MemTotal: 25000000 kB\nMemAvailable: 20000000 kB\n");
  WriteSystemFile(root.Join("proc/self/cgroup"), "4:cpu,memory,pids:/job/step\n");
  WriteSystemFile(root.Join("sys/fs/cgroup/memory/job/memory.limit_in_bytes"), "3000000000\n");
  WriteSystemFile(root.Join("sys/fs/cgroup/memory/job/step/memory.limit_in_bytes"),
                  "9223372036854771712\n");
  MemoryLimit v1 = AvailableMemory(root.path());
  EXPECT_EQ(v1.bytes, 3000000000u);
  EXPECT_EQ(v1.source, "cgroup memory.limit_in_bytes of /job");

  WriteSystemFile(root.Join("proc/self/cgroup"), "0::/a/b\n");
  WriteSystemFile(root.Join("sys/fs/cgroup/a/memory.max"), "2000000000\n");
  WriteSystemFile(root.Join("sys/fs/cgroup/a/b/memory.max"), "max\n");
  MemoryLimit v2 = AvailableMemory(root.path());
  EXPECT_EQ(v2.bytes, 2000000000u);
  EXPECT_EQ(v2.source, "cgroup memory.max of /a");

  // A limit above MemAvailable does not raise it.
  WriteSystemFile(root.Join("sys/fs/cgroup/a/memory.max"), "30000000000\n");
  MemoryLimit above = AvailableMemory(root.path());
  EXPECT_EQ(above.bytes, 20000000ull * 1024);
  EXPECT_EQ(above.source, "MemAvailable");
}

// Files that cannot be read or parsed are left out: without /proc/meminfo, the physical
// memory.
TEST(MemoryBudgetTest, WithoutTheKernelsFilesThePhysicalMemoryCounts) {
  TempDir root;
  WriteSystemFile(root.Join("proc/self/cgroup"), "garbage\n0::/x\n");
  WriteSystemFile(root.Join("sys/fs/cgroup/x/memory.max"), "a lot\n");
  MemoryLimit none = AvailableMemory(root.path());
  EXPECT_EQ(none.source, "physical memory");
  EXPECT_GT(none.bytes, 0u);
}

TEST(MemoryBudgetTest, TheBudgetIsSevenEighthsOfWhatIsAvailable) {
  TempDir root;
  WriteSystemFile(root.Join("proc/meminfo"), "MemAvailable: 20000000 kB\n");
  WriteSystemFile(root.Join("proc/self/cgroup"), "0::/a\n");
  WriteSystemFile(root.Join("sys/fs/cgroup/a/memory.max"), "8000000000\n");
  MemoryLimit budget = MemoryBudget(root.path());
  EXPECT_EQ(budget.bytes, 7000000000u);
  EXPECT_EQ(budget.source, "7/8 of cgroup memory.max of /a");
}

TEST(MemoryBudgetTest, CheckMemoryNamesBothNumbersAndTheSource) {
  const MemoryLimit budget{1000, "7/8 of cgroup memory.max of /a"};
  EXPECT_TRUE(CheckMemory(1000, budget, "x", "y", "z").ok());
  Status s =
      CheckMemory(1001, budget, "loader: the ring", "4 slots of 250 bytes", "lower batch_size");
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "loader: the ring needs 1001 bytes (4 slots of 250 bytes) but only 1000 bytes are "
            "available (7/8 of cgroup memory.max of /a); lower batch_size");
}

}  // namespace
}  // namespace shardpack::io
