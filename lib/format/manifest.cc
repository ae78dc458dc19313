#include "shardpack/manifest.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <unordered_map>

#include "format/format.h"
#include "io/env.h"
#include "util/hash.h"
#include "util/text.h"

#ifndef SHARDPACK_VERSION
#error "SHARDPACK_VERSION must be defined by the build"
#endif

namespace shardpack {

std::string_view Version() { return SHARDPACK_VERSION; }

std::string_view BackendName(Backend b) { return b == Backend::kTfrecord ? "tfrecord" : "lmdb"; }

std::string_view ImageEncodingName(ImageEncoding e) {
  switch (e) {
    case ImageEncoding::kRaw:
      return "raw";
    case ImageEncoding::kJpeg:
      return "jpeg";
    case ImageEncoding::kPng:
      return "png";
    case ImageEncoding::kMixed:
      return "mixed";
  }
  return "?";
}

StatusOr<ImageEncoding> ParseImageEncoding(std::string_view name) {
  for (ImageEncoding e :
       {ImageEncoding::kRaw, ImageEncoding::kJpeg, ImageEncoding::kPng, ImageEncoding::kMixed}) {
    if (name == ImageEncodingName(e)) return e;
  }
  return InvalidArgumentError("encoding \"" + std::string(name) +
                              "\": expected raw, jpeg, png or mixed");
}

std::string_view LmdbSchemaName(LmdbSchema s) {
  return s == LmdbSchema::kExample ? "example" : "caffe";
}

namespace {

using Json = nlohmann::ordered_json;
// An entry of classes or shards, parsed on its own (order of keys does not matter there).
using EntryJson = nlohmann::json;

// The name the converter gives the list of its rejects (docs/FORMAT.md).
constexpr std::string_view kRejectsName = "rejects.tsv";

Json FileJson(const FileEntry& f) {
  return Json{{"file", f.file}, {"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}};
}

// Why `name` cannot be the name of a file of a dataset (the rule FileEntry states); ""
// when it can. `shard`: a shard's data file or index, which may not take the name of the
// rejects list either.
std::string FileNameFault(std::string_view name, bool shard) {
  if (name.empty()) return "it is empty";
  if (name.size() > kMaxFileNameBytes) {
    return "it is " + std::to_string(name.size()) + " bytes long, more than " +
           std::to_string(kMaxFileNameBytes);
  }
  if (!IsPrintableUtf8(name)) return "it holds a control character or bytes that are not UTF-8";
  if (name.find_first_of("/\\") != std::string_view::npos) return "it holds a '/' or '\\'";
  if (name.front() == '.') {
    return "it starts with '.' (\".\", \"..\", and the names of shardpack's own files: the "
           "cache's .lock, .use, .fetch and .reserved, the converter's .shardpack-* records)";
  }
  if (name == format::kManifestName || name == format::kPartsDirName || name == "url") {
    return "it is the name of one of shardpack's own files";
  }
  for (std::string_view suffix : {".tmp", ".partial", ".bad"}) {
    if (name.ends_with(suffix)) {
      return "it ends in \"" + std::string(suffix) +
             "\", the suffix of shardpack's files being written or set aside";
    }
  }
  if (shard && name == kRejectsName) return "it is the name of the rejects list";
  return "";
}

// Reads fields with messages that name the field; every error is a Corruption of the
// manifest, except an unknown major version. J: the JSON type (ordered for the manifest's
// own keys, whose order `options` keeps; plain for the entries of classes and shards).
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Status Error(const std::string& path, const std::string& what) const {
    return CorruptionError(std::string(source_) + ": " + path + ": " + what);
  }

  template <class J>
  Status Object(const J& j, const std::string& path) const {
    return j.is_object() ? Status::Ok() : Error(path, "expected an object");
  }

  template <class J>
  Status Uint(const J& j, const std::string& key, const std::string& path, uint64_t* out,
              uint64_t max = UINT64_MAX) const {
    auto it = j.find(key);
    if (it == j.end()) return Error(path + "." + key, "missing");
    if (!it->is_number_unsigned() &&
        !(it->is_number_integer() && it->template get<int64_t>() >= 0)) {
      return Error(path + "." + key, "expected a non-negative integer, found " + it->dump());
    }
    *out = it->template get<uint64_t>();
    if (*out > max) {
      return Error(path + "." + key, std::to_string(*out) + " exceeds " + std::to_string(max));
    }
    return Status::Ok();
  }

  template <class J>
  Status Int(const J& j, const std::string& key, const std::string& path, int* out, int max) const {
    uint64_t v;
    SHARDPACK_RETURN_IF_ERROR(Uint(j, key, path, &v, static_cast<uint64_t>(max)));
    *out = static_cast<int>(v);
    return Status::Ok();
  }

  template <class J>
  Status String(const J& j, const std::string& key, const std::string& path,
                std::string* out) const {
    auto it = j.find(key);
    if (it == j.end()) return Error(path + "." + key, "missing");
    if (!it->is_string()) return Error(path + "." + key, "expected a string");
    *out = it->template get<std::string>();
    return Status::Ok();
  }

  template <class J>
  Status File(const J& j, const std::string& path, bool shard, FileEntry* out) const {
    SHARDPACK_RETURN_IF_ERROR(Object(j, path));
    SHARDPACK_RETURN_IF_ERROR(String(j, "file", path, &out->file));
    if (std::string why = FileNameFault(out->file, shard); !why.empty()) {
      return Error(path + ".file",
                   "\"" + EscapeBytes(out->file) + "\" is not a plain file name: " + why);
    }
    SHARDPACK_RETURN_IF_ERROR(Uint(j, "bytes", path, &out->bytes));
    SHARDPACK_RETURN_IF_ERROR(String(j, "xxh3_128", path, &out->xxh3_128));
    if (out->xxh3_128.size() != 32 ||
        out->xxh3_128.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return Error(path + ".xxh3_128", "expected 32 lower-case hex digits");
    }
    return Status::Ok();
  }

 private:
  std::string_view source_;
};

}  // namespace

namespace {

// Every key of SerializeManifest but the checksum.
Json ManifestJson(const Manifest& m) {
  Json j;
  j["format"] = "shardpack";
  j["format_version"] = std::to_string(m.format_major) + "." + std::to_string(m.format_minor);
  j["tool_version"] = m.tool_version;
  j["backend"] = std::string(BackendName(m.backend));
  const bool caffe = m.backend == Backend::kLmdb && m.lmdb_schema == LmdbSchema::kCaffe;
  if (caffe) j["lmdb_schema"] = std::string(LmdbSchemaName(m.lmdb_schema));
  j["num_samples"] = m.num_samples;
  const bool encoded = m.image.encoding != ImageEncoding::kRaw;
  Json image{{"layout", encoded ? "encoded"
                        : caffe ? "CHW"
                                : "HWC"},
             {"dtype", "uint8"},
             {"channels", m.image.channels}};
  if (encoded) image["encoding"] = std::string(ImageEncodingName(m.image.encoding));
  if (m.image.fixed()) {
    image["height"] = m.image.height;
    image["width"] = m.image.width;
  } else {
    image["max_side"] = m.image.max_side;
  }
  j["image"] = image;
  j["pixel_alignment"] = m.pixel_alignment;
  j["label_base"] = 0;
  Json classes = Json::array();
  for (const ClassEntry& c : m.classes) classes.push_back({{"name", c.name}, {"count", c.count}});
  j["classes"] = classes;
  j["seed"] = m.seed;
  j["options"] = Json::parse(m.options_json.empty() ? "{}" : m.options_json);
  Json shards = Json::array();
  for (const ShardEntry& s : m.shards) {
    Json e = FileJson(s.data);
    e["records"] = s.records;
    e["first_sample"] = s.first_sample;
    if (s.index) e["index"] = FileJson(*s.index);
    shards.push_back(e);
  }
  j["shards"] = shards;
  if (m.rejects) j["rejects"] = FileJson(*m.rejects);
  return j;
}

}  // namespace

std::string ManifestChecksum(const Manifest& m) {
  const std::string text = ManifestJson(m).dump(2) + "\n";
  return Xxh3Hex(text.data(), text.size());
}

std::string SerializeManifest(const Manifest& m) {
  Json j = ManifestJson(m);
  if (m.format_major > 1 || m.format_minor >= 2) {
    const std::string text = j.dump(2) + "\n";
    j["manifest_xxh3_128"] = Xxh3Hex(text.data(), text.size());
  }
  return j.dump(2) + "\n";
}

namespace {

// The JSON values ParseManifest holds besides the entries it has read (which it keeps,
// typed): the manifest's own fields and `options` (a few dozen values in a writer's
// manifest), and in the one entry of classes or shards being read (about ten in a
// writer's). Bound its memory, with the entries, whatever the file holds
// (shardpack/manifest.h).
constexpr uint64_t kMaxLooseValues = 10000;
constexpr uint64_t kMaxEntryValues = 64;

// nlohmann's SAX interface: builds the manifest's JSON the way nlohmann's DOM parser does,
// except for the elements of the top-level arrays "classes" and "shards": each is handed
// to `on_entry` as soon as it is complete, then dropped, and the array stays empty in the
// tree. A DOM of the whole file took up to 30 times its bytes (an array of a million `{}`
// is a million objects of 16 bytes, each with a map of its own). Stops the parse, saying
// why in error(), at a top-level key given twice (which copy would count?), at more than
// kMaxLooseValues values in the tree and at more than kMaxEntryValues in one entry. The
// tree's count starts at 1, for the manifest_xxh3_128 that SerializeManifest may add, so
// that a manifest written back from one accepted is accepted too.
class ManifestSax {
 public:
  enum class List { kClasses, kShards };
  using OnEntry = std::function<void(List list, size_t index, EntryJson&& entry)>;

