#include "format/example.h"

#include <tuple>
#include <vector>

#include "format/format.h"
#include "format/record.h"
#include "util/coding.h"
#include "util/crc32c.h"

namespace shardpack::format {
namespace {

// Wire types.
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLen = 2;
constexpr int kStartGroup = 3;
constexpr int kEndGroup = 4;
constexpr int kFixed32 = 5;
constexpr uint8_t Tag(int field, int wire) { return static_cast<uint8_t>((field << 3) | wire); }

void PutTagLen(std::string* out, uint8_t tag, uint64_t len) {
  out->push_back(static_cast<char>(tag));
  PutVarint64(out, len);
}

// Size of a length-delimited field holding `len` bytes (1-byte tag).
uint64_t LenFieldSize(uint64_t len) { return 1 + VarintLength(len) + len; }

// Sizes of the pieces of a bytes feature map entry { key, Feature{BytesList{value}} }.
struct BytesEntrySizes {
  uint64_t bytes_list, feature, entry;
};
BytesEntrySizes BytesEntry(std::string_view key, uint64_t value_len) {
  BytesEntrySizes s;
  s.bytes_list = LenFieldSize(value_len);
  s.feature = LenFieldSize(s.bytes_list);
  s.entry = LenFieldSize(key.size()) + LenFieldSize(s.feature);
  return s;
}

// Everything of a bytes entry up to (not including) the value bytes.
void AppendBytesEntryHeader(std::string* out, std::string_view key, uint64_t value_len) {
  BytesEntrySizes s = BytesEntry(key, value_len);
  PutTagLen(out, Tag(1, kLen), s.entry);  // Features.feature (map entry)
  PutTagLen(out, Tag(1, kLen), key.size());
  out->append(key);
  PutTagLen(out, Tag(2, kLen), s.feature);     // entry.value: Feature
  PutTagLen(out, Tag(1, kLen), s.bytes_list);  // Feature.bytes_list
  PutTagLen(out, Tag(1, kLen), value_len);     // BytesList.value
}

void AppendBytesEntry(std::string* out, std::string_view key, std::string_view value) {
  AppendBytesEntryHeader(out, key, value.size());
  out->append(value);
}

void AppendInt64Entry(std::string* out, std::string_view key, int64_t value) {
  uint64_t packed = VarintLength(static_cast<uint64_t>(value));
  uint64_t list = LenFieldSize(packed);
  uint64_t feature = LenFieldSize(list);
  PutTagLen(out, Tag(1, kLen), LenFieldSize(key.size()) + LenFieldSize(feature));
  PutTagLen(out, Tag(1, kLen), key.size());
  out->append(key);
  PutTagLen(out, Tag(2, kLen), feature);
  PutTagLen(out, Tag(3, kLen), list);    // Feature.int64_list
  PutTagLen(out, Tag(1, kLen), packed);  // Int64List.value, packed
  PutVarint64(out, static_cast<uint64_t>(value));
}

// The entries of §2.2 up to the image's own: the shape, label, texts, then image/format
// `format` and the image's checksum under `crc_key`.
std::string EncodeEntries(const SampleMeta& m, std::string_view format, std::string_view crc_key,
                          uint32_t crc) {
  std::string out;
  out.reserve(160 + m.class_text.size() + m.filename.size());
  AppendInt64Entry(&out, kKeyHeight, m.height);
  AppendInt64Entry(&out, kKeyWidth, m.width);
  AppendInt64Entry(&out, kKeyChannels, m.channels);
  AppendInt64Entry(&out, kKeyLabel, m.label);
  AppendBytesEntry(&out, kKeyClassText, m.class_text);
  AppendBytesEntry(&out, kKeyFilename, m.filename);
  AppendBytesEntry(&out, kKeyFormat, format);
  AppendInt64Entry(&out, crc_key, crc);
  return out;
}

}  // namespace

std::string EncodeFeatureEntries(const SampleMeta& m, uint32_t pixel_crc) {
  return EncodeEntries(m, kFormatRaw, kKeyRawCrc, pixel_crc);
}

std::string EncodeEncodedFeatureEntries(const SampleMeta& m, ImageEncoding encoding,
                                        uint32_t encoded_crc) {
  return EncodeEntries(m, encoding == ImageEncoding::kPng ? kFormatPng : kFormatJpeg,
                       kKeyEncodedCrc, encoded_crc);
}

std::string EncodePayloadPrefix(std::string_view entries, uint64_t pixel_bytes,
                                uint64_t payload_offset, uint32_t alignment,
                                std::string_view image_key) {
  const uint64_t raw_entry = LenFieldSize(BytesEntry(image_key, pixel_bytes).entry);
  const uint64_t raw_header = raw_entry - pixel_bytes;
  auto prefix_size = [&](int64_t pad) {  // pad < 0: no padding entry
    uint64_t pad_entry = pad < 0 ? 0 : LenFieldSize(BytesEntry(kKeyPad, pad).entry);
    uint64_t features = entries.size() + pad_entry + raw_entry;
    return LenFieldSize(features) - features + entries.size() + pad_entry + raw_header;
  };
  int64_t pad = -1;
  if (alignment > 1) {
    // The prefix grows by one byte per padding byte, except where a varint gets longer,
    // so some pad below 2 * alignment + 8 lands the pixels on the boundary.
    for (pad = 0; (payload_offset + prefix_size(pad)) % alignment != 0; ++pad) {
    }
  }
  const uint64_t pad_entry = pad < 0 ? 0 : LenFieldSize(BytesEntry(kKeyPad, pad).entry);
  std::string out;
  out.reserve(prefix_size(pad));
  PutTagLen(&out, Tag(1, kLen), entries.size() + pad_entry + raw_entry);  // Example.features
  out.append(entries);
  if (pad >= 0) {
    AppendBytesEntryHeader(&out, kKeyPad, pad);
    out.append(static_cast<size_t>(pad), '\0');
  }
  AppendBytesEntryHeader(&out, image_key, pixel_bytes);
  return out;
}

// ---------------------------------------------------------------------------------------
// Parsing.

namespace {

constexpr int kMaxGroupDepth = 100;  // protobuf's default recursion limit

// The first malformation a parse finds: the parsers of one payload (nested messages, each a
// Parser of its own) share one, and every read stops at the first failure, so what it
// holds is what the parse reports. Reads return bool rather than Status: a payload has
// dozens of fields, and a Status per read was a fifth of a small sample's cost.
struct ParseError {
  const uint8_t* at = nullptr;
  std::string what;
};

class Parser {
 public:
  Parser(const uint8_t* p, const uint8_t* end, ParseError* error)
      : p_(p), end_(end), error_(error) {}

