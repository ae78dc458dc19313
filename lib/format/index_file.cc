#include "format/index_file.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "format/format.h"

namespace shardpack::format {

void AppendIndexLine(std::string* out, const IndexEntry& e) {
  char buf[48];  // two 20-digit numbers, a space and a newline
  int n = std::snprintf(buf, sizeof buf, "%llu %llu\n", static_cast<unsigned long long>(e.offset),
                        static_cast<unsigned long long>(e.size));
  out->append(buf, static_cast<size_t>(n));
}

StatusOr<std::vector<IndexEntry>> ParseIndex(std::string_view text, uint64_t max_entries) {
  // The shortest valid line, "0 16" and its newline: no more entries than this fit.
  constexpr uint64_t kShortestLine = 5;
  const uint64_t lines = static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  std::vector<IndexEntry> entries;
  entries.reserve(static_cast<size_t>(
      std::min({lines, (static_cast<uint64_t>(text.size()) + 1) / kShortestLine, max_entries})));
  uint64_t line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line;
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view l = text.substr(pos, eol - pos);
    pos = eol + 1;
    auto bad = [&](const std::string& what) {
      return CorruptionError("line " + std::to_string(line) + ": " + what);
    };
    const char* p = l.data();
    const char* end = l.data() + l.size();
    auto skip_space = [&] {
      while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) ++p;
    };
    skip_space();
    if (p == end) {
      if (pos >= text.size()) break;  // tolerate a blank last line only
      return bad("empty line");
    }
    IndexEntry e;
    auto r1 = std::from_chars(p, end, e.offset);
    if (r1.ec != std::errc()) return bad("expected two decimal numbers \"offset size\"");
    p = r1.ptr;
    skip_space();
    auto r2 = std::from_chars(p, end, e.size);
    if (r2.ec != std::errc()) return bad("expected two decimal numbers \"offset size\"");
    p = r2.ptr;
    skip_space();
    if (p != end) return bad("unexpected text after \"offset size\"");
    if (e.size < kRecordOverhead) {
      return bad("record size " + std::to_string(e.size) + " is less than a record's " +
                 std::to_string(kRecordOverhead) + " bytes of framing");
    }
    if (entries.size() == max_entries) {
      return bad("more than the " + std::to_string(max_entries) + " records of the shard");
    }
    if (!entries.empty()) {
      const IndexEntry& prev = entries.back();
      // Not `e.offset < prev.offset + prev.size`: near 2^64 the sum wraps.
      if (e.offset < prev.offset || e.offset - prev.offset < prev.size) {
        return bad("offset " + std::to_string(e.offset) + " overlaps the previous record (" +
                   std::to_string(prev.offset) + " + " + std::to_string(prev.size) + ")");
      }
    }
    entries.push_back(e);
  }
  return entries;
}

}  // namespace shardpack::format
