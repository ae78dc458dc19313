#include "dataset_input.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>

#include "shardpack/manifest.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/hash.h"
#include "util/text.h"

namespace shardpack::fuzz {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kManifestName = "manifest.json";

uint64_t Get64(std::string_view s, size_t at) {
  return DecodeFixed64(reinterpret_cast<const uint8_t*>(s.data()) + at);
}
uint16_t Get16(std::string_view s, size_t at) {
  uint16_t v;
  std::memcpy(&v, s.data() + at, 2);
  return v;
}
uint32_t Get32(std::string_view s, size_t at) {
  return DecodeFixed32(reinterpret_cast<const uint8_t*>(s.data()) + at);
}

}  // namespace

DatasetFile* DatasetInput::Find(std::string_view name) {
  for (size_t i = files.size(); i-- > 0;) {
    if (files[i].name == name) return &files[i];
  }
  return nullptr;
}

const DatasetFile* DatasetInput::Find(std::string_view name) const {
  return const_cast<DatasetInput*>(this)->Find(name);
}

std::string Pack(const DatasetInput& input) {
  std::string out(kMagic);
  out.push_back(static_cast<char>(kContainerVersion));
  out.push_back(static_cast<char>(input.flags));
  for (const DatasetFile& f : input.files) {
    const size_t name_size = std::min<size_t>(f.name.size(), UINT16_MAX);
    const size_t data_size = std::min<size_t>(f.data.size(), UINT32_MAX);
    uint8_t header[6];
    header[0] = static_cast<uint8_t>(name_size);
    header[1] = static_cast<uint8_t>(name_size >> 8);
    EncodeFixed32(header + 2, static_cast<uint32_t>(data_size));
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    out.append(f.name, 0, name_size);
    out.append(f.data, 0, data_size);
  }
  return out;
}

DatasetInput Unpack(const uint8_t* data, size_t size) {
  DatasetInput input;
  const std::string_view s(reinterpret_cast<const char*>(data), size);
  if (s.size() < kMagic.size() + 2 || s.substr(0, kMagic.size()) != kMagic) return input;
  input.flags = static_cast<uint8_t>(s[kMagic.size() + 1]);
  size_t p = kMagic.size() + 2;
  while (s.size() - p >= 6 && input.files.size() < kMaxFiles) {
    const size_t name_size = Get16(s, p);
    const size_t data_size = Get32(s, p + 2);
    p += 6;
    if (name_size > s.size() - p) break;
    DatasetFile f;
    f.name = std::string(s.substr(p, name_size));
    p += name_size;
    f.data = std::string(s.substr(p, std::min(data_size, s.size() - p)));
    p += f.data.size();
    input.files.push_back(std::move(f));
  }
  return input;
}

bool IsPlainName(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

// ---- TFRecord framing ----

std::vector<Framed> ScanFraming(std::string_view shard) {
  std::vector<Framed> records;
  uint64_t p = 0;
  while (shard.size() - p >= 16) {
    const uint64_t length = Get64(shard, p);
    if (length > shard.size() - p - 16) break;
    records.push_back({p, length});
    p += length + 16;
  }
  return records;
}

void FixFraming(std::string* shard) {
  auto* d = reinterpret_cast<uint8_t*>(shard->data());
  const uint64_t size = shard->size();
  for (uint64_t p = 0; size - p >= 12;) {
    EncodeFixed32(d + p + 8, crc32c::Mask(crc32c::Value(d + p, 8)));
    const uint64_t length = DecodeFixed64(d + p);
    if (length > size - p - 12 || size - p - 12 - length < 4) break;
    EncodeFixed32(d + p + 12 + length, crc32c::Mask(crc32c::Value(d + p + 12, length)));
    p += length + 16;
  }
}

std::string IndexText(std::string_view shard) {
  std::string text;
  for (const Framed& r : ScanFraming(shard)) {
    text += std::to_string(r.offset) + " " + std::to_string(r.size()) + "\n";
  }
  return text;
}

// ---- Example payloads ----

namespace {

// A protobuf reader over [p, end) that fails closed.
struct Wire {
  const uint8_t* begin;
  const uint8_t* p;
  const uint8_t* end;

  bool Varint(uint64_t* v) {
    const uint8_t* next = DecodeVarint64(p, end, v);
    if (next == nullptr) return false;
    p = next;
    return true;
  }
  // A length-delimited field's bytes.
  bool Bytes(std::string_view* out) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end - p)) return false;
    *out = std::string_view(reinterpret_cast<const char*>(p), n);
    p += n;
    return true;
  }
  size_t Offset() const { return static_cast<size_t>(p - begin); }
};