  explicit ManifestSax(OnEntry on_entry) : on_entry_(std::move(on_entry)) {}

  Json& root() { return root_; }
  const std::string& error() const { return error_; }

  bool null() { return Value(nullptr); }
  bool boolean(bool v) { return Value(v); }
  bool number_integer(Json::number_integer_t v) { return Value(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return Value(v); }
  bool number_float(Json::number_float_t v, const std::string&) { return Value(v); }
  // The lexer's buffer is taken, not copied: it starts over at the next token.
  bool string(std::string& v) { return Value(std::move(v)); }
  bool binary(Json::binary_t&) { return false; }  // JSON text holds none
  bool start_object(size_t) { return Open(true); }
  bool start_array(size_t) { return Open(false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    if (!entry_.empty()) {
      entry_key_ = std::move(k);
      return true;
    }
    if (tree_.size() == 1 && root_.is_object()) {
      if (!top_keys_.insert(k).second) {
        error_ = "key \"" + EscapeBytes(k) + "\" is given twice";
        return false;
      }
      uncounted_ = k == "manifest_xxh3_128";  // counted already
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(size_t, const std::string&, const Json::exception&) { return false; }

 private:
  // A value added to `container` (an array, or an object at `key`; a key given twice in
  // one object keeps its last value, as nlohmann's parser does); where it is now.
  template <class J>
  static J* Put(J* container, std::string* key, J&& value) {
    if (container->is_array()) {
      container->push_back(std::move(value));
      return &container->back();
    }
    J& slot = (*container)[std::move(*key)];
    slot = std::move(value);
    return &slot;
  }

  bool Count() {
    if (streaming_) {
      if (++entry_values_ > kMaxEntryValues) {
        error_ = std::string(list_ == List::kClasses ? "classes" : "shards") + "[" +
                 std::to_string(index_) + "]: more than " + std::to_string(kMaxEntryValues) +
                 " JSON values in one entry";
        return false;
      }
      return true;
    }
    if (uncounted_) {
      uncounted_ = false;
      return true;
    }
    if (++values_ > kMaxLooseValues) {
      error_ = "more than " + std::to_string(kMaxLooseValues) +
               " JSON values besides the entries of classes and shards (the manifest's own "
               "fields and options)";
      return false;
    }
    return true;
  }

  template <class V>
  bool Value(V&& v) {
    if (!Count()) return false;
    if (!entry_.empty()) {
      Put(entry_.back(), &entry_key_, EntryJson(std::forward<V>(v)));
    } else if (streaming_) {
      Emit(EntryJson(std::forward<V>(v)));
    } else if (tree_.empty()) {
      root_ = Json(std::forward<V>(v));
    } else {
      Put(tree_.back(), &key_, Json(std::forward<V>(v)));
    }
    return true;
  }

  bool Open(bool object) {
    if (!Count()) return false;
    if (!entry_.empty()) {
      entry_.push_back(
          Put(entry_.back(), &entry_key_, object ? EntryJson::object() : EntryJson::array()));
    } else if (streaming_) {
      entry_root_ = object ? EntryJson::object() : EntryJson::array();
      entry_.push_back(&entry_root_);
    } else if (tree_.empty()) {
      root_ = object ? Json::object() : Json::array();
      tree_.push_back(&root_);
    } else {
      const bool top = tree_.size() == 1 && root_.is_object();
      const bool classes = top && !object && key_ == "classes";
      const bool shards = top && !object && key_ == "shards";
      tree_.push_back(Put(tree_.back(), &key_, object ? Json::object() : Json::array()));
      if (classes || shards) {
        streaming_ = true;
        list_ = classes ? List::kClasses : List::kShards;
        index_ = 0;
      }
    }
    return true;
  }

  bool Close() {
    if (!entry_.empty()) {
      entry_.pop_back();
      if (entry_.empty()) Emit(std::move(entry_root_));
      return true;
    }
    streaming_ = false;  // the list, if one was open, is done
    tree_.pop_back();
    return true;
  }

  void Emit(EntryJson&& entry) {
    on_entry_(list_, index_++, std::move(entry));
    entry_root_ = EntryJson();
    entry_values_ = 0;
  }

  OnEntry on_entry_;
  Json root_;
  std::vector<Json*> tree_;  // the open arrays and objects, outermost first
  std::string key_;          // of the next value of an object in the tree
  std::set<std::string> top_keys_;
  // Inside classes or shards: the entry being read, its open arrays and objects.
  bool streaming_ = false;
  List list_ = List::kClasses;
  size_t index_ = 0;
  EntryJson entry_root_;
  std::vector<EntryJson*> entry_;
  std::string entry_key_;
  uint64_t values_ = 1;        // in the tree, manifest_xxh3_128 counted from the start
  bool uncounted_ = false;     // the next value is manifest_xxh3_128's
  uint64_t entry_values_ = 0;  // in the entry being read
  std::string error_;
};

// classes[i], checked: a printable UTF-8 name of at most kMaxTextBytes (the writer's
// limit, and what a record's image/class/text holds).
Status ReadClass(const Reader& r, const EntryJson& j, size_t i, ClassEntry* c) {
  const std::string path = "classes[" + std::to_string(i) + "]";
  if (i >= kMaxClasses) {
    return r.Error("classes", "more than " + std::to_string(kMaxClasses) +
                                  " classes, the most a dataset may have");
  }
  SHARDPACK_RETURN_IF_ERROR(r.Object(j, path));
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "name", path, &c->name));
  if (c->name.size() > kMaxTextBytes) {
    return r.Error(path + ".name", std::to_string(c->name.size()) + " bytes, more than " +
                                       std::to_string(kMaxTextBytes));
  }
  if (!IsPrintableUtf8(c->name)) {
    return r.Error(path + ".name", "\"" + EscapeBytes(c->name) +
                                       "\" holds a control character: class names are "
                                       "printable UTF-8");
  }
  return r.Uint(j, "count", path, &c->count);
}

// shards[i], checked on its own: the backend-dependent rules come later. `next_sample`:
// the first sample it must start at; moved past it.
Status ReadShard(const Reader& r, const EntryJson& s, size_t i, uint64_t* next_sample,
                 ShardEntry* e) {
  const std::string path = "shards[" + std::to_string(i) + "]";
  SHARDPACK_RETURN_IF_ERROR(r.File(s, path, /*shard=*/true, &e->data));
  SHARDPACK_RETURN_IF_ERROR(r.Uint(s, "records", path, &e->records));
  if (e->records == 0) return r.Error(path + ".records", "a shard holds at least one record");
  SHARDPACK_RETURN_IF_ERROR(r.Uint(s, "first_sample", path, &e->first_sample));
  if (e->first_sample != *next_sample) {
    return r.Error(path + ".first_sample",
                   std::to_string(e->first_sample) + ", expected " + std::to_string(*next_sample));
  }
  // Not `next_sample + records`: a sum past 2^64 would wrap.
  if (e->records > UINT64_MAX - *next_sample) {
    return r.Error(path + ".records", std::to_string(e->records) + ": the counts overflow");
  }
  *next_sample += e->records;
  auto index = s.find("index");
  if (index != s.end()) {
    FileEntry f;
    SHARDPACK_RETURN_IF_ERROR(r.File(*index, path + ".index", /*shard=*/true, &f));
    e->index = std::move(f);
  }
  return Status::Ok();
}

// Every file the manifest lists has a name of its own: one listed twice (two shards with
// one data file, an index that is another shard's data file, rejects.tsv a shard's index)
// would be read, fetched or replaced as two files.
Status CheckNamesDistinct(const Reader& r, const Manifest& m) {
  std::unordered_map<std::string_view, std::string> seen;
  seen.reserve(2 * m.shards.size() + 1);
  auto add = [&](const FileEntry& f, std::string path) -> Status {
    auto [it, fresh] = seen.emplace(f.file, path);
    if (fresh) return Status::Ok();
    return r.Error(path + ".file",
                   "\"" + f.file + "\" is listed already, as " + it->second + ".file");
  };
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const std::string path = "shards[" + std::to_string(i) + "]";
    SHARDPACK_RETURN_IF_ERROR(add(m.shards[i].data, path));
    if (m.shards[i].index) SHARDPACK_RETURN_IF_ERROR(add(*m.shards[i].index, path + ".index"));
  }
  if (m.rejects) SHARDPACK_RETURN_IF_ERROR(add(*m.rejects, "rejects"));
  return Status::Ok();
}

// What the entries of classes and shards left for the checks after them: their first
// fault each, and the sample after the last shard's.
struct EntryResults {
  Status classes_fault, shards_fault;
  uint64_t next_sample = 0;
};

// The manifest's JSON, but for the entries of classes and shards, which are read into
// `m` as the parser reaches them. Their faults wait in `entries` until the fields before
// them in ParseManifest's order are checked (a manifest of a newer major version is
// NotSupported, whatever its entries hold); after the first fault of a list, its other
// entries are parsed, not kept.
StatusOr<Json> ParseJson(std::string_view text, std::string_view source, const Reader& r,
                         Manifest* m, EntryResults* entries) {
  ManifestSax sax([&](ManifestSax::List list, size_t i, EntryJson&& entry) {
    if (list == ManifestSax::List::kClasses) {
      if (!entries->classes_fault.ok()) return;
      ClassEntry c;
      entries->classes_fault = ReadClass(r, entry, i, &c);
      if (entries->classes_fault.ok()) m->classes.push_back(std::move(c));
    } else {
      if (!entries->shards_fault.ok()) return;
      ShardEntry e;
      entries->shards_fault = ReadShard(r, entry, i, &entries->next_sample, &e);
      if (entries->shards_fault.ok()) m->shards.push_back(std::move(e));
    }
  });
  const bool parsed = Json::sax_parse(text.data(), text.data() + text.size(), &sax);
  if (!sax.error().empty()) return CorruptionError(std::string(source) + ": " + sax.error());
  if (!parsed) return CorruptionError(std::string(source) + ": not valid JSON");
  return std::move(sax.root());
}

// format and format_version: shardpack's, of a major version this build reads.
Status ReadFormat(const Reader& r, const Json& j, std::string_view source, Manifest* m) {
  std::string format, version;
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "format", "manifest", &format));
  if (format != "shardpack") return r.Error("format", "\"" + format + "\", expected \"shardpack\"");
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "format_version", "manifest", &version));
  int consumed = 0;
  if (version.find_first_not_of("0123456789.") != std::string::npos ||
      std::sscanf(version.c_str(), "%4d.%4d%n", &m->format_major, &m->format_minor, &consumed) !=
          2 ||
      consumed != static_cast<int>(version.size())) {
    return r.Error("format_version", "\"" + version + "\" is not MAJOR.MINOR");
  }
  if (m->format_major > kFormatMajor) {
    return NotSupportedError(std::string(source) + ": format version " + version +
                             ", this build reads <= " + std::to_string(kFormatMajor) + ".x");
  }
  if (m->format_major < 1) return r.Error("format_version", version + " was never released");
  return Status::Ok();
}

