#include "io/memory_budget.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "io/system_files.h"

namespace shardpack::io {
namespace {

// Lowers `limit` to the smallest limit file found in `cgroup` and the cgroups above it, up
// to `mount` (the hierarchy's root). A limit at or above the physical memory is none: v1
// writes "no limit" as a huge number.
void LowerToCgroup(const std::string& mount, std::string cgroup, const std::string& file,
                   uint64_t physical, MemoryLimit* limit) {
  for (;;) {
    uint64_t bytes = 0;
    if (ParseBytes(FirstLine(mount + cgroup + "/" + file), &bytes) && bytes < physical &&
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

MemoryLimit AvailableMemory(const std::string& root) {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  const uint64_t physical =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : ~0ull;
  MemoryLimit limit{physical, "physical memory"};
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

MemoryLimit MemoryBudget(const std::string& root) {
  MemoryLimit limit = AvailableMemory(root);
  limit.bytes = limit.bytes / kBudgetDenominator * kBudgetNumerator;
  limit.source = std::to_string(kBudgetNumerator) + "/" + std::to_string(kBudgetDenominator) +
                 " of " + limit.source;
  return limit;
}

Status CheckMemory(uint64_t needed, const MemoryLimit& budget, const std::string& what,
                   const std::string& how, const std::string& advice) {
  if (needed <= budget.bytes) return Status::Ok();
  return ResourceExhaustedError(what + " needs " + std::to_string(needed) + " bytes (" + how +
                                ") but only " + std::to_string(budget.bytes) +
                                " bytes are available (" + budget.source + "); " + advice);
}

}  // namespace shardpack::io
