#include "format/shard_file_writer.h"

#include "format/format.h"
#include "format/lmdb_shard.h"
#include "format/tfrecord_shard.h"
#include "io/env.h"

namespace shardpack::format {

// The defaults answer for the formats that lack a capability; ShardWriter checks its
// options and PlacesRecords before it could ask one of them.
Status ShardFileWriter::AppendValue(std::string key, std::string /*value*/) {
  return FailedPreconditionError("shard files of this format take no keyed values (key " + key +
                                 ")");
}

uint64_t ShardFileWriter::ValueSizeBound(uint64_t key_bytes, uint64_t value_bytes) const {
  return key_bytes + value_bytes;
}

Status ShardFileWriter::Place(std::string_view /*entries*/, std::string_view /*image*/,
                              uint32_t /*image_crc*/, std::string_view /*image_key*/,
                              PlacedRecord* /*record*/) {
  return FailedPreconditionError("shard files of this format take no placed records");
}

Status ShardFileWriter::WritePlaced(const PlacedRecord& /*record*/) const {
  return FailedPreconditionError("shard files of this format take no placed records");
}

void ShardFileWriter::WrittenBefore(uint64_t /*end*/) {}

WriteMethod ShardFileWriter::method() const { return WriteMethod::kAuto; }

namespace {

// StatusOr holds no conversions of its own: a format's writer as the interface.
template <typename Writer>
StatusOr<std::unique_ptr<ShardFileWriter>> AsShardFile(StatusOr<std::unique_ptr<Writer>> w) {
  if (!w.ok()) return w.status();
  return std::unique_ptr<ShardFileWriter>(std::move(w).value());
}

}  // namespace

StatusOr<std::unique_ptr<ShardFileWriter>> OpenShardFile(io::Env* env, const std::string& dir,
                                                         uint64_t number,
                                                         const ShardWriterOptions& options) {
  std::string path = io::JoinPath(dir, StagedShardFileName(number, options.backend));
  switch (options.backend) {
    case Backend::kTfrecord:
      return AsShardFile(TfrecordShardWriter::Create(
          env, std::move(path), io::JoinPath(dir, StagedIndexFileName(number)),
          options.pixel_alignment, options.write_chunk_bytes, options.write_method));
    case Backend::kLmdb: {
      LmdbWriterOptions lmdb;
      lmdb.initial_map_bytes = options.lmdb_initial_map_bytes;
      lmdb.pixel_alignment = options.pixel_alignment;
      return AsShardFile(LmdbShardWriter::Create(std::move(path), lmdb));
    }
  }
  return InvalidArgumentError("no shard file writer for backend " +
                              std::to_string(static_cast<int>(options.backend)));
}

bool PlacesRecords(Backend backend) { return backend == Backend::kTfrecord; }

}  // namespace shardpack::format