// backend, and lmdb_schema, which only an LMDB dataset may name.
Status ReadBackend(const Reader& r, const Json& j, Manifest* m) {
  std::string backend;
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "backend", "manifest", &backend));
  if (backend == "tfrecord") {
    m->backend = Backend::kTfrecord;
  } else if (backend == "lmdb") {
    m->backend = Backend::kLmdb;
  } else {
    return r.Error("backend", "\"" + backend + "\", expected \"tfrecord\" or \"lmdb\"");
  }
  if (!j.contains("lmdb_schema")) return Status::Ok();
  std::string schema;
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "lmdb_schema", "manifest", &schema));
  if (m->backend != Backend::kLmdb) {
    return r.Error("lmdb_schema", "present, but the backend is \"" + backend + "\"");
  }
  if (schema == "caffe") {
    m->lmdb_schema = LmdbSchema::kCaffe;
  } else if (schema != "example") {
    return r.Error("lmdb_schema", "\"" + schema + "\", expected \"example\" or \"caffe\"");
  }
  return Status::Ok();
}

// image.encoding, present from 1.3 on for encoded images: "jpeg", "png" or "mixed".
Status ReadImageEncoding(const Reader& r, const Json& image, Manifest* m) {
  if (!image.contains("encoding")) return Status::Ok();
  std::string name;
  SHARDPACK_RETURN_IF_ERROR(r.String(image, "encoding", "image", &name));
  auto encoding = ParseImageEncoding(name);
  if (!encoding.ok() || *encoding == ImageEncoding::kRaw) {
    return r.Error("image.encoding", "\"" + name + "\", expected \"jpeg\", \"png\" or \"mixed\"");
  }
  if (*encoding == ImageEncoding::kMixed && m->lmdb_schema == LmdbSchema::kCaffe) {
    return r.Error("image.encoding", "\"mixed\", but the LMDB schema is \"caffe\"");
  }
  m->image.encoding = *encoding;
  return Status::Ok();
}

