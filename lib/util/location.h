// Where a fault is, as every message names it: "<file>: record N at offset X", or the
// parts of that which are known ("<file>: record N", "<file>: offset X", "<file>").
//
//   return CorruptionError(RecordLocation{name, 7, 1234}.ToString() + ": data checksum ...");
#ifndef SHARDPACK_UTIL_LOCATION_H_
#define SHARDPACK_UTIL_LOCATION_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace shardpack {

struct RecordLocation {
  std::string_view file;
  int64_t record = -1;  // ordinal within the file; -1: not about one record
  int64_t offset = -1;  // byte offset in the file; -1: unknown or not applicable

  std::string ToString() const;
};

}  // namespace shardpack

#endif  // SHARDPACK_UTIL_LOCATION_H_
