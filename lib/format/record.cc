#include "format/record.h"

#include <cstdio>

#include "util/coding.h"
#include "util/crc32c.h"

namespace shardpack::format {

std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

void EncodeRecordHeader(uint64_t payload_length, uint8_t out[kRecordHeaderSize]) {
  EncodeFixed64(out, payload_length);
  EncodeFixed32(out + 8, crc32c::Mask(crc32c::Value(out, 8)));
}

void EncodeRecordFooter(uint32_t payload_crc, uint8_t out[kRecordFooterSize]) {
  EncodeFixed32(out, crc32c::Mask(payload_crc));
}

namespace {
bool HeaderValid(const uint8_t* h) {
  return crc32c::Value(h, 8) == crc32c::Unmask(DecodeFixed32(h + 8));
}
}  // namespace

Status ReadRecordAt(const uint8_t* data, uint64_t size, uint64_t offset, uint64_t max_length,
                    bool check_payload_crc, RecordView* out) {
  if (offset > size || size - offset < kRecordHeaderSize) {
    return CorruptionError(
        "truncated record header: " + std::to_string(offset > size ? 0 : size - offset) +
        " bytes remain, 12 needed");
  }
  const uint8_t* h = data + offset;
  uint64_t length = DecodeFixed64(h);
  uint32_t actual = crc32c::Value(h, 8);
  uint32_t expected = crc32c::Unmask(DecodeFixed32(h + 8));
  if (actual != expected) {
    return CorruptionError("length checksum " + Hex32(actual) + ", expected " + Hex32(expected));
  }
  if (length > max_length) {
    return CorruptionError("length " + std::to_string(length) + " exceeds the limit of " +
                           std::to_string(max_length) + " bytes");
  }
  uint64_t remaining = size - offset - kRecordHeaderSize;
  // Not `length + 4 > remaining`: with no limit (max_length = UINT64_MAX) that wraps.
  if (length > remaining || remaining - length < kRecordFooterSize) {
    return CorruptionError("truncated record: length " + std::to_string(length) + " needs " +
                           std::to_string(length + kRecordFooterSize) +
                           " more bytes, the file has " + std::to_string(remaining));
  }
  out->offset = offset;
  out->length = length;
  out->payload = h + kRecordHeaderSize;
  out->stored_crc = crc32c::Unmask(DecodeFixed32(out->payload + length));
  if (check_payload_crc) {
    return CheckPayloadCrc(*out, crc32c::Value(out->payload, length));
  }
  return Status::Ok();
}

Status CheckPayloadCrc(const RecordView& r, uint32_t actual_crc) {
  if (actual_crc != r.stored_crc) {
    return CorruptionError("data checksum " + Hex32(actual_crc) + ", expected " +
                           Hex32(r.stored_crc));
  }
  return Status::Ok();
}

RecordScanner::RecordScanner(const uint8_t* data, uint64_t size, Options options, Reporter reporter)
    : data_(data), size_(size), options_(options), reporter_(std::move(reporter)) {}

uint64_t RecordScanner::Resync(uint64_t from) const {
  for (uint64_t p = from; p + kRecordOverhead <= size_; ++p) {
    const uint8_t* h = data_ + p;
    if (!HeaderValid(h)) continue;
    uint64_t length = DecodeFixed64(h);
    if (length <= options_.max_length && length <= size_ - p - kRecordOverhead) return p;
  }
  return size_;
}

void RecordScanner::Fault(uint64_t offset, std::string message, bool resync) {
  if (resync) {
    uint64_t next = Resync(offset + 1);
    if (next < size_) {
      message += "; skipped " + std::to_string(next - offset) +
                 " bytes to the next valid record header at offset " + std::to_string(next);
    } else if (offset < size_) {
      message += "; no valid record header follows: the last " + std::to_string(size_ - offset) +
                 " bytes of the file are unreadable";
    }
    pos_ = next;
  }
  if (reporter_) reporter_(next_index_, offset, message);
  ++next_index_;
}

bool RecordScanner::Next(RecordView* out) {
  while (pos_ < size_) {
    uint64_t offset = pos_;
    RecordView r;
    Status s = ReadRecordAt(data_, size_, offset, options_.max_length,
                            /*check_payload_crc=*/false, &r);
    if (!s.ok()) {
      Fault(offset, s.message(), /*resync=*/true);
      continue;
    }
    pos_ = offset + r.framed_size();
    r.index = next_index_;
    if (options_.check_payload_crc) {
      s = CheckPayloadCrc(r, crc32c::Value(r.payload, r.length));
      if (!s.ok()) {
        // The length was checksummed, so the next record starts where it says.
        Fault(offset, s.message(), /*resync=*/false);
        continue;
      }
    }
    ++next_index_;
    *out = r;
    return true;
  }
  return false;
}

}  // namespace shardpack::format
