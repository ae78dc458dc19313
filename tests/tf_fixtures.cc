#include "tf_fixtures.h"

#include "example.pb.h"
#include "format/record.h"
#include "util/crc32c.h"

namespace shardpack::testing {
namespace {

void Bytes(tf::Features* f, const std::string& key, const std::string& value) {
  (*f->mutable_feature())[key].mutable_bytes_list()->add_value(value);
}
void Int64(tf::Features* f, const std::string& key, int64_t value) {
  (*f->mutable_feature())[key].mutable_int64_list()->add_value(value);
}

}  // namespace

std::string TfImageExample::Serialize() const {
  tf::Example e;
  tf::Features* f = e.mutable_features();
  Bytes(f, "image/encoded", encoded);
  if (!format.empty()) Bytes(f, "image/format", format);
  if (height > 0) Int64(f, "image/height", height);
  if (width > 0) Int64(f, "image/width", width);
  Bytes(f, "image/colorspace", "RGB");
  Int64(f, "image/channels", 3);
  Int64(f, "image/class/label", label);
  Bytes(f, "image/class/synset", "n0000000" + std::to_string(label));
  if (!class_text.empty()) Bytes(f, "image/class/text", class_text);
  Bytes(f, "image/filename", filename);
  return e.SerializeAsString();
}

std::string TfRawExample(const std::vector<uint8_t>& pixels, int height, int width, int channels,
                         int64_t label, const std::string& class_text, const std::string& filename,
                         bool with_crc) {
  tf::Example e;
  tf::Features* f = e.mutable_features();
  Bytes(f, "image/raw", std::string(pixels.begin(), pixels.end()));
  Int64(f, "image/height", height);
  Int64(f, "image/width", width);
  Int64(f, "image/channels", channels);
  Int64(f, "image/class/label", label);
  Bytes(f, "image/class/text", class_text);
  Bytes(f, "image/filename", filename);
  Bytes(f, "image/format", "raw");
  if (with_crc) Int64(f, "image/raw/crc32c", crc32c::Value(pixels.data(), pixels.size()));
  return e.SerializeAsString();
}

std::string FrameRecords(const std::vector<std::string>& payloads, std::vector<uint64_t>* offsets) {
  std::string out;
  for (const std::string& p : payloads) {
    if (offsets != nullptr) offsets->push_back(out.size());
    uint8_t header[format::kRecordHeaderSize];
    uint8_t footer[format::kRecordFooterSize];
    format::EncodeRecordHeader(p.size(), header);
    format::EncodeRecordFooter(crc32c::Value(p.data(), p.size()), footer);
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    out.append(p);
    out.append(reinterpret_cast<const char*>(footer), sizeof footer);
  }
  return out;
}

}  // namespace shardpack::testing
