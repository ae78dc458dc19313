// TFRecord framing: u64 length | u32 masked_crc32c(length) | payload | u32
// masked_crc32c(payload), little-endian, records back to back (docs/FORMAT.md §1).
#ifndef SHARDPACK_FORMAT_RECORD_H_
#define SHARDPACK_FORMAT_RECORD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "format/format.h"
#include "shardpack/status.h"

namespace shardpack::format {

void EncodeRecordHeader(uint64_t payload_length, uint8_t out[kRecordHeaderSize]);
void EncodeRecordFooter(uint32_t payload_crc, uint8_t out[kRecordFooterSize]);

struct RecordView {
  uint64_t index = 0;   // ordinal of the record in its file
  uint64_t offset = 0;  // file offset of the length field
  uint64_t length = 0;  // payload bytes
  const uint8_t* payload = nullptr;
  uint32_t stored_crc = 0;  // payload CRC as stored (unmasked)
  uint64_t framed_size() const { return length + kRecordOverhead; }
};

// Reads the record whose length field is at `offset` of the buffer [data, data+size):
// checks that the header fits, the length checksum, `max_length`, that the payload fits
// and, when `check_payload_crc`, the payload checksum. Never reads outside the buffer.
// Errors are Corruption, "<what>, expected vs actual"; the caller adds file and offset.
Status ReadRecordAt(const uint8_t* data, uint64_t size, uint64_t offset, uint64_t max_length,
                    bool check_payload_crc, RecordView* out);

// Checks a record's payload checksum; `actual_crc` is crc32c of the payload.
Status CheckPayloadCrc(const RecordView& r, uint32_t actual_crc);

// Walks every record of a file from offset 0. A fault (bad length checksum, a length
// beyond the limit or the file, a bad payload checksum, a truncated tail) is reported
// and the scan goes on: after a bad header it resynchronises at the next offset that
// holds a valid header, and says how many bytes it skipped. It never stops early, never
// loops and never allocates per record (leveldb's log::Reader with a Reporter).
class RecordScanner {
 public:
  struct Options {
    uint64_t max_length = kMaxRecordBytes;
    bool check_payload_crc = true;  // off: the caller checks (verify combines CRCs)
  };
  // `record` is the ordinal the faulty record would have; `offset` where it starts.
  using Reporter =
      std::function<void(uint64_t record, uint64_t offset, const std::string& message)>;

  RecordScanner(const uint8_t* data, uint64_t size, Options options, Reporter reporter);

  // Fills `out` with the next intact record; false at the end of the file.
  bool Next(RecordView* out);

  // Records returned or reported so far.
  uint64_t records_seen() const { return next_index_; }

 private:
  // The first offset at or after `from` holding a header with a valid length checksum
  // whose payload fits in the file, or `size_` when there is none.
  uint64_t Resync(uint64_t from) const;
  void Fault(uint64_t offset, std::string message, bool resync);

  const uint8_t* data_;
  uint64_t size_;
  Options options_;
  Reporter reporter_;
  uint64_t pos_ = 0;
  uint64_t next_index_ = 0;
};

// "0x1f2e3d4c"
std::string Hex32(uint32_t v);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_RECORD_H_