// image.layout and image.dtype: encoded images are "encoded" (which a 1.2 reader refuses
// rather than reading image/raw that is not there), Caffe Datum values "CHW", every other
// dataset's pixels "HWC"; all of them "uint8".
Status CheckImageLayout(const Reader& r, const Json& image, const Manifest& m) {
  const char* layout = m.image.encoding != ImageEncoding::kRaw ? "encoded"
                       : m.lmdb_schema == LmdbSchema::kCaffe   ? "CHW"
                                                               : "HWC";
  for (auto [key, want] : {std::pair{"layout", layout}, std::pair{"dtype", "uint8"}}) {
    std::string v;
    SHARDPACK_RETURN_IF_ERROR(r.String(image, key, "image", &v));
    if (v != want) {
      return r.Error(std::string("image.") + key, "\"" + v + "\", expected \"" + want + "\"");
    }
  }
  return Status::Ok();
}

// image.height and image.width (a fixed size, of at most the largest image's pixels), or
// else image.max_side.
Status ReadImageSize(const Reader& r, const Json& image, ImageSpec* spec) {
  const int kMaxSide = static_cast<int>(kMaxImageSide);
  if (!image.contains("height") && !image.contains("width")) {
    return r.Int(image, "max_side", "image", &spec->max_side, kMaxSide);
  }
  SHARDPACK_RETURN_IF_ERROR(r.Int(image, "height", "image", &spec->height, kMaxSide));
  SHARDPACK_RETURN_IF_ERROR(r.Int(image, "width", "image", &spec->width, kMaxSide));
  if (!spec->fixed()) return r.Error("image", "a fixed size must be positive");
  // The writer's limit: no image of more pixels is stored.
  const uint64_t pixels = static_cast<uint64_t>(spec->height) * static_cast<uint64_t>(spec->width);
  if (pixels > kMaxImagePixels) {
    return r.Error("image", std::to_string(spec->height) + " x " + std::to_string(spec->width) +
                                " is " + std::to_string(pixels) + " pixels, more than the " +
                                std::to_string(kMaxImagePixels) + " of the largest image");
  }
  return Status::Ok();
}

