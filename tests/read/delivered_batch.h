// A batch the loader delivered, copied out, for tests that compare what two loaders (or two
// I/O paths) deliver.
#ifndef SHARDPACK_TESTS_READ_DELIVERED_BATCH_H_
#define SHARDPACK_TESTS_READ_DELIVERED_BATCH_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "shardpack/loader.h"

namespace shardpack::testing {

struct Got {
  uint64_t epoch, index;
  int size, valid;
  std::vector<uint64_t> indices;
  std::vector<int64_t> labels;
  std::string bytes;
  bool operator==(const Got&) const = default;
};

inline Got Copy(const Batch& b) {
  return {b.epoch(),
          b.index(),
          b.size(),
          b.valid(),
          {b.indices().begin(), b.indices().end()},
          {b.labels().begin(), b.labels().end()},
          std::string(static_cast<const char*>(b.host_data()), b.host_bytes())};
}

// The batches `loader` delivers until its epoch ends (at most `max_batches`), copied; an
// error other than the epoch's end fails the test.
inline std::vector<Got> ReadRest(Loader& loader, size_t max_batches = SIZE_MAX) {
  std::vector<Got> out;
  while (out.size() < max_batches) {
    auto b = loader.Next();
    if (!b.ok()) {
      EXPECT_EQ(b.status().code(), StatusCode::kOutOfRange) << b.status().ToString();
      break;
    }
    out.push_back(Copy(*b));
  }
  return out;
}

}  // namespace shardpack::testing

#endif  // SHARDPACK_TESTS_READ_DELIVERED_BATCH_H_
