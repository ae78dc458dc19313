// The index sidecar of a TFRecord shard, in DALI's tfrecord2idx format: one ASCII line
// per record, "<offset> <size>\n", offset of the record's length field and size of the
// whole framed record, both decimal (docs/FORMAT.md §3).
#ifndef SHARDPACK_FORMAT_INDEX_FILE_H_
#define SHARDPACK_FORMAT_INDEX_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/status.h"

namespace shardpack::format {

struct IndexEntry {
  uint64_t offset = 0;
  uint64_t size = 0;
  bool operator==(const IndexEntry&) const = default;
};

void AppendIndexLine(std::string* out, const IndexEntry& e);

// Parses an index. Corruption names the 1-based line: "line 7: expected two decimal
// numbers". Entries must be increasing and must not overlap, and each is a whole framed
// record, at least kRecordOverhead (16) bytes. More than `max_entries` entries (the
// shard's record count in the manifest) is Corruption at the first line past it.
//
// Memory: the entries alone, allocated once, before the first line is read, for
// min(max_entries, lines) entries, where lines <= (text.size() + 1) / 5 (the shortest
// line of a valid entry is "0 16"): at most 16 x (bytes + 1) / 5 = 3.2 bytes per byte of
// text, with no growth (tests/format/parser_memory_test.cc); the caller holds `text`.
StatusOr<std::vector<IndexEntry>> ParseIndex(std::string_view text,
                                             uint64_t max_entries = UINT64_MAX);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_INDEX_FILE_H_
