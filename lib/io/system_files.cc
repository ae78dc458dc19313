#include "io/system_files.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace shardpack::io {

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool ParseBytes(std::string_view text, uint64_t* out) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
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

}  // namespace shardpack::io
