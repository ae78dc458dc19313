#include "read/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace shardpack::read {
namespace {

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint64_t> Iota(uint64_t n) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), uint64_t{0});
  return v;
}

const std::vector<uint64_t> kShards = {40, 40, 17, 3};  // 100 samples

TEST(SamplerTest, NoneIsTheDatasetOrder) {
  OrderSpec spec{.shuffle = ShuffleMode::kNone};
  EXPECT_EQ(EpochPermutation(spec, kShards, 5), Iota(100));
}

TEST(SamplerTest, GlobalIsAPermutationThatDependsOnSeedAndEpoch) {
  OrderSpec spec{.shuffle = ShuffleMode::kGlobal, .seed = 7};
  std::vector<uint64_t> e0 = EpochPermutation(spec, kShards, 0);
  EXPECT_EQ(Sorted(e0), Iota(100));
  EXPECT_NE(e0, Iota(100));
  EXPECT_EQ(EpochPermutation(spec, kShards, 0), e0);  // a pure function
  EXPECT_NE(EpochPermutation(spec, kShards, 1), e0);
  spec.seed = 8;
  EXPECT_NE(EpochPermutation(spec, kShards, 0), e0);
}

TEST(SamplerTest, GlobalOrderIsPinned) {
  // The permutation is part of the resumption contract: it must not change between
  // builds or platforms. These are the first entries for seed 1, epoch 0, N = 100.
  OrderSpec spec{.shuffle = ShuffleMode::kGlobal, .seed = 1};
  std::vector<uint64_t> e = EpochPermutation(spec, kShards, 0);
  std::vector<uint64_t> head(e.begin(), e.begin() + 8);
  EXPECT_EQ(head, (std::vector<uint64_t>{10, 63, 60, 95, 29, 7, 18, 1}));
}

TEST(SamplerTest, WindowEndsCutTheRanksOrderIntoWholeBlocks) {
  // Blocks of 8 (shards of 40, 40, 17, 3: blocks of 8 and 1 and 3 at shard ends), windows
  // of 3 blocks.
  OrderSpec spec{.shuffle = ShuffleMode::kBlock, .seed = 5, .block_size = 8, .block_window = 3};
  std::vector<uint64_t> ends;
  const std::vector<uint64_t> e = EpochPermutation(spec, kShards, 2, &ends);
  ASSERT_FALSE(ends.empty());
  EXPECT_EQ(ends.back(), 100u);
  uint64_t begin = 0;
  for (const uint64_t end : ends) {
    ASSERT_GT(end, begin);
    // Sorted, a window's samples are whole blocks: each run of consecutive indices
    // starts at a block's start (a multiple of 8 from its shard's start).
    std::vector<uint64_t> w = Sorted(std::vector<uint64_t>(e.begin() + begin, e.begin() + end));
    for (size_t i = 0; i < w.size(); ++i) {
      if (i > 0 && w[i] == w[i - 1] + 1) continue;
      const uint64_t shard_start = w[i] >= 97 ? 97 : w[i] >= 80 ? 80 : w[i] >= 40 ? 40 : 0;
      EXPECT_EQ((w[i] - shard_start) % 8, 0u) << "window ending at " << end;
    }
    begin = end;
  }
  EXPECT_TRUE(EpochPermutation({.shuffle = ShuffleMode::kGlobal}, kShards, 0, &ends).size() ==
                  100 &&
              ends.empty());
  // A rank's plan: the same ends in its positions, then m; rank 1 of 3 with kPad reads
  // positions 34..67 of the epoch's permutation.
  spec.world_size = 3;
  spec.rank = 1;
  spec.tail = Tail::kPad;
  spec.batch_size = 16;
  EpochPlan plan = EpochPlan::Make(spec, kShards, 2);
  EXPECT_EQ(plan.order().size(), 34u);
  EpochPermutation(spec, kShards, 2, &ends);
  std::vector<uint64_t> want;
  for (const uint64_t end : ends) {
    if (end > 34 && end < 68) want.push_back(end - 34);
  }
  want.push_back(34);
  EXPECT_EQ(plan.window_ends(), want);
  EXPECT_EQ(plan.read_positions(), 34u);  // 3 batches of 16, the last padded
  // Rank 2 reads positions 68..101: the permutation's end (100) is a window's end, and
  // then its first two entries again.
  spec.rank = 2;
  const std::vector<uint64_t> last = EpochPlan::Make(spec, kShards, 2).window_ends();
  EXPECT_NE(std::find(last.begin(), last.end(), 32u), last.end());
  EXPECT_EQ(last.back(), 34u);
  spec.rank = 1;
  spec.tail = Tail::kDrop;
  EXPECT_EQ(EpochPlan::Make(spec, kShards, 2).read_positions(), 32u);
}