  bool done() const { return p_ >= end_; }

  // Reads a tag; false with an error on malformed input.
  bool ReadTag(int* field, int* wire) {
    const uint8_t* at = p_;
    uint64_t tag;
    if (!Varint(&tag) || tag > 0xffffffffu) return Fail(at, "malformed field tag");
    *field = static_cast<int>(tag >> 3);
    *wire = static_cast<int>(tag & 7);
    if (*field == 0) return Fail(at, "field number 0");
    return true;
  }

  bool ReadVarint(uint64_t* v) {
    const uint8_t* at = p_;
    if (!Varint(v)) return Fail(at, "malformed varint");
    return true;
  }

  // Reads a length-delimited field's extent.
  bool ReadLen(const uint8_t** begin, const uint8_t** end) {
    uint64_t len = 0;
    const uint8_t* at = p_;
    if (!ReadVarint(&len)) return false;
    if (len > static_cast<uint64_t>(end_ - p_)) {
      return Fail(at, "length " + std::to_string(len) + " runs past the end of its message");
    }
    *begin = p_;
    p_ += len;
    *end = p_;
    return true;
  }

  bool Skip(int field, int wire, int depth = 0) {
    const uint8_t* at = p_;
    switch (wire) {
      case kVarint: {
        uint64_t v;
        return ReadVarint(&v);
      }
      case kFixed64:
        return Advance(8, at);
      case kFixed32:
        return Advance(4, at);
      case kLen: {
        const uint8_t *b, *e;
        return ReadLen(&b, &e);
      }
      case kStartGroup: {
        if (depth >= kMaxGroupDepth) return Fail(at, "groups nested too deeply");
        for (;;) {
          if (done()) return Fail(at, "unterminated group");
          int f, w;
          if (!ReadTag(&f, &w)) return false;
          if (w == kEndGroup) {
            if (f != field) return Fail(at, "mismatched end of group");
            return true;
          }
          if (!Skip(f, w, depth + 1)) return false;
        }
      }
      default:
        return Fail(at, "invalid wire type " + std::to_string(wire));
    }
  }

