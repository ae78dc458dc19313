#include "format/tfrecord_shard.h"

#include "format/index_file.h"
#include "format/record.h"
#include "io/chunked_file.h"
#include "io/mapped_write.h"
#include "util/crc32c.h"

namespace shardpack::format {

StatusOr<std::unique_ptr<TfrecordShardWriter>> TfrecordShardWriter::Create(
    io::Env* env, std::string path, std::string index_path, uint32_t pixel_alignment,
    uint64_t write_chunk, WriteMethod method) {
  const std::string tmp = path + ".tmp";
  bool mapped = method == WriteMethod::kMap ||
                (method == WriteMethod::kAuto && io::MappedWritesPreferred(io::DirName(tmp)));
  auto file = mapped ? env->NewMappedWritableFile(tmp) : env->NewWritableFile(tmp);
  // Auto falls back where the mapping cannot be had (an environment without it, a file
  // system without fallocate); kMap asked for it, and the reason is its error.
  if (mapped && method == WriteMethod::kAuto && !file.ok() &&
      file.status().code() == StatusCode::kNotSupported) {
    mapped = false;
    file = env->NewWritableFile(tmp);
  }
  if (!file.ok()) return file.status();
  std::unique_ptr<io::WritableFile> out = std::move(file).value();
  if (write_chunk > 0 && !mapped) {
    out = io::NewChunkedWritableFile(std::move(out), tmp, static_cast<size_t>(write_chunk));
  }
  return std::unique_ptr<TfrecordShardWriter>(
      new TfrecordShardWriter(env, std::move(path), std::move(index_path), pixel_alignment,
                              std::move(out), mapped ? WriteMethod::kMap : WriteMethod::kWrite));
}

TfrecordShardWriter::TfrecordShardWriter(io::Env* env, std::string path, std::string index_path,
                                         uint32_t pixel_alignment,
                                         std::unique_ptr<io::WritableFile> file, WriteMethod method)
    : env_(env),
      path_(std::move(path)),
      index_path_(std::move(index_path)),
      alignment_(pixel_alignment),
      file_(std::move(file)),
      method_(method) {}

TfrecordShardWriter::~TfrecordShardWriter() { Abandon(); }

void TfrecordShardWriter::Abandon() {
  if (done_) return;
  done_ = true;
  if (file_) file_->Close().IgnoreError();  // the file is being thrown away
  env_->RemoveFile(path_ + ".tmp").IgnoreError();
  env_->RemoveFile(index_path_ + ".tmp").IgnoreError();
}

uint64_t TfrecordShardWriter::RecordSizeBound(std::string_view entries, uint64_t pixel_bytes,
                                              uint32_t pixel_alignment) {
  return kRecordOverhead + EncodePayloadPrefix(entries, pixel_bytes, 0, 1).size() + 32 +
         2ull * pixel_alignment + 8 + pixel_bytes;
}

Status TfrecordShardWriter::Place(std::string_view entries, std::string_view pixels,
                                  uint32_t pixel_crc, std::string_view image_key,
                                  PlacedRecord* record) {
  if (done_) return FailedPreconditionError(path_ + ": append after finish");
  record->offset = offset_;
  std::string prefix = EncodePayloadPrefix(
      entries, pixels.size(), record->offset + kRecordHeaderSize, alignment_, image_key);
  uint8_t header[kRecordHeaderSize];
  EncodeRecordHeader(prefix.size() + pixels.size(), header);
  record->head.reserve(sizeof header + prefix.size());
  record->head.assign(reinterpret_cast<const char*>(header), sizeof header);
  record->head += prefix;
  record->image = pixels;
  const uint32_t payload_crc = crc32c::Combine(crc32c::Value(prefix), pixel_crc, pixels.size());
  EncodeRecordFooter(payload_crc, reinterpret_cast<uint8_t*>(record->footer.data()));
  const std::string_view footer(record->footer.data(), record->footer.size());
  hasher_.Update(record->head);
  hasher_.Update(pixels);
  hasher_.Update(footer);
  offset_ = record->end();
  AppendIndexLine(&index_, {record->offset, offset_ - record->offset});
  ++records_;
  return Status::Ok();
}

Status TfrecordShardWriter::WritePlaced(const PlacedRecord& record) const {
  const std::string_view pieces[] = {
      record.head, record.image, {record.footer.data(), record.footer.size()}};
  return file_->WriteAt(record.offset, pieces);
}

Status TfrecordShardWriter::Append(std::string_view entries, std::string_view pixels,
                                   uint32_t pixel_crc, std::string_view image_key) {
  PlacedRecord record;
  SHARDPACK_RETURN_IF_ERROR(Place(entries, pixels, pixel_crc, image_key, &record));
  SHARDPACK_RETURN_IF_ERROR(file_->Append(record.head));
  SHARDPACK_RETURN_IF_ERROR(file_->Append(pixels));
  return file_->Append({record.footer.data(), record.footer.size()});
}

Status TfrecordShardWriter::Finish(FileEntry* data, std::optional<FileEntry>* index) {
  if (done_) return FailedPreconditionError(path_ + ": finished twice");
  Status s = file_->Sync();
  Status c = file_->Close();
  if (s.ok()) s = c;
  // The index is published first: a shard under its final name always has its index.
  bool index_published = false;
  if (s.ok()) {
    s = io::WriteFileAtomically(env_, index_path_, index_);
    index_published = s.ok();
  }
  if (s.ok()) s = io::PublishFile(env_, path_ + ".tmp", path_);
  if (!s.ok()) {
    if (index_published && !env_->FileExists(path_)) env_->RemoveFile(index_path_).IgnoreError();
    Abandon();
    return s;
  }
  done_ = true;
  *data = FileEntry{std::string(io::BaseName(path_)), offset_, hasher_.HexDigest()};
  *index = FileEntry{std::string(io::BaseName(index_path_)), index_.size(),
                     Xxh3Hex(index_.data(), index_.size())};
  return Status::Ok();
}

}  // namespace shardpack::format
