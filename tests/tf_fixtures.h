// TensorFlow-style inputs for tests, built with libprotobuf (proto/example.proto), not
// with shardpack's own encoder: Examples as build_image_data.py writes them
// (image/encoded) or as a tf.io.TFRecordWriter user writes shardpack's schema
// (image/raw), framed into TFRecord files.
#ifndef SHARDPACK_TESTS_TF_FIXTURES_H_
#define SHARDPACK_TESTS_TF_FIXTURES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace shardpack::testing {

// An Example with build_image_data.py's keys: image/encoded, image/format, image/height,
// image/width, image/colorspace ("RGB"), image/channels (3), image/class/label,
// image/class/synset, image/class/text, image/filename. A height or width of 0, an empty
// format or text leaves that feature out.
struct TfImageExample {
  std::string encoded;
  int64_t label = 1;
  int64_t height = 0, width = 0;
  std::string format = "JPEG";
  std::string class_text;
  std::string filename;
  std::string Serialize() const;
};

// An Example in shardpack's schema (docs/FORMAT.md §2.1), as libprotobuf serializes it
// (map order, no padding): image/raw, image/height, image/width, image/channels,
// image/class/label, image/class/text, image/filename, image/format "raw", and
// image/raw/crc32c unless `with_crc` is false.
std::string TfRawExample(const std::vector<uint8_t>& pixels, int height, int width, int channels,
                         int64_t label, const std::string& class_text, const std::string& filename,
                         bool with_crc = true);

// TFRecord framing (docs/FORMAT.md §1) of each payload, back to back. `offsets`, when not
// null, receives the offset of each record.
std::string FrameRecords(const std::vector<std::string>& payloads,
                         std::vector<uint64_t>* offsets = nullptr);

}  // namespace shardpack::testing

#endif  // SHARDPACK_TESTS_TF_FIXTURES_H_
