// Interrupted conversions: resumed, the result is byte-identical to an uninterrupted run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>

#include "image_fixtures.h"
#include "shardpack/convert.h"
#include "shardpack/verify.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

// Source images: `n` JPEGs in 3 classes, and every 10th a broken file.
void MakeSource(const std::string& root, int n, int side) {
  for (int i = 0; i < n; ++i) {
    fs::path dir = fs::path(root) / ("class" + std::to_string(i % 3));
    fs::create_directories(dir);
    std::string jpg =
        testing::EncodeJpeg(testing::Pattern(side, side + i % 7, 3, i), side, side + i % 7, 3);
    if (i % 10 == 9) jpg = jpg.substr(0, jpg.size() / 2);
    testing::WriteFileOrDie((dir / ("img" + std::to_string(i) + ".jpg")).string(), jpg);
  }
}

ConvertOptions Options() {
  ConvertOptions o;
  o.height = 24;
  o.width = 24;
  o.max_shard_records = 3;
  o.shuffle = true;
  o.seed = 11;
  return o;
}

// Every file of a finished dataset directory, by name.
std::map<std::string, std::string> Files(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out[e.path().filename().string()] = testing::ReadFileOrDie(e.path().string());
  }
  return out;
}

TEST(ResumeTest, ResumedAfterAnAbortIsByteIdenticalToAnUninterruptedRun) {
  TempDir src, ref, out;
  MakeSource(src.path(), 40, 32);
  ConvertOptions o = Options();
  ASSERT_TRUE(Convert(src.path(), ref.path(), o).ok());
  // Abort part-way: the 3rd reject (of 4) stops the run after some shards are staged.
  o.max_rejects = 2;
  auto aborted = Convert(src.path(), out.path(), o);
  ASSERT_FALSE(aborted.ok());
  ASSERT_TRUE(fs::exists(out.Join(".shardpack-convert.json")));
  EXPECT_FALSE(fs::exists(out.Join("manifest.json")));
  o.max_rejects = UINT64_MAX;
  auto plain = Convert(src.path(), out.path(), o);
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(plain.status().message().find("resume"), std::string::npos);
  o.resume = true;
  auto resumed = Convert(src.path(), out.path(), o);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_GT(resumed->resumed_from, 0u);
  EXPECT_EQ(resumed->inputs, resumed->written + resumed->rejected);
  EXPECT_EQ(Files(out.path()), Files(ref.path()));
  // Resuming a complete dataset changes nothing.
  auto again = Convert(src.path(), out.path(), o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->written, resumed->written);
  EXPECT_EQ(Files(out.path()), Files(ref.path()));
}

