#include "shardpack/dataset.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "format/example.h"
#include "format/format.h"
#include "format/index_file.h"
#include "format/lmdb_shard.h"
#include "format/record.h"
#include "io/env.h"
#include "io/mapped_range.h"
#include "remote/shard_cache.h"
#include "util/crc32c.h"

namespace shardpack {

namespace {

struct Shard {
  std::string name;
  uint64_t first_sample = 0;
  uint64_t records = 0;
  // TFRecord
  std::unique_ptr<io::MappedFile> file;
  std::vector<format::IndexEntry> index;
  // LMDB
  std::unique_ptr<format::LmdbShardReader> lmdb;

  // True once a read of the shard's mapping found part of the file gone.
  bool faulted() const { return file ? file->faulted() : lmdb->faulted(); }
};

}  // namespace

class Dataset::Impl {
 public:
  std::string dir;
  DatasetOptions options;
  Manifest manifest;
  std::vector<Shard> shards;
  // A remote dataset: its cached copy, kept (with its lock against eviction) while the
  // shards are mapped.
  std::unique_ptr<remote::CachedDataset> cached;

  size_t ShardOf(uint64_t index) const {
    auto it = std::upper_bound(shards.begin(), shards.end(), index,
                               [](uint64_t i, const Shard& s) { return i < s.first_sample; });
    return static_cast<size_t>(it - shards.begin()) - 1;
  }

  Status Get(uint64_t index, SampleView* out, bool verify_crc) const {
    if (index >= manifest.num_samples) {
      return OutOfRangeError(dir + ": sample " + std::to_string(index) + " is beyond the " +
                             std::to_string(manifest.num_samples) + " samples of the dataset");
    }
    const Shard& shard = shards[ShardOf(index)];
    const uint64_t record = index - shard.first_sample;
    Status s = Read(shard, record, out, verify_crc);
    // Whatever was read (a checksum over zeros fails too), a lost page is the fault.
    if (shard.faulted()) return ShrunkFault(shard, record);
    return s;
  }

  void WillNeed(uint64_t index) const {
    const Shard& shard = shards[ShardOf(index)];
    const uint64_t record = index - shard.first_sample;
    if (shard.file) {
      const format::IndexEntry& e = shard.index[record];
      shard.file->WillNeed(e.offset, e.size);
      return;
    }
    // LMDB: the lookup reads the (few, cached) branch and leaf pages; the value's own
    // pages are what is hinted. A faulted map is left alone.
    std::string_view value;
    if (shard.lmdb->faulted() || !shard.lmdb->Get(record, &value).ok()) return;
    shard.lmdb->WillNeed(value);
  }

  bool Resident(uint64_t index) const {
    const Shard& shard = shards[ShardOf(index)];
    const uint64_t record = index - shard.first_sample;
    // The middle of the record: its pixels. Its first page also holds the previous
    // record's tail and its own header, which a reader may have touched alone.
    if (shard.file) {
      const format::IndexEntry& e = shard.index[record];
      return shard.file->Resident(e.offset + e.size / 2);
    }
    std::string_view value;
    if (shard.lmdb->faulted() || !shard.lmdb->Get(record, &value).ok()) return true;
    return shard.lmdb->Resident(value.substr(value.size() / 2));
  }

  Status CheckIntact(uint64_t index) const {
    const Shard& shard = shards[ShardOf(index)];
    return shard.faulted() ? ShrunkFault(shard, index - shard.first_sample) : Status::Ok();
  }

 private:
  Status Read(const Shard& shard, uint64_t record, SampleView* out, bool verify_crc) const {
    const uint8_t* payload;
    uint64_t length;
    uint64_t offset = 0;
    if (shard.file) {
      const format::IndexEntry& e = shard.index[record];
      offset = e.offset;
      format::RecordView r;
      Status s = format::ReadRecordAt(shard.file->data(), shard.file->size(), e.offset,
                                      options.max_record_bytes, /*check_payload_crc=*/false, &r);
      if (s.ok() && r.framed_size() != e.size) {
        s = CorruptionError("the record is " + std::to_string(r.framed_size()) +
                            " bytes, its index line says " + std::to_string(e.size));
      }
      if (!s.ok()) return Fault(shard, record, offset, s);
      payload = r.payload;
      length = r.length;
      if (verify_crc) {
        // One pass over the pixels: their checksum, combined with the prefix's, gives the
        // payload checksum, and is checked against image/raw/crc32c as well.
        format::DecodedSample d;
        s = format::ParseSample(payload, length, &d);
        if (s.ok()) s = CheckCrcs(r, d);
        if (!s.ok()) return Fault(shard, record, offset, s);
        return Fill(d, out);
      }
    } else {
      std::string_view v;
      Status s = shard.lmdb->Get(record, &v);
      if (!s.ok()) return s;
      payload = reinterpret_cast<const uint8_t*>(v.data());
      length = v.size();
    }
    format::DecodedSample d;
    Status s = format::ParseSample(payload, length, &d);
    if (s.ok() && verify_crc && d.has_pixel_crc) {
      uint32_t actual = crc32c::Value(d.pixels, d.pixel_bytes);
      if (actual != d.pixel_crc) {
        s = CorruptionError("pixel checksum " + format::Hex32(actual) + ", expected " +
                            format::Hex32(d.pixel_crc));
      }
    }
    if (!s.ok()) return Fault(shard, record, offset, s);
    return Fill(d, out);
  }

