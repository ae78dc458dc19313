// The order in which a loader reads a dataset: a pure function of the options that shape
// it (seed, shuffle mode, block geometry, ranks, tail rule, batch size), the epoch and the
// dataset's shard sizes. Nothing here depends on threads or time, so an epoch can be
// rebuilt anywhere, and resuming needs only (epoch, batch).
//
//   EpochPlan plan = EpochPlan::Make(spec, shard_records, /*epoch=*/3);
//   for (uint64_t b = 0; b < plan.num_batches(); ++b) plan.Batch(b, &indices);
//
// The rules (also in loader.h and docs/LOADER.md):
//   1. the epoch's permutation of all N samples (ShuffleMode);
//   2. kDrop cuts it to n = floor(N / W) * W samples; otherwise it is extended to
//      n = ceil(N / W) * W by repeating its first n - N entries. Rank r takes positions
//      [r * n / W, (r + 1) * n / W), m = n / W samples;
//   3. batches of B: batch b holds positions [b * B, min((b + 1) * B, m)) of the rank's
//      part; the last short batch is dropped (kDrop), delivered short (kPartial) or
//      completed with the rank's first positions again, cyclically (kPad).
//
// Thread-safety: an EpochPlan is immutable after Make; any number of threads may read it.
#ifndef SHARDPACK_READ_SAMPLER_H_
#define SHARDPACK_READ_SAMPLER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "shardpack/loader.h"

namespace shardpack::read {

struct OrderSpec {
  ShuffleMode shuffle = ShuffleMode::kGlobal;
  uint64_t seed = 0;
  int block_size = 64;
  int block_window = 16;
  int rank = 0;
  int world_size = 1;
  Tail tail = Tail::kPartial;
  int batch_size = 1;
};

OrderSpec OrderSpecOf(const LoaderOptions& options);

// Samples per rank per epoch (m above) and batches per epoch, for N samples.
uint64_t SamplesPerRank(const OrderSpec& spec, uint64_t num_samples);
uint64_t BatchesPerEpoch(const OrderSpec& spec, uint64_t num_samples);

// The permutation of step 1: all N = sum(shard_records) global indices, once each. For
// a block shuffle, `window_ends` (when given) receives where each window of blocks ends
// in it, ascending, the last being N; for the other modes it is left empty.
std::vector<uint64_t> EpochPermutation(const OrderSpec& spec,
                                       std::span<const uint64_t> shard_records, uint64_t epoch,
                                       std::vector<uint64_t>* window_ends = nullptr);

class EpochPlan {
 public:
  static EpochPlan Make(const OrderSpec& spec, std::span<const uint64_t> shard_records,
                        uint64_t epoch);

  uint64_t epoch() const { return epoch_; }
  // This rank's global sample indices for the epoch, in order (m of them; no kPad fill).
  const std::vector<uint64_t>& order() const { return order_; }
  uint64_t num_batches() const { return num_batches_; }
  // Batch b's global sample indices (b < num_batches()) written to `out` (resized), and
  // how many of them are not kPad fill.
  int Batch(uint64_t b, std::vector<uint64_t>* out) const;
  // Positions of order() that the batches read (not kPad fill): [0, read_positions()).
  uint64_t read_positions() const;
  // Block shuffle: where the windows of blocks end in order(), ascending, each a position
  // in (0, m], the last m: the samples of a window are a permutation of whole blocks
  // (the rank's first and last window may be parts). Empty for the other modes.
  const std::vector<uint64_t>& window_ends() const { return window_ends_; }

 private:
  uint64_t epoch_ = 0;
  int batch_size_ = 1;
  Tail tail_ = Tail::kPartial;
  std::vector<uint64_t> order_;
  std::vector<uint64_t> window_ends_;
  uint64_t num_batches_ = 0;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_SAMPLER_H_