bool ParseList(Wire w, int kind, Feature* f) {
  while (w.p < w.end) {
    uint64_t tag;
    if (!w.Varint(&tag)) return false;
    if (kind == 1 && tag == 0x0a) {
      std::string_view v;
      if (!w.Bytes(&v)) return false;
      if (f->bytes.empty()) {
        f->bytes_offset = static_cast<size_t>(reinterpret_cast<const uint8_t*>(v.data()) - w.begin);
      }
      f->bytes.emplace_back(v);
    } else if (kind == 2 && tag == 0x0a) {
      std::string_view v;
      if (!w.Bytes(&v)) return false;
      f->floats += v;
    } else if (kind == 3 && tag == 0x0a) {
      std::string_view v;
      if (!w.Bytes(&v)) return false;
      Wire packed{w.begin, reinterpret_cast<const uint8_t*>(v.data()),
                  reinterpret_cast<const uint8_t*>(v.data()) + v.size()};
      while (packed.p < packed.end) {
        const size_t at = packed.Offset();
        uint64_t x;
        if (!packed.Varint(&x)) return false;
        if (f->ints.empty()) {
          f->int_offset = at;
          f->int_size = packed.Offset() - at;
        }
        f->ints.push_back(x);
      }
    } else if (kind == 3 && tag == 0x08) {
      const size_t at = w.Offset();
      uint64_t x;
      if (!w.Varint(&x)) return false;
      if (f->ints.empty()) {
        f->int_offset = at;
        f->int_size = w.Offset() - at;
      }
      f->ints.push_back(x);
    } else {
      return false;
    }
  }
  return true;
}

bool ParseFeature(Wire w, Feature* f) {
  while (w.p < w.end) {
    uint64_t tag;
    if (!w.Varint(&tag)) return false;
    const int kind = static_cast<int>(tag >> 3);
    if ((tag & 7) != 2 || kind < 1 || kind > 3 || (f->kind != 0 && f->kind != kind)) return false;
    f->kind = kind;
    std::string_view list;
    if (!w.Bytes(&list)) return false;
    if (!ParseList({w.begin, reinterpret_cast<const uint8_t*>(list.data()),
                    reinterpret_cast<const uint8_t*>(list.data()) + list.size()},
                   kind, f)) {
      return false;
    }
  }
  return true;
}

void PutTagged(std::string* out, uint8_t tag, std::string_view bytes) {
  out->push_back(static_cast<char>(tag));
  PutVarint64(out, bytes.size());
  out->append(bytes);
}

std::string EncodeFeature(const Feature& f) {
  std::string list;
  if (f.kind == 1) {
    for (const std::string& b : f.bytes) PutTagged(&list, 0x0a, b);
  } else if (f.kind == 2) {
    if (!f.floats.empty()) PutTagged(&list, 0x0a, f.floats);
  } else if (f.kind == 3) {
    std::string packed;
    for (uint64_t v : f.ints) PutVarint64(&packed, v);
    if (!f.ints.empty()) PutTagged(&list, 0x0a, packed);
  }
  std::string value;
  if (f.kind >= 1 && f.kind <= 3) PutTagged(&value, static_cast<uint8_t>(f.kind << 3 | 2), list);
  std::string entry;
  PutTagged(&entry, 0x0a, f.key);
  PutTagged(&entry, 0x12, value);
  std::string out;
  PutTagged(&out, 0x0a, entry);
  return out;
}

}  // namespace

