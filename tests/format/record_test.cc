#include "format/record.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "util/coding.h"
#include "util/crc32c.h"

namespace shardpack::format {
namespace {

std::string Frame(std::string_view payload) {
  uint8_t header[kRecordHeaderSize], footer[kRecordFooterSize];
  EncodeRecordHeader(payload.size(), header);
  EncodeRecordFooter(crc32c::Value(payload), footer);
  return std::string(reinterpret_cast<char*>(header), sizeof header) + std::string(payload) +
         std::string(reinterpret_cast<char*>(footer), sizeof footer);
}

std::string Hex(std::string_view s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

struct Fault {
  uint64_t record, offset;
  std::string message;
};

std::vector<Fault> ScanFaults(const std::string& file, std::vector<RecordView>* good = nullptr) {
  std::vector<Fault> faults;
  RecordScanner scanner(reinterpret_cast<const uint8_t*>(file.data()), file.size(), {},
                        [&](uint64_t r, uint64_t o, const std::string& m) {
                          faults.push_back({r, o, m});
                        });
  RecordView v;
  while (scanner.Next(&v)) {
    if (good) good->push_back(v);
  }
  return faults;
}

// Vectors from TensorFlow's framing, as computed in shared/reference (section c.1).
TEST(RecordTest, EmptyRecordMatchesTensorFlowBytes) {
  EXPECT_EQ(Hex(Frame("")), "000000000000000029039807d8ea82a2");
}

TEST(RecordTest, SmallExampleRecordMatchesReferenceBytes) {
  std::string payload;
  for (const char* p = "\x0a\x10\x0a\x0e\x0a\x05label\x12\x05\x1a\x03\x0a\x01\x07"; *p; ++p) {
    payload += *p;
  }
  ASSERT_EQ(payload.size(), 18u);
  EXPECT_EQ(Hex(Frame(payload)),
            "1200000000000000241f64250a100a0e0a056c6162656c12051a030a0107368c84b9");
}

// An independent parse of the framing, written from the TFRecord spec.
TEST(RecordTest, FramingParsesIndependently) {
  std::string file = Frame("abc") + Frame(std::string(1000, 'z'));
  size_t pos = 0;
  std::vector<std::string> payloads;
  while (pos < file.size()) {
    const auto* p = reinterpret_cast<const uint8_t*>(file.data() + pos);
    uint64_t len = DecodeFixed64(p);
    uint32_t len_crc = DecodeFixed32(p + 8);
    uint32_t rot = len_crc - 0xa282ead8u;
    EXPECT_EQ((rot >> 17) | (rot << 15), crc32c::Value(p, 8));
    payloads.emplace_back(file.data() + pos + 12, len);
    uint32_t data_crc = DecodeFixed32(p + 12 + len);
    rot = data_crc - 0xa282ead8u;
    EXPECT_EQ((rot >> 17) | (rot << 15), crc32c::Value(p + 12, len));
    pos += 16 + len;
  }
  EXPECT_EQ(payloads, (std::vector<std::string>{"abc", std::string(1000, 'z')}));
}

TEST(RecordTest, CleanFileScansWithoutFaults) {
  std::string file = Frame("one") + Frame("two") + Frame("");
  std::vector<RecordView> good;
  EXPECT_TRUE(ScanFaults(file, &good).empty());
  ASSERT_EQ(good.size(), 3u);
  EXPECT_EQ(good[1].offset, 19u);
  EXPECT_EQ(good[1].index, 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(good[1].payload), good[1].length), "two");
}

TEST(RecordTest, PayloadChecksumMismatchIsReportedAndScanContinues) {
  std::string file = Frame("one") + Frame("two") + Frame("three");
  file[19 + 12] ^= 1;  // first payload byte of record 1
  std::vector<RecordView> good;
  auto faults = ScanFaults(file, &good);
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].record, 1u);
  EXPECT_EQ(faults[0].offset, 19u);
  EXPECT_NE(faults[0].message.find("data checksum"), std::string::npos);
  ASSERT_EQ(good.size(), 2u);
  EXPECT_EQ(good[1].index, 2u);
}

TEST(RecordTest, CorruptLengthResynchronisesAtTheNextRecord) {
  std::string file = Frame("one") + Frame("two") + Frame("three");
  file[19] ^= 0x40;  // length of record 1
  std::vector<RecordView> good;
  auto faults = ScanFaults(file, &good);
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].record, 1u);
  EXPECT_EQ(faults[0].offset, 19u);
  EXPECT_NE(faults[0].message.find("length checksum"), std::string::npos);
  EXPECT_NE(faults[0].message.find("skipped 19 bytes"), std::string::npos) << faults[0].message;
  ASSERT_EQ(good.size(), 2u);
  EXPECT_EQ(good[1].offset, 38u);
  EXPECT_EQ(good[1].index, 2u);
}

TEST(RecordTest, TruncationAtEveryOffsetOfTheLastRecordIsReportedNeverACrash) {
  const std::string full = Frame("first") + Frame("the last record");
  const size_t last = Frame("first").size();
  for (size_t cut = last + 1; cut < full.size(); ++cut) {
    std::vector<RecordView> good;
    auto faults = ScanFaults(full.substr(0, cut), &good);
    ASSERT_EQ(faults.size(), 1u) << "cut at " << cut;
    EXPECT_EQ(faults[0].record, 1u);
    EXPECT_EQ(faults[0].offset, last);
    EXPECT_NE(faults[0].message.find("truncated"), std::string::npos) << faults[0].message;
    EXPECT_EQ(good.size(), 1u);
  }
}

