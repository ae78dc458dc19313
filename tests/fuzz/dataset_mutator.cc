// The structure-aware mutator of dataset_fuzzer (libFuzzer's LLVMFuzzerCustomMutator and
// LLVMFuzzerCustomCrossOver). An input is a dataset directory (dataset_input.h); each
// mutation edits one thing a hostile author could write, then, for most inputs, recomputes
// what would otherwise reject it at the first checksum (FixUp), so that the edit reaches
// the code behind the checksums. A sixth of the inputs stay un-fixed (a stale checksum,
// index line or size), and each fix-up is skipped now and then on its own.
//
// Mutations:
//   - manifest.json as JSON: a value set to an edge (0, -1, 2^31, 2^63, 2^64-1, 65500,
//     89,478,486, huge, fractional), a string to a hostile name ("..", "/", NUL, control
//     characters, 5,000 bytes), a type changed, a member removed or added, array entries
//     swapped, duplicated or removed; as text: a key repeated with another value before or
//     after it (which of the two wins is the parser's choice), or libFuzzer's byte edits;
//   - index lines: offsets or sizes off by one, overlapping, going back, past 2^64, lines
//     swapped, repeated or dropped, odd spelling (signs, zeros, hex, blank lines, NUL);
//   - TFRecord framing: a length field set to an edge, the file cut, garbage or a partial
//     header appended, records dropped, repeated, swapped or taken from another shard;
//   - Example payloads: height, width, channels, label or checksum set to an edge, the
//     pixels or the encoded file flipped, cut or grown, keys renamed, features dropped,
//     repeated, reordered or of another kind, an image format changed;
//   - LMDB pages: a meta page's magic, version, page size, map size, either DB's flags,
//     depth, page counts, entries or root, last page or txnid; a page header's number,
//     flags, lower, upper or overflow count; a node's size, flags, key size, key bytes,
//     child or overflow page number, or the pointer to it; a value's bytes in place;
//   - files dropped, renamed (to names the manifest does not list, or hostile ones),
//     repeated, emptied or swapped; libFuzzer's byte edits on one file; the harness's
//     reading flags.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataset_input.h"
#include "util/coding.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace shardpack::fuzz {
namespace {

using Json = nlohmann::ordered_json;

class Rng {
 public:
  explicit Rng(unsigned seed) : gen_(seed) {}
  // Uniform in [0, n); 0 for n == 0.
  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(gen_);
  }
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  uint64_t Bits() { return gen_(); }
  template <typename T>
  const T& Pick(const std::vector<T>& v) {
    return v[Below(v.size())];
  }

 private:
  std::mt19937_64 gen_;
};

// ---- Edge values ----

uint64_t EdgeNumber(Rng& rng, uint64_t current) {
  // Around the limits the format and the readers check, and where arithmetic wraps.
  // clang-format off
  static const std::vector<uint64_t> kEdges = {
      0, 1, 2, 3, 4, 7, 15, 16, 17, 63, 64, 65, 255, 256, 4095, 4096, 4097, 65499, 65500,
      65501, 65535, 65536, 89478485, 89478486, 269484032, 269484033, (1u << 31) - 1, 1u << 31,
      (1ull << 32) - 1, 1ull << 32, 1ull << 53, (1ull << 63) - 1, 1ull << 63, ~0ull, ~0ull - 1,
      ~0ull - 15};
  // clang-format on
  switch (rng.Below(6)) {
    case 0:
      return current + 1;
    case 1:
      return current - 1;
    case 2:
      return current * 2;
    case 3:
      return rng.Bits() >> rng.Below(64);
    default:
      return rng.Pick(kEdges);
  }
}

std::string HostileString(Rng& rng, const std::vector<std::string>& names) {
  // clang-format off
  static const std::vector<std::string> kStrings = {
      // names: empty, up and out of the directory, NUL, control and bidi characters
      "", ".", "..", "/", "../manifest.json", "a/b", "/etc/passwd",
      std::string("shard\0.tfrecord", 15), std::string("\0", 1), "\x01\x1b[31m\r\n\t",
      "manifest.json", "shard-00000-of-00002.tfrecord.tmp", "\xc3\xa9\xe2\x80\xae",
      // the enumerations' values, right and wrong
      "raw", "JPEG", "PNG", "jpeg", "png", "mixed", "lmdb", "tfrecord", "caffe", "example",
      "HWC", "CHW", "encoded", "uint8", "shardpack",
      // versions and checksums
      "1.0", "1.2", "1.3", "1.4", "1.99", "2.0", "0.9", "1.", "01.2", "1.2.3",
      "00000000000000000000000000000000", "ffffffffffffffffffffffffffffffff"};
  // clang-format on
  switch (rng.Below(4)) {
    case 0:
      if (!names.empty()) return rng.Pick(names);
      [[fallthrough]];
    case 1:
      return std::string(1 + rng.Below(5000), "a./\x01"[rng.Below(4)]);
    default:
      return rng.Pick(kStrings);
  }
}

// ---- manifest.json ----

bool ParseManifestJson(const std::string& text, Json* j) {
  int depth = 0, deepest = 0;
  for (char c : text) {
    if (c == '{' || c == '[') deepest = std::max(deepest, ++depth);
    if (c == '}' || c == ']') --depth;
  }
  if (deepest > 64) return false;
  *j = Json::parse(text, nullptr, false);
  return !j->is_discarded();
}

