#include "shardpack/verify.h"

#include <fcntl.h>
#include <unistd.h>

#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>

#include "format/caffe_datum.h"
#include "format/example.h"
#include "format/format.h"
#include "format/index_file.h"
#include "format/lmdb_shard.h"
#include "format/record.h"
#include "format/shard_reader.h"
#include "image/image.h"
#include "io/env.h"
#include "io/mapped_range.h"
#include "io/memory_budget.h"
#include "remote/shard_cache.h"
#include "shardpack/limits.h"
#include "shardpack/manifest.h"
#include "util/crc32c.h"
#include "util/hash.h"
#include "util/location.h"
#include "util/text.h"
#include "util/thread_count.h"

namespace shardpack {

std::string FormatFault(const VerifyFault& f) {
  return RecordLocation{f.file, f.record, f.offset}.ToString() + ": " + f.message;
}

namespace {

// Faults of one file, capped, in the order found.
class FileFaults {
 public:
  FileFaults(std::string file, uint64_t cap, const VerifyOptions& options, std::mutex* mu)
      : file_(std::move(file)), cap_(cap), options_(options), mu_(mu) {}

  void Add(int64_t record, int64_t offset, std::string message) {
    ++count_;
    if (faults_.size() >= cap_) return;
    VerifyFault f{file_, record, offset, std::move(message)};
    if (options_.on_fault) {
      std::lock_guard<std::mutex> l(*mu_);
      options_.on_fault(f);
    }
    faults_.push_back(std::move(f));
  }

  uint64_t count() const { return count_; }

  void MoveTo(std::vector<VerifyFault>* out) {
    std::stable_sort(
        faults_.begin(), faults_.end(),
        [](const VerifyFault& a, const VerifyFault& b) { return a.offset < b.offset; });
    for (auto& f : faults_) out->push_back(std::move(f));
    if (count_ > faults_.size()) {
      out->push_back({file_, -1, -1,
                      std::to_string(count_ - faults_.size()) + " more faults not listed (" +
                          std::to_string(count_) + " in all)"});
    }
  }