bool ParseExample(std::string_view payload, std::vector<Feature>* out) {
  out->clear();
  const auto* b = reinterpret_cast<const uint8_t*>(payload.data());
  Wire w{b, b, b + payload.size()};
  while (w.p < w.end) {
    uint64_t tag;
    std::string_view features;
    if (!w.Varint(&tag) || tag != 0x0a || !w.Bytes(&features)) return false;
    Wire fw{b, reinterpret_cast<const uint8_t*>(features.data()),
            reinterpret_cast<const uint8_t*>(features.data()) + features.size()};
    while (fw.p < fw.end) {
      std::string_view entry;
      if (!fw.Varint(&tag) || tag != 0x0a || !fw.Bytes(&entry)) return false;
      Wire ew{b, reinterpret_cast<const uint8_t*>(entry.data()),
              reinterpret_cast<const uint8_t*>(entry.data()) + entry.size()};
      Feature f;
      bool has_key = false;
      while (ew.p < ew.end) {
        std::string_view field;
        if (!ew.Varint(&tag) || (tag != 0x0a && tag != 0x12) || !ew.Bytes(&field)) return false;
        if (tag == 0x0a) {
          if (has_key) return false;
          f.key = std::string(field);
          has_key = true;
        } else if (!ParseFeature({b, reinterpret_cast<const uint8_t*>(field.data()),
                                  reinterpret_cast<const uint8_t*>(field.data()) + field.size()},
                                 &f)) {
          return false;
        }
      }
      if (!has_key) return false;
      out->push_back(std::move(f));
    }
  }
  return true;
}

std::string EncodeExample(const std::vector<Feature>& features) {
  std::string entries;
  for (const Feature& f : features) entries += EncodeFeature(f);
  std::string out;
  PutTagged(&out, 0x0a, entries);
  return out;
}

bool FixPixelCrc(std::vector<Feature>* features) {
  bool fixed = false;
  for (const auto& [image, crc] :
       {std::pair<std::string_view, std::string_view>{"image/raw", "image/raw/crc32c"},
        {"image/encoded", "image/encoded/crc32c"}}) {
    const Feature* pixels = nullptr;
    for (const Feature& f : *features) {
      if (f.key == image && f.kind == 1 && !f.bytes.empty()) pixels = &f;
    }
    if (pixels == nullptr) continue;
    const uint32_t value = crc32c::Value(pixels->bytes[0]);
    for (Feature& f : *features) {
      if (f.key == crc) {
        f.kind = 3;
        f.ints.assign(1, value);
        fixed = true;
      }
    }
  }
  return fixed;
}

bool AlignPixels(std::vector<Feature>* features, uint64_t payload_offset, uint32_t alignment) {
  const size_t n = features->size();
  if (alignment <= 1 || n < 2) return false;
  Feature& pad = (*features)[n - 2];
  const Feature& raw = (*features)[n - 1];
  if (pad.key != "image/pad" || pad.kind != 1 || pad.bytes.size() != 1 || raw.key != "image/raw" ||
      raw.kind != 1 || raw.bytes.size() != 1) {
    return false;
  }
  std::string before;
  for (size_t i = 0; i + 2 < n; ++i) before += EncodeFeature((*features)[i]);
  // The image/raw entry ends with its pixels: what precedes them is the rest of it.
  const uint64_t pixels = raw.bytes[0].size();
  const uint64_t raw_entry = EncodeFeature(raw).size();
  const uint64_t raw_prefix = raw_entry - pixels;
  for (uint64_t p = 0; p < 2ull * alignment + 16; ++p) {
    pad.bytes[0].assign(p, '\0');
    const uint64_t pad_entry = EncodeFeature(pad).size();
    const uint64_t features_size = before.size() + pad_entry + raw_entry;
    const uint64_t at =
        payload_offset + 1 + VarintLength(features_size) + before.size() + pad_entry + raw_prefix;
    if (at % alignment == 0) return true;
  }
  return false;
}

