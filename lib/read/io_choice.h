// Which I/O path the loader takes when LoaderOptions::io is kAuto: the mapping while the
// dataset fits in what the page cache may hold for this process, read-ahead otherwise.
#ifndef SHARDPACK_READ_IO_CHOICE_H_
#define SHARDPACK_READ_IO_CHOICE_H_

#include <cstdint>
#include <string>

#include "io/memory_budget.h"
#include "shardpack/loader.h"

namespace shardpack::read {

// What the page cache may hold for this process: io::AvailableMemory (MemAvailable,
// lowered to the memory limit of the process's cgroup and of each cgroup above it, v2
// memory.max or v1 memory.limit_in_bytes, where one is set), whole: the page cache is the
// memory the kernel gives back first.
using CacheLimit = io::MemoryLimit;

// Reads /proc and /sys/fs/cgroup under `root` ("" for the real ones; tests pass a folder
// laid out the same way). Without /proc/meminfo: the physical memory (sysconf).
CacheLimit PageCacheLimit(const std::string& root = "");

// The mapping wins while the dataset fits with room to spare: at most this fraction of
// the limit (the rest is the training process's own memory and other files).
inline constexpr double kMappedFraction = 0.75;

struct IoChoice {
  bool read_ahead = false;
  std::string why;  // "dataset 5.9 GB > 75% of 2.1 GB that the page cache may hold (cgroup ...)"
};
IoChoice ChooseIo(uint64_t dataset_bytes, const CacheLimit& limit);

// LoaderOptions::huge_pages on the mapped path: whether uncached pages are read 2 MiB at a
// time, and why. kAuto: where the dataset fits (`fit` from ChooseIo) and nothing stands in
// the way (`obstacle`: "" where nothing does; else why not, in words: the kernel lacks
// what it takes, or io::HostReclaimsFreeMemory's words).
struct PagesChoice {
  bool huge = false;
  std::string why;  // "forced", "the dataset fits in memory", "... may not fit ...", or `obstacle`
};
PagesChoice ChoosePages(HugePages option, const IoChoice& fit, const std::string& obstacle);

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_IO_CHOICE_H_
