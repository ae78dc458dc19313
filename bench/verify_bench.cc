// verify throughput against a plain sequential read of the same bytes, measured in the
// same run, on a dataset in the page cache.
//
//   verify_bench DIR [--reps N]
//
// For each repetition, in turn: read() every file of the dataset in 1 MiB blocks with 1
// thread and with T threads (files split among them), then VerifyDataset with 1 and T
// threads. Reports medians, GB/s and the ratios verify / read at equal thread counts.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "io/env.h"
#include "shardpack/manifest.h"
#include "shardpack/verify.h"

namespace {

volatile char sink_ = 0;  // keeps the touching loop from being optimised away

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t ReadAll(const std::vector<std::string>& files, int threads) {
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> total{0};
  auto worker = [&] {
    std::vector<char> buf(1 << 20);
    uint64_t sum = 0;
    for (size_t i; (i = next++) < files.size();) {
      int fd = ::open(files[i].c_str(), O_RDONLY);
      if (fd < 0) {
        std::perror(files[i].c_str());
        std::exit(2);
      }
      ssize_t r;
      while ((r = ::read(fd, buf.data(), buf.size())) > 0) {
        sum += static_cast<uint64_t>(r);
        // Touch the data as a consumer would: one byte per cache line.
        char acc = 0;
        for (ssize_t k = 0; k < r; k += 64) acc ^= buf[k];
        sink_ = sink_ ^ acc;
      }
      ::close(fd);
    }
    total += sum;
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return total;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: verify_bench DIR [--reps N]\n");
    return 2;
  }
  std::string dir = argv[1];
  int reps = 5;
  for (int i = 2; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  }
  auto m = shardpack::ReadManifest(dir);
  if (!m.ok()) {
    std::fprintf(stderr, "verify_bench: %s\n", m.status().message().c_str());
    return 2;
  }
  std::vector<std::string> files = {shardpack::io::JoinPath(dir, "manifest.json")};
  for (const auto& s : m->shards) {
    files.push_back(shardpack::io::JoinPath(dir, s.data.file));
    if (s.index) files.push_back(shardpack::io::JoinPath(dir, s.index->file));
  }
  const int threads = static_cast<int>(std::thread::hardware_concurrency());
  const uint64_t bytes = ReadAll(files, threads);  // warm the page cache
  std::printf("dataset %s: %zu files, %.2f GB, %llu samples; %d cores\n", dir.c_str(), files.size(),
              bytes / 1e9, static_cast<unsigned long long>(m->num_samples), threads);
  std::vector<double> read1, readn, verify1, verifyn;
  for (int rep = 0; rep < reps; ++rep) {
    double t = Now();
    ReadAll(files, 1);
    read1.push_back(Now() - t);
    t = Now();
    ReadAll(files, threads);
    readn.push_back(Now() - t);
    for (int vt : {1, threads}) {
      t = Now();
      auto r = shardpack::VerifyDataset(dir, {.num_threads = vt});
      double dt = Now() - t;
      if (!r.ok() || !r->ok()) {
        std::fprintf(stderr, "verify_bench: the dataset is not clean\n");
        return 1;
      }
      (vt == 1 ? verify1 : verifyn).push_back(dt);
    }
  }
  auto gbps = [&](double s) { return bytes / s / 1e9; };
  double r1 = Median(read1), rn = Median(readn), v1 = Median(verify1), vn = Median(verifyn);
  std::printf("median of %d repetitions:\n", reps);
  std::printf("  sequential read, 1 thread    %6.2f GB/s\n", gbps(r1));
  std::printf("  sequential read, %d threads   %6.2f GB/s\n", threads, gbps(rn));
  std::printf("  verify, 1 thread             %6.2f GB/s   ratio to read (1 thread)  %.2f\n",
              gbps(v1), r1 / v1);
  std::printf("  verify, %d threads            %6.2f GB/s   ratio to read (%d threads) %.2f\n",
              threads, gbps(vn), threads, rn / vn);
  std::printf("  verify, %d threads vs the 1-thread read (a plain `cat`):           %.2f\n",
              threads, r1 / vn);
  return 0;
}