bool EncodeVarintInPlace(uint64_t v, uint8_t* dst, size_t size) {
  if (size < 1 || size > 10 || static_cast<size_t>(VarintLength(v)) > size) return false;
  for (size_t i = 0; i < size; ++i) {
    dst[i] = static_cast<uint8_t>(v & 0x7f) | (i + 1 < size ? 0x80 : 0);
    v >>= 7;
  }
  return true;
}

// ---- LMDB ----

uint32_t LmdbPageSize(std::string_view file) {
  if (file.size() < lmdb::kMetaDbs + 4) return 4096;
  const uint32_t p = Get32(file, lmdb::kMetaDbs + lmdb::kDbPad);
  return p >= 512 && p <= 65536 && (p & (p - 1)) == 0 ? p : 4096;
}

std::vector<LmdbNode> LmdbNodes(std::string_view file, uint16_t page_kind) {
  std::vector<LmdbNode> nodes;
  const size_t psize = LmdbPageSize(file);
  for (size_t page = 2; (page + 1) * psize <= file.size(); ++page) {
    const size_t base = page * psize;
    const uint16_t flags = Get16(file, base + 10);
    if ((flags & (lmdb::kBranch | lmdb::kLeaf | lmdb::kOverflow)) != page_kind) continue;
    const size_t lower = Get16(file, base + 12);
    if (lower < lmdb::kPageHeader || lower > psize) continue;
    for (size_t ptr = base + lmdb::kPageHeader; ptr + 2 <= base + lower; ptr += 2) {
      const size_t node = Get16(file, ptr);
      if (node < lmdb::kPageHeader || node + 8 > psize) continue;
      nodes.push_back({page, base + node, ptr});
    }
  }
  return nodes;
}

std::vector<LmdbValue> LmdbValues(std::string_view file) {
  std::vector<LmdbValue> values;
  const size_t psize = LmdbPageSize(file);
  for (const LmdbNode& n : LmdbNodes(file, lmdb::kLeaf)) {
    const size_t page_end = (n.page + 1) * psize;
    const size_t ksize = Get16(file, n.offset + 6);
    const size_t dsize = Get16(file, n.offset) | static_cast<size_t>(Get16(file, n.offset + 2))
                                                     << 16;
    const size_t key = n.offset + 8;
    if (ksize > page_end - key) continue;
    LmdbValue v{key, ksize, key + ksize, dsize};
    if (Get16(file, n.offset + 4) & lmdb::kBigData) {
      if (page_end - v.offset < 8) continue;
      const uint64_t overflow = Get64(file, v.offset);
      if (overflow >= file.size() / psize) continue;
      v.offset = overflow * psize + lmdb::kPageHeader;
    }
    if (v.offset > file.size() || dsize > file.size() - v.offset) continue;
    values.push_back(v);
  }
  return values;
}

// ---- Fix-ups ----

