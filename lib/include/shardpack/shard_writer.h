// ShardWriter: turns samples (pixels + label + metadata) into a dataset directory of
// TFRecord or LMDB shards and a manifest.
//
//   ShardWriterOptions o;
//   o.class_names = {"cat", "dog"};
//   o.image = {.channels = 3, .height = 256, .width = 256};
//   auto writer = ShardWriter::Create("out/", o);          // StatusOr
//   (*writer)->Add({.pixels = px, .height = 256, .width = 256, .channels = 3, .label = 1});
//   auto manifest = (*writer)->Finish();                  // publishes manifest.json
//
// Publishing: each shard is written under a temporary name, fsync'd and renamed to a
// staged name ("shard-00003.tfrecord") when complete; Finish() renames the staged shards
// to "shard-00003-of-00016.tfrecord" and writes manifest.json last, atomically. Until the
// manifest exists the directory is not a dataset. A writer destroyed without Finish()
// removes its temporary files and publishes nothing.
//
// Thread-safety: one thread at a time, except Write (of Reserve's three steps, below).
#ifndef SHARDPACK_SHARD_WRITER_H_
#define SHARDPACK_SHARD_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/manifest.h"
#include "shardpack/status.h"
#include "shardpack/write_method.h"

namespace shardpack {

namespace io {
class Env;
}

// What a writer has published so far under staged names: what ShardWriter::Resume needs
// to go on after an interruption.
struct ShardWriterState {
  std::vector<ShardEntry> shards;      // staged file names ("shard-00003.tfrecord")
  std::vector<uint64_t> class_counts;  // samples per label so far
  uint64_t samples = 0;
};

struct ShardWriterOptions {
  Backend backend = Backend::kTfrecord;
  // A shard is closed before a record would take it past this many bytes (default
  // 64 MiB, MosaicML's choice; a shard holds at least one record whatever its size).
  uint64_t max_shard_bytes = 64ull << 20;
  // A shard is closed after this many records; 0: no limit.
  uint64_t max_shard_records = 0;
  // Names of the classes; a sample's label indexes this list (0-based). Required.
  std::vector<std::string> class_names;
  // Shape contract every sample must meet (channels; fixed size or max side).
  ImageSpec image;
  // Pixel bytes start at multiples of this (1: no padding; default 64, a cache line):
  // TFRecord, at file offsets; LMDB, at addresses in the reader's memory map, for values
  // larger than half a page (docs/FORMAT.md §3). Copies from aligned pixels run faster.
  uint32_t pixel_alignment = 64;
  // TFRecord: 0 (default), each record is written as it comes; else each shard file is
  // written in whole, aligned chunks of this many bytes (a multiple of 4096, at most
  // 1 GiB), so that a page cache with large folios holds it in folios of that size: with
  // 2 MiB (2097152), a reader mapping the shard maps one entry per 2 MiB, and its first
  // epoch from the page cache runs about as fast as the later ones (docs/LOADER.md, "The
  // first epoch from the page cache"). The bytes written are the same. The records of a
  // chunk wait in memory until it is full (a chunk per shard being written, and about
  // one per thread). LMDB, and write_method kMap, ignore it. The converter writes 2 MiB
  // chunks where it writes (ConvertOptions::write_chunk_bytes and write_method).
  uint64_t write_chunk_bytes = 0;
  // TFRecord: how shard files are written (above); write_chunk_bytes applies to kWrite,
  // the default here (the converter passes ConvertOptions::write_method, kAuto by
  // default). LMDB writes through its own map and ignores it.
  WriteMethod write_method = WriteMethod::kWrite;
  // LMDB: initial map size, doubled on MDB_MAP_FULL (sparse; default 1 GiB).
  uint64_t lmdb_initial_map_bytes = 1ull << 30;
  // LMDB: what the values hold (docs/FORMAT.md §4). kCaffe writes Caffe Datum values (CHW,
  // BGR) under "%08d_<filename>" keys, numbered by sample across shards; pixel_alignment
  // does not apply (the manifest records 1), and at most 100,000,000 samples fit.
  LmdbSchema lmdb_schema = LmdbSchema::kExample;
  // Recorded in the manifest: the seed and options the dataset was made with (a JSON
  // object text).
  uint64_t seed = 0;
  std::string options_json = "{}";
  // File system; nullptr: POSIX. LMDB shards always use the real file system.
  io::Env* env = nullptr;
  // Called after each shard is durable under its staged name, with the state a later
  // Resume needs; a non-OK return fails the write. When set, a writer destroyed without
  // Finish() keeps its staged shards (they are resumable) and removes only the partial one.
  std::function<Status(const ShardWriterState&)> on_shard_staged;
};

struct SampleInput {
  std::span<const uint8_t> pixels;  // HWC uint8, height * width * channels bytes
  // Datasets of encoded images (ShardWriterOptions::image.encoding jpeg or png): the
  // sample's JPEG or PNG file, of exactly height x width, decoding to `channels` channels
  // (`pixels` is not read). The writer checks its format by its first bytes; verify
  // --decode decodes it. A mixed dataset's sample: its JPEG, or empty to store `pixels`.
  std::span<const uint8_t> encoded;
  int height = 0;
  int width = 0;
  int channels = 0;
  int64_t label = 0;
  std::string_view filename;  // stored as image/filename (may be empty)
};

class ShardWriter {
 public:
  // Creates `dir` if needed. AlreadyExists when it holds a manifest or shard files.
  static StatusOr<std::unique_ptr<ShardWriter>> Create(const std::string& dir,
                                                       ShardWriterOptions options);

