// Arbitrary bytes as manifest.json (ParseManifest, shardpack/manifest.h). A manifest is
// the first thing every reader and `verify` trust, so parsing must never crash (nor
// throw: nlohmann's exceptions would cross the library's boundary), and a manifest that
// parses must be internally consistent and survive a write and a re-read unchanged.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "shardpack/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = shardpack::ParseManifest(text, "manifest.json");
  if (!parsed.ok()) {
    FUZZ_CHECK(!parsed.status().message().empty());
    return 0;
  }
  const shardpack::Manifest& m = *parsed;

  // What ParseManifest promises to have checked.
  FUZZ_CHECK(m.format_major == shardpack::kFormatMajor);
  FUZZ_CHECK(m.image.channels == 1 || m.image.channels == 3);
  FUZZ_CHECK(m.pixel_alignment >= 1 && m.pixel_alignment <= 4096 &&
             (m.pixel_alignment & (m.pixel_alignment - 1)) == 0);
  uint64_t next = 0;
  for (const shardpack::ShardEntry& s : m.shards) {
    FUZZ_CHECK(s.records > 0 && s.first_sample == next);
    FUZZ_CHECK(s.data.file.find('/') == std::string::npos && s.data.file != ".." &&
               !s.data.file.empty());
    FUZZ_CHECK(s.index.has_value() || m.backend == shardpack::Backend::kLmdb);
    next += s.records;
  }
  FUZZ_CHECK(next == m.num_samples);

  // Written back and read again, it is the same manifest.
  const std::string written = shardpack::SerializeManifest(m);
  auto reread = shardpack::ParseManifest(written, "manifest.json");
  FUZZ_CHECK(reread.ok());
  FUZZ_CHECK(shardpack::SerializeManifest(*reread) == written);
  return 0;
}