  // The fault of a shard whose mapping read zeros where the file was gone.
  static Status ShrunkFault(const Shard& shard, uint64_t record) {
    if (shard.lmdb) return Fault(shard, record, 0, IOError(shard.lmdb->FaultMessage()));
    return Fault(shard, record, shard.index[record].offset,
                 IOError(std::string(io::kShrunkWhileMapped)));
  }

  static Status CheckCrcs(const format::RecordView& r, const format::DecodedSample& d) {
    const uint64_t pixel_start = static_cast<uint64_t>(d.pixels - r.payload);
    const uint64_t pixel_end = pixel_start + d.pixel_bytes;
    uint32_t pixels = crc32c::Value(d.pixels, d.pixel_bytes);
    uint32_t payload =
        crc32c::Combine(crc32c::Value(r.payload, pixel_start), pixels, d.pixel_bytes);
    payload = crc32c::Extend(payload, r.payload + pixel_end, r.length - pixel_end);
    SHARDPACK_RETURN_IF_ERROR(format::CheckPayloadCrc(r, payload));
    if (d.has_pixel_crc && pixels != d.pixel_crc) {
      return CorruptionError("pixel checksum " + format::Hex32(pixels) + ", expected " +
                             format::Hex32(d.pixel_crc));
    }
    return Status::Ok();
  }

  static Status Fault(const Shard& shard, uint64_t record, uint64_t offset, const Status& s) {
    std::string where = shard.name + ": record " + std::to_string(record);
    if (shard.file) where += " at offset " + std::to_string(offset);
    return Status(s.code(), where + ": " + s.message());
  }