// image: channels, encoding, layout and dtype, size.
Status ReadImage(const Reader& r, const Json& j, Manifest* m) {
  auto image = j.find("image");
  if (image == j.end()) return r.Error("image", "missing");
  SHARDPACK_RETURN_IF_ERROR(r.Object(*image, "image"));
  SHARDPACK_RETURN_IF_ERROR(r.Int(*image, "channels", "image", &m->image.channels, 3));
  if (m->image.channels != 1 && m->image.channels != 3) {
    return r.Error("image.channels", std::to_string(m->image.channels) + ", expected 1 or 3");
  }
  SHARDPACK_RETURN_IF_ERROR(ReadImageEncoding(r, *image, m));
  SHARDPACK_RETURN_IF_ERROR(CheckImageLayout(r, *image, *m));
  return ReadImageSize(r, *image, &m->image);
}

// pixel_alignment, a power of two, and label_base, which is 0.
Status ReadAlignmentAndLabelBase(const Reader& r, const Json& j, Manifest* m) {
  uint64_t alignment;
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "pixel_alignment", "manifest", &alignment, 4096));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return r.Error("pixel_alignment", std::to_string(alignment) + " is not a power of two");
  }
  m->pixel_alignment = static_cast<uint32_t>(alignment);
  uint64_t label_base;
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "label_base", "manifest", &label_base));
  if (label_base != 0) {
    return r.Error("label_base", std::to_string(label_base) + ", labels are 0-based");
  }
  return Status::Ok();
}