TEST(ResumeTest, ProgressOfAnotherConversionIsRefused) {
  TempDir src, out;
  MakeSource(src.path(), 30, 32);
  ConvertOptions o = Options();
  o.max_rejects = 1;
  ASSERT_FALSE(Convert(src.path(), out.path(), o).ok());
  o.max_rejects = UINT64_MAX;
  o.resume = true;
  o.seed = 12;  // other options: other output bytes
  auto r = Convert(src.path(), out.path(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("other inputs or options"), std::string::npos);
}

TEST(ResumeTest, LeftoversWithoutProgressAreRemovedAndTheRunStartsOver) {
  TempDir src, ref, out;
  MakeSource(src.path(), 12, 32);
  ASSERT_TRUE(Convert(src.path(), ref.path(), Options()).ok());
  testing::WriteFileOrDie(out.Join("shard-00000.tfrecord.tmp"), "half a shard");
  testing::WriteFileOrDie(out.Join("shard-00000.tfrecord"), "not ours to trust");
  ConvertOptions o = Options();
  o.resume = true;
  ASSERT_TRUE(Convert(src.path(), out.path(), o).ok());
  EXPECT_EQ(Files(out.path()), Files(ref.path()));
}

TEST(ResumeTest, ProgressLeftBesideAPublishedManifestIsRemovedOnResume) {
  // A kill between publishing the manifest and removing the progress record.
  TempDir src, ref, out;
  MakeSource(src.path(), 12, 32);
  ASSERT_TRUE(Convert(src.path(), ref.path(), Options()).ok());
  ASSERT_TRUE(Convert(src.path(), out.path(), Options()).ok());
  testing::WriteFileOrDie(out.Join(".shardpack-convert.json"), "{\"stale\": true}");
  ConvertOptions o = Options();
  o.resume = true;
  auto summary = Convert(src.path(), out.path(), o);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(Files(out.path()), Files(ref.path()));
}

TEST(ResumeTest, ACompleteDatasetOfOtherInputsOrOptionsIsRefusedNamingWhatChanged) {
  TempDir src, out;
  MakeSource(src.path(), 12, 32);
  ASSERT_TRUE(Convert(src.path(), out.path(), Options()).ok());
  const auto before = Files(out.path());
  ConvertOptions o = Options();
  o.resume = true;
  o.filter = ResizeFilter::kArea;
  auto r = Convert(src.path(), out.path(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("other options (filter: \"lanczos3\" -> \"area\")"),
            std::string::npos)
      << r.status().message();
  o.filter = Options().filter;
  testing::WriteFileOrDie(src.Join("class0/new.jpg"),
                          testing::EncodeJpeg(testing::Pattern(32, 32, 3, 99), 32, 32, 3));
  r = Convert(src.path(), out.path(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("other inputs"), std::string::npos) << r.status().message();
  fs::remove(src.Join("class0/new.jpg"));
  r = Convert(src.path(), out.path(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->already_complete);
  EXPECT_EQ(Files(out.path()), before) << "nothing changes";
}

TEST(ResumeTest, OverwriteKeepsTheOldDatasetUntilTheNewOneIsPublished) {
  TempDir src, out;
  MakeSource(src.path(), 30, 32);
  ConvertOptions o = Options();
  ASSERT_TRUE(Convert(src.path(), out.path(), o).ok());
  const auto old_files = Files(out.path());
  // A failing replacement (too many rejects part-way) puts the old dataset back.
  ConvertOptions replace = Options();
  replace.overwrite = true;
  replace.height = replace.width = 16;
  replace.max_rejects = 1;
  ASSERT_FALSE(Convert(src.path(), out.path(), replace).ok());
  EXPECT_EQ(Files(out.path()), old_files);

  // A replacement killed part-way leaves the old dataset set aside: the next overwrite
  // puts it back before setting it aside again, and removes it once its own is published.
  const std::string aside = out.Join(".shardpack-replaced");
  fs::create_directory(aside);
  for (const auto& [name, bytes] : old_files) fs::rename(out.Join(name), aside + "/" + name);
  testing::WriteFileOrDie(out.Join("shard-00000.tfrecord"), "the killed run's shard");
  replace.max_rejects = UINT64_MAX;
  replace.max_shard_records = 1000;
  auto replaced = Convert(src.path(), out.path(), replace);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_FALSE(fs::exists(aside));
  EXPECT_EQ(replaced->manifest.image.height, 16);
  auto v = VerifyDataset(out.path());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << "no file of the old dataset may remain";
}

// The converter killed with SIGKILL at random moments, again and again, then resumed: the
// finished dataset equals an uninterrupted conversion, byte for byte.
TEST(ResumeTest, KilledAtRandomMomentsAndResumedGivesTheSameBytes) {
  TempDir src, ref, out;
  MakeSource(src.path(), 90, 96);
  const std::string args = " --size 24x24 --shard-records 3 --shuffle --seed 11 --threads 1";
  const std::string ref_cmd = std::string(SHARDPACK_CLI) + " convert " + src.path() + " " +
                              ref.path() + args + " >/dev/null 2>&1";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(std::system(ref_cmd.c_str()), 0);
  const auto full =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::mt19937 rng(2026);
  int kills = 0;
  // Kill at random moments within a full run's time; a run that finishes first is checked
  // and wiped, so that every kill lands in a conversion in progress. At least 5 kills.
  for (int attempt = 0; attempt < 60 && kills < 5; ++attempt) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int devnull = ::open("/dev/null", O_WRONLY);
      ::dup2(devnull, 1);
      ::dup2(devnull, 2);
      std::string dst = out.path();
      std::string srcp = src.path();
      ::execl(SHARDPACK_CLI, SHARDPACK_CLI, "convert", srcp.c_str(), dst.c_str(), "--size", "24x24",
              "--shard-records", "3", "--shuffle", "--seed", "11", "--threads", "1", "--resume",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(rng() % std::max<int64_t>(full * 8 / 10, 1000)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      ++kills;
      // A published manifest is the commit point: whatever the kill interrupted after it
      // (removing the progress record), the dataset it names is complete and intact.
      if (fs::exists(out.Join("manifest.json"))) {
        auto v = VerifyDataset(out.path());
        ASSERT_TRUE(v.ok()) << v.status().ToString();
        EXPECT_TRUE(v->ok()) << "a manifest was published before its dataset was complete";
      }
    } else {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "attempt " << attempt;
      EXPECT_EQ(Files(out.path()), Files(ref.path())) << "attempt " << attempt;
      fs::remove_all(out.path());
      fs::create_directories(out.path());
    }
  }
  EXPECT_GE(kills, 5) << "too few runs were interrupted; the test proves little";
  const std::string finish = std::string(SHARDPACK_CLI) + " convert " + src.path() + " " +
                             out.path() + args + " --resume >/dev/null 2>&1";
  ASSERT_EQ(std::system(finish.c_str()), 0);
  EXPECT_EQ(Files(out.path()), Files(ref.path()));
  auto v = VerifyDataset(out.path());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
}

}  // namespace
}  // namespace shardpack
