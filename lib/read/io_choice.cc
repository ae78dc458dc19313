#include "read/io_choice.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "io/system_files.h"

namespace shardpack::read {
namespace {

std::string FormatBytes(uint64_t bytes) {
  char buf[32];
  if (bytes < 1000000000) {
    std::snprintf(buf, sizeof buf, "%.0f MB", static_cast<double>(bytes) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GB", static_cast<double>(bytes) / 1e9);
  }
  return buf;
}

// Lowers `limit` to the smallest limit file found in `dir` and the cgroups above it, up
// to `mount` (the hierarchy's root). v1 reports "no limit" as a huge number: anything
// above the physical memory is no limit.
void LowerToCgroup(const std::string& mount, std::string cgroup, const std::string& file,
                   uint64_t physical, CacheLimit* limit) {
  for (;;) {
    uint64_t bytes = 0;
    if (io::ParseBytes(io::FirstLine(mount + cgroup + "/" + file), &bytes) && bytes < physical &&
        bytes < limit->bytes) {
      limit->bytes = bytes;
      limit->source = "cgroup " + file + " of " + (cgroup.empty() ? "/" : cgroup);
    }
    if (cgroup.empty() || cgroup == "/") return;
    const size_t slash = cgroup.rfind('/');
    cgroup = slash == std::string::npos ? "" : cgroup.substr(0, slash);
  }
}

}  // namespace

CacheLimit PageCacheLimit(const std::string& root) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  const uint64_t physical =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : ~0ull;
  CacheLimit limit{physical, "physical memory"};
  std::ifstream meminfo(root + "/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) limit = {kib * 1024, "MemAvailable"};
    break;
  }
  // "0::/path" (v2), "N:memory:/path" or "N:a,memory,b:/path" (v1).
  std::ifstream cgroups(root + "/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path == "/") path.clear();
    if (controllers.empty()) {
      LowerToCgroup(root + "/sys/fs/cgroup", path, "memory.max", physical, &limit);
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      LowerToCgroup(root + "/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", physical,
                    &limit);
    }
  }
  return limit;
}

IoChoice ChooseIo(uint64_t dataset_bytes, const CacheLimit& limit) {
  const auto room = static_cast<uint64_t>(static_cast<double>(limit.bytes) * kMappedFraction);
  IoChoice choice;
  choice.read_ahead = dataset_bytes > room;
  choice.why = "dataset " + FormatBytes(dataset_bytes) + (choice.read_ahead ? " > " : " <= ") +
               std::to_string(static_cast<int>(kMappedFraction * 100)) + "% of the " +
               FormatBytes(limit.bytes) + " the page cache may hold (" + limit.source + ")";
  return choice;
}

PagesChoice ChoosePages(HugePages option, const IoChoice& fit, const std::string& obstacle) {
  if (option != HugePages::kAuto) return {option == HugePages::kOn, "forced"};
  if (fit.read_ahead) return {false, "the dataset may not fit in memory"};
  if (!obstacle.empty()) return {false, obstacle};
  return {true, "the dataset fits in memory"};
}

}  // namespace shardpack::read