// classes: an array whose entries were all read, with counts that add up to num_samples.
Status CheckClasses(const Reader& r, const Json& j, const Status& classes_fault,
                    const Manifest& m) {
  auto classes = j.find("classes");
  if (classes == j.end() || !classes->is_array()) return r.Error("classes", "expected an array");
  SHARDPACK_RETURN_IF_ERROR(classes_fault);
  uint64_t class_total = 0;
  for (const ClassEntry& c : m.classes) {
    if (c.count > UINT64_MAX - class_total) {
      return r.Error("classes", "the counts overflow");
    }
    class_total += c.count;
  }
  if (class_total != m.num_samples) {
    return r.Error("classes", "counts add up to " + std::to_string(class_total) +
                                  ", num_samples is " + std::to_string(m.num_samples));
  }
  return Status::Ok();
}

// options: an object, kept as its text.
Status ReadOptions(const Reader& r, const Json& j, Manifest* m) {
  auto options = j.find("options");
  if (options == j.end() || !options->is_object()) return r.Error("options", "expected an object");
  m->options_json = options->dump();
  return Status::Ok();
}

// shards: an array whose entries were all read, each with an index in a TFRecord
// dataset, with record counts that add up to num_samples.
Status CheckShards(const Reader& r, const Json& j, const EntryResults& entries, const Manifest& m) {
  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array()) return r.Error("shards", "expected an array");
  if (m.backend == Backend::kTfrecord) {
    for (size_t i = 0; i < m.shards.size(); ++i) {
      if (!m.shards[i].index) {
        return r.Error("shards[" + std::to_string(i) + "].index",
                       "missing (every TFRecord shard has an index)");
      }
    }
  }
  SHARDPACK_RETURN_IF_ERROR(entries.shards_fault);
  if (entries.next_sample != m.num_samples) {
    return r.Error("shards", "record counts add up to " + std::to_string(entries.next_sample) +
                                 ", num_samples is " + std::to_string(m.num_samples));
  }
  return Status::Ok();
}

