#include "io/chunked_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace shardpack::io {
namespace {

// A file in memory that records each write it is given; its `fail_write`-th WriteAt
// (1-based) fails.
class RecordingFile final : public WritableFile {
 public:
  struct Write {
    uint64_t offset;
    size_t bytes;
  };

  Status Append(std::string_view data) override {
    return FailedPreconditionError("the chunked file writes with WriteAt only");
  }
  Status WriteAt(uint64_t offset, std::span<const std::string_view> pieces) override {
    std::lock_guard<std::mutex> lock(mu);
    if (++write_calls == fail_write) return IOError("injected write failure");
    size_t bytes = 0;
    for (std::string_view p : pieces) {
      if (data.size() < offset + bytes + p.size()) data.resize(offset + bytes + p.size());
      data.replace(offset + bytes, p.size(), p);
      bytes += p.size();
    }
    writes.push_back({offset, bytes});
    return Status::Ok();
  }
  void WrittenBefore(uint64_t end) override { written_before.push_back(end); }
  Status Sync() override {
    ++syncs;
    return Status::Ok();
  }
  Status Close() override {
    ++closes;
    return Status::Ok();
  }
  uint64_t Size() const override { return 0; }

  std::mutex mu;
  std::string data;
  std::vector<Write> writes;
  std::vector<uint64_t> written_before;
  int write_calls = 0, fail_write = 0, syncs = 0, closes = 0;
};

std::string RandomBytes(size_t n, std::mt19937& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// Every write the file underneath received covers a whole chunk at a chunk's offset, but
// the last, which starts at one and ends at `size`.
void ExpectWholeChunks(const RecordingFile& file, size_t chunk, uint64_t size) {
  std::vector<RecordingFile::Write> writes = file.writes;
  std::sort(writes.begin(), writes.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
  ASSERT_EQ(writes.size(), (size + chunk - 1) / chunk);
  for (size_t i = 0; i < writes.size(); ++i) {
    EXPECT_EQ(writes[i].offset, i * chunk);
    EXPECT_EQ(writes[i].bytes, std::min<uint64_t>(chunk, size - i * chunk)) << "write " << i;
  }
}

TEST(ChunkedFileTest, RecordsWrittenFromThreadsInAnyOrderGiveTheBytesInWholeChunks) {
  constexpr size_t kChunk = 64 << 10;
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    std::mt19937 rng(seed);
    // Records of 1 byte to 3 chunks, laid end to end, each written in up to three pieces.
    std::vector<std::string> records;
    std::vector<uint64_t> offsets;
    uint64_t size = 0;
    for (int i = 0; i < 200; ++i) {
      const size_t n = rng() % 3 == 0 ? 1 + rng() % 64 : 1 + rng() % (3 * kChunk);
      records.push_back(RandomBytes(n, rng));
      offsets.push_back(size);
      size += n;
    }
    std::vector<size_t> order(records.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);

    auto owned = std::make_unique<RecordingFile>();
    RecordingFile& under = *owned;
    std::unique_ptr<WritableFile> file = NewChunkedWritableFile(std::move(owned), "f", kChunk);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (size_t k = t; k < order.size(); k += 4) {
          const size_t i = order[k];
          const std::string& r = records[i];
          const size_t a = r.size() / 3, b = r.size() / 2;
          const std::string_view pieces[] = {std::string_view(r).substr(0, a),
                                             std::string_view(r).substr(a, b - a),
                                             std::string_view(r).substr(b)};
          ASSERT_TRUE(file->WriteAt(offsets[i], pieces).ok());
        }
      });
    }
    for (std::thread& t : threads) t.join();
    // Before Sync, only whole chunks have gone down.
    for (const auto& w : under.writes) EXPECT_EQ(w.bytes, kChunk);
    ASSERT_TRUE(file->Sync().ok());
    ASSERT_TRUE(file->Close().ok());
    EXPECT_EQ(under.syncs, 1);
    EXPECT_EQ(under.closes, 1);
    std::string expected;
    for (const std::string& r : records) expected += r;
    EXPECT_TRUE(under.data == expected) << "seed " << seed;
    ExpectWholeChunks(under, kChunk, size);
  }
}

