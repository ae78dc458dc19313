#include "format/caffe_datum.h"

#include <algorithm>
#include <cstdio>

#include "format/format.h"
#include "image/image.h"
#include "util/coding.h"

namespace shardpack::format {

std::string CaffeKey(uint64_t index, std::string_view path) {
  char number[32];
  std::snprintf(number, sizeof number, "%08llu_", static_cast<unsigned long long>(index));
  std::string key = number;
  key.append(path.substr(0, kLmdbMaxKeySize - std::min(key.size(), kLmdbMaxKeySize)));
  return key;
}

std::string EncodeCaffeDatum(const uint8_t* hwc, int height, int width, int channels,
                             int64_t label) {
  const uint64_t plane = static_cast<uint64_t>(height) * static_cast<uint64_t>(width);
  const uint64_t bytes = plane * static_cast<uint64_t>(channels);
  std::string out;
  out.reserve(bytes + 32);
  auto varint_field = [&](int field, uint64_t v) {
    out.push_back(static_cast<char>(field << 3));  // wire type 0
    PutVarint64(&out, v);
  };
  varint_field(1, static_cast<uint64_t>(channels));
  varint_field(2, static_cast<uint64_t>(height));
  varint_field(3, static_cast<uint64_t>(width));
  out.push_back(static_cast<char>((4 << 3) | 2));  // data: length-delimited
  PutVarint64(&out, bytes);
  const size_t data = out.size();
  out.resize(data + bytes);
  auto* dst = reinterpret_cast<uint8_t*>(out.data() + data);
  // Plane c of the Datum holds HWC channel (C - 1 - c) for RGB (BGR order), channel 0 for
  // gray.
  for (int c = 0; c < channels; ++c) {
    const int src_c = channels == 3 ? 2 - c : c;
    uint8_t* plane_out = dst + static_cast<uint64_t>(c) * plane;
    for (uint64_t i = 0; i < plane; ++i) {
      plane_out[i] = hwc[i * static_cast<uint64_t>(channels) + static_cast<uint64_t>(src_c)];
    }
  }
  varint_field(5, static_cast<uint64_t>(label));
  varint_field(7, 0);  // encoded = false, set explicitly as CVMatToDatum does
  return out;
}

std::string EncodeCaffeEncodedDatum(std::span<const uint8_t> file, int64_t label) {
  std::string out;
  out.reserve(file.size() + 24);
  out.push_back(static_cast<char>((4 << 3) | 2));  // data: length-delimited
  PutVarint64(&out, file.size());
  out.append(reinterpret_cast<const char*>(file.data()), file.size());
  out.push_back(static_cast<char>(5 << 3));  // label
  PutVarint64(&out, static_cast<uint64_t>(label));
  out.push_back(static_cast<char>(7 << 3));  // encoded = true
  out.push_back(1);
  return out;
}

namespace {

Status DatumError(const uint8_t* base, const uint8_t* at, const std::string& what) {
  return CorruptionError("value is not a valid Caffe Datum: " + what + " at byte " +
                         std::to_string(at - base));
}

}  // namespace

Status ParseCaffeDatum(const uint8_t* value, uint64_t size, CaffeDatumView* out) {
  *out = CaffeDatumView{};
  const uint8_t* p = value;
  const uint8_t* end = value + size;
  while (p < end) {
    const uint8_t* at = p;
    uint64_t tag;
    p = DecodeVarint64(p, end, &tag);
    if (p == nullptr || tag > 0xffffffffu || (tag >> 3) == 0) {
      return DatumError(value, at, "malformed field tag");
    }
    const uint64_t field = tag >> 3;
    const int wire = static_cast<int>(tag & 7);
    uint64_t v = 0;
    const uint8_t* payload = nullptr;
    switch (wire) {
      case 0:
        p = DecodeVarint64(p, end, &v);
        if (p == nullptr) return DatumError(value, at, "malformed varint");
        break;
      case 1:
      case 5: {
        const uint64_t n = wire == 1 ? 8 : 4;
        if (static_cast<uint64_t>(end - p) < n) return DatumError(value, at, "truncated field");
        p += n;
        break;
      }
      case 2: {
        p = DecodeVarint64(p, end, &v);
        if (p == nullptr) return DatumError(value, at, "malformed length");
        if (v > static_cast<uint64_t>(end - p)) {
          return DatumError(value, at, "length " + std::to_string(v) + " runs past the value");
        }
        payload = p;
        p += v;
        break;
      }
      default:
        // Groups (3, 4) never occur in a Datum; 6 and 7 are not wire types.
        return DatumError(value, at, "unexpected wire type " + std::to_string(wire));
    }
    // int32 fields are varints; a negative int32 is sign-extended to 64 bits.
    const auto int32 = [&] { return static_cast<int64_t>(static_cast<int32_t>(v)); };
    if (field >= 1 && field <= 3 && wire == 0) {
      int64_t* dst[] = {&out->channels, &out->height, &out->width};
      bool* has[] = {&out->has_channels, &out->has_height, &out->has_width};
      *dst[field - 1] = int32();
      *has[field - 1] = true;
    } else if (field == 4 && wire == 2) {
      out->data = std::string_view(reinterpret_cast<const char*>(payload), v);
      out->has_data = true;
    } else if (field == 5 && wire == 0) {
      out->label = int32();
      out->has_label = true;
    } else if (field == 6 && wire == 5) {
      ++out->float_data;
    } else if (field == 6 && wire == 2) {  // packed
      if (v % 4 != 0) return DatumError(value, at, "packed float_data of odd length");
      out->float_data += v / 4;
    } else if (field == 7 && wire == 0) {
      out->encoded = v != 0;
    } else if (field <= 7) {
      return DatumError(value, at,
                        "field " + std::to_string(field) + " has wire type " +
                            std::to_string(wire) + ", not the one Caffe's schema gives it");
    }
  }
  return Status::Ok();
}

Status CheckCaffeDatum(const CaffeDatumView& d, ImageEncoding encoding) {
  const bool raw = encoding == ImageEncoding::kRaw;
  if (d.encoded != !raw) {
    return CorruptionError(raw ? "Datum.encoded is true: the manifest says raw pixels, not an "
                                 "image file"
                               : "Datum.encoded is false: the manifest says " +
                                     std::string(ImageEncodingName(encoding)) + " files");
  }
  if (d.float_data > 0) {
    return CorruptionError("Datum.float_data holds " + std::to_string(d.float_data) +
                           " values; shardpack writes uint8 data only");
  }
  if (!d.has_label) return CorruptionError("Datum.label: missing");
  if (!raw) {
    const image::Format want =
        encoding == ImageEncoding::kPng ? image::Format::kPng : image::Format::kJpeg;
    if (image::Sniff(reinterpret_cast<const uint8_t*>(d.data.data()), d.data.size()) != want) {
      return CorruptionError("Datum.data: " + std::to_string(d.data.size()) +
                             " bytes that do not start with the " +
                             std::string(ImageEncodingName(encoding)) + " signature");
    }
    return Status::Ok();
  }
  if (d.channels != 1 && d.channels != 3) {
    return CorruptionError("Datum.channels: " + std::to_string(d.channels) +
                           ", expected 1 (gray) or 3 (BGR)");
  }
  for (auto [v, name] : {std::pair{d.height, "height"}, std::pair{d.width, "width"}}) {
    if (v < 1 || v > kMaxImageSide) {
      return CorruptionError(std::string("Datum.") + name + ": " + std::to_string(v) +
                             " is outside 1.." + std::to_string(kMaxImageSide));
    }
  }
  const uint64_t expected = static_cast<uint64_t>(d.channels) * static_cast<uint64_t>(d.height) *
                            static_cast<uint64_t>(d.width);
  if (d.data.size() != expected) {
    return CorruptionError("Datum.data: " + std::to_string(d.data.size()) + " bytes, expected " +
                           std::to_string(expected) + " (" + std::to_string(d.channels) + "x" +
                           std::to_string(d.height) + "x" + std::to_string(d.width) + ", CHW)");
  }
  return Status::Ok();
}

}  // namespace shardpack::format