namespace {

bool ParseJson(std::string_view text, Json* j) {
  // dump() recurses too: deeper manifests are left alone (the library refuses more
  // than 100 levels anyway).
  if (JsonNestingDepth(text) > 64) return false;
  *j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return !j->is_discarded() && j->is_object();
}

std::string DumpJson(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

const std::string* StringAt(const Json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
}

template <typename T>
bool Assign(Json& j, const char* key, const T& value) {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  if (it == j.end()) return false;
  const Json v = value;
  if (*it == v) return false;
  *it = v;
  return true;
}

bool Kept(const FixUpOptions& o, std::string_view name) {
  return std::find(o.keep.begin(), o.keep.end(), name) != o.keep.end();
}

// A file entry's bytes and xxh3_128 from the file, where it is in the input.
bool FixEntry(Json& entry, const DatasetInput& input) {
  const std::string* name = StringAt(entry, "file");
  if (name == nullptr) return false;
  const DatasetFile* f = input.Find(*name);
  if (f == nullptr) return false;
  bool changed = Assign(entry, "bytes", static_cast<uint64_t>(f->data.size()));
  changed |= Assign(entry, "xxh3_128", Xxh3Hex(f->data.data(), f->data.size()));
  return changed;
}

// The labels of a shard's records, false where one does not parse.
// The label of a payload, false where it has none (or not as one int64).
bool Label(std::string_view payload, std::vector<uint64_t>* labels) {
  std::vector<Feature> features;
  if (!ParseExample(payload, &features)) return false;
  const Feature* label = nullptr;
  for (const Feature& f : features) {
    if (f.key == "image/class/label") label = &f;
  }
  if (label == nullptr || label->kind != 3 || label->ints.size() != 1) return false;
  labels->push_back(label->ints[0]);
  return true;
}

// The labels of a shard's records (TFRecord framing, or LMDB leaf values in file order,
// which the writer's appends keep in key order), false where one does not parse.
bool Labels(std::string_view shard, bool lmdb, std::vector<uint64_t>* labels) {
  if (lmdb) {
    for (const LmdbValue& v : LmdbValues(shard)) {
      if (!Label(shard.substr(v.offset, v.size), labels)) return false;
    }
    return true;
  }
  for (const Framed& r : ScanFraming(shard)) {
    if (!Label(shard.substr(r.offset + 12, r.length), labels)) return false;
  }
  return true;
}

// Re-pads every record of a TFRecord shard for the offset it now has (§2.3).
void RealignShard(std::string* shard, uint32_t alignment) {
  std::string out;
  std::vector<Feature> features;
  uint64_t end = 0;
  for (const Framed& r : ScanFraming(*shard)) {
    std::string payload = shard->substr(r.offset + 12, r.length);
    if (ParseExample(payload, &features) && AlignPixels(&features, out.size() + 12, alignment)) {
      payload = EncodeExample(features);
    }
    uint8_t header[12] = {};
    EncodeFixed64(header, payload.size());
    out.append(reinterpret_cast<const char*>(header), sizeof header);
    out += payload;
    out.append(4, '\0');
    end = r.offset + r.size();
  }
  out += shard->substr(end);
  *shard = std::move(out);
}

void FixCounts(DatasetInput* input, Json& j) {
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array()) return;
  const std::string* backend = StringAt(j, "backend");
  if (backend == nullptr || (*backend != "tfrecord" && *backend != "lmdb")) return;
  const bool lmdb = *backend == "lmdb";
  auto alignment = j.find("pixel_alignment");
  const uint64_t align =
      alignment != j.end() && alignment->is_number_unsigned() ? alignment->get<uint64_t>() : 1;
  uint64_t next = 0;
  std::vector<uint64_t> labels;
  bool labelled = true;
  for (Json& s : *shards) {
    const std::string* name = StringAt(s, "file");
    DatasetFile* f = name != nullptr ? input->Find(*name) : nullptr;
    if (f == nullptr) return;
    // LMDB: the records stay as the pages hold them; only the class counts follow.
    if (!lmdb) {
      if (align > 1 && align <= 4096) RealignShard(&f->data, static_cast<uint32_t>(align));
      FixFraming(&f->data);
      const uint64_t records = ScanFraming(f->data).size();
      Assign(s, "records", records);
      Assign(s, "first_sample", next);
      next += records;
    }
    labelled = labelled && Labels(f->data, lmdb, &labels);
  }
  if (!lmdb) Assign(j, "num_samples", next);
  auto classes = j.find("classes");
  if (!labelled || classes == j.end() || !classes->is_array()) return;
  std::vector<uint64_t> counts(classes->size(), 0);
  for (uint64_t l : labels) {
    if (l >= counts.size()) return;
    ++counts[l];
  }
  for (size_t c = 0; c < counts.size(); ++c) Assign((*classes)[c], "count", counts[c]);
}

void FixManifest(DatasetInput* input, const FixUpOptions& o) {
  DatasetFile* manifest = input->Find(kManifestName);
  if (manifest == nullptr || Kept(o, kManifestName)) return;
  Json j;
  if (!ParseJson(manifest->data, &j)) return;
  bool changed = false;
  if (o.counts) {
    const Json before = j;
    FixCounts(input, j);
    changed = j != before;
  }
  if (o.entries) {
    auto shards = j.find("shards");
    if (shards != j.end() && shards->is_array()) {
      for (Json& s : *shards) {
        if (!s.is_object()) continue;
        changed |= FixEntry(s, *input);
        auto index = s.find("index");
        if (index != s.end()) changed |= FixEntry(*index, *input);
      }
    }
    auto rejects = j.find("rejects");
    if (rejects != j.end()) changed |= FixEntry(*rejects, *input);
  }
  if (o.manifest_checksum && j.contains("manifest_xxh3_128")) {
    // The checksum covers the fields as the library serializes them.
    auto parsed = ParseManifest(DumpJson(j), kManifestName);
    if (parsed.ok()) changed |= Assign(j, "manifest_xxh3_128", ManifestChecksum(*parsed));
  }
  if (changed) manifest->data = DumpJson(j);
}

}  // namespace

