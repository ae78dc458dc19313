// shardpack bench DST: the loader's throughput from the page cache into its ring, against
// a plain memcpy of the same bytes by the same number of threads, measured in the same
// run; the resident set across epochs; with a GPU, host-to-device bandwidth against a bare
// pinned cudaMemcpyAsync loop and the overlap of copies with compute.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/cuda.h"
#include "io/memory_budget.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "shardpack/status.h"
#include "tools/commands.h"
#include "tools/output.h"
#include "util/cpu.h"

namespace shardpack::cli {
namespace {

// The CPU features the kernels dispatch on (util/cpu.h), as bench prints them: a build that
// lost its SIMD kernels (the wheel once did) shows here, not only in its rates.
std::string CpuFeatures() {
  const cpu::Features& f = cpu::Get();
  std::string names;
  for (const auto& [has, name] : {std::pair{f.sse42, "sse4.2"},
                                  {f.pclmul, "pclmul"},
                                  {f.avx2, "avx2"},
                                  {f.vpclmulqdq, "vpclmulqdq"},
                                  {f.avx512f, "avx512f"},
                                  {f.avx512bw, "avx512bw"},
                                  {f.avx512vl, "avx512vl"},
                                  {f.avx512vnni, "avx512vnni"},
                                  {f.avx512vbmi, "avx512vbmi"}}) {
    if (!has) continue;
    if (!names.empty()) names += ' ';
    names += name;
  }
  return names.empty() ? "none (the portable kernels)" : names;
}

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Resident set of this process, from /proc/self/status, in bytes.
struct Rss {
  uint64_t total = 0, anon = 0, file = 0;
};

Rss ReadRss() {
  Rss r;
  std::ifstream in("/proc/self/status");
  std::string key;
  uint64_t kb;
  std::string unit;
  while (in >> key) {
    if (key == "VmRSS:" || key == "RssAnon:" || key == "RssFile:") {
      in >> kb >> unit;
      (key == "VmRSS:" ? r.total : key == "RssAnon:" ? r.anon : r.file) = kb * 1024;
    } else {
      in.ignore(1 << 20, '\n');
    }
  }
  return r;
}

struct Args {
  std::string dst;
  std::vector<int> threads = {1, 2};
  std::vector<std::string> shuffles = {"global", "block"};
  int epochs = 5;
  int batch_size = 256;
  int prefetch = 2;
  int device = -1;
  bool no_crc = false;
  uint64_t read_ahead = LoaderOptions{}.read_ahead_bytes;
  std::string io = "auto";
  std::string huge_pages = "auto";
  int io_depth = LoaderOptions{}.io_depth;
  uint64_t io_buffer = LoaderOptions{}.io_buffer_bytes;
  std::string io_queue = "auto";
  bool io_cached = false;
  bool baseline = true;
};

// A name the option's check (EnumCheck) let through.
template <typename E>
E Parsed(const std::string& name) {
  return ParseEnum<E>(name, "").value();
}

// The loader's options for one measurement (the host path; RunGpu adds the device).
LoaderOptions OptionsOf(const Args& a, int threads, const std::string& shuffle) {
  LoaderOptions o;
  o.batch_size = a.batch_size;
  o.prefetch = a.prefetch;
  o.num_threads = threads;
  o.shuffle = Parsed<ShuffleMode>(shuffle);
  o.verify_crc = !a.no_crc;
  o.read_ahead_bytes = a.read_ahead;
  o.io = Parsed<IoPath>(a.io);
  o.huge_pages = Parsed<HugePages>(a.huge_pages);
  o.io_depth = a.io_depth;
  o.io_buffer_bytes = a.io_buffer;
  o.io_queue = Parsed<IoQueue>(a.io_queue);
  o.io_bypass_cache = !a.io_cached;
  return o;
}

// The baseline: `threads` threads memcpy the epoch's samples, in the loader's order and
// from the same mapped pages, into a buffer the size of the loader's ring.
double MemcpyEpoch(const std::vector<std::span<const uint8_t>>& samples, int threads,
                   size_t ring_bytes) {
  std::vector<std::vector<uint8_t>> rings(threads);
  for (auto& r : rings) r.assign(ring_bytes, 0);
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const size_t begin = samples.size() * t / threads;
      const size_t end = samples.size() * (t + 1) / threads;
      uint8_t* ring = rings[t].data();
      size_t at = 0;
      for (size_t i = begin; i < end; ++i) {
        const auto& s = samples[i];
        if (at + s.size() > ring_bytes) at = 0;
        std::memcpy(ring + at, s.data(), s.size());
        at += s.size();
      }
    });
  }
  for (auto& th : pool) th.join();
  return Since(t0);
}

