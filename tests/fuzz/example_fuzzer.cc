// Arbitrary bytes as a record payload (lib/format/example.h): the in-place
// tf.train.Example walk that locates the pixels. It may not read outside the payload,
// and whatever it accepts must be what a full libprotobuf parse of the same bytes reads
// (the schema's generated code, proto/example.proto) whenever libprotobuf accepts them
// too: the same shape, label and the very same pixel bytes. Our parser is stricter on
// purpose in a few places (docs/FORMAT.md §2.4), so only its acceptances are compared.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/stubs/logging.h>

#include "example.pb.h"
#include "format/example.h"
#include "format/format.h"
#include "fuzz_check.h"

namespace {

namespace tf = shardpack::tf;

const tf::Feature* Find(const tf::Example& ex, std::string_view key) {
  const auto& map = ex.features().feature();
  auto it = map.find(std::string(key));
  return it == map.end() ? nullptr : &it->second;
}

void ExpectInt64(const tf::Example& ex, std::string_view key, int64_t value) {
  const tf::Feature* f = Find(ex, key);
  FUZZ_CHECK(f != nullptr && f->has_int64_list());
  FUZZ_CHECK(f->int64_list().value_size() == 1 && f->int64_list().value(0) == value);
}

void ExpectBytes(const tf::Example& ex, std::string_view key, std::string_view value) {
  const tf::Feature* f = Find(ex, key);
  FUZZ_CHECK(f != nullptr && f->has_bytes_list());
  FUZZ_CHECK(f->bytes_list().value_size() == 1 && f->bytes_list().value(0) == value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // libprotobuf logs every invalid UTF-8 key it refuses; not news here.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  // Where the canonical parse accepts the bytes, the general one reads them the same.
  {
    shardpack::format::ExampleView fast, general;
    if (shardpack::format::ParseCanonicalExampleView(data, size, &fast)) {
      FUZZ_CHECK(shardpack::format::ParseGeneralExampleView(data, size, &general).ok());
      FUZZ_CHECK(fast.num_features == general.num_features);
      using F = shardpack::format::FeatureRef;
      const auto same = [](const F& a, const F& b) {
        return a.kind == b.kind && a.count == b.count && a.int64 == b.int64 &&
               a.bytes.data() == b.bytes.data() && a.bytes.size() == b.bytes.size();
      };
      FUZZ_CHECK(same(fast.raw, general.raw) && same(fast.raw_crc, general.raw_crc));
      FUZZ_CHECK(same(fast.height, general.height) && same(fast.width, general.width));
      FUZZ_CHECK(same(fast.channels, general.channels) && same(fast.label, general.label));
      FUZZ_CHECK(same(fast.class_text, general.class_text) &&
                 same(fast.filename, general.filename) && same(fast.format, general.format));
      FUZZ_CHECK(same(fast.encoded, general.encoded) && same(fast.colorspace, general.colorspace) &&
                 same(fast.encoded_crc, general.encoded_crc));
    }
  }
  shardpack::format::DecodedSample d;
  if (!shardpack::format::ParseSample(data, size, &d).ok()) return 0;

  // Pointers into the payload, and a shape the format allows.
  FUZZ_CHECK(d.pixels >= data && d.pixel_bytes <= static_cast<uint64_t>(data + size - d.pixels));
  FUZZ_CHECK(d.height >= 1 && d.height <= shardpack::kMaxImageSide);
  FUZZ_CHECK(d.width >= 1 && d.width <= shardpack::kMaxImageSide);
  FUZZ_CHECK(d.channels == 1 || d.channels == 3);
  FUZZ_CHECK(d.pixel_bytes == static_cast<uint64_t>(d.height * d.width * d.channels));
  const auto inside = [&](std::string_view s) {
    return s.empty() || (reinterpret_cast<const uint8_t*>(s.data()) >= data &&
                         s.size() <= static_cast<size_t>(
                                         data + size - reinterpret_cast<const uint8_t*>(s.data())));
  };
  FUZZ_CHECK(inside(d.class_text) && inside(d.filename));

  tf::Example ex;
  if (!ex.ParseFromArray(data, static_cast<int>(size))) return 0;
  using shardpack::format::kKeyRaw;
  ExpectBytes(ex, kKeyRaw,
              std::string_view(reinterpret_cast<const char*>(d.pixels), d.pixel_bytes));
  ExpectInt64(ex, shardpack::format::kKeyHeight, d.height);
  ExpectInt64(ex, shardpack::format::kKeyWidth, d.width);
  ExpectInt64(ex, shardpack::format::kKeyChannels, d.channels);
  ExpectInt64(ex, shardpack::format::kKeyLabel, d.label);
  if (d.has_pixel_crc) ExpectInt64(ex, shardpack::format::kKeyRawCrc, d.pixel_crc);
  if (Find(ex, shardpack::format::kKeyClassText) != nullptr) {
    ExpectBytes(ex, shardpack::format::kKeyClassText, d.class_text);
  }
  if (Find(ex, shardpack::format::kKeyFilename) != nullptr) {
    ExpectBytes(ex, shardpack::format::kKeyFilename, d.filename);
  }
  return 0;
}
