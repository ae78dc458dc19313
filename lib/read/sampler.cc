#include "read/sampler.h"

#include <algorithm>
#include <numeric>

#include "read/random.h"

namespace shardpack::read {
namespace {

// Stream tags keep the shuffles of one (seed, epoch) independent of each other and of
// the per-sample transform keys.
constexpr uint64_t kGlobalStream = 0x676c6f62616cull;  // "global"
constexpr uint64_t kBlockStream = 0x626c6f636bull;     // "block"
constexpr uint64_t kWindowStream = 0x77696e646f77ull;  // "window"

// Fisher-Yates, with unbiased bounded draws: the same permutation on every platform.
template <typename T>
void Shuffle(std::span<T> v, Random& rng) {
  for (size_t i = v.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng.Below(i));
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace

OrderSpec OrderSpecOf(const LoaderOptions& o) {
  return {o.shuffle, o.seed,       o.block_size, o.block_window,
          o.rank,    o.world_size, o.tail,       o.batch_size};
}

uint64_t SamplesPerRank(const OrderSpec& spec, uint64_t num_samples) {
  const uint64_t w = static_cast<uint64_t>(spec.world_size);
  return spec.tail == Tail::kDrop ? num_samples / w : (num_samples + w - 1) / w;
}

uint64_t BatchesPerEpoch(const OrderSpec& spec, uint64_t num_samples) {
  const uint64_t m = SamplesPerRank(spec, num_samples);
  const uint64_t b = static_cast<uint64_t>(spec.batch_size);
  return spec.tail == Tail::kDrop ? m / b : (m + b - 1) / b;
}

std::vector<uint64_t> EpochPermutation(const OrderSpec& spec,
                                       std::span<const uint64_t> shard_records, uint64_t epoch,
                                       std::vector<uint64_t>* window_ends) {
  if (window_ends != nullptr) window_ends->clear();
  const uint64_t n = std::accumulate(shard_records.begin(), shard_records.end(), uint64_t{0});
  std::vector<uint64_t> order(n);
  std::iota(order.begin(), order.end(), uint64_t{0});
  switch (spec.shuffle) {
    case ShuffleMode::kNone:
      break;
    case ShuffleMode::kGlobal: {
      Random rng(MixKey(spec.seed, epoch, kGlobalStream));
      Shuffle(std::span<uint64_t>(order), rng);
      break;
    }
    case ShuffleMode::kBlock: {
      // Blocks of block_size records that never cross a shard boundary.
      struct Block {
        uint64_t first, count;
      };
      std::vector<Block> blocks;
      uint64_t first = 0;
      const uint64_t size = static_cast<uint64_t>(spec.block_size);
      for (uint64_t records : shard_records) {
        for (uint64_t r = 0; r < records; r += size) {
          blocks.push_back({first + r, std::min(size, records - r)});
        }
        first += records;
      }
      Random block_rng(MixKey(spec.seed, epoch, kBlockStream));
      Shuffle(std::span<Block>(blocks), block_rng);
      Random window_rng(MixKey(spec.seed, epoch, kWindowStream));
      const size_t window = static_cast<size_t>(spec.block_window);
      size_t out = 0;
      for (size_t b = 0; b < blocks.size(); b += window) {
        const size_t begin = out;
        for (size_t k = b; k < std::min(blocks.size(), b + window); ++k) {
          for (uint64_t i = 0; i < blocks[k].count; ++i) order[out++] = blocks[k].first + i;
        }
        Shuffle(std::span<uint64_t>(order).subspan(begin, out - begin), window_rng);
        if (window_ends != nullptr) window_ends->push_back(out);
      }
      break;
    }
  }
  return order;
}

EpochPlan EpochPlan::Make(const OrderSpec& spec, std::span<const uint64_t> shard_records,
                          uint64_t epoch) {
  EpochPlan plan;
  plan.epoch_ = epoch;
  plan.batch_size_ = spec.batch_size;
  plan.tail_ = spec.tail;
  std::vector<uint64_t> ends;
  std::vector<uint64_t> all = EpochPermutation(spec, shard_records, epoch, &ends);
  const uint64_t n_all = all.size();
  const uint64_t m = SamplesPerRank(spec, n_all);
  const uint64_t begin = static_cast<uint64_t>(spec.rank) * m;
  plan.order_.resize(m);
  // Position p of the extended sequence is entry p mod N of the permutation (kDrop never
  // reaches past N; the others repeat at most W - 1 entries from the start).
  for (uint64_t i = 0; i < m; ++i) plan.order_[i] = all[(begin + i) % n_all];
  if (!ends.empty() && m > 0) {
    // The windows' ends in the rank's positions, including those of the repeated start.
    for (const uint64_t lap : {uint64_t{0}, n_all}) {
      for (const uint64_t e : ends) {
        if (e + lap > begin && e + lap - begin < m) plan.window_ends_.push_back(e + lap - begin);
      }
    }
    plan.window_ends_.push_back(m);
  }
  plan.num_batches_ = BatchesPerEpoch(spec, n_all);
  return plan;
}

uint64_t EpochPlan::read_positions() const {
  return std::min<uint64_t>(order_.size(), num_batches_ * static_cast<uint64_t>(batch_size_));
}

int EpochPlan::Batch(uint64_t b, std::vector<uint64_t>* out) const {
  const uint64_t m = order_.size();
  const uint64_t bs = static_cast<uint64_t>(batch_size_);
  const uint64_t begin = b * bs;
  const uint64_t end = std::min(begin + bs, m);
  const uint64_t valid = end > begin ? end - begin : 0;
  const uint64_t count = tail_ == Tail::kPad ? bs : valid;
  out->resize(count);
  for (uint64_t i = 0; i < valid; ++i) (*out)[i] = order_[begin + i];
  for (uint64_t i = valid; i < count; ++i) (*out)[i] = order_[(i - valid) % m];
  return static_cast<int>(valid);
}

}  // namespace shardpack::read
