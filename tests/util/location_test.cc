#include "util/location.h"

#include <gtest/gtest.h>

namespace shardpack {
namespace {

TEST(RecordLocationTest, NamesThePartsThatAreKnown) {
  EXPECT_EQ((RecordLocation{"shard-00003-of-00016.tfrecord", 1207, 88123456}.ToString()),
            "shard-00003-of-00016.tfrecord: record 1207 at offset 88123456");
  EXPECT_EQ((RecordLocation{"shard-00000-of-00001.lmdb", 7}.ToString()),
            "shard-00000-of-00001.lmdb: record 7");
  EXPECT_EQ((RecordLocation{"x.idx", -1, 4096}.ToString()), "x.idx: offset 4096");
  EXPECT_EQ((RecordLocation{"manifest.json"}.ToString()), "manifest.json");
  EXPECT_EQ((RecordLocation{"a", 0, 0}.ToString()), "a: record 0 at offset 0");
}

}  // namespace
}  // namespace shardpack