// Raw pixels of one size: every record of a shard holds height x width x channels bytes
// of them, so its file holds at least that many per record. A size that no record has
// is a lie the readers would pay for (the loader's ring is sized by it).
Status CheckShardsHoldTheImageSize(const Reader& r, const Manifest& m) {
  if (!m.image.fixed() || m.image.encoding != ImageEncoding::kRaw) return Status::Ok();
  const uint64_t sample = static_cast<uint64_t>(m.image.height) *
                          static_cast<uint64_t>(m.image.width) *
                          static_cast<uint64_t>(m.image.channels);
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ShardEntry& e = m.shards[i];
    if (e.records > e.data.bytes / sample) {
      return r.Error("shards[" + std::to_string(i) + "]",
                     std::to_string(e.records) + " records of " + std::to_string(m.image.height) +
                         " x " + std::to_string(m.image.width) + " x " +
                         std::to_string(m.image.channels) + " pixel bytes do not fit in its " +
                         std::to_string(e.data.bytes) +
                         " bytes: the image size is not the "
                         "records'");
    }
  }
  return Status::Ok();
}

// rejects, when present: the file listing the rejected inputs.
Status ReadRejects(const Reader& r, const Json& j, Manifest* m) {
  auto rejects = j.find("rejects");
  if (rejects == j.end()) return Status::Ok();
  FileEntry f;
  SHARDPACK_RETURN_IF_ERROR(r.File(*rejects, "rejects", /*shard=*/false, &f));
  m->rejects = std::move(f);
  return Status::Ok();
}