// One epoch on the GPU path: the consumer's stream waits for each batch, optionally runs
// `compute_ns` of stand-in compute on it, and the batch is released (its slot is reused
// after the consumer's work). Returns the wall time until the consumer's stream is done.
StatusOr<double> GpuEpoch(Loader& loader, uint64_t epoch, void* consumer, uint64_t compute_ns) {
  SHARDPACK_RETURN_IF_ERROR(loader.StartEpoch(epoch));
  const auto t0 = Clock::now();
  while (true) {
    auto b = loader.Next();
    if (!b.ok()) {
      if (b.status().code() != StatusCode::kOutOfRange) return b.status();
      break;
    }
    SHARDPACK_RETURN_IF_ERROR(b->WaitOn(consumer));
    if (compute_ns > 0) SHARDPACK_RETURN_IF_ERROR(cuda::SpinAsync(consumer, compute_ns));
  }
  SHARDPACK_RETURN_IF_ERROR(cuda::StreamSynchronize(consumer));
  return Since(t0);
}

// The GPU part: the loader's host-to-device delivery against a bare pinned
// cudaMemcpyAsync loop of the same batch size, and how well copies overlap compute.
int RunGpu(const Args& a, std::shared_ptr<const Dataset> ds, size_t batch_bytes) {
  auto fail = [](const Status& s) {
    Print(stderr, "shardpack bench: %s\n", s.ToString());
    return kExitUsage;
  };
  if (Status s = cuda::CheckDevice(a.device); !s.ok()) return fail(s);
  auto stream = cuda::Stream::Create(a.device);
  auto pinned = cuda::PinnedBuffer::Allocate(batch_bytes);
  auto target = cuda::DeviceBuffer::Allocate(a.device, batch_bytes);
  auto start = cuda::Event::CreateTimed(a.device);
  auto end = cuda::Event::CreateTimed(a.device);
  for (const Status& s :
       {stream.status(), pinned.status(), target.status(), start.status(), end.status()}) {
    if (!s.ok()) return fail(s);
  }
  std::memset(pinned->data(), 1, batch_bytes);
  // The baseline: the same batch copied again and again from pinned memory; the median of
  // five timed runs after a warm-up.
  constexpr int kCopies = 64;
  std::vector<double> bare;
  for (int rep = 0; rep < 6; ++rep) {
    Status s = start->Record(stream->get());
    for (int i = 0; i < kCopies && s.ok(); ++i) {
      s = cuda::CopyToDeviceAsync(target->data(), pinned->data(), batch_bytes, stream->get());
    }
    if (s.ok()) s = end->Record(stream->get());
    if (s.ok()) s = end->Synchronize();
    StatusOr<float> ms = s.ok() ? cuda::ElapsedMs(*start, *end) : StatusOr<float>(s);
    if (!ms.ok()) return fail(ms.status());
    if (rep > 0) bare.push_back(static_cast<double>(kCopies) * batch_bytes / (*ms / 1e3) / 1e9);
  }
  std::sort(bare.begin(), bare.end());
  const double bare_gbs = bare[bare.size() / 2];

  const int threads = *std::max_element(a.threads.begin(), a.threads.end());
  LoaderOptions o = OptionsOf(a, threads, a.shuffles.front());
  o.device = a.device;
  auto loader = Loader::Create(ds, o);
  if (!loader.ok()) return fail(loader.status());
  auto consumer = cuda::Stream::Create(a.device);
  if (!consumer.ok()) return fail(consumer.status());
  const double batches = static_cast<double>((*loader)->batches_per_epoch());
  const double epoch_gb =
      static_cast<double>(ds->size()) * static_cast<double>(batch_bytes / a.batch_size) / 1e9;
  std::vector<double> alone;
  for (int e = 0; e < a.epochs; ++e) {
    StatusOr<double> t = GpuEpoch(**loader, e, consumer->get(), 0);
    if (!t.ok()) return fail(t.status());
    if (e > 0 || a.epochs == 1) alone.push_back(*t);
  }
  std::sort(alone.begin(), alone.end());
  const double loader_s = alone[alone.size() / 2];
  // Stand-in compute as long per batch as the loader takes per batch: serial execution
  // would take twice the time, perfect overlap the time of either.
  const uint64_t compute_ns = static_cast<uint64_t>(loader_s / batches * 1e9);
  std::vector<double> together;
  for (int e = 0; e < std::max(2, a.epochs); ++e) {
    StatusOr<double> t = GpuEpoch(**loader, a.epochs + e, consumer->get(), compute_ns);
    if (!t.ok()) return fail(t.status());
    if (e > 0) together.push_back(*t);
  }
  std::sort(together.begin(), together.end());
  const double both_s = together[together.size() / 2];
  const double compute_s = batches * static_cast<double>(compute_ns) / 1e9;
  const double overlap = (loader_s + compute_s - both_s) / std::min(loader_s, compute_s);
  Print(stdout,
        "\nGPU %d, %d threads, %s shuffle: the loader delivers %.0f samples/s = %.2f GB/s to "
        "the device; a bare pinned cudaMemcpyAsync loop of %.1f MB batches: %.2f GB/s; "
        "ratio %.2f\n",
        a.device, threads, a.shuffles.front(), ds->size() / loader_s, epoch_gb / loader_s,
        batch_bytes / 1e6, bare_gbs, epoch_gb / loader_s / bare_gbs);
  Print(stdout,
        "overlap with %.2f ms of stand-in compute per batch: epoch %.3f s (loader alone %.3f s, "
        "compute alone %.3f s, serial would take %.3f s): overlap %.0f%%\n",
        compute_ns / 1e6, both_s, loader_s, compute_s, loader_s + compute_s,
        100.0 * std::clamp(overlap, 0.0, 1.0));
  return kExitOk;
}