TEST(RecordTest, LengthWithValidChecksumBeyondTheFileIsAnErrorNotAnAllocation) {
  std::string file = Frame("x");
  uint8_t header[kRecordHeaderSize];
  EncodeRecordHeader(1ull << 40, header);  // a terabyte, correctly checksummed
  file += std::string(reinterpret_cast<char*>(header), sizeof header) + "tiny";
  RecordView v;
  Status s = ReadRecordAt(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                          Frame("x").size(), kMaxRecordBytes, true, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("exceeds the limit"), std::string::npos) << s.message();
  s = ReadRecordAt(reinterpret_cast<const uint8_t*>(file.data()), file.size(), Frame("x").size(),
                   UINT64_MAX, true, &v);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("truncated record: length 1099511627776"), std::string::npos)
      << s.message();
  auto faults = ScanFaults(file);
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].record, 1u);
}

// The reader's limit is inclusive (docs/FORMAT.md §1): a record of exactly
// kMaxRecordBytes (the figure the docs state) is read whole, checksum and all; one a
// byte longer is refused before its payload is touched. The payloads are zeros in an
// anonymous mapping: the zero page, not 257 MiB of memory.
TEST(RecordTest, ARecordOfExactlyTheLimitIsReadAndOneByteLongerIsRefused) {
  EXPECT_EQ(kMaxRecordBytes, 269'484'031u);  // 89,478,485 x 3 + 1 MiB
  for (const uint64_t length : {kMaxRecordBytes, kMaxRecordBytes + 1}) {
    const uint64_t size = kRecordHeaderSize + length + kRecordFooterSize;
    void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    ASSERT_NE(map, MAP_FAILED);
    auto* data = static_cast<uint8_t*>(map);
    EncodeRecordHeader(length, data);
    EncodeRecordFooter(crc32c::Value(data + kRecordHeaderSize, length),
                       data + kRecordHeaderSize + length);
    RecordView v;
    const Status s = ReadRecordAt(data, size, 0, kMaxRecordBytes, true, &v);
    if (length == kMaxRecordBytes) {
      EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(v.length, length);
      // verify's walk (a refused header would send it resynchronising through every byte).
      std::vector<std::string> faults;
      uint64_t intact = 0;
      RecordScanner scanner(data, size, {},
                            [&](uint64_t, uint64_t, const std::string& m) { faults.push_back(m); });
      for (RecordView r; scanner.Next(&r);) ++intact;
      EXPECT_EQ(intact, 1u);
      EXPECT_TRUE(faults.empty()) << faults[0];
    } else {
      EXPECT_EQ(s.code(), StatusCode::kCorruption);
      EXPECT_NE(s.message().find("length 269484032 exceeds the limit of 269484031 bytes"),
                std::string::npos)
          << s.message();
    }
    ::munmap(map, size);
  }
}

// docs/FORMAT.md and docs/RELIABILITY.md state the limit the readers enforce (they said
// 269,484,032, one more than the code's).
TEST(RecordTest, TheDocumentedRecordLimitIsTheReadersLimit) {
  std::string figure = std::to_string(kMaxRecordBytes);
  for (size_t i = figure.size(); i > 3; i -= 3) figure.insert(i - 3, ",");
  for (const char* doc : {"/docs/FORMAT.md", "/docs/RELIABILITY.md"}) {
    std::ifstream in(std::string(SHARDPACK_SOURCE_DIR) + doc);
    ASSERT_TRUE(in.good()) << doc;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(figure + " bytes"), std::string::npos) << doc << " does not say " << figure;
    EXPECT_EQ(text.find("269,484,032 bytes"), std::string::npos) << doc;
  }
}

// Found by tests/fuzz/record_fuzzer: with no limit, `length + 4` wrapped past 2^64 and the
// record "fitted", its checksum read from far outside the buffer.
TEST(RecordTest, LengthNearTwoToThe64WithNoLimitIsTruncationNotAWrap) {
  for (uint64_t length : {UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - 3}) {
    uint8_t header[kRecordHeaderSize];
    EncodeRecordHeader(length, header);
    const std::string file = std::string(reinterpret_cast<char*>(header), sizeof header) + "tail";
    RecordView v;
    Status s = ReadRecordAt(reinterpret_cast<const uint8_t*>(file.data()), file.size(), 0,
                            UINT64_MAX, /*check_payload_crc=*/false, &v);
    ASSERT_FALSE(s.ok()) << length;
    EXPECT_EQ(s.code(), StatusCode::kCorruption);
    EXPECT_NE(s.message().find("truncated record: length " + std::to_string(length)),
              std::string::npos)
        << s.message();
  }
}

TEST(RecordTest, GarbageFileReportsOnceAndNeverLoops) {
  std::string file(5000, '\x5a');
  auto faults = ScanFaults(file);
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_NE(faults[0].message.find("unreadable"), std::string::npos) << faults[0].message;
}

}  // namespace
}  // namespace shardpack::format
