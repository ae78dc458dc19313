// Micro-benchmarks of the per-byte work on the read, verify and convert paths (Google
// Benchmark).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/example.h"
#include "image/resize.h"
#include "image/resize_kernels.h"
#include "util/crc32c.h"
#include "util/hash.h"

namespace {

std::string Random(size_t n) {
  std::string s(n, '\0');
  std::mt19937_64 rng(1);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

void BM_Crc32c(benchmark::State& state) {
  std::string s = Random(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(shardpack::crc32c::Value(s));
  state.SetBytesProcessed(state.iterations() * s.size());
}
BENCHMARK(BM_Crc32c)->Arg(4096)->Arg(196608);

void BM_Crc32cPortable(benchmark::State& state) {
  std::string s = Random(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(shardpack::crc32c::ExtendPortable(0, s.data(), s.size()));
  }
  state.SetBytesProcessed(state.iterations() * s.size());
}
BENCHMARK(BM_Crc32cPortable)->Arg(196608);

void BM_Crc32cWith(benchmark::State& state) {
  auto impl = static_cast<shardpack::crc32c::Implementation>(state.range(0));
  if (!shardpack::crc32c::IsAvailable(impl)) {
    state.SkipWithError("not available on this CPU");
    return;
  }
  std::string s = Random(state.range(1));
  for (auto _ : state) {
    benchmark::DoNotOptimize(shardpack::crc32c::ExtendWith(impl, 0, s.data(), s.size()));
  }
  state.SetBytesProcessed(state.iterations() * s.size());
}
// 1: crc32 instruction (three streams), 2: AVX-512 VPCLMULQDQ folding, 3: AVX2 VPCLMULQDQ.
BENCHMARK(BM_Crc32cWith)->ArgsProduct({{1, 2, 3}, {1024, 4096, 196608}});

// The loader's copy of a sample into its batch: 196,608-byte records in random order out of
// 1 GiB (far beyond the caches) into a 64 MiB ring of slots, checksummed on the way
// (CopyAndExtendWith) or not (memcpy, the baseline). Arguments: the implementation (0
// memcpy alone, 1 crc32 instruction then memcpy in pieces, 2 AVX-512 fused, 3 AVX2 fused),
// then the stores (0 cached, 1 streaming). Run with --benchmark_filter=CopyAndExtend
// --benchmark_min_time=2; threads share the source, each has its own ring.
void BM_CopyAndExtend(benchmark::State& state) {
  constexpr size_t kRecord = 196608, kSource = size_t{1} << 30, kRing = size_t{64} << 20;
  static const std::vector<uint8_t> source = [] {
    std::vector<uint8_t> v(kSource);
    std::mt19937_64 rng(3);
    for (size_t i = 0; i < v.size(); i += 8) {
      const uint64_t r = rng();
      std::memcpy(&v[i], &r, 8);
    }
    return v;
  }();
  const auto impl = static_cast<shardpack::crc32c::Implementation>(state.range(0));
  if (state.range(0) != 0 && !shardpack::crc32c::IsAvailable(impl)) {
    state.SkipWithError("not available on this CPU");
    return;
  }
  const auto stores = state.range(1) != 0 ? shardpack::crc32c::CopyStores::kStreaming
                                          : shardpack::crc32c::CopyStores::kCached;
  std::vector<uint8_t> ring(kRing);
  std::mt19937_64 rng(17 + state.thread_index());
  size_t slot = 0;
  uint32_t crc = 0;
  for (auto _ : state) {
    const uint8_t* from = source.data() + (rng() % (kSource / kRecord)) * kRecord;
    uint8_t* to = ring.data() + slot * kRecord;
    slot = (slot + 1) % (kRing / kRecord);
    if (state.range(0) == 0) {
      std::memcpy(to, from, kRecord);
    } else {
      crc ^= shardpack::crc32c::CopyAndExtendWith(impl, 0, to, from, kRecord, stores);
    }
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(crc);
  state.SetBytesProcessed(state.iterations() * kRecord);
}
BENCHMARK(BM_CopyAndExtend)
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

void BM_Crc32cCombine(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(shardpack::crc32c::Combine(1, 2, 196608));
}
BENCHMARK(BM_Crc32cCombine);

void BM_Xxh3(benchmark::State& state) {
  std::string s = Random(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(shardpack::Xxh3Hex(s.data(), s.size()));
  state.SetBytesProcessed(state.iterations() * s.size());
}
BENCHMARK(BM_Xxh3)->Arg(196608);

void BM_ParseSample(benchmark::State& state) {
  std::string pixels = Random(256 * 256 * 3);
  std::string entries = shardpack::format::EncodeFeatureEntries(
      {256, 256, 3, 17, "n01440764", "n01440764/n01440764_10026.JPEG"},
      shardpack::crc32c::Value(pixels));
  std::string payload =
      shardpack::format::EncodePayloadPrefix(entries, pixels.size(), 12, 64) + pixels;
  for (auto _ : state) {
    shardpack::format::DecodedSample d;
    benchmark::DoNotOptimize(shardpack::format::ParseSample(
        reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &d));
  }
}
BENCHMARK(BM_ParseSample);

// The resize kernels for a benchmark's argument: 0 portable, 1 the best this CPU runs
// (AVX-512 VNNI, with VBMI transposes, or AVX2 where it has them), 2 AVX2 (the best where
// the CPU lacks VNNI), 3 the best with the AVX2 transposes (as on a CPU with VNNI and no
// VBMI), 4 the AVX2 vertical kernel with the best transposes. 1 to 4 are the four ways on
// a CPU with VNNI and VBMI: quads or pairs of taps, VBMI or AVX2 transposes.
void UseKernels(int64_t arg, shardpack::image::ResizeScratch* scratch) {
  if (arg == 0) shardpack::image::internal::UsePortableKernels(scratch);
  if (arg == 2) shardpack::image::internal::UseAvx2Kernels(scratch);
  if (arg == 3) shardpack::image::internal::UseAvx2Transposes(scratch);
  if (arg == 4) shardpack::image::internal::UseAvx2Sums(scratch);
}

// The converter's resize of a Caltech-sized photo (350x280 RGB) to 256x256 with
// --fit crop and Lanczos: the centred 350*256/280 x 280 box. Argument: UseKernels.
void BM_ResizeCrop(benchmark::State& state) {
  constexpr int kH = 280, kW = 350, kOut = 256;
  std::string src = Random(static_cast<size_t>(kH) * kW * 3);
  std::string out(static_cast<size_t>(kOut) * kOut * 3, '\0');
  shardpack::image::ResizeScratch scratch;
  UseKernels(state.range(0), &scratch);
  const float crop = static_cast<float>(kH);
  const float x0 = (kW - crop) * 0.5f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(shardpack::image::ResizeRegionInto(
        reinterpret_cast<const uint8_t*>(src.data()), kH, kW, 3, kW * 3, x0, 0.0f, x0 + crop,
        static_cast<float>(kH), kOut, kOut, shardpack::ResizeFilter::kLanczos3,
        reinterpret_cast<uint8_t*>(out.data()), kOut * 3, &scratch));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ResizeCrop)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Arg(4);

// The loader's random-resized-crop: 64 boxes of a 256x256 sample (area 8-100%, aspect
// 3/4-4/3, as torchvision draws them) to 224x224, bilinear; from upscaling 2.8x to
// shrinking 1.1x. Arg as for BM_ResizeCrop.
void BM_ResizeRandomCrop(benchmark::State& state) {
  constexpr int kSide = 256, kOut = 224;
  std::string src = Random(static_cast<size_t>(kSide) * kSide * 3);
  std::string out(static_cast<size_t>(kOut) * kOut * 3, '\0');
  shardpack::image::ResizeScratch scratch;
  UseKernels(state.range(0), &scratch);
  struct Box {
    float x0, y0, x1, y1;
  };
  std::vector<Box> boxes;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> area(0.08, 1.0),
      log_ratio(std::log(3.0 / 4), std::log(4.0 / 3));
  while (boxes.size() < 64) {
    const double a = area(rng) * kSide * kSide, r = std::exp(log_ratio(rng));
    const int w = static_cast<int>(std::lround(std::sqrt(a * r)));
    const int h = static_cast<int>(std::lround(std::sqrt(a / r)));
    if (w < 1 || h < 1 || w > kSide || h > kSide) continue;
    const int x = static_cast<int>(rng() % (kSide - w + 1)),
              y = static_cast<int>(rng() % (kSide - h + 1));
    boxes.push_back({static_cast<float>(x), static_cast<float>(y), static_cast<float>(x + w),
                     static_cast<float>(y + h)});
  }
  size_t i = 0;
  for (auto _ : state) {
    const Box& b = boxes[i++ % boxes.size()];
    benchmark::DoNotOptimize(shardpack::image::ResizeRegionInto(
        reinterpret_cast<const uint8_t*>(src.data()), kSide, kSide, 3, kSide * 3, b.x0, b.y0, b.x1,
        b.y1, kOut, kOut, shardpack::ResizeFilter::kBilinear,
        reinterpret_cast<uint8_t*>(out.data()), kOut * 3, &scratch));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ResizeRandomCrop)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Arg(4);

}  // namespace

BENCHMARK_MAIN();
