#include "read/io_choice.h"

#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace shardpack::read {
namespace {

// The first line of a file, or "" when it cannot be read.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A decimal byte count; false for "max" and anything else.
bool ParseBytes(std::string_view text, uint64_t* out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
}

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

std::string HostReclaimsFreeMemory(const std::string& root) {
  constexpr std::string_view kBalloon = "0x0005";  // virtio device id of a memory balloon
  constexpr size_t kReportingBit = 5;              // VIRTIO_BALLOON_F_REPORTING
  std::error_code ec;
  std::filesystem::directory_iterator devices(root + "/sys/bus/virtio/devices", ec);
  bool reporting = false;
  for (; !ec && devices != std::filesystem::directory_iterator(); devices.increment(ec)) {
    const std::string dir = devices->path().string();
    // "features" is one character per feature bit, '0' or '1', bit 0 first.
    const std::string features = FirstLine(dir + "/features");
    if (FirstLine(dir + "/device") == kBalloon && features.size() > kReportingBit &&
        features[kReportingBit] == '1') {
      reporting = true;
      break;
    }
  }
  if (!reporting) return "";
  // Free blocks of page_reporting_order and above are reported (absent: the kernel's
  // default, the huge-page order). A free 2 MiB block merges with its free neighbours into
  // larger ones, so any order up to the largest block the kernel keeps (/proc/buddyinfo's
  // last column; 10 where it cannot be told) reports it too. Only an order above that
  // (page_reporting_order 11 on x86) reports nothing.
  int max_order = 10;
  {
    std::istringstream zone(FirstLine(root + "/proc/buddyinfo"));  // "Node 0, zone DMA 0 0 ..."
    std::string word;
    int columns = 0;
    for (int field = 0; zone >> word; ++field) columns += field >= 4 ? 1 : 0;
    if (columns > 0) max_order = columns - 1;
  }
  uint64_t order = 0;
  const bool known = ParseBytes(
      FirstLine(root + "/sys/module/page_reporting/parameters/page_reporting_order"), &order);
  if (known && order > static_cast<uint64_t>(max_order)) return "";
  return std::string("free memory is reported to the host: virtio balloon free page reporting") +
         (known ? ", page_reporting_order " + std::to_string(order) : "");
}

}  // namespace shardpack::read