int Run(const Args& a) {
  auto opened = Dataset::Open(a.dst);
  if (!opened.ok()) {
    Print(stderr, "shardpack bench: %s\n", opened.status().message());
    return OpenExitCode(opened.status(), a.dst);
  }
  std::shared_ptr<const Dataset> ds(std::move(opened).value());
  DatasetOptions raw_options;
  raw_options.verify_crc = false;
  auto raw = Dataset::Open(a.dst, raw_options);
  if (!raw.ok()) {
    Print(stderr, "shardpack bench: %s\n", raw.status().message());
    return OpenExitCode(raw.status(), a.dst);
  }
  const Manifest& m = ds->manifest();
  if (!m.image.fixed()) {
    Print(stderr, "shardpack bench: %s: the benchmark needs a fixed-size dataset\n", a.dst);
    return kExitUsage;
  }
  if (ds->size() == 0) {
    Print(stderr, "shardpack bench: %s: the dataset holds no sample: nothing to measure\n", a.dst);
    return kExitUsage;
  }
  const size_t sample_bytes =
      static_cast<size_t>(m.image.height) * m.image.width * m.image.channels;
  // The loader's ring, and as much again for the memcpy baseline's copies of the samples:
  // both are held at once, so both are checked against the memory available before
  // either is allocated (the loader checks its own too, shardpack/loader.h).
  const unsigned __int128 ring =
      static_cast<unsigned __int128>(a.batch_size) * sample_bytes * (a.prefetch + 2);
  const bool baseline = a.baseline && m.image.encoding == ImageEncoding::kRaw;
  const unsigned __int128 need = ring * (baseline ? 2 : 1);
  if (Status fits = io::CheckMemory(
          need > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(need), io::MemoryBudget(),
          baseline ? "the ring, with the memcpy baseline's copy of it," : "the ring",
          "--batch-size " + std::to_string(a.batch_size) + " x (--prefetch " +
              std::to_string(a.prefetch) + " + 2) batches of " + std::to_string(sample_bytes) +
              "-byte samples" + (baseline ? ", twice" : ""),
          "choose a smaller batch or prefetch");
      !fits.ok()) {
    Print(stderr, "shardpack bench: %s\n", fits.message());
    return kExitUsage;
  }
  const size_t ring_bytes = static_cast<size_t>(ring);
  if (static_cast<uint64_t>(a.batch_size) > ds->size()) {
    Print(stderr,
          "shardpack bench: --batch-size %d is larger than the dataset (%llu samples): "
          "an epoch would not fill one batch\n",
          a.batch_size, static_cast<unsigned long long>(ds->size()));
    return kExitUsage;
  }
  // A memcpy of the stored bytes says nothing about decoding them.
  if (a.baseline && !baseline) {
    Print(stdout,
          "encoded images (%s): no memcpy baseline; the GB/s columns count decoded "
          "pixels\n",
          std::string(ImageEncodingName(m.image.encoding)));
  }
  const double gb = static_cast<double>(ds->size() * sample_bytes) / 1e9;
  Print(stdout,
        "dataset %s: %s, %llu samples of %dx%dx%d, %.2f GB of pixels; batch %d, "
        "prefetch %d (ring %.1f MB), CRC %s, %d epochs per run\n",
        a.dst, m.backend == Backend::kTfrecord ? "tfrecord" : "lmdb",
        static_cast<unsigned long long>(ds->size()), m.image.height, m.image.width,
        m.image.channels, gb, a.batch_size, a.prefetch, ring_bytes / 1e6, a.no_crc ? "off" : "on",
        a.epochs);
  Print(stdout, "CPU features the kernels use: %s\n", CpuFeatures());
  Print(stdout,
        "\n| shuffle | threads | loader samples/s | loader GB/s | memcpy GB/s | ratio | "
        "first epoch GB/s | RSS anon growth (MB) over epochs | RSS file (MB) | I/O path |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n");
  int status = kExitOk;
  for (const std::string& shuffle : a.shuffles) {
    for (int threads : a.threads) {
      const LoaderOptions o = OptionsOf(a, threads, shuffle);
      const Rss before = ReadRss();
      auto loader = Loader::Create(ds, o);
      if (!loader.ok()) {
        Print(stderr, "shardpack bench: %s\n", loader.status().message());
        return kExitUsage;
      }
      // The baseline copies the samples of epoch 0's order from a mapping of its own.
      const std::vector<uint64_t> order =
          baseline ? (*loader)->EpochOrder(0) : std::vector<uint64_t>();
      std::vector<std::span<const uint8_t>> samples;
      samples.reserve(order.size());
      for (uint64_t i : order) {
        SampleView v;
        Status got = (*raw)->Get(i, &v);
        if (!got.ok()) {
          Print(stderr, "shardpack bench: %s\n", got.message());
          return kExitFaults;
        }
        samples.push_back(v.pixels);
      }
      // Loader epochs and memcpy passes alternate, so that both see the same machine; each
      // pair gives a ratio. The first of each is a warm-up (pages mapped, caches filled).
      std::vector<double> seconds;
      std::vector<double> copy_seconds;
      std::vector<double> ratios;
      std::vector<double> anon_growth;
      Rss last;
      for (int e = 0; e < a.epochs; ++e) {
        if (e > 0) (void)(*loader)->StartEpoch(e);
        const auto t0 = Clock::now();
        while (true) {
          auto b = (*loader)->Next();
          if (!b.ok()) {
            if (b.status().code() != StatusCode::kOutOfRange) {
              Print(stderr, "shardpack bench: %s\n", b.status().message());
              return kExitFaults;
            }
            break;
          }
        }
        seconds.push_back(Since(t0));
        last = ReadRss();
        anon_growth.push_back((static_cast<double>(last.anon) - before.anon) / 1e6);
        if (baseline) copy_seconds.push_back(MemcpyEpoch(samples, threads, ring_bytes / threads));
        // The baseline's reads of a shard that shrank meanwhile found zeros, not the file.
        for (uint64_t i : order) {
          Status intact = (*raw)->CheckIntact(i);
          if (!intact.ok()) {
            Print(stderr, "shardpack bench: %s\n", intact.message());
            return kExitFaults;
          }
        }
        if (baseline && (e > 0 || a.epochs == 1)) {
          ratios.push_back(copy_seconds.back() / seconds.back());
        }
      }
      auto median_after_first = [](std::vector<double> v) {
        if (v.size() > 1) v.erase(v.begin());
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double loader_s = median_after_first(seconds);
      const double loader_gbs = gb / loader_s;
      const double copy_gbs = baseline ? gb / median_after_first(copy_seconds) : 0;
      std::sort(ratios.begin(), ratios.end());
      const double ratio = baseline ? ratios[ratios.size() / 2] : 0;
      std::string growth;
      for (double g : anon_growth) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.0f", growth.empty() ? "" : " ", g);
        growth += buf;
      }
      const LoaderStats stats = (*loader)->stats();
      std::string io = stats.io;
      if (stats.bytes_found_missing > 0) {
        char buf[96];
        std::snprintf(buf, sizeof(buf), "; %.1f MB found outside the page cache, read ahead",
                      stats.bytes_found_missing / 1e6);
        io += buf;
      }
      Print(stdout, "| %s | %d | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %.0f | %s |\n", shuffle,
            threads, ds->size() / loader_s, loader_gbs, copy_gbs, ratio, gb / seconds[0], growth,
            last.file / 1e6, io);
      std::fflush(stdout);
    }
  }
  if (a.device >= 0) {
    const int gpu = RunGpu(a, ds, static_cast<size_t>(a.batch_size) * sample_bytes);
    if (gpu != kExitOk) return gpu;
  }
  Print(stdout,
        "\nratio: loader epochs alternate with memcpy passes of the same samples (in epoch "
        "0's order, from a mapping of their own) by the same number of threads; the ratio is "
        "the median over the pairs after the first, the GB/s columns the medians of each. "
        "RSS anon growth: anonymous memory above what the process had before "
        "the loader was created, after each epoch (the ring is %.1f MB). RSS file: shard "
        "pages mapped by the process (shared page cache, not a copy).\n",
        ring_bytes / 1e6);
  return status;
}

}  // namespace

