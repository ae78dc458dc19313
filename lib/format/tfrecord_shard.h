// Writing one TFRecord shard and its index (docs/FORMAT.md §1-3).
#ifndef SHARDPACK_FORMAT_TFRECORD_SHARD_H_
#define SHARDPACK_FORMAT_TFRECORD_SHARD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "format/example.h"
#include "format/shard_file_writer.h"
#include "io/env.h"
#include "shardpack/manifest.h"
#include "shardpack/write_method.h"
#include "util/hash.h"

namespace shardpack::format {

// Writes records to "<final>.tmp"; Finish() fsyncs it, writes the index the same way, and
// renames both to their final names, so that a shard or index that exists under its final
// name is complete. Abandon() (or destruction without Finish) removes the temporary files.
// Not thread-safe: one writer per shard, called from one thread at a time, except
// WritePlaced (below).
//
// Two ways to write records, not mixed in one shard: Append, or Place then WritePlaced.
// Place does everything but the write, in order (the record's offset, the file's hash, the
// index); WritePlaced writes a placed record at its offset and may run on several threads
// at once, alongside Place, for records placed earlier. Every WritePlaced has returned
// before Finish.
class TfrecordShardWriter final : public ShardFileWriter {
 public:
  // `method`: how the file is written (ShardWriterOptions::write_method; kAuto asks
  // io::MappedWritesPreferred of the shard's directory, and writes where the environment
  // has no mapped files). `write_chunk`, for writes: 0, the records are written as they
  // come; else the file is written in aligned chunks of that many bytes
  // (io/chunked_file.h), a multiple of 4096.
  static StatusOr<std::unique_ptr<TfrecordShardWriter>> Create(
      io::Env* env, std::string path, std::string index_path, uint32_t pixel_alignment,
      uint64_t write_chunk = 0, WriteMethod method = WriteMethod::kWrite);
  ~TfrecordShardWriter() override;

  // Appends one sample: `entries` from EncodeFeatureEntries, then the pixels, whose
  // crc32c is `pixel_crc`. The payload checksum is derived from pixel_crc by CRC
  // combination, so the pixels are summed only once. `image_key`: image/encoded for the
  // file of an encoded image (EncodeEncodedFeatureEntries; the writer's alignment is 1).
  Status Append(std::string_view entries, std::string_view pixels, uint32_t pixel_crc,
                std::string_view image_key) override;

  // Append's arguments; the record is placed in *record (its image a view of `pixels`,
  // which must stay valid until WritePlaced returns) and nothing is written.
  Status Place(std::string_view entries, std::string_view pixels, uint32_t pixel_crc,
               std::string_view image_key, PlacedRecord* record) override;
  // Writes a record that Place placed here. Thread-safe (see above).
  Status WritePlaced(const PlacedRecord& record) const override;
  // Every placed record that ends at or before `end` has been written: lets the file start
  // writing them back (io::WritableFile::WrittenBefore).
  void WrittenBefore(uint64_t end) override { file_->WrittenBefore(end); }

  // Bytes the record for this sample will take, padding included (an upper bound).
  static uint64_t RecordSizeBound(std::string_view entries, uint64_t pixel_bytes,
                                  uint32_t pixel_alignment);
  // The same with this shard's alignment.
  uint64_t RecordSizeBound(std::string_view entries, uint64_t image_bytes) const override {
    return RecordSizeBound(entries, image_bytes, alignment_);
  }

  uint64_t records() const override { return records_; }
  uint64_t bytes() const override { return offset_; }
  // How the file is written: kWrite or kMap (Create's kAuto resolved).
  WriteMethod method() const override { return method_; }

  // Publishes the index, then the shard; fills their manifest entries (names are base
  // names). *index is always set.
  Status Finish(FileEntry* data, std::optional<FileEntry>* index) override;
  void Abandon() override;

 private:
  TfrecordShardWriter(io::Env* env, std::string path, std::string index_path,
                      uint32_t pixel_alignment, std::unique_ptr<io::WritableFile> file,
                      WriteMethod method);

  io::Env* env_;
  std::string path_, index_path_;
  uint32_t alignment_;
  std::unique_ptr<io::WritableFile> file_;
  WriteMethod method_;
  Xxh3Hasher hasher_;
  std::string index_;
  uint64_t offset_ = 0;
  uint64_t records_ = 0;
  bool done_ = false;
};

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_TFRECORD_SHARD_H_
