// Arbitrary bytes as an LMDB data file (format::LmdbFile, lib/format/lmdb_file.h): the
// reader every Dataset, Loader and verify uses for LMDB shards instead of liblmdb. Opening,
// looking up and walking never crash and never read outside the bytes (the input is a heap
// block of exactly its size, so AddressSanitizer sees any read past it). What a walk
// accepts is in strictly increasing key order, and a lookup of every key it walked finds
// the same value at the same place: the readers (Find) read what verify (the walk) proved.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "format/format.h"
#include "format/lmdb_file.h"
#include "fuzz_check.h"

using shardpack::Status;
using shardpack::StatusCode;
using shardpack::format::LmdbFile;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A copy of exactly `size` bytes: reads past it are heap overflows.
  std::vector<uint8_t> bytes(data, data + size);
  const uint8_t* begin = bytes.data();
  auto inside = [&](std::string_view v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    FUZZ_CHECK(v.empty() || (p >= begin && v.size() <= size &&
                             static_cast<size_t>(p - begin) <= size - v.size()));
  };
  auto file = LmdbFile::Open(begin, size);
  if (!file.ok()) {
    FUZZ_CHECK(!file.status().message().empty());
    return 0;
  }
  std::string_view first;
  if (file->First(&first).ok()) inside(first);
  for (uint64_t i = 0; i < 3; ++i) {
    std::string_view value;
    Status s = file->Find(shardpack::format::LmdbKey(i), &value);
    if (s.ok()) inside(value);
    FUZZ_CHECK(s.ok() || !s.message().empty());
  }
  for (bool audit : {false, true}) {
    std::vector<std::pair<std::string_view, std::string_view>> walked;
    shardpack::format::LmdbTreeCounts counts;
    Status s = file->ForEach(
        [&](std::string_view k, std::string_view v) {
          inside(k);
          inside(v);
          FUZZ_CHECK(walked.empty() || walked.back().first.compare(k) < 0);
          walked.emplace_back(k, v);
          return Status::Ok();
        },
        audit, &counts);
    FUZZ_CHECK(s.ok() || !s.message().empty());
    FUZZ_CHECK(counts.entries == walked.size());
    if (!s.ok()) continue;
    for (const auto& [k, v] : walked) {
      std::string_view found;
      Status f = file->Find(k, &found);
      FUZZ_CHECK(f.ok());
      FUZZ_CHECK(found.data() == v.data() && found.size() == v.size());
    }
    if (!walked.empty()) {
      std::string_view smallest;
      FUZZ_CHECK(file->First(&smallest).ok() && smallest == walked.front().first);
    }
  }
  return 0;
}
