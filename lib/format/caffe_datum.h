// Caffe's `Datum` message, the value of a Caffe-style LMDB record (docs/FORMAT.md §4.1),
// as Caffe's tools/convert_imageset writes it for raw images, and with --encoded:
//
//   message Datum {                 // caffe/src/caffe/proto/caffe.proto (proto2)
//     optional int32 channels = 1;  optional int32 height = 2;  optional int32 width = 3;
//     optional bytes data = 4;      // uint8 pixels, CHW, channels in BGR order
//     optional int32 label = 5;
//     repeated float float_data = 6;
//     optional bool encoded = 7 [default = false];
//   }
//
// and its key, "%08d_<path>": the record's number, zero-padded to 8 digits, an underscore
// and the image's path (caffe::format_int(line_id, 8) + "_" + path).
#ifndef SHARDPACK_FORMAT_CAFFE_DATUM_H_
#define SHARDPACK_FORMAT_CAFFE_DATUM_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "shardpack/manifest.h"
#include "shardpack/status.h"

namespace shardpack::format {

// LMDB's default largest key (MDB_MAXKEYSIZE); CaffeKey never returns a longer one.
inline constexpr size_t kLmdbMaxKeySize = 511;
// The number in a key has 8 digits while it is below this; above, keys would no longer
// sort in record order, so writers refuse more records.
inline constexpr uint64_t kCaffeMaxRecords = 100000000;

// "%08d_<path>", with `path` cut (at a byte) so that the key fits kLmdbMaxKeySize. The
// number alone orders and identifies records; the path is for people.
std::string CaffeKey(uint64_t index, std::string_view path);

// The Datum of an image given as HWC uint8 pixels (channels 1 = gray or 3 = RGB): the
// fields channels, height, width, data (CHW; for 3 channels in BGR order, as OpenCV
// gives it to Caffe), label and encoded = false, in field-number order, as Caffe's
// CVMatToDatum fills them. `label` must be in 0..2^31-1 (Caffe's int32).
std::string EncodeCaffeDatum(const uint8_t* hwc, int height, int width, int channels,
                             int64_t label);

// The Datum of an encoded image (`file`: the JPEG or PNG file's bytes), as
// convert_imageset --encoded writes it (caffe::ReadImageToDatum): data, label and
// encoded = true, in field-number order, and no channels, height or width (Caffe learns
// them by decoding). `label` as in EncodeCaffeDatum.
std::string EncodeCaffeEncodedDatum(std::span<const uint8_t> file, int64_t label);

// A Datum as parsed: pointers into the value. A field that is absent keeps its proto2
// default (0, empty, false); `has_*` says whether it was present.
struct CaffeDatumView {
  int64_t channels = 0, height = 0, width = 0, label = 0;
  bool has_channels = false, has_height = false, has_width = false, has_label = false;
  std::string_view data;
  bool has_data = false;
  bool encoded = false;
  uint64_t float_data = 0;  // number of float_data values
};

// Parses a serialized Datum with protobuf's rules (any field order, unknown fields
// skipped, a repeated scalar field's last value wins). Corruption ("value is not a valid
// Caffe Datum: ... at byte N") when the bytes are not a protobuf message of that schema.
Status ParseCaffeDatum(const uint8_t* value, uint64_t size, CaffeDatumView* out);

// Checks a parsed Datum as shardpack writes it for a dataset of `encoding`. kRaw: channels
// 1 or 3, height and width in 1..65500, len(data) = C*H*W, not encoded, no float_data, a
// label. kJpeg / kPng: encoded, data that starts with that format's signature, no
// float_data, a label (the shape is the file's: only decoding it checks that).
// Corruption naming the field otherwise.
Status CheckCaffeDatum(const CaffeDatumView& d, ImageEncoding encoding);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_CAFFE_DATUM_H_
