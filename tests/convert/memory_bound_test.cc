// The converter's peak memory is bounded by the images in flight (the pipeline's tokens),
// not by the size of the folder (docs/RELIABILITY.md §3).
//
// What is measured is the peak of the CLI's live heap (tests/convert/heap_peak.cc, preloaded
// into a process of its own): the most bytes allocated and not yet freed at once. It was
// the peak resident set, which also counts what glibc keeps after a free (per-thread arenas
// and a mmap threshold that rises as 12 MB blocks are freed, so freed images stay resident
// in whichever arena they came from) and file pages mapped: that depended on which thread
// freed what when, so on the scheduling, and a test running beside it on the same cores
// moved it past the bound (74.64 MB against 74.56 MB under ctest -j2; 62.8 MB alone). The
// heap peak counts only what the converter holds, which no other process can change.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "image_fixtures.h"
#include "test_util.h"

extern char** environ;

namespace shardpack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// The peak live heap (bytes) of the shardpack CLI run with `args`, in a process of its own
// with the heap_peak library preloaded; -1 when the run failed (the test fails too).
int64_t CliPeakHeap(std::vector<std::string> args, const TempDir& scratch) {
  const std::string peak_file = scratch.Join("heap-peak");
  args.insert(args.begin(), SHARDPACK_CLI);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text = {"LD_PRELOAD=" + std::string(SHARDPACK_HEAP_PEAK_LIB),
                                       "SHARDPACK_HEAP_PEAK_FILE=" + peak_file};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v(*e);
    if (!v.starts_with("LD_PRELOAD=") && !v.starts_with("SHARDPACK_HEAP_PEAK_FILE=")) {
      env_text.emplace_back(v);
    }
  }
  std::vector<char*> envp;
  for (std::string& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) _exit(126);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << args[1] << " failed: status " << status;
  std::error_code ec;
  if (!fs::exists(peak_file, ec)) {
    ADD_FAILURE() << "the heap_peak library wrote no " << peak_file;
    return -1;
  }
  const int64_t peak = std::stoll(testing::ReadFileOrDie(peak_file));
  fs::remove(peak_file, ec);
  return peak;
}

TEST(ConvertMemoryTest, PeakMemoryIsBoundedByTheImagesInFlightNotByTheFolder) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers replace malloc themselves: the preloaded counter cannot stand in front.
  GTEST_SKIP() << "the heap is the sanitizer's";
#endif
  if (std::string(SHARDPACK_HEAP_PEAK_LIB).empty()) GTEST_SKIP() << "no heap_peak library";
  // PNGs (no DCT scaling: each decodes at full size) of 2000 x 2000 RGB, 12 MB decoded.
  constexpr int kSide = 2000;
  constexpr int64_t kDecoded = int64_t{kSide} * kSide * 3;
  constexpr int kThreads = 2;
  const std::string png = testing::EncodePng(testing::Pattern(kSide, kSide, 3, 1), kSide, kSide, 3);
  const std::string tiny = testing::EncodePng(testing::Pattern(16, 16, 3, 1), 16, 16, 3);
  TempDir small, few, many, out, scratch;
  for (int i = 0; i < 30; ++i) {
    for (const TempDir* dir : {&small, &few, &many}) {
      if (dir != &many && i >= 4) continue;
      fs::create_directories(dir->Join("c"));
      testing::WriteFileOrDie(dir->Join("c/img" + std::to_string(i) + ".png"),
                              dir == &small ? tiny : png);
    }
  }
  int run = 0;
  auto convert = [&](const TempDir& src, int threads) {
    return CliPeakHeap({"convert", src.path(), out.Join("run" + std::to_string(run++)), "--size",
                        "32x32", "--threads", std::to_string(threads), "--quiet"},
                       scratch);
  };
  // What a conversion holds besides its images (the pipeline, the shard writer's chunk
  // buffer, the libraries' state), measured on images of 16 x 16, then what one worker
  // holds for an image of 2000 x 2000 above it (its file, the decoded pixels and the
  // decoder's and the resize's buffers), on 4 images and on 30.
  const int64_t base_one = convert(small, 1);
  const int64_t base_two = convert(small, kThreads);
  const int64_t one_few = convert(few, 1);
  const int64_t one_many = convert(many, 1);
  const int64_t two_many = convert(many, kThreads);
  const int64_t per_worker = one_few - base_one;
  std::printf(
      "peak live heap (MB): 16x16 images: %.1f with 1 thread, %.1f with %d; 2000x2000 images "
      "(%.1f MB decoded, %.2f MB files), 1 thread: 4 images %.1f, 30 images %.1f; %d threads, "
      "30 images: %.1f\n",
      base_one / 1e6, base_two / 1e6, kThreads, kDecoded / 1e6, png.size() / 1e6, one_few / 1e6,
      one_many / 1e6, kThreads, two_many / 1e6);
  ASSERT_GT(base_one, 0);
  // One worker takes one image at a time; the images done and waiting for the writer hold
  // only their 32 x 32 outputs (66 tokens of 3 KB). So a folder 7.5 times larger costs
  // nothing more: an unbounded pipeline would hold up to 30 images here. One worker, so
  // no interleaving to vary the figure.
  EXPECT_LE(one_many, one_few + (1 << 20))
      << "1 thread: 4 images " << one_few / 1e6 << " MB, 30 images " << one_many / 1e6 << " MB";
  // A worker holds its image and no more than a few copies' worth of buffers (about two
  // decoded images: the pixels, and the decoder's or the resize's working memory).
  EXPECT_GE(per_worker, kDecoded);
  EXPECT_LT(per_worker, 3 * kDecoded + static_cast<int64_t>(png.size()));
  // Each thread is such a worker, whatever the interleaving: with 2 threads at most twice
  // what one holds above the base, and 4 MiB for what more threads keep besides (the
  // outputs of twice the tokens, the shard writer's chunks being filled by both; 1.05 MB
  // measured), a third of what one more image in flight would add.
  EXPECT_LE(two_many, base_two + kThreads * per_worker + (4 << 20))
      << kThreads << " threads, 30 images: " << two_many / 1e6 << " MB; one worker "
      << per_worker / 1e6 << " MB";
}

}  // namespace
}  // namespace shardpack