// manifest_xxh3_128, when present: 32 lower-case hex digits.
Status ReadManifestChecksum(const Reader& r, const Json& j, Manifest* m) {
  if (!j.contains("manifest_xxh3_128")) return Status::Ok();
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "manifest_xxh3_128", "manifest", &m->manifest_xxh3_128));
  if (m->manifest_xxh3_128.size() != 32 ||
      m->manifest_xxh3_128.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return r.Error("manifest_xxh3_128", "expected 32 lower-case hex digits");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Manifest> ParseManifest(std::string_view text, std::string_view source) {
  // The parser keeps its own stack, but dump() recurses: `options` nested 100,000 levels
  // deep overflowed the stack (tests/fuzz/crashes/manifest). Real manifests nest 4 levels.
  // The depth is measured by a scan of its own: a parser callback made nlohmann's parser
  // quadratic in the length of an array of objects (1,000,000 classes took 170 s).
  constexpr int kMaxDepth = 100;
  if (JsonNestingDepth(text) > kMaxDepth) {
    return CorruptionError(std::string(source) + ": nested deeper than " +
                           std::to_string(kMaxDepth) + " levels");
  }
  Reader r(source);
  Manifest m;
  EntryResults entries;
  SHARDPACK_ASSIGN_OR_RETURN(const Json j, ParseJson(text, source, r, &m, &entries));
  // The fields in the order docs/FORMAT.md lists them: a check may rely on those before
  // it, and the first fault found is the one reported.
  SHARDPACK_RETURN_IF_ERROR(r.Object(j, "manifest"));
  SHARDPACK_RETURN_IF_ERROR(ReadFormat(r, j, source, &m));
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "tool_version", "manifest", &m.tool_version));
  SHARDPACK_RETURN_IF_ERROR(ReadBackend(r, j, &m));
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "num_samples", "manifest", &m.num_samples));
  SHARDPACK_RETURN_IF_ERROR(ReadImage(r, j, &m));
  SHARDPACK_RETURN_IF_ERROR(ReadAlignmentAndLabelBase(r, j, &m));
  SHARDPACK_RETURN_IF_ERROR(CheckClasses(r, j, entries.classes_fault, m));
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "seed", "manifest", &m.seed));
  SHARDPACK_RETURN_IF_ERROR(ReadOptions(r, j, &m));
  SHARDPACK_RETURN_IF_ERROR(CheckShards(r, j, entries, m));
  SHARDPACK_RETURN_IF_ERROR(CheckShardsHoldTheImageSize(r, m));
  SHARDPACK_RETURN_IF_ERROR(ReadRejects(r, j, &m));
  SHARDPACK_RETURN_IF_ERROR(ReadManifestChecksum(r, j, &m));
  SHARDPACK_RETURN_IF_ERROR(CheckNamesDistinct(r, m));
  return m;
}

Status format::NoManifestError(const std::string& dir) {
  io::Env* env = io::Env::Posix();
  const std::string path = io::JoinPath(dir, format::kManifestName);
  if (env->FileExists(io::JoinPath(dir, format::kConvertProgressName))) {
    return NotFoundError(path + ": no manifest: " + dir +
                         " holds an interrupted conversion, not a dataset yet; go on with "
                         "shardpack convert --resume (same SRC and options), or start again "
                         "with --overwrite");
  }
  if (env->FileExists(io::JoinPath(dir, format::kMergePlanName))) {
    return NotFoundError(path + ": no manifest: " + dir +
                         " holds an interrupted merge, not a dataset yet; run shardpack merge " +
                         dir + " again to finish it");
  }
  if (env->FileExists(io::JoinPath(dir, format::kPartsDirName))) {
    return NotFoundError(path + ": no manifest: " + dir +
                         " holds the parts of a conversion, not a dataset yet; once every part "
                         "is done, join them with shardpack merge " +
                         dir);
  }
  return NotFoundError(path + ": no manifest: " + dir + " is not a shardpack dataset");
}

StatusOr<Manifest> ReadManifest(const std::string& dir) {
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(dir, io::PathKind::kLocal));
  const std::string path = io::JoinPath(dir, format::kManifestName);
  auto text = io::Env::Posix()->ReadFile(path, kMaxManifestBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return format::NoManifestError(dir);
    return text.status();
  }
  return ParseManifest(*text, path);
}

std::vector<const FileEntry*> ListedFiles(const Manifest& m) {
  std::vector<const FileEntry*> files;
  for (const ShardEntry& s : m.shards) {
    files.push_back(&s.data);
    if (s.index) files.push_back(&*s.index);
  }
  if (m.rejects) files.push_back(&*m.rejects);
  return files;
}

}  // namespace shardpack
