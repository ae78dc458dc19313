#include "shardpack/dataset.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "format/format.h"
#include "format/shard_reader.h"
#include "image/image.h"
#include "io/env.h"
#include "read/dataset_access.h"
#include "remote/shard_cache.h"

namespace shardpack {

class Dataset::Impl {
 public:
  std::string dir;
  DatasetOptions options;
  io::Env* env = nullptr;  // where the shards are read (POSIX for a remote dataset's cache)
  Manifest manifest;
  // A remote dataset: its cached copy, kept (with its lock against eviction) while the
  // shards are mapped (declared first: destroyed after them).
  std::unique_ptr<remote::CachedDataset> cached;
  std::vector<std::unique_ptr<format::ShardReader>> shards;
  std::vector<uint64_t> first_sample;  // of each shard

  size_t ShardOf(uint64_t index) const {
    auto it = std::upper_bound(first_sample.begin(), first_sample.end(), index);
    return static_cast<size_t>(it - first_sample.begin()) - 1;
  }

  // A label is an index into the class list for whoever consumes the sample: one outside
  // it is the record's Corruption (verify reports the same).
  Status CheckLabel(const format::ShardReader& shard, uint64_t record, int64_t label) const {
    if (label >= 0 && static_cast<uint64_t>(label) < manifest.classes.size()) return Status::Ok();
    return shard.Fault(
        record,
        CorruptionError("label " + std::to_string(label) + " is outside the " +
                        std::to_string(manifest.classes.size()) + " classes of the manifest"));
  }

