// How fast threads can write records into one file, by each write method of the converter
// (docs/DESIGN.md, "Scaling model"): the bound that one shard's writes put on a conversion
// with many threads.
//
// THREADS threads write records of RECORD bytes (default 196,928: a 256x256x3 sample) at
// offsets handed out in order, as the converter's workers do, until MIB MiB are written:
//
//   write   one file through io::Env's pwrite file in 2 MiB chunks (convert --write-method
//           write, the default --write-chunk): one writer at a time per file;
//   map     one file through io::NewMappedWritableFile (--write-method map);
//   map-faults  the same with its pages brought in by the copies' faults
//           (io::MappedPages::kFaulted), where `map` populates them first (tmpfs only);
//   files   one file per thread, by pwrite in 2 MiB chunks: what parts (--part) get, the
//           rate without the one-file bound.
//
// Each case writes into a fresh file (removed afterwards), then syncs it. Prints GB/s on
// the wall clock from the first write to the last (the sync apart, which waits for the
// disk; it also holds `write`'s last partial chunk and `map`'s last unmap and cut) and the
// process's CPU time per MiB over the same span. Run it with the destination on tmpfs and on the
// disk; compare methods within a run.
// Usage: write_scaling DIR [THREADS=1,2] [MIB=1024] [ROUNDS=2] [RECORD=196928]
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "io/chunked_file.h"
#include "io/env.h"
#include "io/mapped_write.h"
#include "shardpack/convert.h"

namespace {

using namespace shardpack;

double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  auto s = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return s(r.ru_utime) + s(r.ru_stime);
}

void Die(const Status& s) {
  std::fprintf(stderr, "write_scaling: %s\n", s.ToString().c_str());
  std::exit(1);
}

std::unique_ptr<io::WritableFile> Open(const std::string& method, const std::string& path) {
  if (method == "map" || method == "map-faults") {
    auto f = io::NewMappedWritableFile(
        path, method == "map" ? io::MappedPages::kAuto : io::MappedPages::kFaulted);
    if (!f.ok()) Die(f.status());
    return std::move(f).value();
  }
  auto f = io::Env::Posix()->NewWritableFile(path);
  if (!f.ok()) Die(f.status());
  return io::NewChunkedWritableFile(std::move(f).value(), path,
                                    static_cast<size_t>(ConvertOptions{}.write_chunk_bytes));
}

// One case: returns {GB/s, CPU ms per MiB}.
std::pair<double, double> Run(const std::string& dir, const std::string& method, int threads,
                              uint64_t total, size_t record) {
  const int files = method == "files" ? threads : 1;
  std::vector<std::unique_ptr<io::WritableFile>> out;
  std::vector<std::string> paths;
  for (int f = 0; f < files; ++f) {
    paths.push_back(dir + "/write_scaling." + std::to_string(f));
    out.push_back(Open(method, paths.back()));
  }
  const uint64_t records = total / record;
  std::string bytes(record, '\0');
  for (size_t i = 0; i < record; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
  std::atomic<uint64_t> next{0};
  const double cpu0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto work = [&](int t) {
    // One file per thread: the thread's own records, in order. One file: records in the
    // order the threads take them.
    uint64_t own = 0;
    for (;;) {
      const uint64_t r = next.fetch_add(1);
      if (r >= records) return;
      io::WritableFile* file = out[files == 1 ? 0 : t].get();
      const uint64_t offset = (files == 1 ? r : own++) * record;
      const std::string_view pieces[] = {bytes};
      if (Status s = file->WriteAt(offset, pieces); !s.ok()) Die(s);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
  for (auto& t : pool) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;
  for (int f = 0; f < files; ++f) {
    if (Status s = out[f]->Sync(); !s.ok()) Die(s);
    if (Status s = out[f]->Close(); !s.ok()) Die(s);
    io::Env::Posix()->RemoveFile(paths[f]).IgnoreError();
  }
  const double written = static_cast<double>(records * record);
  return {written / seconds / 1e9, cpu * 1e3 / (written / (1 << 20))};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: write_scaling DIR [THREADS=1,2] [MIB=1024] [ROUNDS=2] [RECORD]\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<int> counts;
  std::stringstream list(argc > 2 ? argv[2] : "1,2");
  for (std::string n; std::getline(list, n, ',');) counts.push_back(std::atoi(n.c_str()));
  const uint64_t total = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 1024) << 20;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 2;
  const size_t record = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 196928;
  std::printf(
      "write_scaling %s: %llu MiB of %zu-byte records a case, mapped writes %s here\n", dir.c_str(),
      static_cast<unsigned long long>(total >> 20), record,
      io::MappedWritesPreferred(dir) ? "preferred (auto: map)" : "not preferred (auto: write)");
  std::printf("%-6s %-7s %-10s %10s %12s\n", "round", "threads", "method", "GB/s", "CPU ms/MiB");
  for (int round = 1; round <= rounds; ++round) {
    for (int threads : counts) {
      for (const char* method : {"write", "map", "map-faults", "files"}) {
        if (threads == 1 && std::string(method) == "files") continue;
        if (std::string(method) == "map-faults" && !io::MappedWritesPopulate(dir)) continue;
        const auto [rate, cpu] = Run(dir, method, threads, total, record);
        std::printf("%-6d %-7d %-10s %10.2f %12.3f\n", round, threads, method, rate, cpu);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