std::vector<ShardFiles> TfrecordShards(const DatasetInput& input) {
  std::vector<ShardFiles> out;
  Json j;
  const DatasetFile* manifest = input.Find(kManifestName);
  if (manifest != nullptr && ParseJson(manifest->data, &j)) {
    auto shards = j.find("shards");
    const std::string* backend = StringAt(j, "backend");
    if (backend != nullptr && *backend == "tfrecord" && shards != j.end() && shards->is_array()) {
      for (const Json& s : *shards) {
        const std::string* data = StringAt(s, "file");
        if (data == nullptr) continue;
        auto index = s.find("index");
        const std::string* index_name = index != s.end() ? StringAt(*index, "file") : nullptr;
        out.push_back({*data, index_name != nullptr ? *index_name : ""});
      }
      return out;
    }
  }
  for (const DatasetFile& f : input.files) {
    if (f.name.ends_with(".tfrecord")) {
      out.push_back({f.name, f.name.substr(0, f.name.size() - 9) + ".idx"});
    }
  }
  return out;
}

std::vector<std::string> LmdbShards(const DatasetInput& input) {
  std::vector<std::string> out;
  Json j;
  const DatasetFile* manifest = input.Find(kManifestName);
  if (manifest != nullptr && ParseJson(manifest->data, &j)) {
    auto shards = j.find("shards");
    const std::string* backend = StringAt(j, "backend");
    if (backend != nullptr && *backend == "lmdb" && shards != j.end() && shards->is_array()) {
      for (const Json& s : *shards) {
        if (const std::string* data = StringAt(s, "file")) out.push_back(*data);
      }
      return out;
    }
  }
  for (const DatasetFile& f : input.files) {
    if (f.name.ends_with(".lmdb")) out.push_back(f.name);
  }
  return out;
}

void FixUp(DatasetInput* input, const FixUpOptions& o) {
  const std::vector<ShardFiles> shards = TfrecordShards(*input);
  if (o.framing) {
    std::set<std::string> done;
    for (const ShardFiles& s : shards) {
      DatasetFile* f = input->Find(s.data);
      if (f != nullptr && !Kept(o, s.data) && done.insert(s.data).second) FixFraming(&f->data);
    }
  }
  // The counts re-pad and re-frame the shards first: the index follows them.
  FixUpOptions counts_only;
  counts_only.entries = false;
  counts_only.manifest_checksum = false;
  counts_only.counts = true;
  counts_only.keep = o.keep;
  if (o.counts) FixManifest(input, counts_only);
  if (o.index) {
    for (const ShardFiles& s : shards) {
      DatasetFile* data = input->Find(s.data);
      DatasetFile* index = input->Find(s.index);
      if (data != nullptr && index != nullptr && !Kept(o, s.index) && index != data) {
        index->data = IndexText(data->data);
      }
    }
  }
  FixUpOptions rest = o;
  rest.counts = false;
  FixManifest(input, rest);
}

}  // namespace shardpack::fuzz
