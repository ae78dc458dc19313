#include "shardpack/shard_writer.h"

#include <nlohmann/json.hpp>

#include "format/caffe_datum.h"
#include "format/example.h"
#include "format/format.h"
#include "format/lmdb_shard.h"
#include "format/tfrecord_shard.h"
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

// A sample placed by Reserve: its record's place in a TFRecord shard, to be written.
struct ShardWriter::Reservation::Placed {
  format::TfrecordShardWriter* shard = nullptr;
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
    tfrecord_.reset();
    sealed_.clear();
    lmdb_.reset();
    if (!finished_ && !options_.on_shard_staged) {
      for (size_t i = 0; i < shards_.size(); ++i) {
        env_->RemoveFile(io::JoinPath(dir_, shards_[i].data.file)).IgnoreError();
        if (shards_[i].index) {
          env_->RemoveFile(io::JoinPath(dir_, shards_[i].index->file)).IgnoreError();
        }
      }
    }
  }

  Status Validate(const SampleInput& s) const {
    const ImageSpec& spec = options_.image;
    auto shape = [&] {
      return std::to_string(s.height) + "x" + std::to_string(s.width) + "x" +
             std::to_string(s.channels);
    };
    if (s.height < 1 || s.width < 1 || s.height > format::kMaxDimension ||
        s.width > format::kMaxDimension) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": shape " + shape() +
                                  " is outside 1.." + std::to_string(format::kMaxDimension));
    }
    if (uint64_t(s.height) * uint64_t(s.width) > format::kMaxPixels) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": shape " + shape() +
                                  " has more than " + std::to_string(format::kMaxPixels) +
                                  " pixels");
    }
    if (s.filename.size() > format::kMaxTextBytes) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": filename of " +
                                  std::to_string(s.filename.size()) + " bytes, limit " +
                                  std::to_string(format::kMaxTextBytes));
    }
    if (s.channels != spec.channels) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": " +
                                  std::to_string(s.channels) + " channels, the dataset has " +
                                  std::to_string(spec.channels));
    }
    if (spec.fixed() && (s.height != spec.height || s.width != spec.width)) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": shape " + shape() +
                                  ", the dataset is " + std::to_string(spec.height) + "x" +
                                  std::to_string(spec.width));
    }
    if (!spec.fixed() && spec.max_side > 0 &&
        (s.height > spec.max_side || s.width > spec.max_side)) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": shape " + shape() +
                                  " exceeds max side " + std::to_string(spec.max_side));
    }
    if (StoresFile(s)) {
      const image::Format want =
          spec.encoding == ImageEncoding::kPng ? image::Format::kPng : image::Format::kJpeg;
      if (image::Sniff(s.encoded.data(), s.encoded.size()) != want) {
        return InvalidArgumentError("sample " + std::to_string(samples_) + ": the dataset holds " +
                                    std::string(ImageEncodingName(spec.encoding)) +
                                    " images, the sample's encoded bytes are not one (" +
                                    std::to_string(s.encoded.size()) + " bytes)");
      }
      return CheckLabel(s.label);
    }
    uint64_t expected = uint64_t(s.height) * uint64_t(s.width) * uint64_t(s.channels);
    if (s.pixels.size() != expected) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": " +
                                  std::to_string(s.pixels.size()) + " pixel bytes, shape " +
                                  shape() + " needs " + std::to_string(expected));
    }
    return CheckLabel(s.label);
  }

  // Whether `s` is stored as its file (image/encoded) rather than its pixels: every sample
  // of a JPEG or PNG dataset; a mixed dataset's sample when it comes with its JPEG.
  bool StoresFile(const SampleInput& s) const {
    const ImageEncoding e = options_.image.encoding;
    return e != ImageEncoding::kRaw && (e != ImageEncoding::kMixed || !s.encoded.empty());
  }

  Status CheckLabel(int64_t label) const {
    if (label < 0 || static_cast<uint64_t>(label) >= options_.class_names.size()) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": label " +
                                  std::to_string(label) + " is not a class (0.." +
                                  std::to_string(options_.class_names.size()) + ")");
    }
    return Status::Ok();
  }

  // What a TFRecord or Example-schema LMDB record holds of a sample: its features, and
  // `image`, the sample's pixels or the file of an encoded image (`key` image/encoded).
  struct Record {
    std::string entries;
    std::span<const uint8_t> image;
    uint32_t crc = 0;  // of `image`
    std::string_view key = format::kKeyRaw;
    int64_t label = 0;
  };

  Record MakeRecord(const SampleInput& s) const {
    format::SampleMeta meta{s.height, s.width, s.channels, s.label, ClassName(s.label), s.filename};
    if (StoresFile(s)) {
      const uint32_t crc = crc32c::Value(s.encoded.data(), s.encoded.size());
      const ImageEncoding e = encoding();
      const ImageEncoding file = e == ImageEncoding::kMixed ? ImageEncoding::kJpeg : e;
      return {format::EncodeEncodedFeatureEntries(meta, file, crc), s.encoded, crc,
              format::kKeyEncoded, s.label};
    }
    const uint32_t crc = crc32c::Value(s.pixels.data(), s.pixels.size());
    return {format::EncodeFeatureEntries(meta, crc), s.pixels, crc, format::kKeyRaw, s.label};
  }

  // The record appended (Add), or placed in the open TFRecord shard (Reserve, `placed`
  // not null) to be written by WritePlaced.
  Status AddRecord(const Record& r, Placed* placed) {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    if (finished_) return FailedPreconditionError(dir_ + ": add after finish");
    SHARDPACK_RETURN_IF_ERROR(CheckMode(placed != nullptr));
    SHARDPACK_RETURN_IF_ERROR(CheckLabel(r.label));
    Status s = Append(r, placed);
    if (!s.ok()) {
      Fail(s);
      return s;
    }
    ++class_counts_[static_cast<size_t>(r.label)];
    ++samples_;
    return Status::Ok();
  }

  // Reserve's Commit: stages the shards sealed before `placed`'s (all their records are
  // written once the caller commits `placed`), then hints the written bytes' writeback.
  Status Commit(const Placed& placed) {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    while (std::optional<Sealed> sealed = PopSealed(placed.number)) {
      Status s = StageShard(sealed->writer.get(), nullptr, sealed->class_counts, sealed->samples);
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
    SHARDPACK_RETURN_IF_ERROR(CheckLabel(label));
    if (samples_ >= format::kCaffeMaxRecords) {
      return ResourceExhaustedError("sample " + std::to_string(samples_) +
                                    ": Caffe keys number records with 8 digits; at most " +
                                    std::to_string(format::kCaffeMaxRecords) + " samples fit");
    }
    if (label > INT32_MAX) {
      return InvalidArgumentError("sample " + std::to_string(samples_) + ": label " +
                                  std::to_string(label) + " does not fit Caffe's int32");
    }
    const uint64_t records = lmdb_ ? lmdb_->records() : 0;
    const uint64_t bytes = lmdb_ ? lmdb_->bytes() : 0;
    // The value plus LMDB's per-value cost: a node, and a page header per overflow chain.
    const uint64_t next = key.size() + value.size() + 64 + 4096;
    Status s;
    if (records > 0 && ((options_.max_shard_records > 0 && records >= options_.max_shard_records) ||
                        bytes + next > options_.max_shard_bytes)) {
      s = CloseShard();
    }
    if (s.ok() && !lmdb_) s = OpenShard();
    if (s.ok()) s = lmdb_->AppendValue(std::move(key), std::move(value));
    if (!s.ok()) {
      Fail(s);
      return s;
    }
    ++class_counts_[static_cast<size_t>(label)];
    ++samples_;
    return Status::Ok();
  }

  bool IsTfrecord() const { return options_.backend == Backend::kTfrecord; }
  bool IsCaffe() const {
    return options_.backend == Backend::kLmdb && options_.lmdb_schema == LmdbSchema::kCaffe;
  }

  StatusOr<Manifest> Finish() {
    SHARDPACK_RETURN_IF_ERROR(Failed());
    if (finished_) return FailedPreconditionError(dir_ + ": finished twice");
    Status s = CloseShard();
    if (s.ok()) s = PublishFinalNames();
    if (!s.ok()) {
      Fail(s);
      return s;
    }
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
    s = io::WriteFileAtomically(env_, io::JoinPath(dir_, format::kManifestName),
                                SerializeManifest(m));
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
  // Valid after CheckLabel(label) passed.
  ImageEncoding encoding() const { return options_.image.encoding; }

  std::string_view ClassName(int64_t label) const {
    return options_.class_names[static_cast<size_t>(label)];
  }

 private:
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

  Status Append(const Record& r, Placed* placed) {
    std::string_view px(reinterpret_cast<const char*>(r.image.data()), r.image.size());
    uint64_t records =
        IsTfrecord() ? (tfrecord_ ? tfrecord_->records() : 0) : (lmdb_ ? lmdb_->records() : 0);
    uint64_t bytes =
        IsTfrecord() ? (tfrecord_ ? tfrecord_->bytes() : 0) : (lmdb_ ? lmdb_->bytes() : 0);
    uint64_t next = IsTfrecord() ? format::TfrecordShardWriter::RecordSizeBound(
                                       r.entries, px.size(), options_.pixel_alignment)
                                 : format::LmdbShardWriter::RecordSizeBound(
                                       r.entries, px.size(), options_.pixel_alignment);
    bool full =
        records > 0 && ((options_.max_shard_records > 0 && records >= options_.max_shard_records) ||
                        bytes + next > options_.max_shard_bytes);
    if (full && placed != nullptr) {
      // Its records may still be being written: staged by the Commit of a later record.
      std::lock_guard<std::mutex> l(mu_);
      sealed_.push_back({std::move(tfrecord_), opened_ - 1, class_counts_, samples_});
    } else if (full) {
      SHARDPACK_RETURN_IF_ERROR(CloseShard());
    }
    if (!tfrecord_ && !lmdb_) SHARDPACK_RETURN_IF_ERROR(OpenShard());
    if (!IsTfrecord()) return lmdb_->Append(r.entries, px, r.crc, r.key);
    if (placed == nullptr) return tfrecord_->Append(r.entries, px, r.crc, r.key);
    placed->shard = tfrecord_.get();
    placed->number = opened_ - 1;
    return tfrecord_->Place(r.entries, px, r.crc, r.key, &placed->record);
  }

  Status OpenShard() {
    const uint64_t n = opened_;
    std::string path = io::JoinPath(dir_, format::StagedShardFileName(n, options_.backend));
    if (IsTfrecord()) {
      auto w = format::TfrecordShardWriter::Create(
          env_, path, io::JoinPath(dir_, format::StagedIndexFileName(n)), options_.pixel_alignment,
          options_.write_chunk_bytes, options_.write_method);
      if (!w.ok()) return w.status();
      tfrecord_ = std::move(w).value();
      write_method_used_ = tfrecord_->method();
    } else {
      format::LmdbWriterOptions lo;
      lo.initial_map_bytes = options_.lmdb_initial_map_bytes;
      lo.pixel_alignment = options_.pixel_alignment;
      auto w = format::LmdbShardWriter::Create(path, lo);
      if (!w.ok()) return w.status();
      lmdb_ = std::move(w).value();
    }
    ++opened_;
    return Status::Ok();
  }

  // Stages the shards sealed by Reserve, then the open one.
  Status CloseShard() {
    while (std::optional<Sealed> sealed = PopSealed(UINT64_MAX)) {
      SHARDPACK_RETURN_IF_ERROR(
          StageShard(sealed->writer.get(), nullptr, sealed->class_counts, sealed->samples));
    }
    if (!tfrecord_ && !lmdb_) return Status::Ok();
    Status s = StageShard(tfrecord_.get(), lmdb_.get(), class_counts_, samples_);
    tfrecord_.reset();
    lmdb_.reset();
    return s;
  }

  // Finishes one shard (one of the two writers) under its staged name and records it;
  // `class_counts` and `samples` count the samples of every shard up to this one.
  Status StageShard(format::TfrecordShardWriter* tfrecord, format::LmdbShardWriter* lmdb,
                    const std::vector<uint64_t>& class_counts, uint64_t samples) {
    ShardEntry e;
    e.first_sample = shards_.empty() ? 0 : shards_.back().first_sample + shards_.back().records;
    if (tfrecord != nullptr) {
      e.records = tfrecord->records();
      FileEntry index;
      SHARDPACK_RETURN_IF_ERROR(tfrecord->Finish(&e.data, &index));
      e.index = std::move(index);
    } else {
      e.records = lmdb->records();
      SHARDPACK_RETURN_IF_ERROR(lmdb->Finish(&e.data));
    }
    shards_.push_back(std::move(e));
    if (options_.on_shard_staged) return options_.on_shard_staged({shards_, class_counts, samples});
    return Status::Ok();
  }

 public:
  // Resume: adopt what an earlier writer staged.
  void Adopt(const ShardWriterState& state) {
    shards_ = state.shards;
    opened_ = shards_.size();
    class_counts_ = state.class_counts;
    samples_ = state.samples;
  }

 private:
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

  std::string dir_;
  ShardWriterOptions options_;
  io::Env* env_;
  // A TFRecord shard that Reserve closed to new records, until Commit stages it.
  struct Sealed {
    std::unique_ptr<format::TfrecordShardWriter> writer;
    uint64_t number = 0;  // its index among the dataset's shards
    std::vector<uint64_t> class_counts;
    uint64_t samples = 0;
  };
  enum class Mode { kNone, kAdd, kReserve };

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

  // Reserve's calls and Commit's may run at the same time (on two threads): what both
  // touch is under mu_ (sealed_, failed_). Reserve's side alone: the open shard, opened_,
  // the counts; Commit's alone: shards_ and on_shard_staged.
  std::mutex mu_;
  std::unique_ptr<format::TfrecordShardWriter> tfrecord_;
  std::unique_ptr<format::LmdbShardWriter> lmdb_;
  std::deque<Sealed> sealed_;  // in shard order
  uint64_t opened_ = 0;        // shards opened, staged or not: the next one's number
  WriteMethod write_method_used_ = WriteMethod::kAuto;  // the last TFRecord shard opened
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
    if (name.size() > format::kMaxTextBytes) {
      return InvalidArgumentError("a class name of " + std::to_string(name.size()) +
                                  " bytes; the limit is " + std::to_string(format::kMaxTextBytes));
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
  if (!impl_->IsTfrecord()) {
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
