// ShardFileWriter: one shard file being written, whatever its format; what ShardWriter
// needs of a shard, so that the format's knowledge (framing, index, size bounds, how
// records reach the file) stays with the format's writer.
//
//   auto file = OpenShardFile(env, "out/", 3, options);  // shard-00003.<ext>.tmp
//   (*file)->Append(entries, pixels, crc, kKeyRaw);
//   FileEntry data;
//   std::optional<FileEntry> index;
//   (*file)->Finish(&data, &index);  // shard-00003.<ext> (and its index) published
#ifndef SHARDPACK_FORMAT_SHARD_FILE_WRITER_H_
#define SHARDPACK_FORMAT_SHARD_FILE_WRITER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "shardpack/manifest.h"
#include "shardpack/shard_writer.h"
#include "shardpack/status.h"

namespace shardpack::format {

// A record placed in a shard by ShardFileWriter::Place: where it goes and its bytes, the
// framing and the caller's image between them.
struct PlacedRecord {
  uint64_t offset = 0;
  std::string head;              // the record header and the payload up to the image
  std::string_view image;        // the caller's bytes
  std::array<char, 4> footer{};  // the payload's masked crc32c

  uint64_t end() const { return offset + head.size() + image.size() + footer.size(); }
};

// One shard file (and its index, where the format has one), written under a temporary
// name until Finish publishes it. Implemented by TfrecordShardWriter (format/
// tfrecord_shard.h) and LmdbShardWriter (format/lmdb_shard.h); OpenShardFile chooses.
//
// Ownership: the caller owns the writer. Destroying it without a successful Finish, or
// Abandon, removes its temporary files.
// Thread-safety: one thread at a time, except WritePlaced (below).
//
// Records come by Append, or, where PlacesRecords says so of the format, by Place then
// WritePlaced; not both in one shard. Capabilities a format lacks (keyed values,
// placement) answer FailedPrecondition.
class ShardFileWriter {
 public:
  virtual ~ShardFileWriter() = default;
  ShardFileWriter(const ShardFileWriter&) = delete;
  ShardFileWriter& operator=(const ShardFileWriter&) = delete;

  // Appends one sample's Example record: `entries` from EncodeFeatureEntries (or
  // EncodeEncodedFeatureEntries with `image_key` kKeyEncoded), then `image`, whose
  // crc32c is `image_crc`. FailedPrecondition after Finish; I/O errors as they come.
  virtual Status Append(std::string_view entries, std::string_view image, uint32_t image_crc,
                        std::string_view image_key) = 0;
  // An upper bound on the bytes Append's record for these arguments adds to bytes().
  virtual uint64_t RecordSizeBound(std::string_view entries, uint64_t image_bytes) const = 0;

  // Appends `value` under `key`, in the format's own terms (LMDB's Caffe schema: CaffeKey,
  // EncodeCaffeDatum).
  virtual Status AppendValue(std::string key, std::string value);
  // An upper bound on the bytes AppendValue adds to bytes() for a key and value this size.
  virtual uint64_t ValueSizeBound(uint64_t key_bytes, uint64_t value_bytes) const;

  // Append in two steps. Place does everything but the write, in order (the record's
  // offset, checksums, the file's hash, the index), and fills *record (its image a view of
  // `image`, which must stay valid until WritePlaced returns). WritePlaced writes it; it
  // may run on several threads at once, alongside Place, for records placed earlier, and
  // every WritePlaced has returned before Finish.
  virtual Status Place(std::string_view entries, std::string_view image, uint32_t image_crc,
                       std::string_view image_key, PlacedRecord* record);
  virtual Status WritePlaced(const PlacedRecord& record) const;
  // Every placed record that ends at or before `end` has been written: the file may start
  // writing them back (io::WritableFile::WrittenBefore).
  virtual void WrittenBefore(uint64_t end);

  virtual uint64_t records() const = 0;
  // The bytes that records() take (a format may add its own overhead to the file).
  virtual uint64_t bytes() const = 0;
  // How the file's bytes reach it: kWrite or kMap; kAuto for a format that writes through
  // its own means (LMDB).
  virtual WriteMethod method() const;

  // Publishes the shard, fsync'd, under the name it was opened with, and its index first
  // where the format has one; fills their manifest entries (base names). *index is
  // nullopt for a format without an index. On error the temporary files are removed.
  virtual Status Finish(FileEntry* data, std::optional<FileEntry>* index) = 0;
  // Removes the temporary files; the writer takes nothing more.
  virtual void Abandon() = 0;

 protected:
  ShardFileWriter() = default;
};

// Opens shard `number` of a dataset written with `options` (backend, pixel alignment,
// write method and chunk, LMDB's map size) in `dir`, under its staged name
// (StagedShardFileName; a TFRecord shard's index under StagedIndexFileName). `env` writes
// TFRecord shards; LMDB shards are written through the real file system.
StatusOr<std::unique_ptr<ShardFileWriter>> OpenShardFile(io::Env* env, const std::string& dir,
                                                         uint64_t number,
                                                         const ShardWriterOptions& options);

// Whether `backend`'s shard files take records by Place and WritePlaced: a TFRecord
// record's place is known before its bytes are written; LMDB writes its values through one
// transaction at a time.
bool PlacesRecords(Backend backend);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_SHARD_FILE_WRITER_H_