std::string DumpJson(const Json& j) {
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

struct Node {
  Json* node;
  Json* parent;  // nullptr for the root
  std::string key;
  size_t index;
};

void Collect(Json* j, Json* parent, const std::string& key, size_t index, int depth,
             std::vector<Node>* out) {
  out->push_back({j, parent, key, index});
  if (depth > 64) return;
  if (j->is_object()) {
    for (auto it = j->begin(); it != j->end(); ++it)
      Collect(&it.value(), j, it.key(), 0, depth + 1, out);
  } else if (j->is_array()) {
    for (size_t i = 0; i < j->size(); ++i) Collect(&(*j)[i], j, "", i, depth + 1, out);
  }
}

bool MutateManifestJson(DatasetInput* input, Rng& rng) {
  DatasetFile* f = input->Find("manifest.json");
  Json j;
  if (f == nullptr || !ParseManifestJson(f->data, &j)) return false;
  std::vector<std::string> names;
  for (const DatasetFile& d : input->files) names.push_back(d.name);
  std::vector<Node> nodes;
  Collect(&j, nullptr, "", 0, 0, &nodes);
  // Numbers and strings most of the time: they are what readers compute with.
  std::vector<Node> scalars;
  for (const Node& n : nodes) {
    if (n.node->is_number() || n.node->is_string()) scalars.push_back(n);
  }
  const Node& n = !scalars.empty() && rng.Chance(0.7) ? rng.Pick(scalars) : rng.Pick(nodes);
  switch (rng.Below(n.node->is_number() || n.node->is_string() ? 8 : 5)) {
    case 0:  // another type
      switch (rng.Below(7)) {
        case 0:
          *n.node = nullptr;
          break;
        case 1:
          *n.node = true;
          break;
        case 2:
          *n.node = "1";
          break;
        case 3:
          *n.node = Json::array();
          break;
        case 4:
          *n.node = Json::object();
          break;
        case 5:
          *n.node = 1.5;
          break;
        default:
          *n.node = -1;
          break;
      }
      break;
    case 1:  // removed
      if (n.parent == nullptr) return false;
      if (n.parent->is_object()) {
        n.parent->erase(n.key);
      } else {
        n.parent->erase(n.index);
      }
      break;
    case 2:  // an array entry repeated or moved, or an unknown member added
      if (n.parent != nullptr && n.parent->is_array()) {
        Json copy = *n.node;
        const size_t to = rng.Below(n.parent->size() + 1);
        if (rng.Chance(0.5)) n.parent->erase(n.index);
        n.parent->insert(
            n.parent->begin() + static_cast<std::ptrdiff_t>(std::min(to, n.parent->size())),
            std::move(copy));
      } else if (n.node->is_object()) {
        (*n.node)[rng.Chance(0.5) ? "unknown_key" : "records"] = EdgeNumber(rng, 0);
      } else {
        return false;
      }
      break;
    case 3:  // two array entries swapped
      if (n.parent != nullptr && n.parent->is_array() && n.parent->size() > 1) {
        std::swap((*n.parent)[n.index], (*n.parent)[rng.Below(n.parent->size())]);
      } else if (n.node->is_array() && n.node->size() > 1) {
        std::swap((*n.node)[0], (*n.node)[n.node->size() - 1]);
      } else {
        return false;
      }
      break;
    case 4:  // an array emptied or an object's member removed
      if (n.node->is_array()) {
        n.node->clear();
      } else if (n.node->is_object() && !n.node->empty()) {
        auto it = n.node->begin();
        std::advance(it, static_cast<std::ptrdiff_t>(rng.Below(n.node->size())));
        n.node->erase(it);
      } else {
        return false;
      }
      break;
    default:  // an edge value of the same kind, or a hostile string
      if (n.node->is_number()) {
        const uint64_t current = n.node->is_number_integer() ? n.node->get<uint64_t>() : 0;
        const uint64_t v = EdgeNumber(rng, current);
        if (rng.Chance(0.15)) {
          *n.node =
              static_cast<int64_t>(v) < 0 ? static_cast<int64_t>(v) : -static_cast<int64_t>(v);
        } else if (rng.Chance(0.05)) {
          *n.node = 1.8446744073709552e19 * static_cast<double>(1 + rng.Below(3));
        } else {
          *n.node = v;
        }
      } else {
        *n.node = HostileString(rng, names);
      }
      break;
  }
  f->data = DumpJson(j);
  return true;
}

// A member repeated with another value before or after it: the text a JSON writer never
// makes, which parsers resolve their own way.
bool DuplicateManifestKey(DatasetInput* input, Rng& rng) {
  DatasetFile* f = input->Find("manifest.json");
  if (f == nullptr) return false;
  std::vector<size_t> starts;  // lines holding "key": scalar
  for (size_t p = 0; p < f->data.size();) {
    const size_t eol = std::min(f->data.find('\n', p), f->data.size());
    const std::string_view line(f->data.data() + p, eol - p);
    const size_t colon = line.find("\": ");
    if (colon != std::string_view::npos && line.find_first_not_of(' ') < line.size() &&
        line[line.find_first_not_of(' ')] == '"' && !line.ends_with("{") && !line.ends_with("[")) {
      starts.push_back(p);
    }
    p = eol + 1;
  }
  if (starts.empty()) return false;
  const size_t p = rng.Pick(starts);
  const size_t eol = std::min(f->data.find('\n', p), f->data.size());
  std::string line = f->data.substr(p, eol - p);
  const size_t colon = line.find("\": ");
  std::string value;
  switch (rng.Below(3)) {
    case 0:
      value = std::to_string(EdgeNumber(rng, 0));
      break;
    case 1:
      value = "\"..\"";
      break;
    default:
      value = "null";
      break;
  }
  const bool comma = !line.empty() && line.back() == ',';
  std::string dup = line.substr(0, colon + 3) + value;
  if (rng.Chance(0.5)) {
    f->data.insert(p, dup + ",\n");  // before: the original comes last
  } else {
    // after: the new one comes last (a comma for the original if it had none)
    if (!comma) f->data.insert(eol, ",");
    const size_t at = eol + (comma ? 0 : 1);
    f->data.insert(at, "\n" + dup + (comma ? "," : ""));
  }
  return true;
}

// ---- Index files ----

std::vector<std::string> IndexNames(const DatasetInput& input) {
  std::vector<std::string> out;
  for (const ShardFiles& s : TfrecordShards(input)) {
    if (input.Find(s.index) != nullptr) out.push_back(s.index);
  }
  return out;
}

bool MutateIndex(DatasetInput* input, Rng& rng, std::vector<std::string>* keep) {
  const std::vector<std::string> names = IndexNames(*input);
  if (names.empty()) return false;
  DatasetFile* f = input->Find(rng.Pick(names));
  std::vector<std::pair<uint64_t, uint64_t>> lines;
  for (size_t p = 0; p < f->data.size();) {
    const size_t eol = std::min(f->data.find('\n', p), f->data.size());
    unsigned long long o = 0, s = 0;
    if (std::sscanf(f->data.substr(p, eol - p).c_str(), "%llu %llu", &o, &s) == 2) {
      lines.push_back({o, s});
    }
    p = eol + 1;
  }
  const size_t i = rng.Below(lines.size());
  std::string text;
  auto Write = [&]() {
    text.clear();
    for (const auto& [o, s] : lines) text += std::to_string(o) + " " + std::to_string(s) + "\n";
  };
  switch (rng.Below(10)) {
    case 0:
      if (lines.empty()) return false;
      lines[i].first = EdgeNumber(rng, lines[i].first);
      Write();
      break;
    case 1:
      if (lines.empty()) return false;
      lines[i].second = EdgeNumber(rng, lines[i].second);
      Write();
      break;
    case 2:  // overlapping the previous record, or going back before it
      if (i == 0) return false;
      lines[i].first = rng.Chance(0.5) ? lines[i - 1].first + lines[i - 1].second - 1
                                       : lines[i - 1].first - rng.Below(2);
      Write();
      break;
    case 3:  // lines swapped
      if (lines.size() < 2) return false;
      std::swap(lines[i], lines[rng.Below(lines.size())]);
      Write();
      break;
    case 4:  // a line repeated
      if (lines.empty()) return false;
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(i), lines[i]);
      Write();
      break;
    case 5:  // a line dropped
      if (lines.empty()) return false;
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
      Write();
      break;
    case 6:  // a line added past the end
      lines.push_back({lines.empty() ? 0 : lines.back().first + lines.back().second, 16});
      Write();
      break;
    case 7:  // numbers past 2^64, signs, leading zeros, hex
      Write();
      {
        static const char* kOdd[] = {"18446744073709551616",
                                     "99999999999999999999999",
                                     "+0",
                                     "-1",
                                     "00",
                                     "0x10",
                                     "1e3",
                                     " ",
                                     "\t",
                                     "\r"};
        const size_t at = rng.Below(text.size() + 1);
        text.insert(at, kOdd[rng.Below(std::size(kOdd))]);
      }
      break;
    case 8:  // blank lines, a missing final newline, a NUL, an extra column
      Write();
      switch (rng.Below(4)) {
        case 0:
          text.insert(rng.Below(text.size() + 1), "\n");
          break;
        case 1:
          if (!text.empty()) text.pop_back();
          break;
        case 2:
          text.insert(rng.Below(text.size() + 1), std::string("\0", 1));
          break;
        default:
          text.insert(text.empty() ? 0 : text.find('\n'), " 7");
          break;
      }
      break;
    default:
      text.clear();
      break;
  }
  f->data = text;
  keep->push_back(f->name);
  return true;
}