  // Goes on from `state` (as given to on_shard_staged): checks that every staged shard and
  // index is there with its recorded size and XXH3 (a shard already renamed to its final
  // name is renamed back), then removes every other shard file and temporary in `dir`.
  // Corruption when a staged file does not match `state`: then start again.
  static StatusOr<std::unique_ptr<ShardWriter>> Resume(const std::string& dir,
                                                       ShardWriterOptions options,
                                                       const ShardWriterState& state);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends one sample. InvalidArgument when it breaks the shape contract or its label is
  // not a class; an I/O error leaves the writer failed (every later call returns it).
  Status Add(const SampleInput& sample);

  // Add in three steps, for a caller that makes its samples on several threads and has
  // them written there too (the converter's pipeline). Same bytes as Add.
  //   1. Reserve(sample, &r), one thread at a time, in the samples' order: what Add does
  //      (the checks, the errors, the sample's place and checksums), except the write.
  //      The sample's bytes must stay valid until its Write returns.
  //   2. Write(r) writes the sample. Any thread, at the same time as other Writes and as
  //      later Reserve and Commit calls.
  //   3. Commit(r), one thread at a time, in the order of Reserve, after its Write
  //      succeeded: stages each shard whose samples are all written (fsync, rename,
  //      on_shard_staged), as Add does when a shard is full.
  // Finish comes after the last Commit. After a failed Write the dataset is incomplete:
  // destroy the writer (its temporary files go). A writer takes samples through Add or
  // through Reserve, not both, and Reserve only for TFRecord shards (LMDB writes through
  // one transaction at a time): FailedPrecondition otherwise.
  class Reservation {
   public:
    Reservation();
    ~Reservation();
    Reservation(Reservation&&) noexcept;
    Reservation& operator=(Reservation&&) noexcept;

   private:
    friend class ShardWriter;
    struct Placed;
    std::unique_ptr<Placed> placed_;  // null: nothing left to write
  };
  Status Reserve(const SampleInput& sample, Reservation* reservation);
  Status Write(const Reservation& reservation) const;
  Status Commit(const Reservation& reservation);

  // Replaces ShardWriterOptions::options_json, for facts known only at the end (counts).
  // InvalidArgument when it is not a JSON object text.
  Status SetOptionsJson(std::string options_json);

  // Names a file the caller has published in the directory (rejects.tsv) in the manifest,
  // with its size and checksum, so that verify covers it.
  void SetRejectsFile(FileEntry rejects);

  // Publishes the shards under their final names and the manifest; returns it.
  StatusOr<Manifest> Finish();

  uint64_t samples() const;
  // How the TFRecord shards opened so far were written: kWrite or kMap (write_method's
  // kAuto resolved); kAuto before the first, and for LMDB.
  WriteMethod write_method_used() const;

 private:
  class Impl;
  explicit ShardWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardpack

#endif  // SHARDPACK_SHARD_WRITER_H_
