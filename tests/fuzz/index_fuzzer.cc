// Arbitrary bytes as a shard's .idx file (ParseIndex, lib/format/index_file.h, DALI's
// tfrecord2idx text). Parsing never crashes; what it accepts is a list of records in
// increasing order that do not overlap (the readers rely on it), and writing the entries
// back gives text that parses to the same entries.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "format/index_file.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = shardpack::format::ParseIndex(text);
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().message().rfind("line ", 0) == 0);
    return 0;
  }
  const auto& entries = *parsed;
  for (size_t i = 1; i < entries.size(); ++i) {
    const auto& prev = entries[i - 1];
    // Without overflow: entries[i] starts at or after the end of prev.
    FUZZ_CHECK(entries[i].offset >= prev.offset && entries[i].offset - prev.offset >= prev.size);
  }
  std::string written;
  for (const auto& e : entries) shardpack::format::AppendIndexLine(&written, e);
  auto reread = shardpack::format::ParseIndex(written);
  FUZZ_CHECK(reread.ok() && *reread == entries);
  return 0;
}
