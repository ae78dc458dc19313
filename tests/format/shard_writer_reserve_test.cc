// ShardWriter's three-step Add (Reserve, Write, Commit): the converter's pipeline writes
// records on many threads through it. Plain std::thread, so that ThreadSanitizer sees
// every hand-off (this file is in the TSan build's concurrency_tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "io/mem_env.h"
#include "shardpack/shard_writer.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;

// Reserve, Write and Commit as the converter's pipeline drives them, at the same time:
// samples reserved in order on one thread, written on four in a shuffled order, committed
// in order on a third. Shards fill by size, so several are sealed while
// their records are still being written. The files, the manifest and every progress
// state on_shard_staged reports are Add's.
TEST(ShardWriterReserveTest, ReservedSamplesWrittenOnThreadsInAnyOrderGiveAddsBytes) {
  constexpr int kSamples = 40;
  constexpr int kWindow = 9;  // the writes' order is reversed window by window
  std::vector<std::vector<uint8_t>> pixels;
  std::vector<std::string> names;
  for (int i = 0; i < kSamples; ++i) {
    pixels.push_back(testing::TestPixels(i, 16, 24, 3));
    names.push_back("f" + std::to_string(i));
  }
  auto options = [](std::vector<std::string>* staged) {
    ShardWriterOptions o;
    o.class_names = {"a", "b", "c"};
    o.image = {.channels = 3, .height = 16, .width = 24};
    o.max_shard_bytes = 5000;  // four or five samples a shard
    o.on_shard_staged = [staged](const ShardWriterState& st) {
      std::string line = std::to_string(st.samples) + ":";
      for (uint64_t c : st.class_counts) line += " " + std::to_string(c);
      for (const ShardEntry& e : st.shards) line += " " + e.data.file + "/" + e.data.xxh3_128;
      staged->push_back(line);
      return Status::Ok();
    };
    return o;
  };
  auto sample = [&](int i) {
    return SampleInput{.pixels = pixels[i],
                       .height = 16,
                       .width = 24,
                       .channels = 3,
                       .label = (i * 7) % 3,
                       .filename = names[i]};
  };
  TempDir added, reserved;
  std::vector<std::string> added_states, reserved_states;
  {
    auto w = ShardWriter::Create(added.path(), options(&added_states));
    ASSERT_OK(w.status());
    for (int i = 0; i < kSamples; ++i) ASSERT_OK((*w)->Add(sample(i)));
    ASSERT_OK((*w)->Finish().status());
  }
  {
    auto w = ShardWriter::Create(reserved.path(), options(&reserved_states));
    ASSERT_OK(w.status());
    // One thread reserves, four write, this one commits, all at once, as the pipeline's
    // stages do; each window of samples is written in reverse order.
    std::vector<ShardWriter::Reservation> r(kSamples);
    std::vector<Status> reserved(kSamples), written(kSamples);
    std::vector<std::atomic<bool>> reserved_done(kSamples), written_done(kSamples);
    auto wait = [](const std::atomic<bool>& flag) {
      while (!flag.load(std::memory_order_acquire)) std::this_thread::yield();
    };
    std::vector<int> order;
    for (int first = 0; first < kSamples; first += kWindow) {
      for (int i = std::min(kSamples, first + kWindow) - 1; i >= first; --i) order.push_back(i);
    }
    std::thread reserver([&] {
      for (int i = 0; i < kSamples; ++i) {
        reserved[i] = (*w)->Reserve(sample(i), &r[i]);
        reserved_done[i].store(true, std::memory_order_release);
      }
    });
    std::atomic<size_t> next{0};
    std::vector<std::thread> writers;
    for (int t = 0; t < 4; ++t) {
      writers.emplace_back([&] {
        for (size_t k; (k = next.fetch_add(1)) < order.size();) {
          const int i = order[k];
          wait(reserved_done[i]);
          if (reserved[i].ok()) written[i] = (*w)->Write(r[i]);
          written_done[i].store(true, std::memory_order_release);
        }
      });
    }
    std::vector<Status> committed(kSamples);
    for (int i = 0; i < kSamples; ++i) {
      wait(written_done[i]);
      if (reserved[i].ok() && written[i].ok()) committed[i] = (*w)->Commit(r[i]);
    }
    reserver.join();
    for (std::thread& t : writers) t.join();
    for (int i = 0; i < kSamples; ++i) {
      ASSERT_OK(reserved[i]);
      ASSERT_OK(written[i]);
      ASSERT_OK(committed[i]);
    }
    ASSERT_OK((*w)->Finish().status());
  }
  EXPECT_GE(added_states.size(), 8u);
  EXPECT_EQ(reserved_states, added_states);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(added.path())) {
    files.push_back(e.path().filename());
  }
  EXPECT_EQ(files.size(), 2 * added_states.size() + 1);  // shards, indexes, the manifest
  for (const std::string& f : files) {
    EXPECT_EQ(testing::ReadFileOrDie(reserved.Join(f)), testing::ReadFileOrDie(added.Join(f))) << f;
  }
}