// ---- TFRecord framing and payloads ----

std::vector<std::string> TfrecordNames(const DatasetInput& input) {
  std::vector<std::string> out;
  for (const ShardFiles& s : TfrecordShards(input)) {
    if (input.Find(s.data) != nullptr) out.push_back(s.data);
  }
  return out;
}

std::string Garbage(Rng& rng, size_t n) {
  std::string g(n, '\0');
  if (rng.Chance(0.5)) {
    for (char& c : g) c = static_cast<char>(rng.Bits());
  }
  return g;
}

bool MutateFraming(DatasetInput* input, Rng& rng, bool* structural,
                   std::vector<std::string>* keep) {
  const std::vector<std::string> names = TfrecordNames(*input);
  if (names.empty()) return false;
  DatasetFile* f = input->Find(rng.Pick(names));
  std::string& d = f->data;
  const std::vector<Framed> records = ScanFraming(d);
  const size_t i = rng.Below(records.size());
  switch (rng.Below(8)) {
    case 0: {  // a length field
      if (records.empty()) return false;
      uint8_t* p = reinterpret_cast<uint8_t*>(d.data()) + records[i].offset;
      EncodeFixed64(p, EdgeNumber(rng, records[i].length));
      // The records behind it no longer scan: the index as it was still finds them, and
      // the readers meet the length where the index says a record starts.
      for (const ShardFiles& s : TfrecordShards(*input)) {
        if (s.data == f->name && rng.Chance(0.6)) keep->push_back(s.index);
      }
      break;
    }
    case 1:  // cut
      if (d.empty()) return false;
      d.resize(rng.Chance(0.5) && !records.empty()
                   ? std::min<size_t>(d.size(), records[i].offset + rng.Below(20))
                   : rng.Below(d.size()));
      break;
    case 2:  // garbage or a partial header appended
      d += rng.Chance(0.5) ? Garbage(rng, 1 + rng.Below(11)) : Garbage(rng, 1 + rng.Below(64));
      break;
    case 3:  // a record dropped
      if (records.empty()) return false;
      d.erase(records[i].offset, records[i].size());
      *structural = true;
      break;
    case 4:  // a record repeated
      if (records.empty()) return false;
      d.insert(records[i].offset, d.substr(records[i].offset, records[i].size()));
      *structural = true;
      break;
    case 5: {  // two records swapped
      if (records.size() < 2) return false;
      const size_t j = rng.Below(records.size());
      if (i == j) return false;
      const Framed& a = records[std::min(i, j)];
      const Framed& b = records[std::max(i, j)];
      d = d.substr(0, a.offset) + d.substr(b.offset, b.size()) +
          d.substr(a.offset + a.size(), b.offset - a.offset - a.size()) +
          d.substr(a.offset, a.size()) + d.substr(b.offset + b.size());
      *structural = true;
      break;
    }
    case 6: {  // a record of another shard
      DatasetFile* other = input->Find(rng.Pick(names));
      const std::vector<Framed> theirs = ScanFraming(other->data);
      if (theirs.empty()) return false;
      const Framed& r = theirs[rng.Below(theirs.size())];
      const std::string record = other->data.substr(r.offset, r.size());
      d.insert(records.empty() ? d.size() : records[i].offset, record);
      *structural = true;
      break;
    }
    default:  // garbage between records
      d.insert(records.empty() ? 0 : records[i].offset, Garbage(rng, 1 + rng.Below(32)));
      break;
  }
  return true;
}