  // Records the error at `at` (a byte of the payload) and returns false.
  bool Fail(const uint8_t* at, std::string what) const {
    error_->at = at;
    error_->what = std::move(what);
    return false;
  }

  const uint8_t* pos() const { return p_; }
  // A parser of the bytes [b, e) of the same payload, reporting to the same error.
  Parser Nested(const uint8_t* b, const uint8_t* e) const { return Parser(b, e, error_); }

 private:
  // A varint, the one-byte case (every tag, key and length under 128) first.
  bool Varint(uint64_t* v) {
    if (p_ < end_ && *p_ < 0x80) {
      *v = *p_++;
      return true;
    }
    p_ = DecodeVarint64(p_, end_, v);
    return p_ != nullptr;
  }

  bool Advance(uint64_t n, const uint8_t* at) {
    if (n > static_cast<uint64_t>(end_ - p_)) return Fail(at, "field runs past its message");
    p_ += n;
    return true;
  }

  const uint8_t* p_;
  const uint8_t* end_;
  ParseError* error_;
};

// The helpers below run for every value of every feature of every sample: they are
// small and inline, so that splitting the parse costs no call and no allocation.

inline bool WrongWireType(const Parser& list) {
  return list.Fail(list.pos(), "value of the wrong wire type in a feature list");
}

// The first value of a list is the one kept; every value is counted.
inline void AddInt64(uint64_t v, FeatureRef* f) {
  if (f->count++ == 0) f->int64 = static_cast<int64_t>(v);
}

// One value of a BytesList, of wire type `wire`.
inline bool ParseBytesValue(Parser& list, int wire, FeatureRef* f) {
  if (wire != kLen) return WrongWireType(list);
  const uint8_t *vb, *ve;
  if (!list.ReadLen(&vb, &ve)) return false;
  if (f->count++ == 0) {
    f->bytes = std::string_view(reinterpret_cast<const char*>(vb), static_cast<size_t>(ve - vb));
  }
  return true;
}

// One value of an Int64List, or a packed run of them.
inline bool ParseInt64Values(Parser& list, int wire, FeatureRef* f) {
  uint64_t v;
  if (wire == kVarint) {
    if (!list.ReadVarint(&v)) return false;
    AddInt64(v, f);
    return true;
  }
  if (wire != kLen) return WrongWireType(list);
  const uint8_t *vb, *ve;
  if (!list.ReadLen(&vb, &ve)) return false;
  Parser packed = list.Nested(vb, ve);
  while (!packed.done()) {
    if (!packed.ReadVarint(&v)) return false;
    AddInt64(v, f);
  }
  return true;
}

// One value of a FloatList, or a packed run of them: counted, not kept (no feature of the
// schema is a float).
inline bool ParseFloatValues(Parser& list, int field, int wire, FeatureRef* f) {
  if (wire == kFixed32) {
    if (!list.Skip(field, wire)) return false;
    ++f->count;
    return true;
  }
  if (wire != kLen) return WrongWireType(list);
  const uint8_t *vb, *ve;
  if (!list.ReadLen(&vb, &ve)) return false;
  if ((ve - vb) % 4 != 0) return list.Fail(vb, "packed float list of odd length");
  f->count += static_cast<uint64_t>(ve - vb) / 4;
  return true;
}

// Appends the values of a serialized list (the bytes [b, e) of a Feature's oneof member,
// of f->kind) to `f`.
inline bool AppendList(const Parser& outer, const uint8_t* b, const uint8_t* e, FeatureRef* f) {
  Parser list = outer.Nested(b, e);
  while (!list.done()) {
    int field, wire;
    if (!list.ReadTag(&field, &wire)) return false;
    bool ok;
    if (field != 1) {
      ok = list.Skip(field, wire);
    } else if (f->kind == FeatureRef::Kind::kBytes) {
      ok = ParseBytesValue(list, wire, f);
    } else if (f->kind == FeatureRef::Kind::kInt64) {
      ok = ParseInt64Values(list, wire, f);
    } else {
      ok = ParseFloatValues(list, field, wire, f);
    }
    if (!ok) return false;
  }
  return true;
}

// Merges one serialized Feature into `f` with protobuf semantics: a oneof member that
// appears again merges (list values append); a different member replaces the kind.
bool ParseFeature(const Parser& outer, const uint8_t* b, const uint8_t* e, FeatureRef* f) {
  Parser p = outer.Nested(b, e);
  if (f->kind == FeatureRef::Kind::kAbsent) f->kind = FeatureRef::Kind::kNone;
  while (!p.done()) {
    int field = 0, wire = 0;  // ReadTag sets both when it succeeds
    if (!p.ReadTag(&field, &wire)) return false;
    if (field < 1 || field > 3 || wire != kLen) {
      if (!p.Skip(field, wire)) return false;
      continue;
    }
    const uint8_t *lb, *le;
    if (!p.ReadLen(&lb, &le)) return false;
    auto kind = field == 1   ? FeatureRef::Kind::kBytes
                : field == 2 ? FeatureRef::Kind::kFloat
                             : FeatureRef::Kind::kInt64;
    if (f->kind != kind) {
      *f = FeatureRef{};
      f->kind = kind;
    }
    if (!AppendList(outer, lb, le, f)) return false;
  }
  return true;
}

// The slot of a known key, by its length first (one comparison for most keys); null for
// any other key.
inline FeatureRef* Slot(ExampleView* v, std::string_view key) {
  switch (key.size()) {
    case kKeyRaw.size():
      return key == kKeyRaw ? &v->raw : nullptr;
    case kKeyWidth.size():
      return key == kKeyWidth ? &v->width : nullptr;
    case kKeyHeight.size():  // and kKeyFormat
      return key == kKeyHeight ? &v->height : key == kKeyFormat ? &v->format : nullptr;
    case kKeyEncoded.size():
      return key == kKeyEncoded ? &v->encoded : nullptr;
    case kKeyChannels.size():  // and kKeyFilename
      return key == kKeyChannels ? &v->channels : key == kKeyFilename ? &v->filename : nullptr;
    case kKeyRawCrc.size():  // and kKeyClassText, kKeyColorspace
      return key == kKeyRawCrc       ? &v->raw_crc
             : key == kKeyClassText  ? &v->class_text
             : key == kKeyColorspace ? &v->colorspace
                                     : nullptr;
    case kKeyLabel.size():
      return key == kKeyLabel ? &v->label : nullptr;
    case kKeyEncodedCrc.size():
      return key == kKeyEncodedCrc ? &v->encoded_crc : nullptr;
    default:
      return nullptr;
  }
}

bool ParseMapEntry(const Parser& outer, const uint8_t* b, const uint8_t* e, ExampleView* v) {
  Parser p = outer.Nested(b, e);
  std::string_view key;
  const uint8_t *vb = nullptr, *ve = nullptr;
  std::vector<std::pair<const uint8_t*, const uint8_t*>> extra_values;
  while (!p.done()) {
    int field = 0, wire = 0;  // ReadTag sets both when it succeeds
    if (!p.ReadTag(&field, &wire)) return false;
    if (field == 1 && wire == kLen) {
      const uint8_t *kb, *ke;
      if (!p.ReadLen(&kb, &ke)) return false;
      key = std::string_view(reinterpret_cast<const char*>(kb), static_cast<size_t>(ke - kb));
    } else if (field == 2 && wire == kLen) {
      // A value field that appears twice in one entry merges; rare enough to keep a list.
      if (vb != nullptr) extra_values.emplace_back(vb, ve);
      if (!p.ReadLen(&vb, &ve)) return false;
    } else if (!p.Skip(field, wire)) {
      return false;
    }
  }
  ++v->num_features;
  FeatureRef* slot = Slot(v, key);
  FeatureRef merged;
  for (auto [xb, xe] : extra_values) {
    if (!ParseFeature(p, xb, xe, &merged)) return false;
  }
  if (vb != nullptr) {
    if (!ParseFeature(p, vb, ve, &merged)) return false;
  } else {
    merged.kind = FeatureRef::Kind::kNone;
  }
  // A later entry with the same key replaces the earlier one (map semantics).
  if (slot != nullptr) *slot = merged;
  return true;
}

bool ParseExample(Parser& p, ExampleView* out) {
  while (!p.done()) {
    int field = 0, wire = 0;  // ReadTag sets both when it succeeds
    if (!p.ReadTag(&field, &wire)) return false;
    if (field != 1 || wire != kLen) {
      if (!p.Skip(field, wire)) return false;
      continue;
    }
    const uint8_t *fb, *fe;  // Features; repeated occurrences merge
    if (!p.ReadLen(&fb, &fe)) return false;
    Parser features = p.Nested(fb, fe);
    while (!features.done()) {
      int ff, fw;
      if (!features.ReadTag(&ff, &fw)) return false;
      if (ff != 1 || fw != kLen) {
        if (!features.Skip(ff, fw)) return false;
        continue;
      }
      const uint8_t *eb, *ee;
      if (!features.ReadLen(&eb, &ee)) return false;
      if (!ParseMapEntry(features, eb, ee, out)) return false;
    }
  }
  return true;
}

// The canonical layout: what EncodeEntries and EncodePayloadPrefix write, and what most
// writers of tf.train.Example write. One Example.features field spanning the payload; in
// it, map entries of a key and then a value, the value a Feature of one BytesList or one
// packed Int64List, the list one value. A length-delimited field of `n` bytes here: its
// tag, then its length, which must fit what is left (`end`); the field's bytes follow.
inline const uint8_t* CanonicalField(const uint8_t* p, const uint8_t* end, uint8_t tag,
                                     const uint8_t** field_end) {
  if (p >= end || *p != tag) return nullptr;
  ++p;
  uint64_t n;
  if (p < end && *p < 0x80) {
    n = *p++;
  } else if ((p = DecodeVarint64(p, end, &n)) == nullptr) {
    return nullptr;
  }
  if (n > static_cast<uint64_t>(end - p)) return nullptr;
  *field_end = p + n;
  return p;
}

// One map entry [p, end) of the canonical layout into `v`, as ParseMapEntry would.
inline bool CanonicalEntry(const uint8_t* p, const uint8_t* end, ExampleView* v) {
  const uint8_t *key_end, *feature_end, *list_end, *value_end;
  const uint8_t* key = CanonicalField(p, end, Tag(1, kLen), &key_end);
  if (key == nullptr) return false;
  const uint8_t* feature = CanonicalField(key_end, end, Tag(2, kLen), &feature_end);
  if (feature == nullptr || feature_end != end) return false;
  FeatureRef f;
  f.count = 1;
  const uint8_t* list = CanonicalField(feature, end, Tag(1, kLen), &list_end);
  if (list != nullptr) {
    f.kind = FeatureRef::Kind::kBytes;
  } else if ((list = CanonicalField(feature, end, Tag(3, kLen), &list_end)) != nullptr) {
    f.kind = FeatureRef::Kind::kInt64;
  } else {
    return false;
  }
  const uint8_t* value = CanonicalField(list, end, Tag(1, kLen), &value_end);
  if (list_end != end || value == nullptr || value_end != end) return false;
  if (f.kind == FeatureRef::Kind::kBytes) {
    f.bytes = std::string_view(reinterpret_cast<const char*>(value),
                               static_cast<size_t>(value_end - value));
  } else {
    uint64_t x;
    if (value < value_end && *value < 0x80) {
      x = *value++;
    } else if ((value = DecodeVarint64(value, value_end, &x)) == nullptr) {
      return false;
    }
    if (value != value_end) return false;  // not exactly one packed value
    f.int64 = static_cast<int64_t>(x);
  }
  ++v->num_features;
  FeatureRef* slot = Slot(
      v, std::string_view(reinterpret_cast<const char*>(key), static_cast<size_t>(key_end - key)));
  if (slot != nullptr) *slot = f;
  return true;
}

}  // namespace

bool ParseCanonicalExampleView(const uint8_t* payload, uint64_t size, ExampleView* out) {
  *out = ExampleView{};
  const uint8_t* const end = payload + size;
  const uint8_t* features_end;
  const uint8_t* p = CanonicalField(payload, end, Tag(1, kLen), &features_end);
  if (p == nullptr || features_end != end) return false;
  while (p < end) {
    const uint8_t* entry_end;
    const uint8_t* entry = CanonicalField(p, end, Tag(1, kLen), &entry_end);
    if (entry == nullptr || !CanonicalEntry(entry, entry_end, out)) return false;
    p = entry_end;
  }
  return true;
}

Status ParseGeneralExampleView(const uint8_t* payload, uint64_t size, ExampleView* out) {
  *out = ExampleView{};
  ParseError error;
  Parser p(payload, payload + size, &error);
  if (ParseExample(p, out)) return Status::Ok();
  return CorruptionError("payload is not a valid tf.train.Example: " + error.what +
                         " at payload byte " + std::to_string(error.at - payload));
}

Status ParseExampleView(const uint8_t* payload, uint64_t size, ExampleView* out) {
  if (ParseCanonicalExampleView(payload, size, out)) return Status::Ok();
  return ParseGeneralExampleView(payload, size, out);
}

namespace {

const char* KindName(FeatureRef::Kind k) {
  switch (k) {
    case FeatureRef::Kind::kAbsent:
      return "absent";
    case FeatureRef::Kind::kNone:
      return "empty";
    case FeatureRef::Kind::kBytes:
      return "bytes";
    case FeatureRef::Kind::kFloat:
      return "float";
    case FeatureRef::Kind::kInt64:
      return "int64";
  }
  return "?";
}

Status Expect(const FeatureRef& f, std::string_view key, FeatureRef::Kind kind) {
  if (f.kind == kind && f.count == 1) return Status::Ok();
  std::string want = kind == FeatureRef::Kind::kInt64 ? "one int64 value" : "one bytes value";
  std::string found = f.kind == FeatureRef::Kind::kAbsent
                          ? "no such feature"
                          : std::to_string(f.count) + " " + KindName(f.kind) + " values";
  return CorruptionError("feature " + std::string(key) + ": expected " + want + ", found " + found);
}

Status CheckDim(int64_t v, std::string_view key) {
  if (v >= 1 && v <= kMaxImageSide) return Status::Ok();
  return CorruptionError("feature " + std::string(key) + ": " + std::to_string(v) +
                         " is outside 1.." + std::to_string(kMaxImageSide));
}

}  // namespace

namespace {

// The shape and label every sample declares, one int64 each: H and W in range, C 1 or 3.
Status CheckShape(const ExampleView& v) {
  using K = FeatureRef::Kind;
  SHARDPACK_RETURN_IF_ERROR(Expect(v.height, kKeyHeight, K::kInt64));
  SHARDPACK_RETURN_IF_ERROR(Expect(v.width, kKeyWidth, K::kInt64));
  SHARDPACK_RETURN_IF_ERROR(Expect(v.channels, kKeyChannels, K::kInt64));
  SHARDPACK_RETURN_IF_ERROR(Expect(v.label, kKeyLabel, K::kInt64));
  SHARDPACK_RETURN_IF_ERROR(CheckDim(v.height.int64, kKeyHeight));
  SHARDPACK_RETURN_IF_ERROR(CheckDim(v.width.int64, kKeyWidth));
  const int64_t c = v.channels.int64;
  if (c != 1 && c != 3) {
    return CorruptionError("feature image/channels: " + std::to_string(c) +
                           ", expected 1 (gray) or 3 (RGB)");
  }
  return Status::Ok();
}

// The rest of a sample whose shape CheckShape accepted: the stored image's optional
// checksum `crc` (feature `crc_key`), the optional texts, and `out` filled with `image`
// as the stored bytes.
Status FinishSample(const ExampleView& v, const FeatureRef& crc, std::string_view crc_key,
                    ImageEncoding encoding, std::string_view image, DecodedSample* out) {
  using K = FeatureRef::Kind;
  out->has_pixel_crc = crc.kind != K::kAbsent;
  if (out->has_pixel_crc) {
    SHARDPACK_RETURN_IF_ERROR(Expect(crc, crc_key, K::kInt64));
    if (crc.int64 < 0 || crc.int64 > 0xffffffffll) {
      return CorruptionError("feature " + std::string(crc_key) + ": " + std::to_string(crc.int64) +
                             " is not a 32-bit checksum");
    }
    out->pixel_crc = static_cast<uint32_t>(crc.int64);
  }
  for (auto [f, key, dst] : {std::tuple{&v.class_text, kKeyClassText, &out->class_text},
                             std::tuple{&v.filename, kKeyFilename, &out->filename}}) {
    if (f->kind == K::kAbsent) {
      *dst = {};
      continue;
    }
    SHARDPACK_RETURN_IF_ERROR(Expect(*f, key, K::kBytes));
    *dst = f->bytes;
  }
  out->encoding = encoding;
  out->pixels = reinterpret_cast<const uint8_t*>(image.data());
  out->pixel_bytes = image.size();
  out->height = v.height.int64;
  out->width = v.width.int64;
  out->channels = v.channels.int64;
  out->label = v.label.int64;
  return Status::Ok();
}

}  // namespace

Status DecodeSample(const ExampleView& v, DecodedSample* out) {
  using K = FeatureRef::Kind;
  SHARDPACK_RETURN_IF_ERROR(Expect(v.raw, kKeyRaw, K::kBytes));
  SHARDPACK_RETURN_IF_ERROR(CheckShape(v));
  if (v.format.kind != K::kAbsent) {
    SHARDPACK_RETURN_IF_ERROR(Expect(v.format, kKeyFormat, K::kBytes));
    if (v.format.bytes != kFormatRaw) {
      return CorruptionError("feature image/format: \"" + std::string(v.format.bytes) +
                             "\", expected \"raw\"");
    }
  }
  // Each factor is at most 65500, so the product fits in 64 bits.
  const uint64_t expected = static_cast<uint64_t>(v.height.int64) *
                            static_cast<uint64_t>(v.width.int64) *
                            static_cast<uint64_t>(v.channels.int64);
  if (v.raw.bytes.size() != expected) {
    return CorruptionError("feature image/raw: " + std::to_string(v.raw.bytes.size()) +
                           " bytes, expected " + std::to_string(expected) + " (" +
                           std::to_string(v.height.int64) + "x" + std::to_string(v.width.int64) +
                           "x" + std::to_string(v.channels.int64) + ")");
  }
  return FinishSample(v, v.raw_crc, kKeyRawCrc, ImageEncoding::kRaw, v.raw.bytes, out);
}

Status DecodeStoredEncoded(const ExampleView& v, DecodedSample* out) {
  using K = FeatureRef::Kind;
  *out = DecodedSample{};
  SHARDPACK_RETURN_IF_ERROR(Expect(v.encoded, kKeyEncoded, K::kBytes));
  if (v.encoded.bytes.empty()) return CorruptionError("feature image/encoded: empty (0 bytes)");
  SHARDPACK_RETURN_IF_ERROR(Expect(v.format, kKeyFormat, K::kBytes));
  ImageEncoding encoding;
  if (v.format.bytes == kFormatJpeg) {
    encoding = ImageEncoding::kJpeg;
  } else if (v.format.bytes == kFormatPng) {
    encoding = ImageEncoding::kPng;
  } else {
    return CorruptionError("feature image/format: \"" + std::string(v.format.bytes) +
                           "\", expected \"JPEG\" or \"PNG\"");
  }
  SHARDPACK_RETURN_IF_ERROR(CheckShape(v));
  const uint64_t pixels =
      static_cast<uint64_t>(v.height.int64) * static_cast<uint64_t>(v.width.int64);
  if (pixels > kMaxImagePixels) {
    return CorruptionError("image/height x image/width is " + std::to_string(v.height.int64) + "x" +
                           std::to_string(v.width.int64) + ", over the limit of " +
                           std::to_string(kMaxImagePixels) + " pixels");
  }
  return FinishSample(v, v.encoded_crc, kKeyEncodedCrc, encoding, v.encoded.bytes, out);
}

Status CheckEncoding(const DecodedSample& d, ImageEncoding expected) {
  if (d.encoding == expected) return Status::Ok();
  if (expected == ImageEncoding::kMixed &&
      (d.encoding == ImageEncoding::kRaw || d.encoding == ImageEncoding::kJpeg)) {
    return Status::Ok();
  }
  return CorruptionError("the record holds " +
                         (d.encoding == ImageEncoding::kRaw
                              ? std::string("raw pixels")
                              : "a " + std::string(ImageEncodingName(d.encoding)) + " image") +
                         ", the manifest says " + std::string(ImageEncodingName(expected)) +
                         (expected == ImageEncoding::kMixed ? " (jpeg or raw)" : ""));
}

Status ParseSample(const uint8_t* payload, uint64_t size, DecodedSample* out) {
  ExampleView view;
  SHARDPACK_RETURN_IF_ERROR(ParseExampleView(payload, size, &view));
  return DecodeSample(view, out);
}

Status ParseStoredSample(const uint8_t* payload, uint64_t size, DecodedSample* out) {
  ExampleView view;
  SHARDPACK_RETURN_IF_ERROR(ParseExampleView(payload, size, &view));
  if (view.encoded.kind != FeatureRef::Kind::kAbsent &&
      view.raw.kind == FeatureRef::Kind::kAbsent) {
    return DecodeStoredEncoded(view, out);
  }
  return DecodeSample(view, out);
}

StatusOr<PayloadKind> ClassifyExample(const ExampleView& v) {
  const bool raw = v.raw.kind != FeatureRef::Kind::kAbsent;
  const bool encoded = v.encoded.kind != FeatureRef::Kind::kAbsent;
  if (raw && encoded) {
    return CorruptionError("the Example has both image/raw and image/encoded; expected one");
  }
  if (!raw && !encoded) {
    return CorruptionError(
        "the Example has neither image/raw (pixels) nor image/encoded (a JPEG or PNG "
        "file); " +
        std::to_string(v.num_features) + " features");
  }
  return raw ? PayloadKind::kRaw : PayloadKind::kEncoded;
}

Status DecodeEncodedSample(const ExampleView& v, EncodedSample* out) {
  using K = FeatureRef::Kind;
  *out = EncodedSample{};
  SHARDPACK_RETURN_IF_ERROR(Expect(v.encoded, kKeyEncoded, K::kBytes));
  if (v.encoded.bytes.empty()) {
    return CorruptionError("feature image/encoded: empty (0 bytes)");
  }
  SHARDPACK_RETURN_IF_ERROR(Expect(v.label, kKeyLabel, K::kInt64));
  for (auto [f, key, dst, max] :
       {std::tuple{&v.height, kKeyHeight, &out->height, int64_t{kMaxImageSide}},
        std::tuple{&v.width, kKeyWidth, &out->width, int64_t{kMaxImageSide}},
        std::tuple{&v.channels, kKeyChannels, &out->channels, int64_t{4}}}) {
    if (f->kind == K::kAbsent) continue;
    SHARDPACK_RETURN_IF_ERROR(Expect(*f, key, K::kInt64));
    if (f->int64 < 1 || f->int64 > max) {
      return CorruptionError("feature " + std::string(key) + ": " + std::to_string(f->int64) +
                             " is outside 1.." + std::to_string(max));
    }
    *dst = f->int64;
  }
  for (auto [f, key, dst] : {std::tuple{&v.format, kKeyFormat, &out->format},
                             std::tuple{&v.colorspace, kKeyColorspace, &out->colorspace},
                             std::tuple{&v.class_text, kKeyClassText, &out->class_text},
                             std::tuple{&v.filename, kKeyFilename, &out->filename}}) {
    if (f->kind == K::kAbsent) continue;
    SHARDPACK_RETURN_IF_ERROR(Expect(*f, key, K::kBytes));
    *dst = f->bytes;
  }
  out->encoded = v.encoded.bytes;
  out->label = v.label.int64;
  return Status::Ok();
}

uint32_t PayloadCrc(const uint8_t* payload, uint64_t length, const DecodedSample& d,
                    uint32_t pixel_crc) {
  const uint64_t start = static_cast<uint64_t>(d.pixels - payload);
  const uint64_t end = start + d.pixel_bytes;
  const uint32_t through_pixels =
      crc32c::Combine(crc32c::Value(payload, start), pixel_crc, d.pixel_bytes);
  return crc32c::Extend(through_pixels, payload + end, length - end);
}

Status CheckPixelCrc(const DecodedSample& d, uint32_t actual) {
  if (!d.has_pixel_crc || actual == d.pixel_crc) return Status::Ok();
  return CorruptionError(
      (d.encoding == ImageEncoding::kRaw ? "pixel checksum " : "image/encoded checksum ") +
      Hex32(actual) + ", expected " + Hex32(d.pixel_crc));
}

}  // namespace shardpack::format