// Reserve is for TFRecord writers that have not taken Add's samples; Write and Commit
// want a reservation.
TEST(ShardWriterReserveTest, ReserveIsRefusedAfterAddAndForLmdb) {
  std::vector<uint8_t> px(12);
  const SampleInput in{.pixels = px, .height = 2, .width = 2, .channels = 3};
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    ShardWriterOptions o;
    o.backend = backend;
    o.class_names = {"a"};
    o.image = {.channels = 3, .height = 2, .width = 2};
    auto w = ShardWriter::Create(dir.path(), o);
    ASSERT_OK(w.status());
    ASSERT_OK((*w)->Add(in));
    ShardWriter::Reservation r;
    Status s = (*w)->Reserve(in, &r);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_EQ((*w)->Write(r).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ((*w)->Commit(r).code(), StatusCode::kFailedPrecondition);
  }
  TempDir dir;
  ShardWriterOptions o;
  o.class_names = {"a"};
  o.image = {.channels = 3, .height = 2, .width = 2};
  auto w = ShardWriter::Create(dir.path(), o);
  ASSERT_OK(w.status());
  ShardWriter::Reservation r;
  ASSERT_OK((*w)->Reserve(in, &r));
  EXPECT_EQ((*w)->Add(in).code(), StatusCode::kFailedPrecondition);
}

// A failed positional write names the file and offset; the writer, destroyed, leaves
// nothing behind, the sealed shards whose records were still being written included.
TEST(ShardWriterReserveTest, AFailedReservedWriteNamesTheFileAndLeavesNothing) {
  for (int nth = 1; nth <= 7; ++nth) {
    io::MemEnv env;
    {
      ShardWriterOptions o;
      o.class_names = {"a"};
      o.image = {.channels = 3, .height = 2, .width = 2};
      o.max_shard_records = 2;
      o.env = &env;
      auto w = ShardWriter::Create("/out", o);
      ASSERT_OK(w.status());
      env.InjectFault(io::FaultOp::kAppend, nth, ENOSPC);
      std::vector<std::vector<uint8_t>> px;
      for (int i = 0; i < 7; ++i) px.push_back(testing::TestPixels(i, 2, 2, 3));
      std::vector<ShardWriter::Reservation> r(7);
      for (int i = 0; i < 7; ++i) {
        ASSERT_OK((*w)->Reserve({.pixels = px[i], .height = 2, .width = 2, .channels = 3}, &r[i]));
      }
      Status failed;
      for (int i = 0; i < 7 && failed.ok(); ++i) failed = (*w)->Write(r[i]);
      ASSERT_EQ(failed.code(), StatusCode::kIOError) << nth;
      EXPECT_NE(failed.message().find("/out/shard-0000" + std::to_string((nth - 1) / 2) +
                                      ".tfrecord.tmp: write at offset"),
                std::string::npos)
          << failed.message();
      EXPECT_NE(failed.message().find("ENOSPC"), std::string::npos) << failed.message();
    }
    auto left = env.ListDir("/out");
    ASSERT_OK(left.status());
    EXPECT_TRUE(left->empty()) << nth << ": " << left->front();
  }
}

}  // namespace
}  // namespace shardpack