uint32_t ManifestAlignment(const DatasetInput& input) {
  const DatasetFile* f = input.Find("manifest.json");
  Json j;
  if (f == nullptr || !ParseManifestJson(f->data, &j) || !j.is_object()) return 1;
  auto it = j.find("pixel_alignment");
  if (it == j.end() || !it->is_number_unsigned()) return 1;
  const uint64_t a = it->get<uint64_t>();
  return a >= 1 && a <= 4096 ? static_cast<uint32_t>(a) : 1;
}

// One edit of a parsed Example's features. False when it found nothing to edit.
bool EditFeatures(std::vector<Feature>* features, Rng& rng, const std::vector<std::string>& texts) {
  static const std::vector<std::string> kKeys = {
      "image/height",     "image/width",    "image/channels", "image/class/label",
      "image/class/text", "image/filename", "image/format",   "image/raw/crc32c",
      "image/pad",        "image/raw",      "image/encoded",  "image/encoded/crc32c",
      "image/colorspace", "image/unknown"};
  if (features->empty()) return false;
  Feature& f = (*features)[rng.Below(features->size())];
  switch (rng.Below(10)) {
    case 0:
    case 1:
    case 2: {  // a value of the feature's kind
      if (f.kind == 3) {
        if (f.ints.empty()) f.ints.push_back(0);
        uint64_t v = EdgeNumber(rng, f.ints[0]);
        if (rng.Chance(0.1)) v = static_cast<uint64_t>(-static_cast<int64_t>(1 + rng.Below(3)));
        f.ints[0] = v;
      } else if (f.kind == 1) {
        if (f.bytes.empty()) f.bytes.emplace_back();
        std::string& b = f.bytes[0];
        switch (rng.Below(6)) {
          case 0:
            if (b.empty()) return false;
            b[rng.Below(b.size())] ^= static_cast<char>(1 + rng.Below(255));
            break;
          case 1:
            b.resize(rng.Below(b.size() + 1));
            break;
          case 2:
            b += Garbage(rng, 1 + rng.Below(64));
            break;
          case 3:
            b = texts.empty() ? "" : rng.Pick(texts);
            break;
          case 4:
            b.clear();
            break;
          default: {
            static const std::vector<std::string> kFormats = {"raw",  "JPEG", "PNG",
                                                              "jpeg", "GIF",  ""};
            b = rng.Pick(kFormats);
            break;
          }
        }
      } else {
        return false;
      }
      break;
    }
    case 3:  // renamed
      f.key = rng.Pick(kKeys);
      break;
    case 4:  // dropped
      features->erase(features->begin() + (&f - features->data()));
      break;
    case 5: {  // repeated (the last of a repeated key wins) with another value
      Feature copy = f;
      if (copy.kind == 3 && !copy.ints.empty()) copy.ints[0] = EdgeNumber(rng, copy.ints[0]);
      features->insert(
          features->begin() + static_cast<std::ptrdiff_t>(rng.Below(features->size() + 1)),
          std::move(copy));
      break;
    }
    case 6:  // reordered
      std::swap(f, (*features)[rng.Below(features->size())]);
      break;
    case 7:  // a second value in the list
      if (f.kind == 3)
        f.ints.push_back(EdgeNumber(rng, 0));
      else if (f.kind == 1)
        f.bytes.push_back(f.bytes.empty() ? "" : f.bytes[0]);
      else
        return false;
      break;
    case 8:  // another kind, or none
      f.kind = static_cast<int>(rng.Below(4));
      if (f.kind == 3 && f.ints.empty()) f.ints.push_back(1);
      if (f.kind == 1 && f.bytes.empty()) f.bytes.emplace_back("x");
      if (f.kind == 2) f.floats = std::string("\x00\x00\x80\x3f", 4);
      break;
    default: {  // an unknown feature
      Feature u;
      u.key = "image/extra";
      u.kind = 1;
      u.bytes.push_back(Garbage(rng, rng.Below(16)));
      features->insert(
          features->begin() + static_cast<std::ptrdiff_t>(rng.Below(features->size() + 1)),
          std::move(u));
      break;
    }
  }
  return true;
}