TEST(ChunkedFileTest, AppendsAreWrittenInChunksToo) {
  std::mt19937 rng(7);
  auto owned = std::make_unique<RecordingFile>();
  RecordingFile& under = *owned;
  std::unique_ptr<WritableFile> file = NewChunkedWritableFile(std::move(owned), "f", 4096);
  std::string expected;
  for (size_t n : {1, 4095, 4096, 10000, 3, 8192, 17}) {
    const std::string s = RandomBytes(n, rng);
    ASSERT_TRUE(file->Append(s).ok());
    expected += s;
    EXPECT_EQ(file->Size(), expected.size());
  }
  ASSERT_TRUE(file->Close().ok());
  EXPECT_TRUE(under.data == expected);
  ExpectWholeChunks(under, 4096, expected.size());
}

TEST(ChunkedFileTest, AFileOfWholeChunksHasNoPartialWrite) {
  auto owned = std::make_unique<RecordingFile>();
  RecordingFile& under = *owned;
  std::unique_ptr<WritableFile> file = NewChunkedWritableFile(std::move(owned), "f", 4096);
  const std::string s(3 * 4096, 'x');
  ASSERT_TRUE(file->Append(s).ok());
  EXPECT_EQ(under.writes.size(), 3u);  // each handed on when it filled, before Close
  ASSERT_TRUE(file->Close().ok());
  EXPECT_EQ(under.writes.size(), 3u);
  EXPECT_TRUE(under.data == s);
}

TEST(ChunkedFileTest, AGapIsReportedAndTheLastChunkIsNotWritten) {
  auto owned = std::make_unique<RecordingFile>();
  RecordingFile& under = *owned;
  std::unique_ptr<WritableFile> file =
      NewChunkedWritableFile(std::move(owned), "shard.tfrecord.tmp", 4096);
  const std::string a(100, 'a'), b(100, 'b');
  const std::string_view first[] = {a};
  const std::string_view second[] = {b};
  ASSERT_TRUE(file->WriteAt(0, first).ok());
  ASSERT_TRUE(file->WriteAt(200, second).ok());
  Status s = file->Sync();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("shard.tfrecord.tmp: 100 bytes missing before offset 300"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(under.syncs, 0);
  // Close reports it too, and still closes the file underneath.
  EXPECT_EQ(file->Close().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(under.closes, 1);
  EXPECT_TRUE(under.writes.empty());
}

TEST(ChunkedFileTest, AFailedChunkWriteIsReturnedToTheWriteThatFilledIt) {
  auto owned = std::make_unique<RecordingFile>();
  RecordingFile& under = *owned;
  under.fail_write = 2;
  std::unique_ptr<WritableFile> file = NewChunkedWritableFile(std::move(owned), "f", 4096);
  const std::string s(4096, 's');
  const std::string_view pieces[] = {s};
  EXPECT_TRUE(file->WriteAt(0, pieces).ok());
  const Status failed = file->WriteAt(4096, pieces);
  EXPECT_EQ(failed.code(), StatusCode::kIOError);
  EXPECT_NE(failed.message().find("injected write failure"), std::string::npos);
  EXPECT_TRUE(file->WriteAt(8192, pieces).ok());
  EXPECT_TRUE(file->Close().ok());
  EXPECT_EQ(under.writes.size(), 2u);
}

TEST(ChunkedFileTest, WrittenBeforeNamesOnlyWholeChunks) {
  auto owned = std::make_unique<RecordingFile>();
  RecordingFile& under = *owned;
  std::unique_ptr<WritableFile> file = NewChunkedWritableFile(std::move(owned), "f", 4096);
  const std::string s(10000, 's');
  ASSERT_TRUE(file->Append(s).ok());
  file->WrittenBefore(10000);
  file->WrittenBefore(4095);
  EXPECT_EQ(under.written_before, (std::vector<uint64_t>{8192, 0}));
  ASSERT_TRUE(file->Close().ok());
}

TEST(ChunkedFileTest, ChunkSizesAreZeroOrWholePagesUpToAGibibyte) {
  for (uint64_t ok : {uint64_t{0}, uint64_t{4096}, uint64_t{2} << 20, uint64_t{1} << 30}) {
    EXPECT_TRUE(CheckWriteChunk(ok).ok()) << ok;
  }
  for (uint64_t bad : {uint64_t{1}, uint64_t{4095}, uint64_t{5000}, (uint64_t{1} << 30) + 4096}) {
    const Status s = CheckWriteChunk(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("write chunk of " + std::to_string(bad) + " bytes: not"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace shardpack::io
