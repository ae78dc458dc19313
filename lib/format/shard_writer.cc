#include "shardpack/shard_writer.h"

#include <nlohmann/json.hpp>

#include "format/caffe_datum.h"
#include "format/example.h"
#include "format/format.h"
#include "format/shard_file_writer.h"
#include "image/image.h"
#include "io/chunked_file.h"
#include "io/env.h"
#include "util/crc32c.h"
#include "util/hash.h"
#include "util/text.h"

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>

namespace shardpack {

std::string_view WriteMethodName(WriteMethod m) {
  switch (m) {
    case WriteMethod::kWrite:
      return "write";
    case WriteMethod::kMap:
      return "map";
    case WriteMethod::kAuto:
      break;
  }
  return "auto";
}

namespace {

// Validation's messages name the sample by its number in the dataset.
std::string SampleName(uint64_t number) { return "sample " + std::to_string(number); }

std::string ShapeText(const SampleInput& s) {
  return std::to_string(s.height) + "x" + std::to_string(s.width) + "x" +
         std::to_string(s.channels);
}

// Whether `s` is stored as its file (image/encoded) rather than its pixels: every sample
// of a JPEG or PNG dataset; a mixed dataset's sample when it comes with its JPEG.
bool StoresFile(ImageEncoding e, const SampleInput& s) {
  return e != ImageEncoding::kRaw && (e != ImageEncoding::kMixed || !s.encoded.empty());
}

Status CheckLabel(const ShardWriterOptions& o, uint64_t number, int64_t label) {
  if (label < 0 || static_cast<uint64_t>(label) >= o.class_names.size()) {
    return InvalidArgumentError(SampleName(number) + ": label " + std::to_string(label) +
                                " is not a class (0.." + std::to_string(o.class_names.size()) +
                                ")");
  }
  return Status::Ok();
}

// The limits every reader enforces (format.h), whatever the dataset's shape.
Status CheckReadable(uint64_t number, const SampleInput& s) {
  if (s.height < 1 || s.width < 1 || s.height > kMaxImageSide || s.width > kMaxImageSide) {
    return InvalidArgumentError(SampleName(number) + ": shape " + ShapeText(s) + " is outside 1.." +
                                std::to_string(kMaxImageSide));
  }
  if (uint64_t(s.height) * uint64_t(s.width) > kMaxImagePixels) {
    return InvalidArgumentError(SampleName(number) + ": shape " + ShapeText(s) + " has more than " +
                                std::to_string(kMaxImagePixels) + " pixels");
  }
  if (s.filename.size() > kMaxTextBytes) {
    return InvalidArgumentError(SampleName(number) + ": filename of " +
                                std::to_string(s.filename.size()) + " bytes, limit " +
                                std::to_string(kMaxTextBytes));
  }
  return Status::Ok();
}

// The dataset's shape contract (ShardWriterOptions::image).
Status CheckShape(const ImageSpec& spec, uint64_t number, const SampleInput& s) {
  if (s.channels != spec.channels) {
    return InvalidArgumentError(SampleName(number) + ": " + std::to_string(s.channels) +
                                " channels, the dataset has " + std::to_string(spec.channels));
  }
  if (spec.fixed() && (s.height != spec.height || s.width != spec.width)) {
    return InvalidArgumentError(SampleName(number) + ": shape " + ShapeText(s) +
                                ", the dataset is " + std::to_string(spec.height) + "x" +
                                std::to_string(spec.width));
  }
  if (!spec.fixed() && spec.max_side > 0 && (s.height > spec.max_side || s.width > spec.max_side)) {
    return InvalidArgumentError(SampleName(number) + ": shape " + ShapeText(s) +
                                " exceeds max side " + std::to_string(spec.max_side));
  }
  return Status::Ok();
}

// The sample's image bytes: its file in the dataset's encoding, or its pixels, whole.
Status CheckImageBytes(const ImageSpec& spec, uint64_t number, const SampleInput& s) {
  if (StoresFile(spec.encoding, s)) {
    const image::Format want =
        spec.encoding == ImageEncoding::kPng ? image::Format::kPng : image::Format::kJpeg;
    if (image::Sniff(s.encoded.data(), s.encoded.size()) != want) {
      return InvalidArgumentError(SampleName(number) + ": the dataset holds " +
                                  std::string(ImageEncodingName(spec.encoding)) +
                                  " images, the sample's encoded bytes are not one (" +
                                  std::to_string(s.encoded.size()) + " bytes)");
    }
    return Status::Ok();
  }
  uint64_t expected = uint64_t(s.height) * uint64_t(s.width) * uint64_t(s.channels);
  if (s.pixels.size() != expected) {
    return InvalidArgumentError(SampleName(number) + ": " + std::to_string(s.pixels.size()) +
                                " pixel bytes, shape " + ShapeText(s) + " needs " +
                                std::to_string(expected));
  }
  return Status::Ok();
}

// Everything Add refuses of sample `number` before it touches a shard.
Status ValidateSample(const ShardWriterOptions& o, uint64_t number, const SampleInput& s) {
  SHARDPACK_RETURN_IF_ERROR(CheckReadable(number, s));
  SHARDPACK_RETURN_IF_ERROR(CheckShape(o.image, number, s));
  SHARDPACK_RETURN_IF_ERROR(CheckImageBytes(o.image, number, s));
  return CheckLabel(o, number, s.label);
}

// What a TFRecord or Example-schema LMDB record holds of a sample: its features, and
// `image`, the sample's pixels or the file of an encoded image (`key` image/encoded).
struct SampleRecord {
  std::string entries;
  std::span<const uint8_t> image;
  uint32_t crc = 0;  // of `image`
  std::string_view key = format::kKeyRaw;
  int64_t label = 0;
};

// Valid after CheckLabel(s.label) passed.
SampleRecord MakeSampleRecord(const ShardWriterOptions& o, const SampleInput& s) {
  const std::string_view class_name = o.class_names[static_cast<size_t>(s.label)];
  format::SampleMeta meta{s.height, s.width, s.channels, s.label, class_name, s.filename};
  const ImageEncoding e = o.image.encoding;
  if (StoresFile(e, s)) {
    const uint32_t crc = crc32c::Value(s.encoded.data(), s.encoded.size());
    const ImageEncoding file = e == ImageEncoding::kMixed ? ImageEncoding::kJpeg : e;
    return {format::EncodeEncodedFeatureEntries(meta, file, crc), s.encoded, crc,
            format::kKeyEncoded, s.label};
  }
  const uint32_t crc = crc32c::Value(s.pixels.data(), s.pixels.size());
  return {format::EncodeFeatureEntries(meta, crc), s.pixels, crc, format::kKeyRaw, s.label};
}

std::string_view AsChars(std::span<const uint8_t> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

// A sample placed by Reserve: its record's place in a shard file, to be written.
struct ShardWriter::Reservation::Placed {
  format::ShardFileWriter* shard = nullptr;
  uint64_t number = 0;  // the shard's index in the dataset
  format::PlacedRecord record;
};

class ShardWriter::Impl {
  using Placed = Reservation::Placed;

 public:
  Impl(std::string dir, ShardWriterOptions options, io::Env* env)
      : dir_(std::move(dir)), options_(std::move(options)), env_(env) {
    // An encoded image is read whole into a decoder, never in place: no padding.
    if (options_.image.encoding != ImageEncoding::kRaw) options_.pixel_alignment = 1;
    class_counts_.assign(options_.class_names.size(), 0);
  }

  ~Impl() {
    // Without Finish(), nothing is published: drop the open shard, and the staged ones
    // unless the caller records progress to resume from them.
    file_.reset();
    sealed_.clear();
    if (!finished_ && !options_.on_shard_staged) {
      for (size_t i = 0; i < shards_.size(); ++i) {
        env_->RemoveFile(io::JoinPath(dir_, shards_[i].data.file)).IgnoreError();
        if (shards_[i].index) {
          env_->RemoveFile(io::JoinPath(dir_, shards_[i].index->file)).IgnoreError();
        }
      }
    }
  }

  Status Validate(const SampleInput& s) const { return ValidateSample(options_, samples_, s); }
  SampleRecord MakeRecord(const SampleInput& s) const { return MakeSampleRecord(options_, s); }

  // The record appended (Add), or placed in the open shard (Reserve, `placed` not null)
  // to be written by WritePlaced.
  Status AddRecord(const SampleRecord& r, Placed* placed) {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    if (finished_) return FailedPreconditionError(dir_ + ": add after finish");
    SHARDPACK_RETURN_IF_ERROR(CheckMode(placed != nullptr));
    SHARDPACK_RETURN_IF_ERROR(CheckLabel(options_, samples_, r.label));
    return Counted(r.label, Append(r, placed));
  }

  // Reserve's Commit: stages the shards sealed before `placed`'s (all their records are
  // written once the caller commits `placed`), then hints the written bytes' writeback.
  Status Commit(const Placed& placed) {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    while (std::optional<Sealed> sealed = PopSealed(placed.number)) {
      Status s = StageShard(sealed->writer.get(), sealed->class_counts, sealed->samples);
      if (!s.ok()) {
        Fail(s);
        return s;
      }
    }
    placed.shard->WrittenBefore(placed.record.end());
    return Status::Ok();
  }

  // A Caffe-schema sample: the Datum under its key (both from format/caffe_datum.h).
  Status AddCaffe(std::string key, std::string value, int64_t label) {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    if (finished_) return FailedPreconditionError(dir_ + ": add after finish");
    SHARDPACK_RETURN_IF_ERROR(CheckLabel(options_, samples_, label));
    if (samples_ >= format::kCaffeMaxRecords) {
      return ResourceExhaustedError(SampleName(samples_) +
                                    ": Caffe keys number records with 8 digits; at most " +
                                    std::to_string(format::kCaffeMaxRecords) + " samples fit");
    }
    if (label > INT32_MAX) {
      return InvalidArgumentError(SampleName(samples_) + ": label " + std::to_string(label) +
                                  " does not fit Caffe's int32");
    }
    Status s = MakeRoom(file_ ? file_->ValueSizeBound(key.size(), value.size()) : 0,
                        /*sealing=*/false);
    if (s.ok()) s = file_->AppendValue(std::move(key), std::move(value));
    return Counted(label, std::move(s));
  }

  bool IsCaffe() const {
    return options_.backend == Backend::kLmdb && options_.lmdb_schema == LmdbSchema::kCaffe;
  }
  Backend backend() const { return options_.backend; }

  StatusOr<Manifest> Finish() {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    if (finished_) return FailedPreconditionError(dir_ + ": finished twice");
    Status s = CloseShard();
    if (s.ok()) s = PublishFinalNames();
    Manifest m;
    if (s.ok()) {
      m = MakeManifest();
      s = io::WriteFileAtomically(env_, io::JoinPath(dir_, format::kManifestName),
                                  SerializeManifest(m));
    }
    if (!s.ok()) {
      Fail(s);
      return s;
    }
    finished_ = true;
    return m;
  }

  uint64_t samples() const { return samples_; }
  WriteMethod write_method_used() const { return write_method_used_; }
  void set_options_json(std::string j) { options_.options_json = std::move(j); }
  void set_rejects(FileEntry f) { rejects_ = std::move(f); }
  ImageEncoding encoding() const { return options_.image.encoding; }

  // Resume: adopt what an earlier writer staged.
  void Adopt(const ShardWriterState& state) {
    shards_ = state.shards;
    opened_ = shards_.size();
    class_counts_ = state.class_counts;
    samples_ = state.samples;
  }

 private:
  // A shard that Reserve closed to new records, until Commit stages it.
  struct Sealed {
    std::unique_ptr<format::ShardFileWriter> writer;
    uint64_t number = 0;  // its index among the dataset's shards
    std::vector<uint64_t> class_counts;
    uint64_t samples = 0;
  };
  enum class Mode { kNone, kAdd, kReserve };

  // A writer takes Add's samples or Reserve's, never both in one dataset: appended and
  // placed records would overwrite each other in a shard.
  Status CheckMode(bool reserving) {
    const Mode mode = reserving ? Mode::kReserve : Mode::kAdd;
    if (mode_ == Mode::kNone) mode_ = mode;
    if (mode_ != mode) {
      return FailedPreconditionError(dir_ +
                                     ": samples are added with Add or with Reserve, not both");
    }
    return Status::Ok();
  }

  // Counts a sample of `label` once `appended` is OK; an error fails the writer.
  Status Counted(int64_t label, Status appended) {
    if (!appended.ok()) {
      Fail(appended);
      return appended;
    }
    ++class_counts_[static_cast<size_t>(label)];
    ++samples_;
    return Status::Ok();
  }

  Status Append(const SampleRecord& r, Placed* placed) {
    const std::string_view image = AsChars(r.image);
    SHARDPACK_RETURN_IF_ERROR(MakeRoom(file_ ? file_->RecordSizeBound(r.entries, image.size()) : 0,
                                       /*sealing=*/placed != nullptr));
    if (placed == nullptr) return file_->Append(r.entries, image, r.crc, r.key);
    placed->shard = file_.get();
    placed->number = opened_ - 1;
    return file_->Place(r.entries, image, r.crc, r.key, &placed->record);
  }

  // Makes room for a record of at most `next` bytes: the open shard is closed first when
  // the record would take it past max_shard_bytes or max_shard_records (a shard holds at
  // least one record), or, `sealing` (Reserve), set aside for Commit, since its records
  // may still be being written; then a shard is opened where none is.
  Status MakeRoom(uint64_t next, bool sealing) {
    const uint64_t records = file_ ? file_->records() : 0;
    const uint64_t bytes = file_ ? file_->bytes() : 0;
    const bool full =
        records > 0 && ((options_.max_shard_records > 0 && records >= options_.max_shard_records) ||
                        bytes + next > options_.max_shard_bytes);
    if (full && sealing) {
      std::lock_guard<std::mutex> l(mu_);
      sealed_.push_back({std::move(file_), opened_ - 1, class_counts_, samples_});
    } else if (full) {
      SHARDPACK_RETURN_IF_ERROR(CloseShard());
    }
    if (!file_) SHARDPACK_RETURN_IF_ERROR(OpenShard());
    return Status::Ok();
  }

  Status OpenShard() {
    SHARDPACK_ASSIGN_OR_RETURN(file_, format::OpenShardFile(env_, dir_, opened_, options_));
    write_method_used_ = file_->method();
    ++opened_;
    return Status::Ok();
  }

  // Stages the shards sealed by Reserve, then the open one.
  Status CloseShard() {
    while (std::optional<Sealed> sealed = PopSealed(UINT64_MAX)) {
      SHARDPACK_RETURN_IF_ERROR(
          StageShard(sealed->writer.get(), sealed->class_counts, sealed->samples));
    }
    if (!file_) return Status::Ok();
    Status s = StageShard(file_.get(), class_counts_, samples_);
    file_.reset();
    return s;
  }

  // Finishes one shard under its staged name and records it; `class_counts` and `samples`
  // count the samples of every shard up to this one.
  Status StageShard(format::ShardFileWriter* file, const std::vector<uint64_t>& class_counts,
                    uint64_t samples) {
    ShardEntry e;
    e.first_sample = shards_.empty() ? 0 : shards_.back().first_sample + shards_.back().records;
    e.records = file->records();
    SHARDPACK_RETURN_IF_ERROR(file->Finish(&e.data, &e.index));
    shards_.push_back(std::move(e));
    if (options_.on_shard_staged) return options_.on_shard_staged({shards_, class_counts, samples});
    return Status::Ok();
  }

  Status PublishFinalNames() {
    const uint64_t total = shards_.size();
    for (uint64_t i = 0; i < total; ++i) {
      ShardEntry& e = shards_[i];
      // The index first, so that a shard under its final name always has its index.
      if (e.index) {
        std::string index_name = format::IndexFileName(i, total);
        SHARDPACK_RETURN_IF_ERROR(
            env_->RenameFile(io::JoinPath(dir_, e.index->file), io::JoinPath(dir_, index_name)));
        e.index->file = index_name;
      }
      std::string name = format::ShardFileName(i, total, options_.backend);
      SHARDPACK_RETURN_IF_ERROR(
          env_->RenameFile(io::JoinPath(dir_, e.data.file), io::JoinPath(dir_, name)));
      e.data.file = name;
    }
    return env_->SyncDir(dir_);
  }

  Manifest MakeManifest() const {
    Manifest m;
    // 2: the manifest checksum, including 1.1's Caffe schema; 3: encoded images;
    // 1.4: mixed records.
    m.format_minor = options_.image.encoding == ImageEncoding::kMixed ? 4
                     : options_.image.encoding != ImageEncoding::kRaw ? 3
                                                                      : 2;
    m.tool_version = "shardpack " + std::string(Version());
    m.backend = options_.backend;
    m.num_samples = samples_;
    m.image = options_.image;
    m.pixel_alignment = IsCaffe() ? 1 : options_.pixel_alignment;
    if (IsCaffe()) m.lmdb_schema = LmdbSchema::kCaffe;
    for (size_t i = 0; i < options_.class_names.size(); ++i) {
      m.classes.push_back({options_.class_names[i], class_counts_[i]});
    }
    m.shards = shards_;
    m.seed = options_.seed;
    m.options_json = options_.options_json;
    m.rejects = rejects_;
    return m;
  }

  // The first sealed shard if its number is below `before` (taken off the list).
  std::optional<Sealed> PopSealed(uint64_t before) {
    std::lock_guard<std::mutex> l(mu_);
    if (sealed_.empty() || sealed_.front().number >= before) return std::nullopt;
    Sealed sealed = std::move(sealed_.front());
    sealed_.pop_front();
    return sealed;
  }

  Status Failed() {
    std::lock_guard<std::mutex> l(mu_);
    return failed_;
  }
  void Fail(const Status& s) {
    std::lock_guard<std::mutex> l(mu_);
    if (failed_.ok()) failed_ = s;
  }

  std::string dir_;
  ShardWriterOptions options_;
  io::Env* env_;
  // Reserve's calls and Commit's may run at the same time (on two threads): what both
  // touch is under mu_ (sealed_, failed_). Reserve's side alone: the open shard, opened_,
  // the counts; Commit's alone: shards_ and on_shard_staged.
  std::mutex mu_;
  std::unique_ptr<format::ShardFileWriter> file_;  // the open shard
  std::deque<Sealed> sealed_;                      // in shard order
  uint64_t opened_ = 0;  // shards opened, staged or not: the next one's number
  WriteMethod write_method_used_ = WriteMethod::kAuto;  // by the last shard opened
  Mode mode_ = Mode::kNone;
  std::vector<ShardEntry> shards_;
  std::vector<uint64_t> class_counts_;
  uint64_t samples_ = 0;
  Status failed_;  // under mu_
  bool finished_ = false;
  std::optional<FileEntry> rejects_;  // named in the manifest (SetRejectsFile)
};

StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Create(const std::string& dir,
                                                           ShardWriterOptions options) {
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(dir, io::PathKind::kLocal));
  io::Env* env = options.env != nullptr ? options.env : io::Env::Posix();
  if (options.backend == Backend::kLmdb) env = io::Env::Posix();
  if (options.class_names.empty()) {
    return InvalidArgumentError(
        "ShardWriterOptions.class_names is empty: a dataset needs "
        "at least one class");
  }
  if (options.lmdb_schema == LmdbSchema::kCaffe && options.backend != Backend::kLmdb) {
    return InvalidArgumentError("the Caffe schema is for LMDB shards; the backend is " +
                                std::string(BackendName(options.backend)));
  }
  const ImageSpec& im = options.image;
  if (im.channels != 1 && im.channels != 3) {
    return InvalidArgumentError("ImageSpec.channels is " + std::to_string(im.channels) +
                                ", expected 1 (gray) or 3 (RGB)");
  }
  for (const std::string& name : options.class_names) {
    if (name.size() > kMaxTextBytes) {
      return InvalidArgumentError("a class name of " + std::to_string(name.size()) +
                                  " bytes; the limit is " + std::to_string(kMaxTextBytes));
    }
    // What ParseManifest reads back (shardpack/manifest.h): a dataset is never written
    // that its readers refuse.
    if (!IsPrintableUtf8(name)) {
      return InvalidArgumentError("class name \"" + EscapeBytes(name) +
                                  "\" holds a control character or bytes that are not UTF-8: "
                                  "class names are printable UTF-8 (EscapeBytes makes one)");
    }
  }
  if ((im.height > 0) != (im.width > 0) || im.height < 0 || im.width < 0 || im.max_side < 0) {
    return InvalidArgumentError("ImageSpec: give both height and width, or neither");
  }
  if (options.pixel_alignment == 0 || options.pixel_alignment > 4096 ||
      (options.pixel_alignment & (options.pixel_alignment - 1)) != 0) {
    return InvalidArgumentError("pixel_alignment " + std::to_string(options.pixel_alignment) +
                                " is not a power of two in 1..4096");
  }
  if (im.encoding == ImageEncoding::kMixed && options.lmdb_schema == LmdbSchema::kCaffe) {
    return InvalidArgumentError("mixed encoding is not written in the Caffe schema");
  }
  if (options.max_shard_bytes == 0) {
    return InvalidArgumentError("max_shard_bytes must be positive");
  }
  if (Status s = io::CheckWriteChunk(options.write_chunk_bytes); !s.ok()) return s;
  if (!nlohmann::json::accept(options.options_json.empty() ? "{}" : options.options_json)) {
    return InvalidArgumentError("options_json is not valid JSON");
  }
  SHARDPACK_RETURN_IF_ERROR(env->CreateDirs(dir));
  auto names = env->ListDir(dir);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (n == format::kManifestName || n.rfind("shard-", 0) == 0) {
      return AlreadyExistsError(io::JoinPath(dir, n) +
                                ": the output directory already holds a dataset; remove it "
                                "or choose another directory");
    }
  }
  return std::unique_ptr<ShardWriter>(
      new ShardWriter(std::make_unique<Impl>(dir, std::move(options), env)));
}

namespace {

Status CheckStagedFile(io::Env* env, const std::string& dir, const FileEntry& e) {
  const std::string path = io::JoinPath(dir, e.file);
  auto file = env->MapFile(path, io::AccessPattern::kSequential);
  if (!file.ok()) return file.status().WithPrefix("cannot resume");
  std::string hash = Xxh3Hex((*file)->data(), (*file)->size());
  if ((*file)->size() != e.bytes || hash != e.xxh3_128) {
    return CorruptionError("cannot resume: " + path + " is " + std::to_string((*file)->size()) +
                           " bytes with xxh3_128 " + hash + ", the progress record says " +
                           std::to_string(e.bytes) + " bytes and " + e.xxh3_128 +
                           "; remove the output directory and convert again");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Resume(const std::string& dir,
                                                           ShardWriterOptions options,
                                                           const ShardWriterState& state) {
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(dir, io::PathKind::kLocal));
  io::Env* env = options.env != nullptr ? options.env : io::Env::Posix();
  if (options.backend == Backend::kLmdb) env = io::Env::Posix();
  if (state.class_counts.size() != options.class_names.size()) {
    return InvalidArgumentError("cannot resume: the progress record has " +
                                std::to_string(state.class_counts.size()) + " classes, not " +
                                std::to_string(options.class_names.size()));
  }
  const uint64_t total = state.shards.size();
  std::set<std::string> keep;
  for (uint64_t i = 0; i < total; ++i) {
    const ShardEntry& e = state.shards[i];
    // An interruption while Finish() renamed shards leaves some under their final names.
    std::vector<std::pair<std::string, std::string>> names = {
        {e.data.file, format::ShardFileName(i, total, options.backend)}};
    if (e.index) names.push_back({e.index->file, format::IndexFileName(i, total)});
    for (const auto& [staged, final_name] : names) {
      if (!env->FileExists(io::JoinPath(dir, staged)) &&
          env->FileExists(io::JoinPath(dir, final_name))) {
        SHARDPACK_RETURN_IF_ERROR(
            env->RenameFile(io::JoinPath(dir, final_name), io::JoinPath(dir, staged)));
      }
      keep.insert(staged);
    }
    SHARDPACK_RETURN_IF_ERROR(CheckStagedFile(env, dir, e.data));
    if (e.index) SHARDPACK_RETURN_IF_ERROR(CheckStagedFile(env, dir, *e.index));
  }
  auto names = env->ListDir(dir);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (n == format::kManifestName) {
      return AlreadyExistsError(io::JoinPath(dir, n) + ": the dataset is already complete");
    }
    if ((n.starts_with("shard-") || n.ends_with(".tmp")) && keep.count(n) == 0) {
      SHARDPACK_RETURN_IF_ERROR(env->RemoveFile(io::JoinPath(dir, n)));
    }
  }
  SHARDPACK_RETURN_IF_ERROR(env->SyncDir(dir));
  auto impl = std::make_unique<Impl>(dir, std::move(options), env);
  impl->Adopt(state);
  return std::unique_ptr<ShardWriter>(new ShardWriter(std::move(impl)));
}

ShardWriter::ShardWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ShardWriter::~ShardWriter() = default;

Status ShardWriter::Add(const SampleInput& s) {
  SHARDPACK_RETURN_IF_ERROR(impl_->Validate(s));
  if (impl_->IsCaffe()) {
    return impl_->AddCaffe(
        format::CaffeKey(impl_->samples(), s.filename),
        impl_->encoding() != ImageEncoding::kRaw
            ? format::EncodeCaffeEncodedDatum(s.encoded, s.label)
            : format::EncodeCaffeDatum(s.pixels.data(), s.height, s.width, s.channels, s.label),
        s.label);
  }
  return impl_->AddRecord(impl_->MakeRecord(s), nullptr);
}

ShardWriter::Reservation::Reservation() = default;
ShardWriter::Reservation::~Reservation() = default;
ShardWriter::Reservation::Reservation(Reservation&&) noexcept = default;
ShardWriter::Reservation& ShardWriter::Reservation::operator=(Reservation&&) noexcept = default;

Status ShardWriter::Reserve(const SampleInput& s, Reservation* reservation) {
  reservation->placed_.reset();
  if (!format::PlacesRecords(impl_->backend())) {
    return FailedPreconditionError("Reserve writes TFRecord shards; LMDB shards take Add");
  }
  SHARDPACK_RETURN_IF_ERROR(impl_->Validate(s));
  auto placed = std::make_unique<Reservation::Placed>();
  SHARDPACK_RETURN_IF_ERROR(impl_->AddRecord(impl_->MakeRecord(s), placed.get()));
  reservation->placed_ = std::move(placed);
  return Status::Ok();
}

Status ShardWriter::Write(const Reservation& reservation) const {
  const Reservation::Placed* p = reservation.placed_.get();
  if (p == nullptr) return FailedPreconditionError("Write of a sample that was not reserved");
  return p->shard->WritePlaced(p->record);
}

Status ShardWriter::Commit(const Reservation& reservation) {
  const Reservation::Placed* p = reservation.placed_.get();
  if (p == nullptr) return FailedPreconditionError("Commit of a sample that was not reserved");
  return impl_->Commit(*p);
}

StatusOr<Manifest> ShardWriter::Finish() { return impl_->Finish(); }

Status ShardWriter::SetOptionsJson(std::string options_json) {
  auto j = nlohmann::json::parse(options_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError("options_json is not a JSON object");
  }
  impl_->set_options_json(std::move(options_json));
  return Status::Ok();
}
void ShardWriter::SetRejectsFile(FileEntry rejects) { impl_->set_rejects(std::move(rejects)); }

uint64_t ShardWriter::samples() const { return impl_->samples(); }

WriteMethod ShardWriter::write_method_used() const { return impl_->write_method_used(); }

}  // namespace shardpack