  Status OutOfRange(uint64_t index) const {
    return OutOfRangeError(dir + ": sample " + std::to_string(index) + " is beyond the " +
                           std::to_string(manifest.num_samples) + " samples of the dataset");
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
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(dir, io::PathKind::kDataset));
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
    auto text = env->ReadFile(manifest_path, kMaxManifestBytes);
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
  impl->env = env;
  format::ShardOpenOptions shard_options;
  shard_options.env = env;
  shard_options.random_access = options.random_access;
  shard_options.copy_on_write = options.copy_on_write;
  shard_options.max_record_bytes = options.max_record_bytes;
  shard_options.encoding = impl->manifest.image.encoding;
  for (const ShardEntry& e : impl->manifest.shards) {
    const std::string path = files.path(e.data.file);
    const std::string shown = files.display(e.data.file);
    auto shard = impl->manifest.backend == Backend::kTfrecord
                     ? format::OpenTfrecordShard(e, path, shown, files.path(e.index->file),
                                                 files.display(e.index->file), shard_options)
                     : format::OpenLmdbShard(e, path, shown, shard_options);
    if (!shard.ok()) return shard.status();
    impl->shards.push_back(std::move(shard).value());
    impl->first_sample.push_back(e.first_sample);
  }
  return std::unique_ptr<Dataset>(new Dataset(std::move(impl)));
}

Dataset::Dataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dataset::~Dataset() = default;
const Manifest& Dataset::manifest() const { return impl_->manifest; }
const std::string& Dataset::dir() const { return impl_->dir; }
uint64_t Dataset::size() const { return impl_->manifest.num_samples; }

Status Dataset::Get(uint64_t index, SampleView* out) const {
  return Get(index, out, impl_->options.verify_crc);
}

Status Dataset::Get(uint64_t index, SampleView* out, bool verify_crc) const {
  if (index >= size()) return impl_->OutOfRange(index);
  const size_t s = impl_->ShardOf(index);
  const format::ShardReader& shard = *impl_->shards[s];
  const uint64_t record = index - impl_->first_sample[s];
  SHARDPACK_RETURN_IF_ERROR(shard.Get(record, verify_crc, out));
  return impl_->CheckLabel(shard, record, out->label);
}

Status Dataset::GetPixels(uint64_t index, std::span<uint8_t> dst, SampleView* out) const {
  if (index >= size()) return impl_->OutOfRange(index);
  const size_t s = impl_->ShardOf(index);
  const format::ShardReader& shard = *impl_->shards[s];
  const uint64_t record = index - impl_->first_sample[s];
  SampleView view;
  SHARDPACK_RETURN_IF_ERROR(shard.Get(record, impl_->options.verify_crc, &view));
  SHARDPACK_RETURN_IF_ERROR(impl_->CheckLabel(shard, record, view.label));
  const uint64_t bytes = static_cast<uint64_t>(view.height) * static_cast<uint64_t>(view.width) *
                         static_cast<uint64_t>(view.channels);
  if (dst.size() < bytes) {
    return InvalidArgumentError(shard.Where(record) + ": " + std::to_string(bytes) +
                                " pixel bytes, the buffer holds " + std::to_string(dst.size()));
  }
  Status d;
  if (view.encoding == ImageEncoding::kRaw) {
    std::memcpy(dst.data(), view.pixels.data(), bytes);
  } else {
    d = format::DecodeSampleInto(view, 1, dst.data());
  }
  // Those reads went through the mapping: a shard that shrank meanwhile gave zeros.
  SHARDPACK_RETURN_IF_ERROR(shard.CheckIntact(record));
  if (!d.ok()) return shard.Fault(record, d);
  view.pixels = {dst.data(), bytes};
  *out = view;
  return Status::Ok();
}

Status Dataset::ReserveReaders(int threads) const {
  for (const auto& shard : impl_->shards) {
    SHARDPACK_RETURN_IF_ERROR(shard->ReserveReaders(threads));
  }
  return Status::Ok();
}

void read::DatasetAccess::Prefetch(uint64_t index, int stage) const {
  if (index >= dataset_->size()) return;
  const size_t s = dataset_->impl_->ShardOf(index);
  dataset_->impl_->shards[s]->Prefetch(index - dataset_->impl_->first_sample[s], stage);
}

void read::DatasetAccess::WillNeed(std::span<const uint64_t> indices) const {
  for (const uint64_t index : indices) {
    if (index >= dataset_->size()) continue;
    const size_t s = dataset_->impl_->ShardOf(index);
    dataset_->impl_->shards[s]->WillNeed(index - dataset_->impl_->first_sample[s]);
  }
}

uint64_t read::DatasetAccess::WillNeedMissing(uint64_t limit) const {
  constexpr uint64_t kBlock = 2ull << 20;
  std::vector<std::vector<format::FileRange>> missing(dataset_->impl_->shards.size());
  uint64_t budget = limit;
  for (size_t s = 0; s < dataset_->impl_->shards.size(); ++s) {
    if (!dataset_->impl_->shards[s]->MissingBlocks(kBlock, &budget, &missing[s])) return 0;
  }
  for (size_t s = 0; s < dataset_->impl_->shards.size(); ++s) {
    for (const format::FileRange& r : missing[s]) dataset_->impl_->shards[s]->WillNeedRange(r);
  }
  return limit - budget;
}

void read::DatasetAccess::Populate(std::span<const uint64_t> indices) const {
  for (const uint64_t index : indices) {
    if (index >= dataset_->size()) continue;
    const size_t s = dataset_->impl_->ShardOf(index);
    dataset_->impl_->shards[s]->Populate(index - dataset_->impl_->first_sample[s]);
  }
}

void read::DatasetAccess::PreferHugePages() const {
  for (const auto& shard : dataset_->impl_->shards) shard->PreferHugePages();
}

bool read::DatasetAccess::Resident(uint64_t index) const {
  if (index >= dataset_->size()) return false;
  const size_t s = dataset_->impl_->ShardOf(index);
  return dataset_->impl_->shards[s]->Resident(index - dataset_->impl_->first_sample[s]);
}

Status Dataset::CheckIntact(uint64_t index) const {
  if (index >= size()) return impl_->OutOfRange(index);
  const size_t s = impl_->ShardOf(index);
  return impl_->shards[s]->CheckIntact(index - impl_->first_sample[s]);
}

bool read::DatasetAccess::Resident(std::span<const uint64_t> indices) const {
  constexpr size_t kProbes = 8;
  const size_t n = indices.size();
  if (n == 0) return false;
  for (size_t k = 0; k < std::min(n, kProbes); ++k) {
    if (!Resident(indices[k * n / std::min(n, kProbes)])) return false;
  }
  return true;
}

StatusOr<SampleLocation> Dataset::Locate(uint64_t index) const {
  if (index >= size()) return impl_->OutOfRange(index);
  const size_t s = impl_->ShardOf(index);
  const uint64_t record = index - impl_->first_sample[s];
  return SampleLocation{s, record, impl_->shards[s]->LocationOffset(record)};
}

StatusOr<read::DatasetAccess::ShardRecord> read::DatasetAccess::Find(uint64_t index) const {
  if (index >= dataset_->size()) return dataset_->impl_->OutOfRange(index);
  const size_t s = dataset_->impl_->ShardOf(index);
  return ShardRecord{dataset_->impl_->shards[s].get(), index - dataset_->impl_->first_sample[s]};
}

const format::ShardReader& read::DatasetAccess::shard(size_t i) const {
  return *dataset_->impl_->shards[i];
}
io::Env* read::DatasetAccess::env() const { return dataset_->impl_->env; }

}  // namespace shardpack
