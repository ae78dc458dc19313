#include "format/index_file.h"

#include <gtest/gtest.h>

namespace shardpack::format {
namespace {

TEST(IndexFileTest, LinesRoundTripInDaliFormat) {
  std::string text;
  AppendIndexLine(&text, {0, 123});
  AppendIndexLine(&text, {123, 4567890123ull});
  EXPECT_EQ(text, "0 123\n123 4567890123\n");
  auto parsed = ParseIndex(text);
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, (std::vector<IndexEntry>{{0, 123}, {123, 4567890123ull}}));
}

TEST(IndexFileTest, AnyWhitespaceIsAcceptedAsDaliDoes) {
  auto parsed = ParseIndex("0\t10\r\n10   5\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->size(), 2u);
}

TEST(IndexFileTest, BadLinesAreNamedByNumber) {
  auto r = ParseIndex("0 10\n10 x\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos);
  r = ParseIndex("0 10\n5 10\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2: offset 5 overlaps"), std::string::npos)
      << r.status().message();
  r = ParseIndex("0 10 7\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 1"), std::string::npos);
}

// Found by tests/fuzz/index_fuzzer: the overlap check added offset and size, which wraps
// past 2^64, so a record at 2^64 - 1 let the next line go back to offset 0.
TEST(IndexFileTest, OffsetsGoingBackAfterAnEntryThatEndsPastTwoToThe64AreRefused) {
  auto r = ParseIndex("18446744073709551615 1\n0 4\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("line 2: offset 0 overlaps"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace shardpack::format
