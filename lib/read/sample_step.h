// One sample's way into its place in a batch: fetch (from the mapped shard, or from the
// read-ahead buffers), decode (encoded shards), transform, normalise (host path). The
// loader (loader.cc) calls Run for each sample of a chunk and knows nothing of what
// happens inside; the transform (transform.h) plans its own crop and, for a JPEG, the DCT
// scale it may be decoded at.
//
//   SampleStep step(dataset, options, std::move(transformer), normalizer);
//   SampleScratch scratch;                                    // one per thread
//   step.Reserve(&scratch);
//   Status s = step.Run({index, epoch}, target, &scratch);
//
// Errors name the sample's record ("<file>: record N[ at offset X]: <what>"):
// Corruption for a damaged record, a label outside the manifest's classes, an image that
// does not decode or whose shape the loader cannot take; IOError for a shard that shrank
// under its mapping (which a damaged-looking sample then is).
//
// A sample copied as it is goes to the batch in non-temporal stores that Run does not
// fence (crc32c::CopyStores::kStreamingUnfenced): the caller calls crc32c::StoreFence()
// after a chunk's last sample, before the batch is published to another thread or a copy.
//
// Thread-safety: immutable after construction; Run may be called from any number of
// threads at once, each with its own SampleScratch.
#ifndef SHARDPACK_READ_SAMPLE_STEP_H_
#define SHARDPACK_READ_SAMPLE_STEP_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "read/dataset_access.h"
#include "read/normalize.h"
#include "read/read_ahead.h"
#include "read/transform.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "shardpack/status.h"

namespace shardpack::read {

// A worker's memory for Run: the transform's, and an encoded image's decoded pixels
// before a transform reads them. Sized by Reserve so that Run allocates nothing.
struct SampleScratch {
  TransformScratch transform;
  std::vector<uint8_t> decoded;
};

// Which sample, and where its bytes come from.
struct SampleSource {
  uint64_t index = 0;  // in the dataset
  uint64_t epoch = 0;  // draws the random transform's key
  // The read-ahead path: the sample's position in the epoch's order, its record read
  // into `reads`' buffers. Null: the mapped path.
  ReadAhead* reads = nullptr;
  uint64_t position = 0;
};

// Where the sample goes.
struct SampleTarget {
  uint8_t* pixels = nullptr;      // sample_bytes() uint8, HWC
  uint8_t* normalized = nullptr;  // with a host normaliser: its values, CHW
  int64_t* label = nullptr;
};

class SampleStep {
 public:
  // `normalizer`: the host path's (null: none, or the device normalises). `dataset` and
  // `normalizer` must outlive the step.
  SampleStep(const Dataset* dataset, const LoaderOptions& options, SampleTransformer transformer,
             const HostNormalizer* normalizer);
  SampleStep() = default;

  const SampleTransformer& transformer() const { return transformer_; }
  // uint8 HWC bytes of one output sample.
  size_t sample_bytes() const { return sample_bytes_; }
  // What Reserve allocates per scratch, at most (the dataset's largest sample).
  uint64_t ScratchBytes() const;
  void Reserve(SampleScratch* scratch) const;

  // Sample `source` into `target`, as the header says.
  Status Run(const SampleSource& source, const SampleTarget& target, SampleScratch* scratch) const;

  // Before its first sample, a worker of a dataset of encoded images decodes one of them
  // (the first of the first eight that reads), so that its decoder (libjpeg's decompressor
  // and its arenas, kept per thread) exists before the first epoch: however the chunks
  // fall between the workers, none allocates for its first image in the middle of one. A
  // sample that does not read or decode is left to the epoch that reads it to report.
  void WarmDecoder(SampleScratch* scratch) const;

 private:
  // Fetch and transform; Run adds the check that the mapping stayed intact.
  Status Place(const SampleSource& source, const DatasetAccess::ShardRecord& at,
               const SampleTarget& target, SampleScratch* scratch) const;
  Status Transform(const SampleView& view, const SampleSource& source, uint8_t* dst,
                   SampleScratch* scratch) const;
  Status TransformEncoded(const SampleView& view, uint64_t key, uint8_t* dst,
                          SampleScratch* scratch) const;
  // "<shard file>: record N[ at offset X]" of a sample index.
  std::string Where(uint64_t index) const;
  // A sample whose shape the transform cannot take: the record is damaged or foreign.
  Status ShapeFault(uint64_t index, const SampleView& view, const std::string& why) const;

  const Dataset* dataset_ = nullptr;
  bool verify_crc_ = true;
  bool decode_scaled_ = true;
  uint64_t seed_ = 0;
  uint64_t num_classes_ = 0;  // labels are 0..num_classes_ - 1
  SampleTransformer transformer_;
  const HostNormalizer* normalizer_ = nullptr;
  size_t sample_bytes_ = 0;
  size_t decoded_bytes_ = 0;  // the largest encoded sample, decoded
  int max_height_ = 0;        // the dataset's largest sample (0: no bound)
  int max_width_ = 0;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_SAMPLE_STEP_H_
