#include "read/io_choice.h"

#include <cstdio>

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

}  // namespace

CacheLimit PageCacheLimit(const std::string& root) { return io::AvailableMemory(root); }

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
