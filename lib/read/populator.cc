#include "read/populator.h"

#include "read/dataset_access.h"
#include "shardpack/dataset.h"

namespace shardpack::read {

Populator::Populator(const Dataset* dataset, int threads) : dataset_(dataset) {
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

Populator::~Populator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Populator::Reserve(size_t samples) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.reserve(samples);
}

void Populator::Add(std::span<const uint64_t> indices) {
  if (indices.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (head_ > 0 && head_ >= queue_.size() / 2) {
      // Taken items first out, so that the vector grows only with what is still queued.
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    queue_.insert(queue_.end(), indices.begin(), indices.end());
  }
  cv_.notify_all();
}

void Populator::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
  head_ = 0;
  if (busy_ == 0) idle_cv_.notify_all();
}

void Populator::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [this] { return head_ == queue_.size() && busy_ == 0; });
}

void Populator::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || head_ < queue_.size(); });
    if (stopping_) return;
    const uint64_t index = queue_[head_++];
    if (head_ == queue_.size()) {
      queue_.clear();
      head_ = 0;
    }
    ++busy_;
    lock.unlock();
    DatasetAccess(*dataset_).Populate(std::span<const uint64_t>(&index, 1));
    lock.lock();
    if (--busy_ == 0 && head_ == queue_.size()) idle_cv_.notify_all();
  }
}

}  // namespace shardpack::read