std::vector<std::string> ClassNames(const DatasetInput& input) {
  std::vector<std::string> out = {"", std::string(5000, 'c'), "\x01\n"};
  const DatasetFile* f = input.Find("manifest.json");
  Json j;
  if (f == nullptr || !ParseManifestJson(f->data, &j) || !j.is_object()) return out;
  auto classes = j.find("classes");
  if (classes == j.end() || !classes->is_array()) return out;
  for (const Json& c : *classes) {
    if (c.is_object() && c.contains("name") && c["name"].is_string()) {
      out.push_back(c["name"].get<std::string>());
    }
  }
  return out;
}

bool MutateTfrecordPayload(DatasetInput* input, Rng& rng, bool fix, bool* resized) {
  const std::vector<std::string> names = TfrecordNames(*input);
  if (names.empty()) return false;
  DatasetFile* f = input->Find(rng.Pick(names));
  const std::vector<Framed> records = ScanFraming(f->data);
  if (records.empty()) return false;
  const Framed r = records[rng.Below(records.size())];
  std::string payload = f->data.substr(r.offset + 12, r.length);
  std::vector<Feature> features;
  if (ParseExample(payload, &features) && rng.Chance(0.9)) {
    if (!EditFeatures(&features, rng, ClassNames(*input))) return false;
    if (fix && rng.Chance(0.9)) FixPixelCrc(&features);
    if (fix && rng.Chance(0.9)) AlignPixels(&features, r.offset + 12, ManifestAlignment(*input));
    payload = EncodeExample(features);
  } else {
    // Not the writer's layout: libFuzzer's byte edits.
    const size_t max = payload.size() * 2 + 64;
    payload.resize(max);
    payload.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(payload.data()), r.length, max));
  }
  *resized = payload.size() != r.length;
  uint8_t length[8];
  EncodeFixed64(length, payload.size());
  f->data = f->data.substr(0, r.offset) + std::string(reinterpret_cast<char*>(length), 8) +
            f->data.substr(r.offset + 8, 4) + payload + f->data.substr(r.offset + 12 + r.length);
  return true;
}

// ---- LMDB ----

std::vector<std::string> LmdbNames(const DatasetInput& input) {
  std::vector<std::string> out;
  for (const std::string& n : LmdbShards(input)) {
    if (input.Find(n) != nullptr) out.push_back(n);
  }
  return out;
}

void Put(std::string* d, size_t at, size_t width, uint64_t v) {
  if (at + width > d->size()) return;
  for (size_t i = 0; i < width; ++i) (*d)[at + i] = static_cast<char>(v >> (8 * i));
}

uint64_t GetAt(const std::string& d, size_t at, size_t width) {
  uint64_t v = 0;
  if (at + width > d.size()) return 0;
  for (size_t i = 0; i < width; ++i)
    v |= static_cast<uint64_t>(static_cast<uint8_t>(d[at + i])) << (8 * i);
  return v;
}

// An edge value for a field of `width` bytes holding `current` in a file of `pages` pages.
uint64_t LmdbEdge(Rng& rng, size_t width, uint64_t current, uint64_t pages, uint64_t psize) {
  const uint64_t max = width == 8 ? ~0ull : (1ull << (8 * width)) - 1;
  uint64_t v;
  switch (rng.Below(8)) {
    case 0:
      v = pages;
      break;
    case 1:
      v = pages - 1 + rng.Below(3);
      break;
    case 2:
      v = rng.Chance(0.5) ? psize : psize + 1 - rng.Below(3);
      break;
    case 3:
      v = max - rng.Below(2);
      break;
    case 4:
      v = 1ull << (8 * width - 1);
      break;
    case 5:
      v = current ^ (1ull << rng.Below(8 * width));
      break;
    default:
      v = EdgeNumber(rng, current);
      break;
  }
  return v & max;
}

