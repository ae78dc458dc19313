#include "io/chunked_file.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace shardpack::io {
namespace {

// The chunk buffers kept for reuse: a new buffer is new memory, whose first touch costs a
// page fault per page (and on a virtual machine that reports free pages, a host fault).
constexpr size_t kKeptBuffers = 8;

class ChunkedWritableFile final : public WritableFile {
 public:
  ChunkedWritableFile(std::unique_ptr<WritableFile> file, std::string path, size_t chunk_bytes)
      : file_(std::move(file)), path_(std::move(path)), chunk_(chunk_bytes) {}

  Status Append(std::string_view data) override {
    const std::string_view pieces[] = {data};
    SHARDPACK_RETURN_IF_ERROR(WriteAt(appended_, pieces));
    appended_ += data.size();
    return Status::Ok();
  }

  Status WriteAt(uint64_t offset, std::span<const std::string_view> pieces) override {
    Status result = Status::Ok();
    for (std::string_view piece : pieces) {
      const char* p = piece.data();
      size_t left = piece.size();
      while (left > 0) {
        const uint64_t index = offset / chunk_;
        const size_t at = static_cast<size_t>(offset % chunk_);
        const size_t take = std::min(left, chunk_ - at);
        Chunk* chunk = Acquire(index);
        std::memcpy(chunk->bytes.get() + at, p, take);
        coverage_.Add(offset, take);
        // The write that fills the chunk's last byte sees every other write's bytes (their
        // additions came before, in acq_rel order) and hands the chunk on.
        if (chunk->filled.fetch_add(take, std::memory_order_acq_rel) + take == chunk_) {
          Status s = HandOn(index, chunk, chunk_);
          if (result.ok()) result = std::move(s);
        }
        offset += take;
        p += take;
        left -= take;
      }
    }
    return result;
  }

  // Every chunk wholly before `end` has been handed on by the write that completed it.
  void WrittenBefore(uint64_t end) override { file_->WrittenBefore(end / chunk_ * chunk_); }

  Status Sync() override {
    SHARDPACK_RETURN_IF_ERROR(HandOnPartial());
    return file_->Sync();
  }

  Status Close() override {
    Status s = HandOnPartial();
    Status c = file_->Close();
    return s.ok() ? c : s;
  }

  uint64_t Size() const override { return appended_; }

 private:
  struct Chunk {
    std::unique_ptr<char[]> bytes;
    std::atomic<size_t> filled{0};  // bytes written into it
  };

  Chunk* Acquire(uint64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<Chunk>& chunk = open_[index];
    if (!chunk) {
      chunk = std::make_unique<Chunk>();
      if (spare_.empty()) {
        chunk->bytes = std::make_unique_for_overwrite<char[]>(chunk_);
      } else {
        chunk->bytes = std::move(spare_.back());
        spare_.pop_back();
      }
    }
    return chunk.get();
  }

  // Writes the first `bytes` of chunk `index` to the file and forgets the chunk.
  Status HandOn(uint64_t index, Chunk* chunk, size_t bytes) {
    const std::string_view pieces[] = {{chunk->bytes.get(), bytes}};
    Status s = file_->WriteAt(index * chunk_, pieces);
    std::lock_guard<std::mutex> lock(mu_);
    if (spare_.size() < kKeptBuffers) spare_.push_back(std::move(chunk->bytes));
    open_.erase(index);
    return s;
  }

  // The chunk not filled: the file's last, which ends at the file's end. Writes never
  // overlap, so the file has no gap when the bytes written add up to its end; where they do
  // not, nothing is handed on.
  Status HandOnPartial() {
    SHARDPACK_RETURN_IF_ERROR(coverage_.Whole(path_, "a chunked file"));
    const uint64_t file_end = coverage_.end();
    std::vector<std::pair<uint64_t, Chunk*>> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [index, chunk] : open_) left.emplace_back(index, chunk.get());
    }
    Status result = Status::Ok();
    for (const auto& [index, chunk] : left) {
      Status s = HandOn(index, chunk, static_cast<size_t>(file_end - index * chunk_));
      if (result.ok()) result = std::move(s);
    }
    return result;
  }

  std::unique_ptr<WritableFile> file_;
  const std::string path_;
  const size_t chunk_;
  uint64_t appended_ = 0;
  WriteCoverage coverage_;
  std::mutex mu_;
  std::map<uint64_t, std::unique_ptr<Chunk>> open_;  // chunks being filled, by index
  std::vector<std::unique_ptr<char[]>> spare_;
};

}  // namespace

Status CheckWriteChunk(uint64_t bytes) {
  if (bytes % 4096 == 0 && bytes <= kMaxWriteChunk) return Status::Ok();
  return InvalidArgumentError("write chunk of " + std::to_string(bytes) +
                              " bytes: not 0 or a multiple of 4096 up to 1 GiB");
}

std::unique_ptr<WritableFile> NewChunkedWritableFile(std::unique_ptr<WritableFile> file,
                                                     std::string path, size_t chunk_bytes) {
  return std::make_unique<ChunkedWritableFile>(std::move(file), std::move(path), chunk_bytes);
}

}  // namespace shardpack::io