std::function<int()> AddBench(CLI::App& app) {
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Measure the loader from the page cache into its ring against memcpy");
  cmd->add_option("DST", a->dst, "Dataset directory (holding manifest.json)")->required();
  cmd->add_option("--threads", a->threads, "Worker thread counts to measure")
      ->delimiter(',')
      ->check(Integer<int>(1, kMaxThreads));
  cmd->add_option("--shuffle", a->shuffles, "Shuffle modes to measure: none, global, block")
      ->delimiter(',')
      ->check(EnumCheck<ShuffleMode>());
  cmd->add_option("--epochs", a->epochs, "Epochs per measurement (the first is reported apart)")
      ->check(Integer<int>(1, 1000));
  cmd->add_option("--batch-size", a->batch_size, "Samples per batch")->check(Integer<int>(1));
  cmd->add_option("--prefetch", a->prefetch, "Batches prepared ahead")
      ->check(Integer<int>(1, kMaxPrefetch));
  cmd->add_option("--device", a->device, "CUDA device, -1 for the host path")
      ->check(Integer<int>(-1, 1024));
  cmd->add_flag("--no-crc", a->no_crc, "Do not check record checksums");
  cmd->add_option("--read-ahead", a->read_ahead,
                  "Bytes of upcoming samples read ahead (mapped: asked of the kernel, 0: off; "
                  "readahead: the buffers' budget)")
      ->check(Integer<uint64_t>())
      ->capture_default_str();
  cmd->add_option("--io", a->io, "I/O path: auto, mapped or readahead (docs/LOADER.md)")
      ->check(EnumCheck<IoPath>())
      ->capture_default_str();
  cmd->add_option("--huge-pages", a->huge_pages,
                  "Mapped path: read uncached pages 2 MiB at a time, so that the next process "
                  "maps them in 2 MiB entries: auto (where the dataset fits in memory and the "
                  "host does not take free memory back), on or off (docs/LOADER.md)")
      ->check(EnumCheck<HugePages>())
      ->capture_default_str();
  cmd->add_option("--io-depth", a->io_depth, "Read-ahead path: reads in flight")
      ->check(Integer<int>(1, kMaxIoDepth))
      ->capture_default_str();
  cmd->add_option("--io-buffer", a->io_buffer,
                  "Read-ahead path: bytes of buffers the records are read into (0: 384 MiB, "
                  "or three windows of blocks under --shuffle block, at most 1 GiB)")
      ->check(Integer<uint64_t>(0))
      ->capture_default_str();
  cmd->add_option("--io-queue", a->io_queue,
                  "Read-ahead path: auto (io_uring where the kernel allows it), uring or pread")
      ->check(EnumCheck<IoQueue>())
      ->capture_default_str();
  cmd->add_flag("--io-cached", a->io_cached,
                "Read-ahead path: read through the page cache (dropping each read's pages "
                "after it) instead of O_DIRECT");
  cmd->add_flag(
      "--no-baseline", [a](int64_t) { a->baseline = false; },
      "Skip the memcpy baseline (its reads of every record would fill the page cache "
      "of a dataset bigger than memory); the memcpy and ratio columns read 0");
  return [a] { return Run(*a); };
}

}  // namespace shardpack::cli