bool MutateLmdb(DatasetInput* input, Rng& rng, bool fix) {
  const std::vector<std::string> names = LmdbNames(*input);
  if (names.empty()) return false;
  std::string& d = input->Find(rng.Pick(names))->data;
  const uint64_t psize = LmdbPageSize(d);
  const uint64_t pages = d.size() / psize;
  if (pages < 2) return false;
  switch (rng.Below(5)) {
    case 0: {  // a meta page's field
      static const std::vector<std::pair<size_t, size_t>> kFields = [] {
        std::vector<std::pair<size_t, size_t>> f = {
            {lmdb::kMetaMagic, 4},   {lmdb::kMetaVersion, 4},  {lmdb::kMetaAddress, 8},
            {lmdb::kMetaMapsize, 8}, {lmdb::kMetaLastPage, 8}, {lmdb::kMetaTxnid, 8}};
        for (size_t db = 0; db < 2; ++db) {
          const size_t base = lmdb::kMetaDbs + db * lmdb::kDbSize;
          for (auto [off, w] : std::vector<std::pair<size_t, size_t>>{{lmdb::kDbPad, 4},
                                                                      {lmdb::kDbFlags, 2},
                                                                      {lmdb::kDbDepth, 2},
                                                                      {lmdb::kDbBranch, 8},
                                                                      {lmdb::kDbLeaf, 8},
                                                                      {lmdb::kDbOverflow, 8},
                                                                      {lmdb::kDbEntries, 8},
                                                                      {lmdb::kDbRoot, 8}}) {
            f.push_back({base + off, w});
          }
        }
        return f;
      }();
      // The meta with the larger txnid is the one LMDB uses.
      const size_t newer =
          GetAt(d, psize + lmdb::kMetaTxnid, 8) > GetAt(d, lmdb::kMetaTxnid, 8) ? 1 : 0;
      const size_t meta = rng.Chance(0.7) ? newer : rng.Below(2);
      const auto [off, w] = rng.Pick(kFields);
      const size_t at = meta * psize + off;
      Put(&d, at, w, LmdbEdge(rng, w, GetAt(d, at, w), pages, psize));
      if (rng.Chance(0.3)) Put(&d, (1 - meta) * psize + off, w, GetAt(d, at, w));  // both metas
      break;
    }
    case 1: {  // a page header
      const size_t page = rng.Chance(0.9) ? 2 + rng.Below(pages - 2) : rng.Below(2);
      if (page >= pages) return false;
      const size_t base = page * psize;
      switch (rng.Below(5)) {
        case 0:
          Put(&d, base, 8, LmdbEdge(rng, 8, page, pages, psize));
          break;
        case 1: {
          static const std::vector<uint64_t> kFlags = {
              0,    lmdb::kBranch, lmdb::kLeaf, lmdb::kOverflow, lmdb::kMeta, 0x10,
              0x20, 0x40,          0x22,        0x8000};
          Put(&d, base + 10, 2, rng.Chance(0.8) ? rng.Pick(kFlags) : rng.Bits() & 0xffff);
          break;
        }
        case 2:
          Put(&d, base + 12, 2, LmdbEdge(rng, 2, GetAt(d, base + 12, 2), pages, psize));
          break;
        case 3:
          Put(&d, base + 14, 2, LmdbEdge(rng, 2, GetAt(d, base + 14, 2), pages, psize));
          break;
        default:
          Put(&d, base + 12, 4, LmdbEdge(rng, 4, GetAt(d, base + 12, 4), pages, psize));
          break;
      }
      break;
    }
    case 2: {  // a node
      const bool leaf = rng.Chance(0.7);
      const std::vector<LmdbNode> nodes = LmdbNodes(d, leaf ? lmdb::kLeaf : lmdb::kBranch);
      if (nodes.empty()) return false;
      const LmdbNode& n = nodes[rng.Below(nodes.size())];
      switch (rng.Below(7)) {
        case 0:
          Put(&d, n.offset, 2, LmdbEdge(rng, 2, GetAt(d, n.offset, 2), pages, psize));
          break;
        case 1:
          Put(&d, n.offset + 2, 2, LmdbEdge(rng, 2, GetAt(d, n.offset + 2, 2), pages, psize));
          break;
        case 2:
          Put(&d, n.offset + 4, 2, rng.Chance(0.5) ? rng.Below(8) : rng.Bits() & 0xffff);
          break;
        case 3:
          Put(&d, n.offset + 6, 2, LmdbEdge(rng, 2, GetAt(d, n.offset + 6, 2), pages, psize));
          break;
        case 4: {  // the key's bytes
          const size_t ksize = GetAt(d, n.offset + 6, 2);
          if (ksize == 0 || n.offset + 8 + ksize > d.size()) return false;
          d[n.offset + 8 + rng.Below(ksize)] = "0129:/\xff"[rng.Below(7)];
          break;
        }
        case 5: {  // a child page (branch) or an overflow page (F_BIGDATA leaf)
          const size_t ksize = GetAt(d, n.offset + 6, 2);
          const uint64_t v = LmdbEdge(rng, 8, GetAt(d, n.offset, 4), pages, psize);
          if (leaf) {
            if ((GetAt(d, n.offset + 4, 2) & lmdb::kBigData) == 0) return false;
            Put(&d, n.offset + 8 + ksize, 8, v);
          } else {
            Put(&d, n.offset, 2, v);
            Put(&d, n.offset + 2, 2, v >> 16);
            Put(&d, n.offset + 4, 2, v >> 32);
          }
          break;
        }
        default:  // the pointer to the node
          Put(&d, n.ptr_offset, 2, LmdbEdge(rng, 2, GetAt(d, n.ptr_offset, 2), pages, psize));
          break;
      }
      break;
    }
    case 3: {  // a value, in place
      const std::vector<LmdbValue> values = LmdbValues(d);
      if (values.empty()) return false;
      const LmdbValue& v = values[rng.Below(values.size())];
      std::vector<Feature> features;
      if (v.size == 0) return false;
      auto* bytes = reinterpret_cast<uint8_t*>(d.data()) + v.offset;
      if (!ParseExample(std::string_view(d.data() + v.offset, v.size), &features) ||
          rng.Chance(0.2)) {
        bytes[rng.Below(v.size)] ^= static_cast<uint8_t>(1 + rng.Below(255));
        break;
      }
      Feature& f = features[rng.Below(features.size())];
      if (f.kind == 3 && f.int_size > 0) {
        const uint64_t edge = EdgeNumber(rng, f.ints[0]);
        // Where the edge does not fit the varint's bytes, its low bits.
        const uint64_t fits = f.int_size >= 9 ? ~0ull : (1ull << (7 * f.int_size)) - 1;
        if (!EncodeVarintInPlace(edge & fits, bytes + f.int_offset, f.int_size)) {
          return false;
        }
      } else if (f.kind == 1 && !f.bytes.empty() && !f.bytes[0].empty()) {
        bytes[f.bytes_offset + rng.Below(f.bytes[0].size())] ^=
            static_cast<uint8_t>(1 + rng.Below(255));
        // The pixel checksum, in the varint's bytes, where it fits.
        std::vector<Feature> edited;
        if (fix && ParseExample(std::string_view(d.data() + v.offset, v.size), &edited)) {
          std::vector<Feature> fixed = edited;
          FixPixelCrc(&fixed);
          for (size_t i = 0; i < fixed.size(); ++i) {
            if (fixed[i].kind == 3 && edited[i].int_size > 0 && !fixed[i].ints.empty() &&
                fixed[i].ints[0] != edited[i].ints[0]) {
              EncodeVarintInPlace(fixed[i].ints[0], bytes + edited[i].int_offset,
                                  edited[i].int_size);
            }
          }
        }
      } else {
        return false;
      }
      break;
    }
    default: {  // cut or grown
      if (rng.Chance(0.5)) {
        d.resize(rng.Chance(0.5) ? psize * (1 + rng.Below(pages)) : rng.Below(d.size()));
      } else {
        d += Garbage(rng, rng.Chance(0.5) ? psize : 1 + rng.Below(64));
      }
      break;
    }
  }
  return true;
}

