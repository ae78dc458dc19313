// The stages of a conversion (shardpack/convert.h Convert), each usable and testable alone:
//
//   1. Scan       the options checked, the output's place checked, the inputs found, and
//                 the range of the write order this run (or part) converts.
//   2. Plan       the write order (a seeded permutation, or the scan's order), and the
//                 output made ready: its lock taken, a dataset that overwrite replaces set
//                 aside, the shard writer created or resumed from the progress record.
//   3. Decode     one input read, decoded and resized into its output image, in parallel.
//   4. Write      the images into the shard writer in write order; a failed input is a
//                 reject, counted against the limits.
//   5. Publish    rejects.tsv, the options and fingerprints, then the manifest (the commit
//                 point); the progress record and the replaced dataset go.
//
// Convert() runs them in this order; RunPipeline runs 3 and 4 as a TBB pipeline (decode in
// parallel, write serially in order), so the output bytes do not depend on the thread
// count.
#ifndef SHARDPACK_CONVERT_STAGES_H_
#define SHARDPACK_CONVERT_STAGES_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convert/input_scan.h"
#include "image/image.h"
#include "image/resize.h"
#include "io/dir_lock.h"
#include "shardpack/convert.h"
#include "shardpack/shard_writer.h"

namespace shardpack::convert {

// ---- 1. Scan ----------------------------------------------------------------------------

struct ScanResult {
  std::string dst;  // where this run writes: DST, or this part's directory in DST
  bool partitioned = false;
  bool tfrecord_source = false;  // InputFormat::kAuto resolved
  InputSet inputs;
  InputRange range;  // the write-order positions this run converts
  // The scan's rejects this run accounts for (all of them go to the first part).
  std::vector<ConvertReject> rejects;
  // What identifies the conversion: the inputs and every option that shapes the output
  // bytes (shared by the parts of one conversion, which Merge checks), and the same with
  // this part named (what a progress record must carry to be resumed).
  std::string inputs_fingerprint;
  std::string fingerprint;
};

// Errors: InvalidArgument for bad options, an output inside SRC or classes past the
// limits; AlreadyExists for a partitioned run into a merged DST; the scan's errors;
// Corruption when the scan's rejects alone pass the limits (strict, max_rejects).
StatusOr<ScanResult> Scan(const std::string& src, const std::string& target,
                          const ConvertOptions& o);

// OK, or Corruption naming the reject that passes the limits: the first one under
// `strict`, the last one past `max_rejects`.
Status CheckRejects(const std::vector<ConvertReject>& rejects, const ConvertOptions& o);

// ---- 2. Plan ----------------------------------------------------------------------------

// The write order: position p of the output holds input order[p] of the scan. With
// `shuffle`, a permutation seeded by `seed` alone, the same on every platform (Fisher-
// Yates driven by splitmix64; pinned by the existing datasets' write order).
std::vector<size_t> WriteOrder(size_t inputs, const ConvertOptions& o);

// What the write stage and the progress record share: the first position not yet
// written, and the rejects so far (the scan's, a resumed run's, this run's).
struct RunState {
  uint64_t position = 0;
  std::vector<ConvertReject> rejects;
};

// The output directory of a run, made ready. It holds DST's lock for as long as it lives.
// Until Committed(), destroying it puts back a dataset that overwrite set aside.
class Output {
 public:
  Output(Output&&) noexcept;
  Output& operator=(Output&&) = delete;
  ~Output();

  // Takes the lock, then: with overwrite, sets the present dataset aside; with resume,
  // goes on from the progress record (or finds the dataset complete: complete() then
  // holds the summary to return, and nothing more is to be done). `state` receives the
  // resumed rejects and must outlive the writer (its shards record `state`).
  static StatusOr<Output> Open(const std::string& src, const ScanResult& scan,
                               const ConvertOptions& o, RunState* state);

  const std::optional<ConvertSummary>& complete() const { return complete_; }
  ShardWriter* writer() const { return writer_.get(); }
  uint64_t first() const { return first_; }  // the first position this run converts

  // After the manifest is published: the progress record and the replaced dataset go.
  void Committed();
  // A run that wrote no sample: what it wrote goes, the replaced dataset comes back, and
  // a DST this run created is removed again (if empty).
  void Abandon();

 private:
  Output() = default;

