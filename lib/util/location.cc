#include "util/location.h"

namespace shardpack {

std::string RecordLocation::ToString() const {
  std::string s(file);
  if (record >= 0) {
    s += ": record " + std::to_string(record);
    if (offset >= 0) s += " at offset " + std::to_string(offset);
  } else if (offset >= 0) {
    s += ": offset " + std::to_string(offset);
  }
  return s;
}

}  // namespace shardpack
