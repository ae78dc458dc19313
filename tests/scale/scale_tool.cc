// The helper program of tests/scale/mpi_test.sh: makes source images, reads a dataset as
// one rank of a distributed job, and checks what all ranks read.
//
//   scale_tool images DIR N                       N JPEGs in 3 class folders
//   scale_tool read DATASET OUTDIR EPOCHS BATCH   as the rank RankFromEnvironment() gives
//   scale_tool check OUTDIR SAMPLES EPOCHS        every sample once per epoch, across ranks
//
// `read` writes OUTDIR/rank-R-of-W.txt: one line per batch, "epoch index index ...".
// `check` fails (exit 1, naming what is wrong) unless, in every epoch, the ranks' batches
// together hold every sample index exactly once and every rank has the same batch count.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "image_fixtures.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace shardpack;

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "scale_tool: %s\n", message.c_str());
  return 1;
}

int Images(const std::string& dir, int n) {
  for (int i = 0; i < n; ++i) {
    fs::path cls = fs::path(dir) / ("class" + std::to_string(i % 3));
    fs::create_directories(cls);
    const int h = 40 + i % 9, w = 48 + i % 5;
    shardpack::testing::WriteFileOrDie(
        (cls / ("img" + std::to_string(i) + ".jpg")).string(),
        shardpack::testing::EncodeJpeg(shardpack::testing::Pattern(h, w, 3, i), h, w, 3));
  }
  return 0;
}

int Read(const std::string& dataset, const std::string& outdir, int epochs, int batch) {
  auto rank = RankFromEnvironment();
  if (!rank.ok()) return Fail(rank.status().ToString());
  auto opened = Dataset::Open(dataset);
  if (!opened.ok()) return Fail(opened.status().ToString());
  std::shared_ptr<const Dataset> ds(std::move(opened).value());
  LoaderOptions o;
  o.batch_size = batch;
  o.rank = rank->rank;
  o.world_size = rank->world_size;
  o.seed = 42;
  o.num_threads = 1;
  auto loader = Loader::Create(ds, o);
  if (!loader.ok()) return Fail(loader.status().ToString());
  std::ostringstream out;
  for (int e = 0; e < epochs; ++e) {
    if (Status s = (*loader)->StartEpoch(e); !s.ok()) return Fail(s.ToString());
    while (true) {
      auto b = (*loader)->Next();
      if (!b.ok() && b.status().code() == StatusCode::kOutOfRange) break;
      if (!b.ok()) return Fail(b.status().ToString());
      out << e;
      auto idx = b->indices();
      for (int i = 0; i < b->valid(); ++i) out << " " << idx[i];
      out << "\n";
    }
  }
  fs::create_directories(outdir);
  const std::string name = outdir + "/rank-" + std::to_string(rank->rank) + "-of-" +
                           std::to_string(rank->world_size) + ".txt";
  shardpack::testing::WriteFileOrDie(name, out.str());
  std::printf("scale_tool: rank %d of %d (%s) read %d epochs into %s\n", rank->rank,
              rank->world_size, rank->source.c_str(), epochs, name.c_str());
  return 0;
}

int Check(const std::string& outdir, uint64_t samples, int epochs) {
  // epoch -> index -> times read; epoch -> rank file -> batches.
  std::map<int, std::map<uint64_t, int>> seen;
  std::map<int, std::map<std::string, int>> batches;
  int files = 0;
  for (const auto& f : fs::directory_iterator(outdir)) {
    ++files;
    std::ifstream in(f.path());
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      int e = 0;
      fields >> e;
      ++batches[e][f.path().filename().string()];
      uint64_t i = 0;
      while (fields >> i) ++seen[e][i];
    }
  }
  if (files < 2) return Fail(outdir + ": " + std::to_string(files) + " rank files, expected 2+");
  for (int e = 0; e < epochs; ++e) {
    if (batches[e].size() != static_cast<size_t>(files)) {
      return Fail("epoch " + std::to_string(e) + ": not every rank read batches");
    }
    const int first = batches[e].begin()->second;
    for (const auto& [file, n] : batches[e]) {
      if (n != first) {
        return Fail("epoch " + std::to_string(e) + ": " + file + " read " + std::to_string(n) +
                    " batches, another rank " + std::to_string(first));
      }
    }
    for (uint64_t i = 0; i < samples; ++i) {
      auto it = seen[e].find(i);
      const int n = it == seen[e].end() ? 0 : it->second;
      if (n != 1) {
        return Fail("epoch " + std::to_string(e) + ": sample " + std::to_string(i) + " read " +
                    std::to_string(n) + " times across ranks, expected once");
      }
    }
    if (seen[e].size() != samples) {
      return Fail("epoch " + std::to_string(e) + ": indices beyond the " + std::to_string(samples) +
                  " samples");
    }
  }
  std::printf(
      "scale_tool: %d ranks, %d epochs: every one of %llu samples read exactly once "
      "per epoch, %d batches per rank\n",
      files, epochs, static_cast<unsigned long long>(samples), batches[0].begin()->second);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 3 && a[0] == "images") return Images(a[1], std::atoi(a[2].c_str()));
  if (a.size() == 5 && a[0] == "read") {
    return Read(a[1], a[2], std::atoi(a[3].c_str()), std::atoi(a[4].c_str()));
  }
  if (a.size() == 4 && a[0] == "check") {
    return Check(a[1], std::strtoull(a[2].c_str(), nullptr, 10), std::atoi(a[3].c_str()));
  }
  std::fprintf(stderr,
               "usage: scale_tool images DIR N | read DATASET OUTDIR EPOCHS BATCH | "
               "check OUTDIR SAMPLES EPOCHS\n");
  return 2;
}