 private:
  std::string file_;
  uint64_t cap_;
  const VerifyOptions& options_;
  std::mutex* mu_;
  std::vector<VerifyFault> faults_;
  uint64_t count_ = 0;
};

// Where the files of the dataset are: a directory, or the cache copy of a remote dataset,
// where a file the server could not give has no path and a reason instead.
struct FileSource {
  std::function<std::string(const std::string&)> path;         // "": not available
  std::function<std::string(const std::string&)> why_missing;  // when path is ""
};

struct ShardResult {
  std::vector<FileFaults> files;  // data file, then index file
  uint64_t records = 0;
  uint64_t bytes = 0;
  // Sound records per label, shared by every shard (one counter per class of the manifest:
  // per-shard vectors would cost classes x shards, both the manifest's claims). They are
  // compared with the manifest only where every record of every shard was read and found
  // sound (counted): else the faults already name the shards.
  std::atomic<uint64_t>* labels = nullptr;
  bool counted = false;
};

std::string Shape(int64_t h, int64_t w, int64_t c) {
  return std::to_string(h) + "x" + std::to_string(w) + "x" + std::to_string(c);
}

// A sample's label and class text (optional: FORMAT.md §2.4; shardpack's writer always
// stores it) against the manifest: Corruption naming the first mismatch.
Status CheckLabel(int64_t label, std::string_view class_text, const Manifest& m) {
  if (label < 0 || static_cast<uint64_t>(label) >= m.classes.size()) {
    return CorruptionError("label " + std::to_string(label) + " is outside the " +
                           std::to_string(m.classes.size()) + " classes of the manifest");
  }
  const std::string& name = m.classes[static_cast<size_t>(label)].name;
  if (!class_text.empty() && class_text != name) {
    return CorruptionError("class text \"" + std::string(class_text) + "\" does not match label " +
                           std::to_string(label) + " (\"" + name + "\")");
  }
  return Status::Ok();
}

// CheckLabel, then the sample's channels and shape against the manifest.
Status CheckAgainstManifest(int64_t label, std::string_view class_text, int64_t channels,
                            int64_t height, int64_t width, const Manifest& m) {
  SHARDPACK_RETURN_IF_ERROR(CheckLabel(label, class_text, m));
  if (channels != m.image.channels) {
    return CorruptionError(std::to_string(channels) + " channels, the manifest says " +
                           std::to_string(m.image.channels));
  }
  if (m.image.fixed() && (height != m.image.height || width != m.image.width)) {
    return CorruptionError("shape " + Shape(height, width, channels) + ", the manifest says " +
                           Shape(m.image.height, m.image.width, m.image.channels));
  }
  if (!m.image.fixed() && m.image.max_side > 0 &&
      (height > m.image.max_side || width > m.image.max_side)) {
    return CorruptionError("shape " + Shape(height, width, channels) + " exceeds the max side " +
                           std::to_string(m.image.max_side) + " of the manifest");
  }
  return Status::Ok();
}

// Checks one payload against the format and the manifest. `framed`: the TFRecord record
// holding it, whose data checksum is checked too, or nullptr (LMDB has none). `decode`:
// an encoded image is decoded too, and must be the size its record declares. Corruption
// naming the first fault; OK with the sample in `d`.
Status CheckPayload(const uint8_t* payload, uint64_t length, const format::RecordView* framed,
                    const Manifest& m, bool decode, format::DecodedSample& d) {
  Status parsed = format::ParseStoredSample(payload, length, &d);
  uint32_t pixel_crc = 0;
  if (parsed.ok()) pixel_crc = crc32c::Value(d.pixels, d.pixel_bytes);
  if (framed != nullptr) {
    // The pixels were summed once; the payload checksum is derived from that sum.
    SHARDPACK_RETURN_IF_ERROR(format::CheckPayloadCrc(
        *framed, parsed.ok() ? format::PayloadCrc(payload, length, d, pixel_crc)
                             : crc32c::Value(payload, length)));
  }
  if (!parsed.ok()) return parsed;
  const bool raw = d.encoding == ImageEncoding::kRaw;
  SHARDPACK_RETURN_IF_ERROR(format::CheckEncoding(d, m.image.encoding));
  if (!d.has_pixel_crc) {
    return CorruptionError(std::string("feature ") +
                           std::string(raw ? format::kKeyRawCrc : format::kKeyEncodedCrc) +
                           ": missing");
  }
  SHARDPACK_RETURN_IF_ERROR(format::CheckPixelCrc(d, pixel_crc));
  SHARDPACK_RETURN_IF_ERROR(
      CheckAgainstManifest(d.label, d.class_text, d.channels, d.height, d.width, m));
  if (!raw) {
    Status s =
        image::CheckDeclaredFormat(d.pixels, d.pixel_bytes, d.encoding == ImageEncoding::kJpeg);
    if (!s.ok()) return CorruptionError("image/encoded: " + s.message());
  }
  if (!raw && decode) {
    SampleView view;
    view.encoded = {d.pixels, d.pixel_bytes};
    view.encoding = d.encoding;
    view.height = static_cast<int>(d.height);
    view.width = static_cast<int>(d.width);
    view.channels = static_cast<int>(d.channels);
    std::vector<uint8_t> pixels(static_cast<size_t>(d.height * d.width * d.channels));
    SHARDPACK_RETURN_IF_ERROR(format::DecodeSampleInto(view, 1, pixels.data()));
  }
  return Status::Ok();
}

// Checks one Caffe-schema LMDB value (docs/FORMAT.md §4.1) against the manifest. An
// encoded Datum carries no shape (as convert_imageset --encoded writes it): its label is
// checked, and with `decode` its file is decoded and the shape checked (a fixed size
// bounds the decode; a variable one by the manifest's max side).
Status CheckCaffeValue(std::string_view value, const Manifest& m, bool decode) {
  format::CaffeDatumView d;
  SHARDPACK_RETURN_IF_ERROR(
      format::ParseCaffeDatum(reinterpret_cast<const uint8_t*>(value.data()), value.size(), &d));
  SHARDPACK_RETURN_IF_ERROR(format::CheckCaffeDatum(d, m.image.encoding));
  if (m.image.encoding == ImageEncoding::kRaw) {
    return CheckAgainstManifest(d.label, {}, d.channels, d.height, d.width, m);
  }
  // The shape is the file's: without decoding only the label can be checked.
  if (!decode) return CheckLabel(d.label, {}, m);
  const auto* file = reinterpret_cast<const uint8_t*>(d.data.data());
  int64_t height = m.image.height;
  int64_t width = m.image.width;
  Status s;
  if (m.image.fixed()) {
    std::vector<uint8_t> pixels(static_cast<size_t>(m.image.height) *
                                static_cast<size_t>(m.image.width) *
                                static_cast<size_t>(m.image.channels));
    s = image::DecodeExact(file, d.data.size(), m.image.height, m.image.width, m.image.channels,
                           pixels.data());
  } else {
    image::DecodeOptions o;
    o.channels = m.image.channels;
    o.apply_orientation = false;
    if (m.image.max_side > 0) o.limits.max_dimension = m.image.max_side;
    auto decoded = image::Decode(file, d.data.size(), o);
    s = decoded.status();
    if (s.ok()) {
      height = decoded->height;
      width = decoded->width;
    }
  }
  if (!s.ok()) return CorruptionError("Datum.data: " + s.message());
  return CheckAgainstManifest(d.label, {}, m.image.channels, height, width, m);
}

void CheckFileEntry(const FileEntry& e, uint64_t actual_bytes, const std::string& actual_hash,
                    FileFaults* faults) {
  if (actual_bytes != e.bytes) {
    faults->Add(-1, -1,
                "size " + std::to_string(actual_bytes) + " bytes, the manifest says " +
                    std::to_string(e.bytes));
  }
  if (actual_hash != e.xxh3_128) {
    faults->Add(-1, -1, "xxh3_128 checksum " + actual_hash + ", the manifest says " + e.xxh3_128);
  }
}

// The fault of a file that shrank while verify read its mapping (those reads found zeros).
std::string ShrunkWhileRead() {
  return std::string(io::kShrunkWhileMapped) +
         "; faults listed for this file may be consequences of it";
}

void VerifyTfrecordShard(const FileSource& source, const ShardEntry& e, const Manifest& m,
                         bool decode, io::Env* env, ShardResult* out) {
  FileFaults& faults = out->files[0];
  FileFaults& index_faults = out->files[1];
  const std::string data_path = source.path(e.data.file);
  if (data_path.empty()) {
    faults.Add(-1, -1, source.why_missing(e.data.file));
    return;
  }
  auto file = env->MapFile(data_path, io::AccessPattern::kSequential);
  if (!file.ok()) {
    faults.Add(-1, -1,
               file.status().code() == StatusCode::kNotFound ? "missing: the manifest lists it"
                                                             : file.status().message());
    return;
  }
  const uint8_t* data = (*file)->data();
  const uint64_t size = (*file)->size();
  out->bytes += size;

  std::set<uint64_t> fault_offsets;
  format::RecordScanner scanner(
      data, size, {.max_length = kMaxRecordBytes, .check_payload_crc = false},
      [&](uint64_t record, uint64_t offset, const std::string& message) {
        fault_offsets.insert(offset);
        faults.Add(static_cast<int64_t>(record), static_cast<int64_t>(offset), message);
      });
  // The file is hashed region by region as the scan passes, while the bytes are in cache.
  Xxh3Hasher hasher;
  uint64_t hashed = 0;
  std::vector<format::IndexEntry> framed;
  format::RecordView r;
  while (scanner.Next(&r)) {
    hasher.Update(data + hashed, r.offset + r.framed_size() - hashed);
    hashed = r.offset + r.framed_size();
    framed.push_back({r.offset, r.framed_size()});
    format::DecodedSample d;
    Status fault = CheckPayload(r.payload, r.length, &r, m, decode, d);
    if (fault.ok() && m.pixel_alignment > 1) {
      uint64_t pixel_offset = static_cast<uint64_t>(d.pixels - data);
      if (pixel_offset % m.pixel_alignment != 0) {
        fault = CorruptionError("pixels start at offset " + std::to_string(pixel_offset) +
                                ", not a multiple of the manifest's pixel alignment " +
                                std::to_string(m.pixel_alignment));
      }
    }
    if (!fault.ok()) {
      fault_offsets.insert(r.offset);
      faults.Add(static_cast<int64_t>(r.index), static_cast<int64_t>(r.offset), fault.message());
    } else {
      out->labels[static_cast<size_t>(d.label)].fetch_add(1, std::memory_order_relaxed);
    }
  }
  out->counted = faults.count() == 0;
  hasher.Update(data + hashed, size - hashed);
  if ((*file)->faulted()) faults.Add(-1, -1, ShrunkWhileRead());
  CheckFileEntry(e.data, size, hasher.HexDigest(), &faults);
  const uint64_t seen = scanner.records_seen();
  out->records += seen;
  if (seen != e.records) {
    faults.Add(-1, -1,
               std::to_string(seen) + " records, the manifest says " + std::to_string(e.records));
  }

  // The index: its own checksum, then every line against the scan.
  const std::string index_path = source.path(e.index->file);
  if (index_path.empty()) {
    index_faults.Add(-1, -1, source.why_missing(e.index->file));
    return;
  }
  auto text = env->ReadFile(index_path, kMaxIndexBytes);
  if (!text.ok()) {
    index_faults.Add(-1, -1,
                     text.status().code() == StatusCode::kNotFound
                         ? "missing: the manifest lists it"
                         : text.status().message());
    return;
  }
  out->bytes += text->size();
  CheckFileEntry(*e.index, text->size(), Xxh3Hex(text->data(), text->size()), &index_faults);
  auto index = format::ParseIndex(*text);
  if (!index.ok()) {
    index_faults.Add(-1, -1, index.status().message());
    return;
  }
  // Merge by offset: a line without a framed record there, or a record without a line,
  // is a fault, except where the record itself was already reported.
  size_t i = 0, j = 0;
  const auto& lines = *index;
  while (i < lines.size() || j < framed.size()) {
    if (j == framed.size() || (i < lines.size() && lines[i].offset < framed[j].offset)) {
      if (fault_offsets.count(lines[i].offset) == 0) {
        index_faults.Add(static_cast<int64_t>(i), -1,
                         "line " + std::to_string(i + 1) + ": \"" +
                             std::to_string(lines[i].offset) + " " + std::to_string(lines[i].size) +
                             "\": no record of " + e.data.file + " starts at that offset");
      }
      ++i;
    } else if (i == lines.size() || framed[j].offset < lines[i].offset) {
      index_faults.Add(-1, -1,
                       "no line for the record at offset " + std::to_string(framed[j].offset) +
                           " of " + e.data.file);
      ++j;
    } else {
      if (lines[i].size != framed[j].size) {
        index_faults.Add(static_cast<int64_t>(i), -1,
                         "line " + std::to_string(i + 1) + ": size " +
                             std::to_string(lines[i].size) + ", the record at offset " +
                             std::to_string(framed[j].offset) + " is " +
                             std::to_string(framed[j].size) + " bytes");
      }
      ++i;
      ++j;
    }
  }
}

// Reads every record of an LMDB shard and reports faults through `add`.
// `labels`, when given, counts the sound records of each label (Example schema only).
Status WalkLmdbShard(const std::string& path, const ShardEntry& e, const Manifest& m, bool decode,
                     const std::function<void(int64_t, std::string)>& add, uint64_t* records,
                     std::atomic<uint64_t>* labels = nullptr) {
  auto reader = format::LmdbShardReader::Open(path, /*random_access=*/false,
                                              format::LmdbShardReader::Keys::kAny);
  if (!reader.ok()) return reader.status();
  uint64_t n = 0;
  const bool caffe = m.lmdb_schema == LmdbSchema::kCaffe;
  Status s = (*reader)->Audit([&](std::string_view key, std::string_view value) {
    if (caffe) {
      // Caffe keys number samples across shards: "%08d_<path>".
      const std::string prefix = format::CaffeKey(e.first_sample + n, "");
      Status fault;
      if (key.substr(0, prefix.size()) != prefix) {
        fault = CorruptionError("key \"" + EscapeBytes(key.substr(0, 40)) + "\", expected \"" +
                                prefix + "<path>\"");
      } else {
        fault = CheckCaffeValue(value, m, decode);
      }
      if (!fault.ok()) add(static_cast<int64_t>(n), fault.message());
      ++n;
      return Status::Ok();
    }
    std::string expected = format::LmdbKey(n);
    if (key != expected) {
      add(static_cast<int64_t>(n),
          "key \"" + std::string(key) + "\", expected \"" + expected + "\"");
    } else {
      format::DecodedSample d;
      const auto* bytes = reinterpret_cast<const uint8_t*>(value.data());
      Status fault = CheckPayload(bytes, value.size(), nullptr, m, decode, d);
      // The writer pads as if the value started kLmdbValueOffset bytes into a page.
      const uint64_t pixel_offset = static_cast<uint64_t>(d.pixels - bytes);
      if (fault.ok() && m.pixel_alignment > 1 &&
          (format::kLmdbValueOffset + pixel_offset) % m.pixel_alignment != 0) {
        fault = CorruptionError("pixels start at value offset " + std::to_string(pixel_offset) +
                                ", not " + std::to_string(m.pixel_alignment) +
                                "-aligned after LMDB's " +
                                std::to_string(format::kLmdbValueOffset) + "-byte page header");
      }
      if (!fault.ok()) {
        add(static_cast<int64_t>(n), fault.message());
      } else if (labels != nullptr) {
        labels[static_cast<size_t>(d.label)].fetch_add(1, std::memory_order_relaxed);
      }
    }
    ++n;
    return Status::Ok();
  });
  *records = n;
  if ((*reader)->faulted()) add(-1, (*reader)->FaultMessage());
  if (!s.ok()) return s;
  if (n != e.records) {
    add(-1, std::to_string(n) + " records, the manifest says " + std::to_string(e.records));
  }
  return Status::Ok();
}

void VerifyLmdbShard(const FileSource& source, const ShardEntry& e, const Manifest& m, bool decode,
                     io::Env* env, ShardResult* out) {
  FileFaults& faults = out->files[0];
  const std::string path = source.path(e.data.file);
  if (path.empty()) {
    faults.Add(-1, -1, source.why_missing(e.data.file));
    return;
  }
  auto file = env->MapFile(path, io::AccessPattern::kSequential);
  if (!file.ok()) {
    faults.Add(-1, -1,
               file.status().code() == StatusCode::kNotFound ? "missing: the manifest lists it"
                                                             : file.status().message());
    return;
  }
  out->bytes += (*file)->size();
  std::string hash = Xxh3Hex((*file)->data(), (*file)->size());
  if ((*file)->faulted()) faults.Add(-1, -1, ShrunkWhileRead());
  const bool intact = hash == e.data.xxh3_128 && (*file)->size() == e.data.bytes;
  CheckFileEntry(e.data, (*file)->size(), hash, &faults);
  file->reset();
  // The reader checks every page before it follows it (format/lmdb_file.h): a damaged or
  // crafted file is read here, whatever its checksum, and its faults are named.
  uint64_t records = 0;
  Status s = WalkLmdbShard(
      path, e, m, decode,
      [&](int64_t record, std::string message) { faults.Add(record, -1, std::move(message)); },
      &records, out->labels);
  if (!s.ok()) faults.Add(-1, -1, s.message());
  out->counted = intact && m.lmdb_schema == LmdbSchema::kExample && faults.count() == 0;
  out->records += records;
}

// rejects.tsv is read whole; a conversion of 100 million rejected inputs stays below this.
constexpr uint64_t kMaxRejectsBytes = 16ull << 30;

// The manifest's own checksum (format 1.2 on): any edit of a field (seed, options, format
// version, pixel alignment, class counts, ...) is a fault.
void CheckManifestChecksum(const Manifest& m, FileFaults* faults) {
  if (m.manifest_xxh3_128.empty()) {
    if (m.format_major == 1 && m.format_minor < 2) return;  // written before the checksum
    faults->Add(-1, -1,
                "manifest_xxh3_128: missing (format " + std::to_string(m.format_major) + "." +
                    std::to_string(m.format_minor) + " manifests carry their checksum)");
    return;
  }
  const std::string actual = ManifestChecksum(m);
  if (actual != m.manifest_xxh3_128) {
    faults->Add(-1, -1,
                "manifest_xxh3_128 " + m.manifest_xxh3_128 + ", the manifest's fields give " +
                    actual + ": the manifest was edited after it was written");
  }
}

bool LooksLikeOurs(const std::string& name) {
  return name.starts_with("shard-") || name.ends_with(".tmp");
}

// Checks every shard of `m` from `source` into `report` (which already counts the
// manifest), then appends the directory's faults, `stray`.
// With decode_encoded, each thread holds one decoded image and its decoder's buffers:
// at most three times the largest image the manifest allows (the pixels, and libjpeg's
// coefficients of a progressive file, two bytes a sample). The threads are lowered to
// what the memory budget holds; a budget that does not hold one of them is refused.
StatusOr<int> ThreadsThatFit(const Manifest& m, const VerifyOptions& options, int threads) {
  if (!options.decode_encoded || m.image.encoding == ImageEncoding::kRaw) return threads;
  const uint64_t channels = static_cast<uint64_t>(m.image.channels);
  uint64_t pixels = kMaxImagePixels;
  if (m.image.fixed()) {
    pixels = static_cast<uint64_t>(m.image.height) * static_cast<uint64_t>(m.image.width);
  } else if (m.image.max_side > 0) {
    const uint64_t side = static_cast<uint64_t>(m.image.max_side);
    pixels = std::min<uint64_t>(side * side, kMaxImagePixels);
  }
  const uint64_t per_thread = 3 * pixels * channels;
  const io::MemoryLimit budget =
      options.max_memory_bytes > 0
          ? io::MemoryLimit{options.max_memory_bytes, "VerifyOptions::max_memory_bytes"}
          : io::MemoryBudget();
  SHARDPACK_RETURN_IF_ERROR(io::CheckMemory(
      per_thread, budget, "verify --decode",
      "one decoding thread: 3 x " + std::to_string(pixels) + " pixels x " +
          std::to_string(channels) + " bytes, the largest image the manifest allows",
      "verify without --decode (the checksums still prove the files), or on a machine with "
      "more memory"));
  return static_cast<int>(
      std::min<uint64_t>(static_cast<uint64_t>(threads), budget.bytes / per_thread));
}

Status VerifyShards(const Manifest& m, const FileSource& source, const VerifyOptions& options,
                    std::mutex* mu, FileFaults* manifest_faults, FileFaults* stray,
                    VerifyReport* report) {
  SHARDPACK_ASSIGN_OR_RETURN(
      const int threads,
      ThreadsThatFit(
          m, options,
          options.num_threads > 0 ? options.num_threads : tbb::this_task_arena::max_concurrency()));
  io::Env* env = io::Env::Posix();
  std::vector<ShardResult> results(m.shards.size());
  std::vector<std::atomic<uint64_t>> labels(m.classes.size());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    results[i].labels = labels.data();
    results[i].files.emplace_back(m.shards[i].data.file, options.max_faults_per_file, options, mu);
    if (m.shards[i].index) {
      results[i].files.emplace_back(m.shards[i].index->file, options.max_faults_per_file, options,
                                    mu);
    }
  }
  auto check = [&](size_t i) {
    if (m.backend == Backend::kTfrecord) {
      VerifyTfrecordShard(source, m.shards[i], m, options.decode_encoded, env, &results[i]);
    } else {
      VerifyLmdbShard(source, m.shards[i], m, options.decode_encoded, env, &results[i]);
    }
  };
  tbb::task_arena arena(threads);
  arena.execute(
      [&] { tbb::parallel_for(size_t{0}, m.shards.size(), [&](size_t i) { check(i); }); });