TEST(SamplerTest, BlockModeReadsRunsOfOneShard) {
  // With a window of one block, every run of the order is one block, shuffled inside.
  OrderSpec spec{.shuffle = ShuffleMode::kBlock, .seed = 3, .block_size = 8, .block_window = 1};
  std::vector<uint64_t> e = EpochPermutation(spec, kShards, 0);
  EXPECT_EQ(Sorted(e), Iota(100));
  std::vector<uint64_t> shard_start = {0, 40, 80, 97, 100};
  size_t pos = 0;
  std::set<uint64_t> firsts;
  while (pos < e.size()) {
    // The run starting at pos: its minimum is a block start within a shard.
    uint64_t lo = e[pos];
    size_t shard =
        std::upper_bound(shard_start.begin(), shard_start.end(), lo) - shard_start.begin() - 1;
    uint64_t block_first = shard_start[shard] + (lo - shard_start[shard]) / 8 * 8;
    uint64_t block_end = std::min(block_first + 8, shard_start[shard + 1]);
    size_t len = block_end - block_first;
    std::vector<uint64_t> run(e.begin() + pos, e.begin() + pos + len);
    const std::vector<uint64_t> upto_end = Iota(block_end);
    EXPECT_EQ(Sorted(run), std::vector<uint64_t>(upto_end.begin() + block_first, upto_end.end()))
        << "run at position " << pos;
    firsts.insert(block_first);
    pos += len;
  }
  EXPECT_EQ(firsts.size(), 5u + 5u + 3u + 1u);  // 40/8 + 40/8 + ceil(17/8) + 1
}

TEST(SamplerTest, BlockModeMixesWindowsOfBlocks) {
  OrderSpec spec{.shuffle = ShuffleMode::kBlock, .seed = 3, .block_size = 4, .block_window = 5};
  std::vector<uint64_t> e = EpochPermutation(spec, kShards, 0);
  EXPECT_EQ(Sorted(e), Iota(100));
  // The first 20 positions come from five blocks of four, interleaved.
  std::set<uint64_t> blocks;
  for (int i = 0; i < 20; ++i) blocks.insert(e[i] / 4);
  EXPECT_EQ(blocks.size(), 5u);
  EXPECT_NE(EpochPermutation(spec, kShards, 1), e);
}

TEST(SamplerTest, RanksTogetherSeeEverySampleOnceWithPaddingRepeats) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (Tail tail : {Tail::kPartial, Tail::kPad, Tail::kDrop}) {
      OrderSpec spec{.shuffle = ShuffleMode::kGlobal,
                     .seed = 11,
                     .world_size = world,
                     .tail = tail,
                     .batch_size = 6};
      std::map<uint64_t, int> seen;
      size_t per_rank = 0;
      for (int r = 0; r < world; ++r) {
        spec.rank = r;
        EpochPlan plan = EpochPlan::Make(spec, kShards, 2);
        if (r == 0) per_rank = plan.order().size();
        EXPECT_EQ(plan.order().size(), per_rank) << "rank " << r << " of " << world;
        for (uint64_t i : plan.order()) ++seen[i];
      }
      const uint64_t n = 100;
      if (tail == Tail::kDrop) {
        EXPECT_EQ(per_rank, n / world);
        EXPECT_EQ(seen.size(), n / world * world);
        for (auto& [i, count] : seen) EXPECT_EQ(count, 1);
      } else {
        EXPECT_EQ(per_rank, (n + world - 1) / world);
        EXPECT_EQ(seen.size(), n);  // every sample at least once
        int repeats = 0;
        for (auto& [i, count] : seen) repeats += count - 1;
        EXPECT_EQ(repeats, static_cast<int>(per_rank * world - n));
        EXPECT_LT(repeats, world);
      }
    }
  }
}

TEST(SamplerTest, TailRulesShapeTheLastBatch) {
  OrderSpec spec{.shuffle = ShuffleMode::kNone, .batch_size = 30};
  std::vector<uint64_t> batch;

  spec.tail = Tail::kPartial;
  EpochPlan partial = EpochPlan::Make(spec, kShards, 0);
  ASSERT_EQ(partial.num_batches(), 4u);
  EXPECT_EQ(partial.Batch(3, &batch), 10);
  EXPECT_EQ(batch.size(), 10u);
  EXPECT_EQ(batch.front(), 90u);

  spec.tail = Tail::kDrop;
  EXPECT_EQ(EpochPlan::Make(spec, kShards, 0).num_batches(), 3u);

  spec.tail = Tail::kPad;
  EpochPlan pad = EpochPlan::Make(spec, kShards, 0);
  ASSERT_EQ(pad.num_batches(), 4u);
  EXPECT_EQ(pad.Batch(3, &batch), 10);
  ASSERT_EQ(batch.size(), 30u);
  EXPECT_EQ(batch[9], 99u);
  EXPECT_EQ(batch[10], 0u);  // the fill repeats the rank's first samples
  EXPECT_EQ(batch[29], 19u);
}

TEST(SamplerTest, PadFillCyclesWhenTheRankHasFewerSamplesThanABatch) {
  OrderSpec spec{.shuffle = ShuffleMode::kNone, .tail = Tail::kPad, .batch_size = 8};
  const std::vector<uint64_t> three = {3};
  EpochPlan plan = EpochPlan::Make(spec, three, 0);
  std::vector<uint64_t> batch;
  ASSERT_EQ(plan.num_batches(), 1u);
  EXPECT_EQ(plan.Batch(0, &batch), 3);
  EXPECT_EQ(batch, (std::vector<uint64_t>{0, 1, 2, 0, 1, 2, 0, 1}));
}

TEST(SamplerTest, EmptyDatasetHasNoBatches) {
  OrderSpec spec{.world_size = 2, .tail = Tail::kPad, .batch_size = 8};
  const std::vector<uint64_t> none = {0};
  EXPECT_EQ(EpochPlan::Make(spec, none, 0).num_batches(), 0u);
  EXPECT_EQ(BatchesPerEpoch(spec, 0), 0u);
}

}  // namespace
}  // namespace shardpack::read
