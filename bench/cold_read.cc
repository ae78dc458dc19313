// How a random-order read of shards through their mappings fills the page cache, and what
// that leaves for the next process (docs/LOADER.md, "The first epoch from the page cache").
// The shards of DIR (*.tfrecord) are cut into pieces of about one record (RECORD bytes,
// default 196,928: a 256x256x3 sample), read in one seeded random order by THREADS threads
// that copy each piece into a buffer of their own, EPOCHS times:
//
//   hints  the loader's way until 2026-11-27 (it now maps a record by faults, not by a
//          populate): the mappings advised MADV_RANDOM; the pieces AHEAD bytes
//          (default 128 MiB) ahead of the readers are hinted with MADV_WILLNEED (read in
//          the background, in 4 KiB pages), each piece's first read maps it with one
//          MADV_POPULATE_READ, then it is copied;
//   huge   the mappings also advised MADV_HUGEPAGE, and POPULATORS threads (default 8)
//          populate the pieces up to AHEAD bytes ahead of the readers (MADV_POPULATE_READ:
//          a fault on an uncached page reads the 2 MiB around it into one folio); the
//          readers wait for their piece, then copy it.
//
// Prints each epoch's GB/s (the first apart) and, at the end, how much of the shards the
// process mapped 2 MiB per entry (FilePmdMapped). Run it after dropping the page cache to
// see the cold epoch, then again (MODE hints) to see the next process's first epoch
// against its later ones.
// Usage: cold_read MODE DIR [THREADS=2] [POPULATORS=8] [EPOCHS=1] [AHEAD_MIB=128] [RECORD]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "io/env.h"
#include "io/mapped_range.h"

namespace {

struct Piece {
  const uint8_t* data;
  size_t bytes;
};

long FilePmdMappedKib() {
  std::ifstream f("/proc/self/smaps_rollup");
  std::string key;
  long value = 0;
  while (f >> key) {
    if (key == "FilePmdMapped:") {
      f >> value;
      return value;
    }
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: cold_read hints|huge DIR [THREADS=2] [POPULATORS=8] [EPOCHS=1] "
                 "[AHEAD_MIB=128] [RECORD=196928]\n");
    return 2;
  }
  const std::string mode = argv[1];
  const bool huge = mode == "huge";
  if (!huge && mode != "hints") {
    std::fprintf(stderr, "cold_read: MODE is hints or huge, not %s\n", mode.c_str());
    return 2;
  }
  const int threads = argc > 3 ? std::atoi(argv[3]) : 2;
  const int populators = argc > 4 ? std::atoi(argv[4]) : 8;
  const int epochs = argc > 5 ? std::atoi(argv[5]) : 1;
  const size_t ahead_bytes = (argc > 6 ? std::strtoull(argv[6], nullptr, 10) : 128) << 20;
  const size_t record = argc > 7 ? std::strtoull(argv[7], nullptr, 10) : 196928;

  std::vector<std::string> paths;
  for (const auto& e : std::filesystem::directory_iterator(argv[2])) {
    if (e.path().extension() == ".tfrecord") paths.push_back(e.path());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    std::fprintf(stderr, "cold_read: no .tfrecord file in %s\n", argv[2]);
    return 2;
  }
  std::vector<std::unique_ptr<shardpack::io::MappedFile>> files;
  std::vector<Piece> pieces;
  size_t total = 0;
  for (const std::string& p : paths) {
    auto f = shardpack::io::Env::Posix()->MapFile(p, shardpack::io::AccessPattern::kRandom);
    if (!f.ok()) {
      std::fprintf(stderr, "cold_read: %s\n", f.status().ToString().c_str());
      return 1;
    }
    const uint8_t* base = (*f)->data();
    const size_t size = (*f)->size();
    if (huge) (*f)->PreferHugePages();
    const size_t n = std::max<size_t>(1, (size + record / 2) / record);
    for (size_t i = 0; i < n; ++i) {
      const size_t begin = size * i / n;
      const size_t end = size * (i + 1) / n;
      pieces.push_back({base + begin, end - begin});
    }
    total += size;
    files.push_back(std::move(*f));
  }
  std::vector<size_t> order(pieces.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  const size_t ahead = std::max<size_t>(1, ahead_bytes / record);
  std::printf(
      "cold_read %s: %zu files, %.2f GB, %zu pieces, %d threads, %d populators, %zu "
      "pieces ahead\n",
      mode.c_str(), files.size(), total / 1e9, pieces.size(), threads, huge ? populators : 0,
      ahead);

  std::unique_ptr<std::atomic<uint8_t>[]> ready(new std::atomic<uint8_t>[pieces.size()]());
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    std::atomic<size_t> next{0}, hinted{0}, next_populate{0};
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    if (huge && epoch == 1) {
      for (int p = 0; p < populators; ++p) {
        pool.emplace_back([&] {
          for (;;) {
            const size_t k = next_populate.fetch_add(1);
            if (k >= order.size()) return;
            // The readers wait for every piece, so this wait always ends.
            while (k > next.load(std::memory_order_relaxed) + ahead) {
              std::this_thread::yield();
            }
            const Piece& piece = pieces[order[k]];
            shardpack::io::PopulatePages(piece.data, piece.bytes);
            ready[k].store(1, std::memory_order_release);
            ready[k].notify_all();
          }
        });
      }
    }
    std::vector<std::thread> readers;
    for (int t = 0; t < threads; ++t) {
      readers.emplace_back([&] {
        std::vector<uint8_t> buffer(record * 2);
        for (;;) {
          const size_t k = next.fetch_add(1);
          if (k >= order.size()) return;
          const Piece& piece = pieces[order[k]];
          if (epoch == 1) {
            if (huge) {
              ready[k].wait(0, std::memory_order_acquire);
            } else {
              // Hint up to `ahead` pieces past this one, once each.
              size_t h = hinted.load();
              const size_t want = std::min(order.size(), k + ahead);
              while (h < want && !hinted.compare_exchange_weak(h, want)) {
              }
              for (size_t j = h; j < want; ++j) {
                shardpack::io::WillNeedPages(pieces[order[j]].data, pieces[order[j]].bytes);
              }
              shardpack::io::PopulatePages(piece.data, piece.bytes);
            }
          }
          if (buffer.size() < piece.bytes) buffer.resize(piece.bytes);
          std::memcpy(buffer.data(), piece.data, piece.bytes);
        }
      });
    }
    for (auto& r : readers) r.join();
    for (auto& p : pool) p.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %d: %.2f GB/s (%.2f s)\n", epoch, total / s / 1e9, s);
    std::fflush(stdout);
  }
  std::printf("FilePmdMapped: %ld MB of %.0f MB\n", FilePmdMappedKib() / 1024, total / 1e6);
  return 0;
}