  static Status Fill(const format::DecodedSample& d, SampleView* out) {
    out->pixels = {d.pixels, d.pixel_bytes};
    out->height = static_cast<int>(d.height);
    out->width = static_cast<int>(d.width);
    out->channels = static_cast<int>(d.channels);
    out->label = d.label;
    out->class_text = d.class_text;
    out->filename = d.filename;
    return Status::Ok();
  }
};

namespace {

// Maps a manifest's file name to the path to open and the name to use in messages.
struct FileResolver {
  std::function<std::string(const std::string&)> path;
  std::function<std::string(const std::string&)> display;
};

}  // namespace

StatusOr<std::unique_ptr<Dataset>> Dataset::Open(const std::string& dir,
                                                 const DatasetOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->dir = dir;
  impl->options = options;
  io::Env* env = options.env != nullptr ? options.env : io::Env::Posix();
  FileResolver files;
  if (IsRemotePath(dir)) {
    SHARDPACK_ASSIGN_OR_RETURN(impl->cached, remote::FetchDataset(dir, options.remote));
    impl->manifest = impl->cached->manifest();
    const remote::CachedDataset* cached = impl->cached.get();
    files.path = [cached](const std::string& name) { return cached->PathOf(name); };
    files.display = [cached](const std::string& name) { return cached->UrlOf(name); };
    // The cache is always POSIX: a caller's Env cannot see it.
    env = io::Env::Posix();
  } else {
    const std::string manifest_path = io::JoinPath(dir, format::kManifestName);
    auto text = env->ReadFile(manifest_path, format::kMaxManifestBytes);
    if (!text.ok()) {
      if (text.status().code() == StatusCode::kNotFound) return format::NoManifestError(dir);
      return text.status();
    }
    auto manifest = ParseManifest(*text, manifest_path);
    if (!manifest.ok()) return manifest.status();
    impl->manifest = std::move(manifest).value();
    files.path = [&dir](const std::string& name) { return io::JoinPath(dir, name); };
    files.display = files.path;
  }
  const auto pattern =
      options.random_access ? io::AccessPattern::kRandom : io::AccessPattern::kSequential;
  for (const ShardEntry& e : impl->manifest.shards) {
    Shard shard;
    shard.name = e.data.file;
    shard.first_sample = e.first_sample;
    shard.records = e.records;
    const std::string path = files.path(e.data.file);
    const std::string shown = files.display(e.data.file);
    if (impl->manifest.backend == Backend::kTfrecord) {
      auto file =
          env->MapFile(path, pattern,
                       options.copy_on_write ? io::MapMode::kCopyOnWrite : io::MapMode::kReadOnly);
      if (!file.ok()) return file.status();
      shard.file = std::move(file).value();
      if (shard.file->size() != e.data.bytes) {
        return CorruptionError(shown + ": " + std::to_string(shard.file->size()) +
                               " bytes, the manifest says " + std::to_string(e.data.bytes));
      }
      const std::string index_shown = files.display(e.index->file);
      auto index_text = env->ReadFile(files.path(e.index->file), format::kMaxIndexBytes);
      if (!index_text.ok()) return index_text.status();
      auto index = format::ParseIndex(*index_text);
      if (!index.ok()) return index.status().WithPrefix(index_shown);
      shard.index = std::move(index).value();
      if (shard.index.size() != e.records) {
        return CorruptionError(index_shown + ": " + std::to_string(shard.index.size()) +
                               " records, the manifest says " + std::to_string(e.records));
      }
      if (!shard.index.empty()) {
        const format::IndexEntry& last = shard.index.back();
        // Not `last.offset + last.size > size`: the sum can wrap.
        if (last.offset > shard.file->size() || last.size > shard.file->size() - last.offset) {
          return CorruptionError(index_shown + ": line " + std::to_string(shard.index.size()) +
                                 ": record ends at " + std::to_string(last.offset + last.size) +
                                 ", past the end of " + e.data.file + " (" +
                                 std::to_string(shard.file->size()) + " bytes)");
        }
      }
    } else {
      auto reader = format::LmdbShardReader::Open(path, options.random_access);
      if (!reader.ok()) return reader.status();
      shard.lmdb = std::move(reader).value();
      if (shard.lmdb->entries() != e.records) {
        return CorruptionError(shown + ": " + std::to_string(shard.lmdb->entries()) +
                               " records, the manifest says " + std::to_string(e.records));
      }
    }
    impl->shards.push_back(std::move(shard));
  }
  return std::unique_ptr<Dataset>(new Dataset(std::move(impl)));
}

Dataset::Dataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dataset::~Dataset() = default;
const Manifest& Dataset::manifest() const { return impl_->manifest; }
const std::string& Dataset::dir() const { return impl_->dir; }
uint64_t Dataset::size() const { return impl_->manifest.num_samples; }
Status Dataset::Get(uint64_t index, SampleView* out) const {
  return impl_->Get(index, out, impl_->options.verify_crc);
}

Status Dataset::ReserveReaders(int threads) const {
  for (const Shard& shard : impl_->shards) {
    if (shard.lmdb) SHARDPACK_RETURN_IF_ERROR(shard.lmdb->ReserveReaders(threads));
  }
  return Status::Ok();
}

Status Dataset::Get(uint64_t index, SampleView* out, bool verify_crc) const {
  return impl_->Get(index, out, verify_crc);
}

void Dataset::WillNeed(std::span<const uint64_t> indices) const {
  for (const uint64_t index : indices) {
    if (index < size()) impl_->WillNeed(index);
  }
}

bool Dataset::Resident(uint64_t index) const { return index < size() && impl_->Resident(index); }

Status Dataset::CheckIntact(uint64_t index) const {
  if (index >= size()) {
    return OutOfRangeError(impl_->dir + ": sample " + std::to_string(index) + " is beyond the " +
                           std::to_string(size()) + " samples of the dataset");
  }
  return impl_->CheckIntact(index);
}

StatusOr<SampleLocation> Dataset::Locate(uint64_t index) const {
  if (index >= size()) {
    return OutOfRangeError(impl_->dir + ": sample " + std::to_string(index) + " is beyond the " +
                           std::to_string(size()) + " samples of the dataset");
  }
  size_t s = impl_->ShardOf(index);
  const auto& shard = impl_->shards[s];
  SampleLocation loc{s, index - shard.first_sample, 0};
  if (shard.file) loc.offset = shard.index[loc.record].offset;
  return loc;
}

}  // namespace shardpack
