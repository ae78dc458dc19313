#include "read/populator.h"

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
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Populator::Add(std::span<const uint64_t> indices) {
  if (indices.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.insert(queue_.end(), indices.begin(), indices.end());
  }
  cv_.notify_all();
}

void Populator::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.clear();
}

void Populator::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const uint64_t index = queue_.front();
    queue_.pop_front();
    lock.unlock();
    dataset_->Populate(std::span<const uint64_t>(&index, 1));
    lock.lock();
  }
}

}  // namespace shardpack::read
