// The record payload: a serialized tf.train.Example (docs/FORMAT.md §2).
//
// Writing: the encoder lays features out so that image/raw comes last and its bytes start
// at a multiple of the pixel alignment in the shard file, padded by an image/pad bytes
// feature. Any protobuf parser reads the result; map order carries no meaning.
//
// Reading: ParseExampleView walks the protobuf wire format in place and returns pointers
// into the payload; no message is built and no byte is copied. It reads any Example as
// libprotobuf does (any feature order, packed or unpacked int64 lists, unknown fields,
// extra features, repeated map keys where the last wins), with one deliberate difference
// shared with TensorFlow's parser: a list element of the wrong wire type (a fixed32 in an
// Int64List) is Corruption, where libprotobuf would keep it as an unknown field.
#ifndef SHARDPACK_FORMAT_EXAMPLE_H_
#define SHARDPACK_FORMAT_EXAMPLE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "format/format.h"
#include "shardpack/manifest.h"
#include "shardpack/status.h"

namespace shardpack::format {

struct SampleMeta {
  int64_t height = 0;
  int64_t width = 0;
  int64_t channels = 0;
  int64_t label = 0;
  std::string_view class_text;
  std::string_view filename;
};

// The map entries of every feature except image/pad and image/raw.
std::string EncodeFeatureEntries(const SampleMeta& meta, uint32_t pixel_crc);
// The same for an encoded image (§2.5): image/format "JPEG" or "PNG" and
// image/encoded/crc32c (`encoded_crc`, of the file's bytes) instead of "raw" and
// image/raw/crc32c.
std::string EncodeEncodedFeatureEntries(const SampleMeta& meta, ImageEncoding encoding,
                                        uint32_t encoded_crc);

// The payload bytes that precede `pixel_bytes` bytes of pixels: the Example and Features
// envelopes, `entries`, the padding entry and the image/raw entry's header. With the
// payload at file offset `payload_offset`, the pixels start at a multiple of `alignment`
// (alignment <= 1: no padding entry). `image_key`: image/encoded for an encoded image
// (written with alignment 1).
std::string EncodePayloadPrefix(std::string_view entries, uint64_t pixel_bytes,
                                uint64_t payload_offset, uint32_t alignment,
                                std::string_view image_key = kKeyRaw);

// One feature as the parser saw it: its kind and how many values it holds. Bytes and
// int64 features keep their first value (scalars are all this format needs).
struct FeatureRef {
  enum class Kind { kAbsent, kNone, kBytes, kFloat, kInt64 };
  Kind kind = Kind::kAbsent;  // kNone: the key is present with an empty Feature
  uint64_t count = 0;
  std::string_view bytes;  // first bytes value
  int64_t int64 = 0;       // first int64 value
};

// The features shardpack reads, located in a payload. `encoded` and `colorspace` are
// those of TensorFlow's encoded-image Examples (image/encoded, image/colorspace).
struct ExampleView {
  FeatureRef raw, raw_crc, height, width, channels, label, class_text, filename, format;
  FeatureRef encoded, colorspace, encoded_crc;
  uint64_t num_features = 0;  // map entries seen, all keys
};

// Locates the known features in a serialized Example. Corruption when the bytes are not
// a valid protobuf message of that schema; the message names the payload byte offset.
Status ParseExampleView(const uint8_t* payload, uint64_t size, ExampleView* out);

// ParseExampleView's two halves, apart for the tests that hold them to each other. The
// canonical one reads the layout shardpack's writer (and most others) produce: one
// Example.features field spanning the payload, map entries of a key then a value, each
// value one BytesList or one packed Int64List of one value. It returns false, `out`
// unspecified, for anything else, which the general one then reads (any order, unpacked
// and repeated values, unknown fields, merged duplicates) and names the faults of. For
// every payload the canonical one accepts, the two give the same view.
bool ParseCanonicalExampleView(const uint8_t* payload, uint64_t size, ExampleView* out);
Status ParseGeneralExampleView(const uint8_t* payload, uint64_t size, ExampleView* out);

// A sample as read back: pointers into the payload. `pixels` is the stored image: the
// HWC pixels (kRaw: image/raw, pixel_bytes = H*W*C), or the JPEG or PNG file (image/encoded
// of a 1.3 dataset, §2.5), which decodes to H x W x C; pixel_crc is that feature's
// checksum.
struct DecodedSample {
  ImageEncoding encoding = ImageEncoding::kRaw;
  const uint8_t* pixels = nullptr;
  uint64_t pixel_bytes = 0;
  int64_t height = 0, width = 0, channels = 0, label = 0;
  bool has_pixel_crc = false;
  uint32_t pixel_crc = 0;
  std::string_view class_text;
  std::string_view filename;
};

// Checks the required features (image/raw, height, width, channels, label: one value each,
// of the right type), the format, the dimensions (1..65500, channels 1 or 3) and
// len(image/raw) == H*W*C. Corruption with "feature K: expected ..., found ...".
Status DecodeSample(const ExampleView& view, DecodedSample* out);

// An encoded sample of a 1.3 dataset (§2.5): image/encoded one non-empty bytes value,
// image/format "JPEG" or "PNG" (required), image/height, image/width, image/channels (1
// or 3) and image/class/label one int64 each, H*W within the pixel limit,
// image/encoded/crc32c (optional) a 32-bit value. Corruption naming the feature otherwise.
Status DecodeStoredEncoded(const ExampleView& view, DecodedSample* out);

// Corruption "the record holds <kind>, the manifest says <expected>" when a sample is not
// of the kind its dataset stores (raw pixels, or a JPEG or PNG file; a mixed dataset's
// records are JPEG files or raw pixels).
Status CheckEncoding(const DecodedSample& d, ImageEncoding expected);

// Parse + DecodeSample in one call: a raw sample (§2.1).
Status ParseSample(const uint8_t* payload, uint64_t size, DecodedSample* out);
// Parse, then DecodeSample, or DecodeStoredEncoded for an Example that carries
// image/encoded and no image/raw: what a dataset's readers take (they check d.encoding
// against the manifest's).
Status ParseStoredSample(const uint8_t* payload, uint64_t size, DecodedSample* out);

// The checksums of a decoded sample, with one pass over its pixels (the readers, verify):
// PayloadCrc is the crc32c of the whole `payload` that `d` was decoded from, derived
// from `pixel_crc` (the pixels' own crc32c) by CRC combination; CheckPixelCrc is
// Corruption "pixel checksum X, expected Y" when the sample's image/raw/crc32c differs
// from `actual` (OK when it has none).
uint32_t PayloadCrc(const uint8_t* payload, uint64_t length, const DecodedSample& d,
                    uint32_t pixel_crc);
Status CheckPixelCrc(const DecodedSample& d, uint32_t actual);

// What an Example carries: pixels (image/raw, shardpack's schema, §2) or an encoded image
// (image/encoded, TensorFlow's build_image_data.py schema, docs/FORMAT.md §9).
enum class PayloadKind { kRaw, kEncoded };

// Corruption when the Example has both image/raw and image/encoded, or neither.
StatusOr<PayloadKind> ClassifyExample(const ExampleView& view);

// A sample that carries an encoded image, as TensorFlow's build_image_data.py writes it
// (image/encoded, image/format "JPEG", 1-based labels). Pointers into the payload.
struct EncodedSample {
  std::string_view encoded;     // the image file's bytes, never empty
  std::string_view format;      // image/format as stored ("JPEG", "PNG"); empty if absent
  std::string_view colorspace;  // image/colorspace as stored ("RGB"); empty if absent
  int64_t label = 0;
  // image/height, image/width, image/channels; 0 where the feature is absent.
  int64_t height = 0, width = 0, channels = 0;
  std::string_view class_text;
  std::string_view filename;
};

// Checks an encoded-image Example: image/encoded is one non-empty bytes value and
// image/class/label one int64 (required); image/height and image/width, if present, one
// int64 each in 1..65500; image/channels, if present, one int64 in 1..4; image/format,
// image/colorspace, image/class/text and image/filename, if present, one bytes value each.
// Says nothing of the encoded bytes themselves: the caller decodes them. Corruption with
// "feature K: expected ..., found ..." otherwise.
Status DecodeEncodedSample(const ExampleView& view, EncodedSample* out);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_EXAMPLE_H_
