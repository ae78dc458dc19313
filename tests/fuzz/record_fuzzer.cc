// Arbitrary bytes as a TFRecord shard (lib/format/record.h): the scanner that `verify`
// walks every shard with, and the random-access read the Dataset does at each index
// offset. Neither may read outside the buffer, loop, or return a record that is not
// intact; every fault is reported at an offset inside the file. Run with three length
// limits: the default, a tiny one, and none at all (UINT64_MAX), so that no arithmetic
// on a hostile 64-bit length can wrap.
//
// Random bytes almost never carry a valid length checksum, which would leave everything
// behind it unexplored; so when the first byte is odd, the rest of the input is first
// made into a shard whose checksums hold (each header's length checksum, and each payload
// checksum where the record fits), and the fuzzer mutates lengths and payloads freely.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "format/example.h"
#include "format/format.h"
#include "format/record.h"
#include "fuzz_check.h"
#include "util/coding.h"
#include "util/crc32c.h"

namespace {

using shardpack::format::kRecordOverhead;
using shardpack::format::RecordView;

// An intact record lies inside [data, data + size) and its payload checksum holds.
void CheckIntact(const uint8_t* data, uint64_t size, uint64_t max_length, const RecordView& r) {
  FUZZ_CHECK(r.offset <= size && size - r.offset >= kRecordOverhead);
  FUZZ_CHECK(r.length <= max_length && r.length <= size - r.offset - kRecordOverhead);
  FUZZ_CHECK(r.payload == data + r.offset + shardpack::format::kRecordHeaderSize);
  FUZZ_CHECK(shardpack::crc32c::Value(r.payload, r.length) == r.stored_crc);
}

void Scan(const uint8_t* data, uint64_t size, uint64_t max_length) {
  shardpack::format::RecordScanner::Options options;
  options.max_length = max_length;
  uint64_t faults = 0;
  uint64_t last_fault = 0;
  shardpack::format::RecordScanner scanner(
      data, size, options, [&](uint64_t, uint64_t offset, const std::string& message) {
        FUZZ_CHECK(offset <= size);
        FUZZ_CHECK(faults == 0 || offset > last_fault);
        FUZZ_CHECK(!message.empty());
        last_fault = offset;
        ++faults;
      });
  uint64_t records = 0;
  uint64_t end = 0;  // where the previous intact record ended
  RecordView r;
  while (scanner.Next(&r)) {
    CheckIntact(data, size, max_length, r);
    FUZZ_CHECK(r.offset >= end);
    end = r.offset + r.framed_size();
    FUZZ_CHECK(r.index == records + faults);
    ++records;
    // The payload of an intact record is what the loader parses next.
    shardpack::format::DecodedSample sample;
    if (shardpack::format::ParseSample(r.payload, r.length, &sample).ok()) {
      FUZZ_CHECK(sample.pixels >= r.payload &&
                 sample.pixel_bytes <= static_cast<uint64_t>(r.payload + r.length - sample.pixels));
    }
  }
  FUZZ_CHECK(scanner.records_seen() == records + faults);
  FUZZ_CHECK(!scanner.Next(&r));  // the end stays the end
}

// Rewrites the checksums of bytes taken as records back to back, until a length that
// does not fit in the rest.
void FixChecksums(std::vector<uint8_t>* shard) {
  uint8_t* d = shard->data();
  const uint64_t size = shard->size();
  for (uint64_t p = 0; size - p >= shardpack::format::kRecordHeaderSize;) {
    shardpack::EncodeFixed32(d + p + 8,
                             shardpack::crc32c::Mask(shardpack::crc32c::Value(d + p, 8)));
    const uint64_t length = shardpack::DecodeFixed64(d + p);
    if (length > size - p - shardpack::format::kRecordHeaderSize ||
        size - p - shardpack::format::kRecordHeaderSize - length < 4) {
      break;
    }
    uint8_t* payload = d + p + shardpack::format::kRecordHeaderSize;
    shardpack::EncodeFixed32(payload + length,
                             shardpack::crc32c::Mask(shardpack::crc32c::Value(payload, length)));
    p += length + kRecordOverhead;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* input, size_t input_size) {
  // A copy of exactly the input's size, so that ASan sees any read past its end.
  std::vector<uint8_t> shard(input, input + input_size);
  if (input_size > 0 && (input[0] & 1) != 0) {
    shard.erase(shard.begin());
    FixChecksums(&shard);
  }
  const uint8_t* data = shard.data();
  const size_t size = shard.size();
  for (uint64_t max_length : {shardpack::kMaxRecordBytes, uint64_t{64}, UINT64_MAX}) {
    Scan(data, size, max_length);
    // Random access, as Dataset::Get does at an offset from the index file; the offsets
    // past the end are refused as well.
    for (uint64_t offset = 0; offset <= size + 1 && offset < 64; ++offset) {
      for (bool check_crc : {false, true}) {
        RecordView r;
        if (shardpack::format::ReadRecordAt(data, size, offset, max_length, check_crc, &r).ok()) {
          FUZZ_CHECK(r.offset == offset);
          FUZZ_CHECK(r.length <= max_length && offset <= size && size - offset >= kRecordOverhead &&
                     r.length <= size - offset - kRecordOverhead);
          if (check_crc) CheckIntact(data, size, max_length, r);
        }
      }
    }
  }
  return 0;
}
