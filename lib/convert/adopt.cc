// Adopt (shardpack/convert.h): TFRecord files in shardpack's Example schema, written by
// another tool, become a dataset in place, with an index per file and a manifest.
#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "format/example.h"
#include "format/format.h"
#include "format/index_file.h"
#include "format/record.h"
#include "format/tfrecord_files.h"
#include "io/dir_lock.h"
#include "io/env.h"
#include "shardpack/convert.h"
#include "shardpack/limits.h"
#include "util/crc32c.h"
#include "util/hash.h"
#include "util/location.h"
#include "util/text.h"

namespace shardpack {
namespace {

struct ClassSeen {
  bool has_text = false;
  std::string text;
  std::string where;
  uint64_t count = 0;
};

// What the records of all files have in common, gathered as they are checked.
struct Gathered {
  std::map<int64_t, ClassSeen> classes;  // only labels seen: a label may be large
  int channels = 0;
  int fixed_height = -1, fixed_width = -1;  // -1: none yet; 0: sizes differ
  int max_side = 0;
  uint32_t alignment = 4096;  // largest power of two dividing every pixel offset
};

class Faults {
 public:
  Faults(const AdoptOptions& options, AdoptSummary* summary)
      : options_(options), summary_(summary) {}
  void Add(const std::string& file, int64_t record, int64_t offset, std::string message) {
    VerifyFault f{file, record, offset, std::move(message)};
    if (options_.on_fault) options_.on_fault(f);
    summary_->faults.push_back(std::move(f));
  }