// ---- Files ----

bool MutateFileSet(DatasetInput* input, Rng& rng) {
  if (input->files.empty()) return false;
  const size_t i = rng.Below(input->files.size());
  DatasetFile& f = input->files[i];
  static const std::vector<std::string> kNames = {"shard-00009-of-00002.tfrecord",
                                                  "shard-00000.tfrecord.tmp",
                                                  "manifest.json.tmp",
                                                  "shard-00000-of-00001.lmdb",
                                                  "shard-00000-of-00001.lmdb-lock",
                                                  "rejects.tsv",
                                                  "..",
                                                  "a/b",
                                                  "",
                                                  std::string("x\0y", 3)};
  switch (rng.Below(6)) {
    case 0:
      input->files.erase(input->files.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    case 1:  // renamed
      f.name = rng.Pick(kNames);
      break;
    case 2: {  // repeated under another name
      DatasetFile copy = f;
      copy.name = rng.Pick(kNames);
      input->files.push_back(std::move(copy));
      break;
    }
    case 3:  // emptied
      f.data.clear();
      break;
    case 4: {  // two files' bytes swapped
      DatasetFile& g = input->files[rng.Below(input->files.size())];
      std::swap(f.data, g.data);
      break;
    }
    default:  // an unlisted file
      input->files.push_back({rng.Pick(kNames), Garbage(rng, rng.Below(32))});
      break;
  }
  return true;
}

// libFuzzer's byte edits of one file, growing it by at most `budget` bytes.
void MutateBytes(DatasetFile& f, size_t budget) {
  const size_t max = std::min(f.data.size() * 2 + 64, f.data.size() + budget);
  const size_t size = f.data.size();
  f.data.resize(std::max<size_t>(max, 1));
  f.data.resize(LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(f.data.data()), size, f.data.size()));
}

bool MutateFileBytes(DatasetInput* input, Rng& rng, size_t budget) {
  if (input->files.empty()) return false;
  MutateBytes(input->files[rng.Below(input->files.size())], budget);
  return true;
}

bool MutateManifestBytes(DatasetInput* input, size_t budget) {
  DatasetFile* f = input->Find("manifest.json");
  if (f == nullptr) return false;
  MutateBytes(*f, budget);
  return true;
}

enum class Kind {
  kManifestJson,
  kManifestText,
  kIndex,
  kFraming,
  kPayload,
  kLmdb,
  kFileSet,
  kFileBytes,
  kFlags,
  kNothing,
};

