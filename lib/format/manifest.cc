#include "shardpack/manifest.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>

#include "format/format.h"
#include "io/env.h"
#include "util/hash.h"

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

Json FileJson(const FileEntry& f) {
  return Json{{"file", f.file}, {"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}};
}

// Reads fields with messages that name the field; every error is a Corruption of the
// manifest, except an unknown major version.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Status Error(const std::string& path, const std::string& what) const {
    return CorruptionError(std::string(source_) + ": " + path + ": " + what);
  }

  Status Object(const Json& j, const std::string& path) const {
    return j.is_object() ? Status::Ok() : Error(path, "expected an object");
  }

  Status Uint(const Json& j, const std::string& key, const std::string& path, uint64_t* out,
              uint64_t max = UINT64_MAX) const {
    auto it = j.find(key);
    if (it == j.end()) return Error(path + "." + key, "missing");
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0)) {
      return Error(path + "." + key, "expected a non-negative integer, found " + it->dump());
    }
    *out = it->get<uint64_t>();
    if (*out > max) {
      return Error(path + "." + key, std::to_string(*out) + " exceeds " + std::to_string(max));
    }
    return Status::Ok();
  }

  Status Int(const Json& j, const std::string& key, const std::string& path, int* out,
             int max) const {
    uint64_t v;
    SHARDPACK_RETURN_IF_ERROR(Uint(j, key, path, &v, static_cast<uint64_t>(max)));
    *out = static_cast<int>(v);
    return Status::Ok();
  }

  Status String(const Json& j, const std::string& key, const std::string& path,
                std::string* out) const {
    auto it = j.find(key);
    if (it == j.end()) return Error(path + "." + key, "missing");
    if (!it->is_string()) return Error(path + "." + key, "expected a string");
    *out = it->get<std::string>();
    return Status::Ok();
  }

  Status File(const Json& j, const std::string& path, FileEntry* out) const {
    SHARDPACK_RETURN_IF_ERROR(Object(j, path));
    SHARDPACK_RETURN_IF_ERROR(String(j, "file", path, &out->file));
    if (out->file.empty() || out->file.find('/') != std::string::npos || out->file == "." ||
        out->file == "..") {
      return Error(path + ".file", "\"" + out->file + "\" is not a plain file name");
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

// The deepest nesting of objects and arrays in JSON text (brackets inside strings do not
// count); for text that is not JSON, some number the parser then refuses anyway.
int NestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
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

StatusOr<Manifest> ParseManifest(std::string_view text, std::string_view source) {
  // The parser keeps its own stack, but dump() recurses: `options` nested 100,000 levels
  // deep overflowed the stack (tests/fuzz/crashes/manifest). Real manifests nest 4 levels.
  // The depth is measured by a scan of its own: a parser callback made nlohmann's parser
  // quadratic in the length of an array of objects (1,000,000 classes took 170 s).
  constexpr int kMaxDepth = 100;
  if (NestingDepth(text) > kMaxDepth) {
    return CorruptionError(std::string(source) + ": nested deeper than " +
                           std::to_string(kMaxDepth) + " levels");
  }
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return CorruptionError(std::string(source) + ": not valid JSON");
  Reader r(source);
  Manifest m;
  SHARDPACK_RETURN_IF_ERROR(r.Object(j, "manifest"));
  std::string format, version, backend;
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "format", "manifest", &format));
  if (format != "shardpack") return r.Error("format", "\"" + format + "\", expected \"shardpack\"");
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "format_version", "manifest", &version));
  int consumed = 0;
  if (version.find_first_not_of("0123456789.") != std::string::npos ||
      std::sscanf(version.c_str(), "%4d.%4d%n", &m.format_major, &m.format_minor, &consumed) != 2 ||
      consumed != static_cast<int>(version.size())) {
    return r.Error("format_version", "\"" + version + "\" is not MAJOR.MINOR");
  }
  if (m.format_major > kFormatMajor) {
    return NotSupportedError(std::string(source) + ": format version " + version +
                             ", this build reads <= " + std::to_string(kFormatMajor) + ".x");
  }
  if (m.format_major < 1) return r.Error("format_version", version + " was never released");
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "tool_version", "manifest", &m.tool_version));
  SHARDPACK_RETURN_IF_ERROR(r.String(j, "backend", "manifest", &backend));
  if (backend == "tfrecord") {
    m.backend = Backend::kTfrecord;
  } else if (backend == "lmdb") {
    m.backend = Backend::kLmdb;
  } else {
    return r.Error("backend", "\"" + backend + "\", expected \"tfrecord\" or \"lmdb\"");
  }
  if (j.contains("lmdb_schema")) {
    std::string schema;
    SHARDPACK_RETURN_IF_ERROR(r.String(j, "lmdb_schema", "manifest", &schema));
    if (m.backend != Backend::kLmdb) {
      return r.Error("lmdb_schema", "present, but the backend is \"" + backend + "\"");
    }
    if (schema == "caffe") {
      m.lmdb_schema = LmdbSchema::kCaffe;
    } else if (schema != "example") {
      return r.Error("lmdb_schema", "\"" + schema + "\", expected \"example\" or \"caffe\"");
    }
  }
  // Caffe Datum values are CHW; every other dataset is HWC.
  const char* layout = m.lmdb_schema == LmdbSchema::kCaffe ? "CHW" : "HWC";
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "num_samples", "manifest", &m.num_samples));

  auto image = j.find("image");
  if (image == j.end()) return r.Error("image", "missing");
  SHARDPACK_RETURN_IF_ERROR(r.Object(*image, "image"));
  SHARDPACK_RETURN_IF_ERROR(r.Int(*image, "channels", "image", &m.image.channels, 3));
  if (m.image.channels != 1 && m.image.channels != 3) {
    return r.Error("image.channels", std::to_string(m.image.channels) + ", expected 1 or 3");
  }
  // 1.3: encoded images, "layout": "encoded" (which a 1.2 reader refuses rather than
  // reading image/raw that is not there) and "encoding": "jpeg" or "png".
  if (image->contains("encoding")) {
    std::string name;
    SHARDPACK_RETURN_IF_ERROR(r.String(*image, "encoding", "image", &name));
    auto encoding = ParseImageEncoding(name);
    if (!encoding.ok() || *encoding == ImageEncoding::kRaw) {
      return r.Error("image.encoding", "\"" + name + "\", expected \"jpeg\", \"png\" or \"mixed\"");
    }
    if (*encoding == ImageEncoding::kMixed && m.lmdb_schema == LmdbSchema::kCaffe) {
      return r.Error("image.encoding", "\"mixed\", but the LMDB schema is \"caffe\"");
    }
    m.image.encoding = *encoding;
    layout = "encoded";
  }
  for (auto [key, want] : {std::pair{"layout", layout}, std::pair{"dtype", "uint8"}}) {
    std::string v;
    SHARDPACK_RETURN_IF_ERROR(r.String(*image, key, "image", &v));
    if (v != want) {
      return r.Error(std::string("image.") + key, "\"" + v + "\", expected \"" + want + "\"");
    }
  }
  const int kMaxSide = static_cast<int>(format::kMaxDimension);
  if (image->contains("height") || image->contains("width")) {
    SHARDPACK_RETURN_IF_ERROR(r.Int(*image, "height", "image", &m.image.height, kMaxSide));
    SHARDPACK_RETURN_IF_ERROR(r.Int(*image, "width", "image", &m.image.width, kMaxSide));
    if (!m.image.fixed()) return r.Error("image", "a fixed size must be positive");
  } else {
    SHARDPACK_RETURN_IF_ERROR(r.Int(*image, "max_side", "image", &m.image.max_side, kMaxSide));
  }
  uint64_t alignment;
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "pixel_alignment", "manifest", &alignment, 4096));
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return r.Error("pixel_alignment", std::to_string(alignment) + " is not a power of two");
  }
  m.pixel_alignment = static_cast<uint32_t>(alignment);
  uint64_t label_base;
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "label_base", "manifest", &label_base));
  if (label_base != 0) {
    return r.Error("label_base", std::to_string(label_base) + ", labels are 0-based");
  }

  auto classes = j.find("classes");
  if (classes == j.end() || !classes->is_array()) return r.Error("classes", "expected an array");
  uint64_t class_total = 0;
  for (size_t i = 0; i < classes->size(); ++i) {
    const std::string path = "classes[" + std::to_string(i) + "]";
    ClassEntry c;
    SHARDPACK_RETURN_IF_ERROR(r.Object((*classes)[i], path));
    SHARDPACK_RETURN_IF_ERROR(r.String((*classes)[i], "name", path, &c.name));
    SHARDPACK_RETURN_IF_ERROR(r.Uint((*classes)[i], "count", path, &c.count));
    class_total += c.count;
    m.classes.push_back(std::move(c));
  }
  if (class_total != m.num_samples) {
    return r.Error("classes", "counts add up to " + std::to_string(class_total) +
                                  ", num_samples is " + std::to_string(m.num_samples));
  }
  SHARDPACK_RETURN_IF_ERROR(r.Uint(j, "seed", "manifest", &m.seed));
  auto options = j.find("options");
  if (options == j.end() || !options->is_object()) return r.Error("options", "expected an object");
  m.options_json = options->dump();

  auto shards = j.find("shards");
  if (shards == j.end() || !shards->is_array()) return r.Error("shards", "expected an array");
  uint64_t next_sample = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    const std::string path = "shards[" + std::to_string(i) + "]";
    const Json& s = (*shards)[i];
    ShardEntry e;
    SHARDPACK_RETURN_IF_ERROR(r.File(s, path, &e.data));
    SHARDPACK_RETURN_IF_ERROR(r.Uint(s, "records", path, &e.records));
    if (e.records == 0) return r.Error(path + ".records", "a shard holds at least one record");
    SHARDPACK_RETURN_IF_ERROR(r.Uint(s, "first_sample", path, &e.first_sample));
    if (e.first_sample != next_sample) {
      return r.Error(path + ".first_sample",
                     std::to_string(e.first_sample) + ", expected " + std::to_string(next_sample));
    }
    next_sample += e.records;
    auto index = s.find("index");
    if (index != s.end()) {
      FileEntry f;
      SHARDPACK_RETURN_IF_ERROR(r.File(*index, path + ".index", &f));
      e.index = std::move(f);
    } else if (m.backend == Backend::kTfrecord) {
      return r.Error(path + ".index", "missing (every TFRecord shard has an index)");
    }
    m.shards.push_back(std::move(e));
  }
  if (next_sample != m.num_samples) {
    return r.Error("shards", "record counts add up to " + std::to_string(next_sample) +
                                 ", num_samples is " + std::to_string(m.num_samples));
  }
  auto rejects = j.find("rejects");
  if (rejects != j.end()) {
    FileEntry f;
    SHARDPACK_RETURN_IF_ERROR(r.File(*rejects, "rejects", &f));
    m.rejects = std::move(f);
  }
  if (j.contains("manifest_xxh3_128")) {
    SHARDPACK_RETURN_IF_ERROR(r.String(j, "manifest_xxh3_128", "manifest", &m.manifest_xxh3_128));
    if (m.manifest_xxh3_128.size() != 32 ||
        m.manifest_xxh3_128.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return r.Error("manifest_xxh3_128", "expected 32 lower-case hex digits");
    }
  }
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
  auto text = io::Env::Posix()->ReadFile(path, format::kMaxManifestBytes);
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