  std::string dst_;
  bool dst_existed_ = false;
  bool restore_ = false;  // a dataset set aside comes back on destruction
  std::unique_ptr<io::DirLock> lock_;
  std::unique_ptr<ShardWriter> writer_;
  uint64_t first_ = 0;
  std::optional<ConvertSummary> complete_;
};

// ---- 3. Decode --------------------------------------------------------------------------

// One input on its way from the decode stage to the write stage.
struct Item {
  size_t position = 0;  // in the write order
  const InputFile* input = nullptr;
  uint64_t bytes_in = 0;
  Status status;  // not OK: the input is a reject, for this reason
  image::Image image;
  std::string encoded;   // ConvertOptions::encoding jpeg or png: `image` encoded
  std::string filename;  // stored as image/filename: a TFRecord input's own, else the path
  // Seconds this item spent in each stage (ConvertStageSeconds), on the thread that
  // processed it.
  double read_seconds = 0, decode_seconds = 0, resize_seconds = 0, encode_seconds = 0,
         write_seconds = 0;
  // The write stage's: the sample's place in the output, and a failure to place or
  // write it (which stops the conversion, unlike `status`).
  ShardWriter::Reservation reservation;
  Status write_status;
};

// One worker's memory for DecodeStage, kept from image to image: the resize's buffers,
// the file's bytes and the decoded window, which grow to the largest image seen instead of
// being allocated and zero-filled for each.
struct DecodeScratch {
  image::ResizeScratch resize;
  std::vector<uint8_t> file;
  image::ImageWindow window;
};

// Reads, decodes and resizes inputs as the options say. Thread-safe: any number of
// threads may call Process at once, each with its own scratch.
class DecodeStage {
 public:
  explicit DecodeStage(const ConvertOptions& o);

  // item->input into item->image, or the reason it fails into item->status. Never throws
  // (an allocation failure is ResourceExhausted).
  void Process(Item* item, DecodeScratch* scratch) const;

 private:
  Status DecodeFile(Item* item, DecodeScratch* scratch) const;
  Status DecodeRecord(Item* item, DecodeScratch* scratch) const;
  Status Resize(image::Image decoded, Item* item, image::ResizeScratch* scratch) const;
  Status Encode(Item* item) const;

  const ConvertOptions& o_;
  image::DecodeOptions decode_;
};

// ---- 4. Write ---------------------------------------------------------------------------

// Writes the items of a TFRecord output in three steps (ShardWriter::Reserve, Write,
// Commit): Place and Commit take them in write order, one thread at a time; Write may run
// on any thread between them, for several items at once. An LMDB output's items are
// written whole by Commit (ShardWriter::Add); Place and Write do nothing there.
class WriteStage {
 public:
  // `done` inputs of the run's `total` are finished already (a resumed run's).
  WriteStage(const ConvertOptions& o, ShardWriter* writer, RunState* state, uint64_t done,
             uint64_t total, std::chrono::steady_clock::time_point start);

  // The item's image reserved in the writer (nothing for a failed input). A failure goes
  // to item->write_status.
  void Place(Item* item);
  // The reserved image written. Thread-safe. A failure goes to item->write_status.
  void Write(Item* item) const;
  // The item committed, or its failure into the rejects; then progress. An error stops
  // the conversion: the writer's (write_status first), or rejects past the limits.
  Status Commit(const Item& item);
  // Place, Write and Commit.
  Status Consume(Item* item);

  uint64_t bytes_in() const { return bytes_in_; }
  // The items' stage seconds summed, and the write stage's own (ConvertStageSeconds: read
  // to write).
  const ConvertStageSeconds& stages() const { return stages_; }

 private:
  const ConvertOptions& o_;
  ShardWriter* writer_;
  // TFRecord: written in three steps (ShardWriter::Reserve); LMDB: by Add in Commit.
  bool placed_;
  RunState* state_;
  uint64_t done_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  ConvertStageSeconds stages_;
};

// The threads a pipeline of these options runs on: o.num_threads (0: as many as the task
// arena has), at most as many as the process's TBB pool lends.
int PipelineThreads(const ConvertOptions& o);

// Stages 3 and 4 over positions [first, end) of `order`: PipelineThreads(o) workers
// decode and write; placing and committing go in order. The first error of the write stage
// stops the pipeline and is returned.
Status RunPipeline(const InputSet& inputs, const std::vector<size_t>& order, uint64_t first,
                   uint64_t end, const DecodeStage& decode, WriteStage* write,
                   const ConvertOptions& o);

// ---- 5. Publish -------------------------------------------------------------------------

// rejects.tsv (before the manifest, so a dataset never lacks its account), the options
// with the fingerprints (and the part, for Merge), then the manifest: the commit point.
// `summary` gives inputs, written and rejected.
StatusOr<Manifest> Publish(const std::string& src, const ScanResult& scan, const ConvertOptions& o,
                           const ConvertSummary& summary, ShardWriter* writer, RunState* state);

}  // namespace shardpack::convert

#endif  // SHARDPACK_CONVERT_STAGES_H_