// One mutation of `input` with its fix-ups; false when the chosen one did not apply.
bool MutateOnce(DatasetInput* input, Rng& rng, size_t budget) {
  static const std::vector<std::pair<Kind, int>> kWeights = {
      {Kind::kManifestJson, 20}, {Kind::kManifestText, 3}, {Kind::kIndex, 8},
      {Kind::kFraming, 12},      {Kind::kPayload, 24},     {Kind::kLmdb, 24},
      {Kind::kFileSet, 3},       {Kind::kFileBytes, 8},    {Kind::kFlags, 3},
      {Kind::kNothing, 1}};
  int total = 0;
  for (const auto& [k, w] : kWeights) total += w;
  int pick = static_cast<int>(rng.Below(static_cast<size_t>(total)));
  Kind kind = Kind::kNothing;
  for (const auto& [k, w] : kWeights) {
    if (pick < w) {
      kind = k;
      break;
    }
    pick -= w;
  }
  const bool fix = rng.Chance(5.0 / 6.0);
  FixUpOptions o;
  bool structural = false, resized = false, done = true;
  switch (kind) {
    case Kind::kIndex:
      done = MutateIndex(input, rng, &o.keep);
      break;
    case Kind::kFraming:
      done = MutateFraming(input, rng, &structural, &o.keep);
      break;
    case Kind::kPayload:
      done = MutateTfrecordPayload(input, rng, fix, &resized);
      break;
    case Kind::kLmdb:
      done = MutateLmdb(input, rng, fix);
      break;
    case Kind::kFileSet:
      done = MutateFileSet(input, rng);
      break;
    case Kind::kFileBytes:
      done = MutateFileBytes(input, rng, budget);
      break;
    case Kind::kFlags:
      input->flags ^= static_cast<uint8_t>(2u << rng.Below(3));
      break;
    default:
      break;
  }
  if (!done) return false;
  if (fix) {
    // Each fix-up is skipped now and then on its own.
    o.framing = rng.Chance(0.95);
    o.index = rng.Chance(0.95) && !(kind == Kind::kFraming && rng.Chance(0.2));
    // The counts follow records added, dropped or resized, and labels edited.
    o.counts = (structural || resized || kind == Kind::kPayload ||
                (kind == Kind::kLmdb && rng.Chance(0.5))) &&
               rng.Chance(0.7);
    o.entries = rng.Chance(0.95);
    o.manifest_checksum = rng.Chance(0.95);
    FixUp(input, o);
  }
  if (kind == Kind::kManifestJson || kind == Kind::kManifestText) {
    const bool text = kind == Kind::kManifestText;
    if (text ? !(rng.Chance(0.5) ? DuplicateManifestKey(input, rng)
                                 : MutateManifestBytes(input, budget))
             : !MutateManifestJson(input, rng)) {
      return false;
    }
    if (fix && !text) {
      FixUpOptions checksum;
      checksum.framing = checksum.index = checksum.entries = false;
      FixUp(input, checksum);
    }
  }
  // A pristine dataset read with other flags is still pristine.
  if (kind != Kind::kNothing && kind != Kind::kFlags) {
    input->flags &= static_cast<uint8_t>(~kPristine);
  }
  return true;
}

}  // namespace
}  // namespace shardpack::fuzz

using shardpack::fuzz::DatasetInput;

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  shardpack::fuzz::Rng rng(seed);
  const DatasetInput original = shardpack::fuzz::Unpack(data, size);
  for (int attempt = 0; attempt < 8; ++attempt) {
    DatasetInput input = original;
    const size_t packed = shardpack::fuzz::Pack(input).size();
    const size_t budget = max_size > packed ? max_size - packed : 0;
    // Now and then two mutations at once.
    bool changed = shardpack::fuzz::MutateOnce(&input, rng, budget);
    if (changed && rng.Chance(0.2)) shardpack::fuzz::MutateOnce(&input, rng, budget);
    if (!changed) continue;
    const std::string out = shardpack::fuzz::Pack(input);
    if (out.size() > max_size) continue;
    std::memcpy(data, out.data(), out.size());
    return out.size();
  }
  return size;
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  shardpack::fuzz::Rng rng(seed);
  DatasetInput a = shardpack::fuzz::Unpack(data1, size1);
  const DatasetInput b = shardpack::fuzz::Unpack(data2, size2);
  if (b.files.empty()) return 0;
  const shardpack::fuzz::DatasetFile& theirs = b.files[rng.Below(b.files.size())];
  shardpack::fuzz::DatasetFile* mine = a.Find(theirs.name);
  if (mine != nullptr && rng.Chance(0.8)) {
    mine->data = theirs.data;
  } else if (!a.files.empty() && rng.Chance(0.5)) {
    a.files[rng.Below(a.files.size())].data = theirs.data;
  } else {
    a.files.push_back(theirs);
  }
  if (rng.Chance(5.0 / 6.0)) {
    shardpack::fuzz::FixUpOptions o;
    o.counts = rng.Chance(0.5);
    shardpack::fuzz::FixUp(&a, o);
  }
  a.flags &= static_cast<uint8_t>(~shardpack::fuzz::kPristine);
  const std::string packed = shardpack::fuzz::Pack(a);
  if (packed.size() > max_out_size) return 0;
  std::memcpy(out, packed.data(), packed.size());
  return packed.size();
}
