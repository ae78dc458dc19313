// The converter's peak memory is bounded by the images in flight (the pipeline's tokens),
// not by the size of the folder (docs/RELIABILITY.md §3).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "image_fixtures.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// Peak resident set (bytes) of the shardpack CLI run with `args`, in a process of its own
// (a fresh process: no test's threads or heap in the figure).
int64_t CliPeakRss(std::vector<std::string> args) {
  args.insert(args.begin(), SHARDPACK_CLI);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  EXPECT_EQ(wait4(pid, &status, 0, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << args[1] << " failed: status " << status;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

TEST(ConvertMemoryTest, PeakMemoryIsBoundedByTheImagesInFlightNotByTheFolder) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // ASan keeps freed memory in quarantine (256 MB) and TSan shadows it: RSS is theirs.
  GTEST_SKIP() << "peak RSS means nothing under a sanitizer";
#endif
  // PNGs (no DCT scaling: each decodes at full size) of 2000 x 2000 RGB, 12 MB decoded.
  constexpr int kSide = 2000;
  constexpr int64_t kDecoded = int64_t{kSide} * kSide * 3;
  const std::string png = testing::EncodePng(testing::Pattern(kSide, kSide, 3, 1), kSide, kSide, 3);
  TempDir few, many, out;
  for (int i = 0; i < 30; ++i) {
    for (const TempDir* dir : {&few, &many}) {
      if (dir == &few && i >= 4) continue;
      fs::create_directories(dir->Join("c"));
      testing::WriteFileOrDie(dir->Join("c/img" + std::to_string(i) + ".png"), png);
    }
  }
  auto convert = [&](const TempDir& src, const std::string& name) {
    return CliPeakRss(
        {"convert", src.path(), out.Join(name), "--size", "32x32", "--threads", "2", "--quiet"});
  };
  const int64_t base = CliPeakRss({"--version"});
  const int64_t peak_few = convert(few, "few") - base;
  const int64_t peak_many = convert(many, "many") - base;
  std::printf("peak RSS above a bare process: 4 images %.1f MB, 30 images %.1f MB\n",
              peak_few / 1e6, peak_many / 1e6);
  // Each thread holds one decoded image (and its file and resize rows) at a time; the
  // 2 * threads + 2 tokens in flight hold only 32 x 32 results. 30 images must not cost
  // more than 4: an unbounded pipeline would hold up to 30 x 12 MB here. The allowance is
  // three decoded images: whether the two threads of the 4-image run ever decode at once
  // differs from run to run (39.1 and 50.9 MB above a bare process seen, 30 images: 63 MB).
  EXPECT_LT(peak_many, peak_few + 3 * kDecoded)
      << "4 images: " << peak_few / 1e6 << " MB, 30 images: " << peak_many / 1e6 << " MB";
  EXPECT_LT(peak_many, (2 * 2 + 2) * kDecoded + (64 << 20)) << peak_many / 1e6 << " MB";
}

}  // namespace
}  // namespace shardpack