 private:
  const AdoptOptions& options_;
  AdoptSummary* summary_;
};

// Checks one sample against the schema and what earlier records established.
std::string CheckRecord(const format::RecordView& r, const uint8_t* file_data,
                        const std::string& where, Gathered* g) {
  format::DecodedSample d;
  Status s = format::ParseSample(r.payload, r.length, &d);
  if (!s.ok()) return s.message();
  if (!d.has_pixel_crc) {
    return "feature image/raw/crc32c: missing (shardpack's schema requires it; convert "
           "re-packs records without it)";
  }
  const uint32_t actual = crc32c::Value(d.pixels, d.pixel_bytes);
  if (actual != d.pixel_crc) {
    return "pixel checksum " + format::Hex32(actual) + ", expected " + format::Hex32(d.pixel_crc);
  }
  // The manifest lists a class for every label up to the largest, and readers refuse one
  // of more than kMaxClasses classes: a larger label is this record's fault, named here.
  if (d.label < 0 || static_cast<uint64_t>(d.label) >= kMaxClasses) {
    return "feature image/class/label: " + std::to_string(d.label) + " is outside 0.." +
           std::to_string(kMaxClasses - 1) + " (a dataset has at most " +
           std::to_string(kMaxClasses) + " classes)";
  }
  if (g->channels == 0) g->channels = static_cast<int>(d.channels);
  if (d.channels != g->channels) {
    return std::to_string(d.channels) + " channels; earlier records have " +
           std::to_string(g->channels) + " (a dataset has one channel count)";
  }
  const auto label = static_cast<size_t>(d.label);
  ClassSeen& c = g->classes[d.label];
  if (!d.class_text.empty()) {
    if (EscapeBytes(d.class_text) != d.class_text) {
      return "feature image/class/text: \"" + EscapeBytes(d.class_text) +
             "\" is not printable UTF-8, which class names in a manifest must be";
    }
    if (!c.has_text) {
      c.has_text = true;
      c.text = std::string(d.class_text);
      c.where = where;
    } else if (c.text != d.class_text) {
      return "feature image/class/text: \"" + EscapeBytes(d.class_text) + "\", but label " +
             std::to_string(label) + " is \"" + EscapeBytes(c.text) + "\" (" + c.where + ")";
    }
  }
  ++c.count;
  const int h = static_cast<int>(d.height), w = static_cast<int>(d.width);
  if (g->fixed_height < 0) {
    g->fixed_height = h;
    g->fixed_width = w;
  } else if (g->fixed_height != h || g->fixed_width != w) {
    g->fixed_height = g->fixed_width = 0;
  }
  g->max_side = std::max({g->max_side, h, w});
  const auto offset = static_cast<uint64_t>(d.pixels - file_data);
  while (g->alignment > 1 && offset % g->alignment != 0) g->alignment /= 2;
  return "";
}

// The dataset being made from the files: its manifest, the index text of each of its
// shards, and what the records have in common.
struct Adoption {
  Manifest m;
  std::vector<std::string> index_texts;  // of m.shards[i]
  Gathered g;
};

// Why data file `name` cannot have its index at `index_name`: the name of a data file, or
// of the index of a file before it (`index_names`: index name -> data file); "" when it
// can.
std::string IndexNameClash(const std::string& index_name, const std::set<std::string>& data_names,
                           const std::map<std::string, std::string>& index_names) {
  if (index_names.count(index_name) == 0 && data_names.count(index_name) == 0) return "";
  return "its index would be " + index_name + ", which " +
         (data_names.count(index_name) > 0 ? std::string("is a data file")
                                           : "is also " + index_names.at(index_name) + "'s index") +
         "; rename one of the files";
}

// Scans data file `path` (named `name` in the dataset): indexes its records and checks
// each into `a->g`, reporting faults. A file that cannot be mapped is a fault and no shard;
// any other becomes the next shard of `a->m`, indexed by `index_name`.
void AdoptFile(const std::string& path, const std::string& name, const std::string& index_name,
               Faults* faults, AdoptSummary* summary, Adoption* a) {
  auto mapped = io::Env::Posix()->MapFile(path, io::AccessPattern::kSequential);
  if (!mapped.ok()) {
    faults->Add(name, -1, -1, mapped.status().message());
    return;
  }
  const uint8_t* data = (*mapped)->data();
  const uint64_t size = (*mapped)->size();
  ++summary->files;
  summary->bytes += size;
  format::RecordScanner scanner(
      data, size, {.max_length = kMaxRecordBytes, .check_payload_crc = true},
      [&](uint64_t record, uint64_t offset, const std::string& message) {
        faults->Add(name, static_cast<int64_t>(record), static_cast<int64_t>(offset), message);
      });
  std::string index;
  format::RecordView r;
  while (scanner.Next(&r)) {
    format::AppendIndexLine(&index, {r.offset, r.framed_size()});
    const std::string where =
        RecordLocation{name, static_cast<int64_t>(r.index), static_cast<int64_t>(r.offset)}
            .ToString();
    std::string fault = CheckRecord(r, data, where, &a->g);
    if (!fault.empty()) {
      faults->Add(name, static_cast<int64_t>(r.index), static_cast<int64_t>(r.offset),
                  std::move(fault));
    }
  }
  const uint64_t records = scanner.records_seen();
  summary->records += records;
  if (records == 0) faults->Add(name, -1, -1, "no records: a shard holds at least one");
  ShardEntry e;
  e.data = {name, size, Xxh3Hex(data, size)};
  e.index = FileEntry{index_name, index.size(), Xxh3Hex(index.data(), index.size())};
  e.records = records;
  e.first_sample = a->m.num_samples;
  a->m.num_samples += records;
  a->m.shards.push_back(std::move(e));
  a->index_texts.push_back(std::move(index));
}

// The manifest's fields that the records decide: the image spec, the pixel alignment, and
// a class for every label up to the largest (named by its records' class text, else by
// its number); and options that name the source.
void DescribeRecords(const Gathered& g, const std::string& src, Manifest* m) {
  m->tool_version = "shardpack " + std::string(Version());
  m->image.channels = g.channels;
  if (g.fixed_height > 0) {
    m->image.height = g.fixed_height;
    m->image.width = g.fixed_width;
  } else {
    m->image.max_side = g.max_side;
  }
  m->pixel_alignment = g.alignment;
  const int64_t max_label = g.classes.rbegin()->first;
  for (int64_t label = 0; label <= max_label; ++label) {
    auto it = g.classes.find(label);
    if (it == g.classes.end()) {
      m->classes.push_back({std::to_string(label), 0});
    } else {
      const ClassSeen& c = it->second;
      m->classes.push_back({c.has_text ? EscapeBytes(c.text) : std::to_string(label), c.count});
    }
  }
  nlohmann::ordered_json o;
  o["adopted_by"] = "shardpack adopt";
  o["source"] = EscapeBytes(src);
  m->options_json = o.dump();
}

// The indexes first, the manifest last: until it exists the directory is not a dataset.
Status WriteDataset(const std::string& dir, const Adoption& a) {
  io::Env* env = io::Env::Posix();
  for (size_t i = 0; i < a.m.shards.size(); ++i) {
    SHARDPACK_RETURN_IF_ERROR(io::WriteFileAtomically(
        env, io::JoinPath(dir, a.m.shards[i].index->file), a.index_texts[i]));
  }
  return io::WriteFileAtomically(env, io::JoinPath(dir, format::kManifestName),
                                 SerializeManifest(a.m));
}

}  // namespace

StatusOr<AdoptSummary> Adopt(const std::string& src, const AdoptOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto found = format::FindTfrecordFiles(src);
  if (!found.ok()) return found.status();
  io::Env* env = io::Env::Posix();
  const std::string& dir = found->dir;
  if (found->from_manifest || env->FileExists(io::JoinPath(dir, format::kManifestName))) {
    return AlreadyExistsError(io::JoinPath(dir, format::kManifestName) +
                              ": the directory already holds a dataset");
  }
  SHARDPACK_ASSIGN_OR_RETURN(const auto lock, io::DirLock::Acquire(dir, "shardpack adopt"));
  AdoptSummary summary;
  summary.dir = dir;
  for (const auto& [name, reason] : found->rejects) {
    summary.skipped.push_back({EscapeBytes(name), reason});
  }
  for (const format::TfrecordFile& f : found->files) {
    if (io::DirName(f.path) != dir) {
      return InvalidArgumentError(src + ": " + f.path + " is not in " + dir +
                                  "; a dataset's files are in one directory");
    }
  }

  Faults faults(options, &summary);
  Adoption a;
  a.m.format_minor = 2;  // the manifest checksum
  a.m.backend = Backend::kTfrecord;
  std::map<std::string, std::string> index_names;  // index name -> data file
  std::set<std::string> data_names;
  for (const format::TfrecordFile& f : found->files)
    data_names.insert(std::string(io::BaseName(f.path)));
  for (const format::TfrecordFile& f : found->files) {
    const std::string name(io::BaseName(f.path));
    const std::string index_name = format::IndexNameFor(name);
    std::string clash = IndexNameClash(index_name, data_names, index_names);
    if (!clash.empty()) faults.Add(name, -1, -1, std::move(clash));
    index_names[index_name] = name;
    AdoptFile(f.path, name, index_name, &faults, &summary, &a);
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!summary.ok()) return summary;

  DescribeRecords(a.g, src, &a.m);
  SHARDPACK_RETURN_IF_ERROR(WriteDataset(dir, a));
  summary.manifest = std::move(a.m);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return summary;
}

}  // namespace shardpack
