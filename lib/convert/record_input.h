// Decoding one TFRecord input of a conversion (InputFile with record >= 0): the record is
// read again from its file and checked (framing, both checksums), then its Example gives
// the image: image/encoded is decoded like an image file (by content, whatever
// image/format says), image/raw is taken as pixels (their image/raw/crc32c checked when
// present) and converted to the requested channels.
#ifndef SHARDPACK_CONVERT_RECORD_INPUT_H_
#define SHARDPACK_CONVERT_RECORD_INPUT_H_

#include <cstdint>
#include <string>

#include "convert/input_scan.h"
#include "image/image.h"
#include "shardpack/status.h"

namespace shardpack::convert {

struct RecordImage {
  image::Image image;
  std::string filename;   // the record's image/filename; empty when it has none
  uint64_t bytes_in = 0;  // the framed record's size
};

// Errors, which reject the input: ResourceExhausted when the record's payload is larger
// than `max_payload_bytes` (checked before reading it); I/O errors; Corruption when the
// record no longer reads back intact or its Example breaks the schema; and the decoder's
// errors for image/encoded (image/image.h). The image is oriented, DCT-scaled and
// limited as `decode` says; raw pixels are returned at their stored size.
StatusOr<RecordImage> DecodeRecordInput(const InputFile& input, uint64_t max_payload_bytes,
                                        const image::DecodeOptions& decode);

}  // namespace shardpack::convert

#endif  // SHARDPACK_CONVERT_RECORD_INPUT_H_
