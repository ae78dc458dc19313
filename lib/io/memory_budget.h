// How much memory this process may use, as the kernel tells it: for the readers that
// allocate buffers sized by what a dataset claims (the loader's ring, `shardpack bench`,
// `shardpack preview`), so that they refuse what would not fit before allocating it, and
// for the loader's choice of I/O path (read/io_choice.h).
#ifndef SHARDPACK_IO_MEMORY_BUDGET_H_
#define SHARDPACK_IO_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "shardpack/status.h"

namespace shardpack::io {

struct MemoryLimit {
  uint64_t bytes = 0;
  // Where the number comes from, for messages: "MemAvailable", "cgroup memory.max of
  // /a/b", "cgroup memory.limit_in_bytes of /a", "physical memory"; a budget says "7/8 of
  // ..." (MemoryBudget), a caller's own number "the caller's limit".
  std::string source;
};

// The memory this process may hold, reading /proc and /sys/fs/cgroup under `root` (""
// for the real ones; tests pass a folder laid out the same way): the smallest of
//   - MemAvailable of /proc/meminfo (free memory plus the page cache the kernel can
//     reclaim), or the physical memory (sysconf) where /proc/meminfo has none;
//   - the memory limit of the process's cgroup and of every cgroup above it: v2
//     memory.max, v1 memory.limit_in_bytes (v1 writes "no limit" as a huge number, so
//     a limit at or above the physical memory counts as none).
// The cgroup limits are totals: what the process and its cgroup hold already is not taken
// off (their page cache, which the kernel reclaims first, would count). Never fails; a
// file that cannot be read or parsed is left out.
MemoryLimit AvailableMemory(const std::string& root = "");

// The share of AvailableMemory that one allocation of a reader may take: 7/8 of it, the
// rest left to the process's other memory (the training framework, the page cache its
// reads need). What readers check their buffers against.
inline constexpr uint64_t kBudgetNumerator = 7;
inline constexpr uint64_t kBudgetDenominator = 8;
MemoryLimit MemoryBudget(const std::string& root = "");

// OK when `needed` bytes fit in `budget`; otherwise ResourceExhausted:
//   "<what> needs <needed> bytes (<how>) but only <budget.bytes> bytes are available
//   (<budget.source>); <advice>"
Status CheckMemory(uint64_t needed, const MemoryLimit& budget, const std::string& what,
                   const std::string& how, const std::string& advice);

}  // namespace shardpack::io

#endif  // SHARDPACK_IO_MEMORY_BUDGET_H_