  // The class counts of the manifest against the labels of the records, when every shard
  // could be counted.
  bool counted = true;
  for (const auto& r : results) counted = counted && r.counted;
  for (size_t c = 0; counted && c < labels.size(); ++c) {
    if (labels[c] != m.classes[c].count) {
      manifest_faults->Add(-1, -1,
                           "class " + std::to_string(c) + " (\"" + EscapeBytes(m.classes[c].name) +
                               "\"): the manifest counts " + std::to_string(m.classes[c].count) +
                               " samples, the records hold " + std::to_string(labels[c]));
    }
  }
  report->fault_count += manifest_faults->count();
  manifest_faults->MoveTo(&report->faults);
  for (auto& r : results) {
    report->records += r.records;
    report->bytes += r.bytes;
    for (auto& f : r.files) {
      ++report->files;
      report->fault_count += f.count();
      f.MoveTo(&report->faults);
    }
  }
  report->fault_count += stray->count();
  stray->MoveTo(&report->faults);
  return Status::Ok();
}

// A dataset at an http(s) URL: fetched into the cache (each file's size and checksum
// checked as it arrives; a file failing its checksum kept aside), then verified there like
// a local one, so that a damaged file on the server is named down to its records. There
// is no directory listing over HTTP, so no check for unlisted files.
StatusOr<VerifyReport> VerifyRemoteDataset(const std::string& url, const VerifyOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  SHARDPACK_ASSIGN_OR_RETURN(auto cached,
                             remote::FetchDataset(url, options.remote, remote::FetchMode::kVerify));
  const remote::CachedDataset* c = cached.get();
  FileSource source;
  source.path = [c](const std::string& name) { return c->PathOf(name); };
  source.why_missing = [c](const std::string& name) {
    auto it = c->failures().find(name);
    return it == c->failures().end() ? std::string("not fetched") : it->second.message();
  };
  VerifyReport report;
  report.files = 1;
  report.bytes = c->manifest_bytes();
  std::mutex mu;
  FileFaults stray("(directory)", options.max_faults_per_file, options, &mu);
  FileFaults manifest_faults(std::string(format::kManifestName), options.max_faults_per_file,
                             options, &mu);
  CheckManifestChecksum(c->manifest(), &manifest_faults);
  SHARDPACK_RETURN_IF_ERROR(
      VerifyShards(c->manifest(), source, options, &mu, &manifest_faults, &stray, &report));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace

StatusOr<VerifyReport> VerifyDataset(const std::string& dir, const VerifyOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(CheckThreadCount(options.num_threads, "num_threads"));
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(dir, io::PathKind::kDataset));
  if (IsRemotePath(dir)) return VerifyRemoteDataset(dir, options);
  const auto start = std::chrono::steady_clock::now();
  io::Env* env = io::Env::Posix();
  const std::string manifest_path = io::JoinPath(dir, format::kManifestName);
  auto text = env->ReadFile(manifest_path, kMaxManifestBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return format::NoManifestError(dir);
    return text.status();
  }
  auto parsed = ParseManifest(*text, manifest_path);
  if (!parsed.ok()) return parsed.status();
  const Manifest& m = *parsed;

  VerifyReport report;
  report.files = 1;
  report.bytes = text->size();
  std::mutex mu;

  // Files in the directory that the manifest does not list.
  std::set<std::string> listed;
  for (const ShardEntry& e : m.shards) {
    listed.insert(e.data.file);
    if (e.index) listed.insert(e.index->file);
  }
  FileFaults stray("(directory)", options.max_faults_per_file, options, &mu);
  auto names = env->ListDir(dir);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (listed.count(n) == 0 && LooksLikeOurs(n)) {
      stray.Add(-1, -1, n + ": not listed in the manifest (a leftover or foreign file)");
    }
  }
  FileFaults manifest_faults(std::string(format::kManifestName), options.max_faults_per_file,
                             options, &mu);
  CheckManifestChecksum(m, &manifest_faults);
  if (m.rejects) {
    // rejects.tsv: its checksum, and one line per reject the options count.
    ++report.files;
    FileFaults rejects_faults(m.rejects->file, options.max_faults_per_file, options, &mu);
    auto tsv = env->ReadFile(io::JoinPath(dir, m.rejects->file), kMaxRejectsBytes);
    if (!tsv.ok()) {
      rejects_faults.Add(-1, -1,
                         tsv.status().code() == StatusCode::kNotFound
                             ? "missing: the manifest lists it"
                             : tsv.status().message());
    } else {
      report.bytes += tsv->size();
      CheckFileEntry(*m.rejects, tsv->size(), Xxh3Hex(tsv->data(), tsv->size()), &rejects_faults);
      const uint64_t lines = static_cast<uint64_t>(std::count(tsv->begin(), tsv->end(), '\n'));
      auto options_json = nlohmann::json::parse(m.options_json, nullptr, false);
      if (lines >= 1 && options_json.is_object() && options_json.contains("rejected") &&
          options_json["rejected"].is_number_unsigned() &&
          options_json["rejected"].get<uint64_t>() != lines - 1) {
        rejects_faults.Add(-1, -1,
                           std::to_string(lines - 1) +
                               " rejects listed, the manifest's options "
                               "count " +
                               std::to_string(options_json["rejected"].get<uint64_t>()));
      }
    }
    report.fault_count += rejects_faults.count();
    rejects_faults.MoveTo(&report.faults);
  }
  FileSource source;
  source.path = [&dir](const std::string& name) { return io::JoinPath(dir, name); };
  SHARDPACK_RETURN_IF_ERROR(
      VerifyShards(m, source, options, &mu, &manifest_faults, &stray, &report));
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

}  // namespace shardpack
