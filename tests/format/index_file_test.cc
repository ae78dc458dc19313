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
  auto parsed = ParseIndex("0\t20\r\n20   16\n");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->size(), 2u);
}

TEST(IndexFileTest, BadLinesAreNamedByNumber) {
  auto r = ParseIndex("0 20\n20 x\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos);
  r = ParseIndex("0 20\n5 20\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2: offset 5 overlaps"), std::string::npos)
      << r.status().message();
  r = ParseIndex("0 20 7\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 1"), std::string::npos);
}

// Found by tests/fuzz/index_fuzzer: the overlap check added offset and size, which wraps
// past 2^64, so a record at 2^64 - 1 let the next line go back to offset 0.
TEST(IndexFileTest, OffsetsGoingBackAfterAnEntryThatEndsPastTwoToThe64AreRefused) {
  auto r = ParseIndex("18446744073709551615 16\n0 16\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("line 2: offset 0 overlaps"), std::string::npos)
      << r.status().message();
}

// A line names a whole framed record (length, its checksum, payload, checksum): 16 bytes
// at least. "0 0" lines would let 4 bytes of index claim a record each.
TEST(IndexFileTest, RecordsSmallerThanTheirFramingAreRefused) {
  auto r = ParseIndex("0 16\n16 15\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(),
            "line 2: record size 15 is less than a record's 16 bytes of framing");
  r = ParseIndex("0 0\n0 0\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 1: record size 0"), std::string::npos)
      << r.status().message();
}

// The shard's record count bounds the entries: the parse stops at the first line past it
// instead of reading (and holding) the rest of the file.
TEST(IndexFileTest, MoreEntriesThanTheShardsRecordsAreRefusedAtTheFirstLinePastThem) {
  std::string text;
  for (uint64_t i = 0; i < 5; ++i) AppendIndexLine(&text, {i * 100, 100});
  auto r = ParseIndex(text, 3);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(), "line 4: more than the 3 records of the shard");
  auto exact = ParseIndex(text, 5);
  ASSERT_TRUE(exact.ok()) << exact.status().ToString();
  EXPECT_EQ(exact->size(), 5u);
  // Room for exactly the entries: nothing grew past the one allocation.
  EXPECT_EQ(exact->capacity(), 5u);
}

}  // namespace
}  // namespace shardpack::format
