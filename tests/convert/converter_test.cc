#include "shardpack/convert.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "convert/input_scan.h"
#include "format/caffe_datum.h"
#include "format/lmdb_shard.h"
#include "image/encoder.h"
#include "image_fixtures.h"
#include "io/dir_lock.h"
#include "shardpack/dataset.h"
#include "shardpack/limits.h"
#include "shardpack/verify.h"
#include "test_util.h"
#include "util/hash.h"

namespace shardpack {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& data) {
  testing::WriteFileMakingDirs(path, data);
}

// A small Caltech-like tree with the strays real datasets have.
struct Tree {
  TempDir dir;
  int good = 0;  // inputs that must convert
  int bad = 0;   // inputs that must be rejected
  Tree() {
    const std::string r = dir.path();
    Write(r + "/001.cat/a.jpg", testing::PatternJpeg(40, 60, 1));
    Write(r + "/001.cat/B.JPG", testing::PatternJpeg(64, 48, 2));  // upper-case extension
    Write(r + "/001.cat/nested/deeper/c.jpeg",
          testing::EncodeJpeg(testing::Pattern(30, 30, 3, 3), 30, 30, 3, 90, true));
    Write(r + "/001.cat/png-named.JPEG",
          testing::EncodePng(testing::Pattern(20, 24, 3, 4), 20, 24, 3));
    Write(r + "/002.dog/d.png", testing::EncodePng(testing::Pattern(33, 17, 4, 5), 33, 17, 4));
    Write(r + "/002.dog/gray.jpg", testing::EncodeJpeg(testing::Pattern(25, 25, 1, 6), 25, 25, 1));
    good = 6;
    Write(r + "/002.dog/.DS_Store", "hidden junk");
    Write(r + "/002.dog/empty.jpg", "");
    std::string truncated = testing::PatternJpeg(50, 50, 7);
    Write(r + "/002.dog/truncated.jpg", truncated.substr(0, truncated.size() / 2));
    Write(r + "/002.dog/notes.txt", "not an image\n");
    bad = 3;
  }
};

ConvertOptions Options16(int threads = 0) {
  ConvertOptions o;
  o.height = 16;
  o.width = 16;
  o.num_threads = threads;
  return o;
}

// ConvertTest.OutputBytesArePinned: the shards' digests (xxh3-64).
constexpr const char* kPinnedDigests =
    "shard-00000-of-00006.tfrecord df789c637c6f60a74c917d48d4581ac4\n"
    "shard-00000-of-00006.idx c9e74a60495fe7e8e366a752b2d270e7\n"
    "shard-00001-of-00006.tfrecord 2783d513c18029490b4d75d52e5464d1\n"
    "shard-00001-of-00006.idx 39819488bf42e2f0a2de704a9582c1d4\n"
    "shard-00002-of-00006.tfrecord 8c3a2fefc5025c4f339d8ab457d9e149\n"
    "shard-00002-of-00006.idx c9e74a60495fe7e8e366a752b2d270e7\n"
    "shard-00003-of-00006.tfrecord 4c367bd73359705c4abae385303245e0\n"
    "shard-00003-of-00006.idx 39819488bf42e2f0a2de704a9582c1d4\n"
    "shard-00004-of-00006.tfrecord 6d21e49c60ec14e64473521cc45dab10\n"
    "shard-00004-of-00006.idx 39819488bf42e2f0a2de704a9582c1d4\n"
    "shard-00005-of-00006.tfrecord 5f4bcd8d98bcd462bc8caa37229cbc3a\n"
    "shard-00005-of-00006.idx c32da2a2df35f16ffad14972196d5d76\n";

TEST(ConvertTest, ClassFoldersConvertAndEveryInputIsAccountedFor) {
  Tree tree;
  TempDir out;
  auto s = Convert(tree.dir.path(), out.path(), Options16());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, static_cast<uint64_t>(tree.good)) << testing::RejectList(*s);
  EXPECT_EQ(s->rejected, static_cast<uint64_t>(tree.bad)) << testing::RejectList(*s);
  EXPECT_EQ(s->inputs, s->written + s->rejected);
  EXPECT_EQ(s->hidden_ignored, 1u);
  EXPECT_EQ(s->manifest.classes.size(), 2u);
  EXPECT_EQ(s->manifest.classes[0].name, "001.cat");
  EXPECT_EQ(s->manifest.classes[0].count, 4u);
  std::string rejects = testing::ReadFileOrDie(out.Join("rejects.tsv"));
  EXPECT_NE(rejects.find("002.dog/empty.jpg\t"), std::string::npos) << rejects;
  EXPECT_NE(rejects.find("002.dog/truncated.jpg\t"), std::string::npos) << rejects;
  EXPECT_NE(rejects.find("002.dog/notes.txt\tNotSupported: not a JPEG or PNG file"),
            std::string::npos)
      << rejects;
  auto v = VerifyDataset(out.path());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok());
  auto ds = Dataset::Open(out.path());
  ASSERT_TRUE(ds.ok());
  SampleView sample;
  ASSERT_OK((*ds)->Get(0, &sample));
  EXPECT_EQ(sample.height, 16);
  EXPECT_EQ(sample.filename, "001.cat/B.JPG");  // bytewise order: 'B' < 'a'
}

// A thread count outside 0..kMaxThreads is the caller's error: nothing is written.
TEST(ConvertTest, ThreadCountsOutsideTheirRangeAreInvalidArguments) {
  Tree tree;
  TempDir out;
  for (int threads : {-1, kMaxThreads + 1}) {
    ConvertOptions o = Options16();
    o.num_threads = threads;
    auto s = Convert(tree.dir.path(), out.Join("d"), o);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << threads;
    EXPECT_NE(
        s.status().message().find("num_threads must be in 0..4096, not " + std::to_string(threads)),
        std::string::npos)
        << s.status().message();
    EXPECT_FALSE(fs::exists(out.Join("d")));
  }
}

// The summary says where the time went: every stage that ran took time, the ones that did
// not ran none, and the pipeline's stages fit in its threads' time.
TEST(ConvertTest, TheSummaryAccountsForTheTimeOfEachStage) {
  Tree tree;
  for (const ImageEncoding encoding : {ImageEncoding::kRaw, ImageEncoding::kJpeg}) {
    TempDir out;
    ConvertOptions o = Options16(2);
    o.encoding = encoding;
    auto s = Convert(tree.dir.path(), out.path(), o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const ConvertStageSeconds& t = s->stages;
    EXPECT_EQ(t.threads, std::min(2, tbb::this_task_arena::max_concurrency()));
    for (double stage :
         {t.scan, t.plan, t.pipeline, t.publish, t.read, t.decode, t.resize, t.write}) {
      EXPECT_GT(stage, 0.0);
    }
    if (encoding == ImageEncoding::kRaw) {
      EXPECT_EQ(t.encode, 0.0);
    } else {
      EXPECT_GT(t.encode, 0.0);
    }
    EXPECT_LE(t.busy(), t.threads * t.pipeline);
    EXPECT_DOUBLE_EQ(t.idle(), t.threads * t.pipeline - t.busy());
    EXPECT_LE(t.scan + t.plan + t.pipeline + t.publish, s->seconds);
  }
}

// The acceptance test of determinism: 1, 2 and 8 threads give byte-identical datasets,
// and so do shards written by pwrite in chunks (4 KiB and 1 MiB, each more than these
// shards of two records: OutputBytesArePinned fills whole chunks,
// tests/io/chunked_file_test.cc fills them from several threads) and through mappings
// from 8 threads.
TEST(ConvertTest, OutputBytesAreIdenticalForAnyThreadCount) {
  Tree tree;
  std::vector<std::unique_ptr<TempDir>> outs;
  struct Run {
    int threads;
    WriteMethod method;
    uint64_t chunk;
  };
  const Run runs[] = {{1, WriteMethod::kWrite, 0},       {2, WriteMethod::kWrite, 0},
                      {8, WriteMethod::kWrite, 0},       {8, WriteMethod::kWrite, 4096},
                      {2, WriteMethod::kWrite, 1 << 20}, {8, WriteMethod::kMap, 0}};
  for (const auto& [threads, method, chunk] : runs) {
    outs.push_back(std::make_unique<TempDir>());
    ConvertOptions o = Options16(threads);
    o.shuffle = true;
    o.seed = 5;
    o.max_shard_records = 2;
    o.write_chunk_bytes = chunk;
    o.write_method = method;
    auto s = Convert(tree.dir.path(), outs.back()->path(), o);
    ASSERT_TRUE(s.ok()) << WriteMethodName(method) << ": " << s.status().ToString();
  }
  for (const auto& entry : fs::directory_iterator(outs[0]->path())) {
    const std::string name = entry.path().filename();
    std::string a = testing::ReadFileOrDie(entry.path());
    for (size_t i = 1; i < outs.size(); ++i) {
      EXPECT_EQ(a, testing::ReadFileOrDie(outs[i]->Join(name))) << name << ", run " << i;
    }
  }
}

// This process's write system calls so far (/proc/self/io, all threads), or -1 where the
// kernel does not count them.
int64_t WriteCalls() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "syscw:") return value;
  }
  return -1;
}

// By default the converter's writes (write_method kWrite, and kAuto where it does not map)
// put each shard down in whole 2 MiB chunks (docs/LOADER.md, "The first epoch from the page
// cache"): a shard of 40 records (about 37 KB) goes down in one write at its end, against
// one write a record with write_chunk_bytes = 0. Everything else the two conversions write
// (index, manifest, reject list) is the same.
TEST(ConvertTest, PwriteWritesShardsInTwoMebibyteChunksByDefault) {
  EXPECT_EQ(ConvertOptions{}.write_chunk_bytes, uint64_t{2} << 20);
  if (WriteCalls() < 0) GTEST_SKIP() << "/proc/self/io does not count write calls here";
  TempDir in;
  constexpr int kRecords = 40;
  for (int i = 0; i < kRecords; ++i) {
    Write(in.Join("001.cat/" + std::to_string(i) + ".png"),
          testing::EncodePng(testing::Pattern(16, 16, 3, i), 16, 16, 3));
  }
  auto writes = [&](const ConvertOptions& o) -> int64_t {
    TempDir out;
    const int64_t before = WriteCalls();
    auto s = Convert(in.path(), out.path(), o);
    const int64_t after = WriteCalls();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) {
      EXPECT_EQ(s->written, static_cast<uint64_t>(kRecords));
      EXPECT_EQ(s->manifest.shards.size(), 1u);
    }
    return after - before;
  };
  ConvertOptions by_default = Options16(2);
  by_default.write_method = WriteMethod::kWrite;
  ConvertOptions record_by_record = by_default;
  record_by_record.write_chunk_bytes = 0;
  const int64_t each = writes(record_by_record);
  const int64_t chunked = writes(by_default);
  EXPECT_GE(each, kRecords);
  EXPECT_GE(each - chunked, kRecords - 1)
      << each << " write calls record by record, " << chunked << " by default";
}

// The output bytes are part of the format's contract: a refactor of the converter must
// not change them. PNG inputs (decoded exactly by any libpng) of several sizes and
// channel counts, resized with Lanczos into a crop, shuffled, in shards of 3: the digest
// of every shard and index file is pinned. A change that alters these bytes on purpose
// is a format change (docs/FORMAT.md) and updates the digests with it.
TEST(ConvertTest, OutputBytesArePinned) {
  TempDir in;
  const std::pair<int, int> sizes[] = {{40, 60}, {64, 48}, {30, 30}, {20, 24},
                                       {33, 17}, {25, 25}, {90, 70}, {16, 16}};
  int seed = 0;
  for (const char* cls : {"001.cat", "002.dog"}) {
    for (const auto& [h, w] : sizes) {
      const int channels = seed % 3 == 0 ? 1 : seed % 3 == 1 ? 3 : 4;
      Write(in.Join(std::string(cls) + "/img" + std::to_string(seed) + ".png"),
            testing::EncodePng(testing::Pattern(h, w, channels, seed), h, w, channels));
      ++seed;
    }
  }
  // Every write method: pwrite record by record and in 4 KiB chunks (a shard of three
  // records, 5,220 bytes, fills one chunk and leaves a partial one), besides the default
  // 2 MiB; copies into the file's mapping; and the default, which is one of those.
  const std::pair<WriteMethod, uint64_t> methods[] = {
      {WriteMethod::kAuto, ConvertOptions{}.write_chunk_bytes},
      {WriteMethod::kWrite, ConvertOptions{}.write_chunk_bytes},
      {WriteMethod::kWrite, 0},
      {WriteMethod::kWrite, 4096},
      {WriteMethod::kMap, ConvertOptions{}.write_chunk_bytes}};
  for (const auto& [method, chunk] : methods) {
    TempDir out;
    ConvertOptions o;
    o.height = 24;
    o.width = 20;
    o.fit = FitMode::kCrop;
    o.filter = ResizeFilter::kLanczos3;
    o.shuffle = true;
    o.seed = 7;
    o.max_shard_records = 3;
    o.num_threads = 2;
    o.write_chunk_bytes = chunk;
    o.write_method = method;
    auto s = Convert(in.path(), out.path(), o);
    ASSERT_TRUE(s.ok()) << WriteMethodName(method) << ": " << s.status().ToString();
    ASSERT_EQ(s->written, 16u) << testing::RejectList(*s);
    std::string digests;
    for (const ShardEntry& e : s->manifest.shards) {
      ASSERT_TRUE(e.index.has_value());
      for (const std::string& file : {e.data.file, e.index->file}) {
        const std::string bytes = testing::ReadFileOrDie(out.Join(file));
        digests += file + " " + Xxh3HexPortable(bytes.data(), bytes.size()) + "\n";
      }
    }
    EXPECT_EQ(digests, kPinnedDigests)
        << "write method " << WriteMethodName(method) << ", write chunk " << chunk;
  }
}

TEST(ConvertTest, ShuffleIsSeededAndChangesTheOrder) {
  Tree tree;
  auto order = [&](bool shuffle, uint64_t seed) {
    TempDir out;
    ConvertOptions o = Options16();
    o.shuffle = shuffle;
    o.seed = seed;
    EXPECT_TRUE(Convert(tree.dir.path(), out.path(), o).ok());
    auto ds = Dataset::Open(out.path());
    std::string names;
    for (uint64_t i = 0; i < (*ds)->size(); ++i) {
      SampleView s;
      EXPECT_TRUE((*ds)->Get(i, &s).ok());
      names += std::string(s.filename) + ";";
    }
    return names;
  };
  EXPECT_EQ(order(true, 3), order(true, 3));
  EXPECT_NE(order(true, 3), order(false, 0));
  EXPECT_NE(order(true, 3), order(true, 4));
}

TEST(ConvertTest, StrictFailsOnTheFirstRejectAndPublishesNothing) {
  Tree tree;
  TempDir out;
  ConvertOptions o = Options16();
  o.strict = true;
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  EXPECT_NE(s.status().message().find("002.dog/"), std::string::npos) << s.status().message();
  EXPECT_FALSE(fs::exists(out.Join("manifest.json")));
  EXPECT_TRUE(fs::is_empty(out.path()));
}

TEST(ConvertTest, MaxRejectsAbortsPastTheLimit) {
  Tree tree;
  TempDir out;
  ConvertOptions o = Options16();
  o.max_rejects = 2;
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("3 inputs rejected, more than the limit of 2"),
            std::string::npos)
      << s.status().message();
  o.max_rejects = 3;
  TempDir out2;
  EXPECT_TRUE(Convert(tree.dir.path(), out2.path(), o).ok());
}

TEST(ConvertTest, GeometryModesGiveTheRightShapes) {
  TempDir src;
  Write(src.Join("c/wide.jpg"), testing::PatternJpeg(40, 100, 1));
  Write(src.Join("c/tall.png"), testing::EncodePng(testing::Pattern(90, 30, 3, 2), 90, 30, 3));
  struct Case {
    ConvertOptions o;
    std::vector<std::pair<int, int>> shapes;  // (h, w) in bytewise file order: tall, wide
  };
  ConvertOptions max_side;
  max_side.max_side = 50;
  ConvertOptions keep;
  keep.keep = true;
  ConvertOptions pad = Options16();
  pad.fit = FitMode::kPad;
  ConvertOptions gray = Options16();
  gray.channels = 1;
  for (const Case& c : {Case{max_side, {{50, 17}, {20, 50}}}, Case{keep, {{90, 30}, {40, 100}}},
                        Case{pad, {{16, 16}, {16, 16}}}, Case{gray, {{16, 16}, {16, 16}}}}) {
    TempDir out;
    auto s = Convert(src.path(), out.path(), c.o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto ds = Dataset::Open(out.path());
    ASSERT_TRUE(ds.ok());
    for (uint64_t i = 0; i < 2; ++i) {
      SampleView v;
      ASSERT_OK((*ds)->Get(i, &v));
      EXPECT_EQ(v.height, c.shapes[i].first) << v.filename;
      EXPECT_EQ(v.width, c.shapes[i].second) << v.filename;
      EXPECT_EQ(v.channels, c.o.channels);
    }
    EXPECT_TRUE(VerifyDataset(out.path())->ok());
  }
}

TEST(ConvertTest, AFilterOrFitOutsideTheEnumIsRefusedNotTakenAsADefault) {
  Tree tree;
  for (int bad : {-1, 4, 100}) {
    ConvertOptions o = Options16();
    o.filter = static_cast<ResizeFilter>(bad);
    TempDir out;
    auto s = Convert(tree.dir.path(), out.path(), o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("filter is not a resize filter (value " +
                                        std::to_string(bad) + ")"),
              std::string::npos)
        << s.status().message();
    EXPECT_FALSE(std::filesystem::exists(out.Join("manifest.json")));
  }
  ConvertOptions o = Options16();
  o.fit = static_cast<FitMode>(3);
  TempDir out;
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("fit is not a fit mode (value 3)"), std::string::npos)
      << s.status().message();
}

TEST(ConvertTest, LeavesTheProcesssTbbSettingsAsTheyAre) {
  // An application's own limit, above the thread count convert is given.
  tbb::global_control application(tbb::global_control::max_allowed_parallelism, 4);
  ASSERT_EQ(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism), 4u);
  Tree tree;
  ConvertOptions o = Options16(/*threads=*/1);
  std::vector<size_t> seen;
  o.progress = [&](const ConvertProgress&) {
    seen.push_back(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  };
  TempDir out;
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_FALSE(seen.empty());
  for (size_t value : seen) EXPECT_EQ(value, 4u);
}

TEST(ConvertTest, ListFileInputsUseTheirLabels) {
  Tree tree;
  testing::WriteFileOrDie(tree.dir.Join("list.txt"),
                          "# path label\n001.cat/a.jpg 2\n002.dog/d.png 0\n\n"
                          "001.cat/nested/deeper/c.jpeg\t1\n");
  TempDir out;
  ConvertOptions o = Options16();
  o.list_file = tree.dir.Join("list.txt");
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->written, 3u);
  ASSERT_EQ(s->manifest.classes.size(), 3u);
  auto ds = Dataset::Open(out.path());
  SampleView v;
  ASSERT_OK((*ds)->Get(0, &v));
  EXPECT_EQ(v.label, 2);
  EXPECT_EQ(v.class_text, "2");
  testing::WriteFileOrDie(tree.dir.Join("bad.txt"), "001.cat/a.jpg two\n");
  o.list_file = tree.dir.Join("bad.txt");
  TempDir out2;
  auto bad = Convert(tree.dir.path(), out2.path(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 1: label \"two\""), std::string::npos);
}

TEST(ConvertTest, LmdbBackendConvertsAndVerifies) {
  Tree tree;
  TempDir out;
  ConvertOptions o = Options16();
  o.backend = Backend::kLmdb;
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->manifest.shards[0].data.file, "shard-00000-of-00001.lmdb");
  EXPECT_TRUE(VerifyDataset(out.path())->ok());
}

TEST(InputScanTest, SymlinkLoopsAndNonUtf8NamesAreHandled) {
  TempDir src;
  Write(src.Join("k\xff"
                 "9/x.jpg"),
        testing::PatternJpeg(8, 8, 1));
  Write(src.Join("loop/y.jpg"), testing::PatternJpeg(8, 8, 2));
  ASSERT_EQ(::symlink("..", src.Join("loop/up").c_str()), 0);
  ASSERT_EQ(::symlink("nowhere", src.Join("loop/dangling.jpg").c_str()), 0);
  Write(src.Join("stray.jpg"), testing::PatternJpeg(8, 8, 3));
  auto set = convert::ScanClassFolders(src.path());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->classes.size(), 2u);
  EXPECT_EQ(set->classes[0], "k\\xff9");
  EXPECT_EQ(set->files.size(), 2u);
  std::string reasons;
  for (const auto& r : set->rejects) reasons += r.relative + ": " + r.reason + "\n";
  EXPECT_NE(reasons.find("loop/up: directory already scanned"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("loop/dangling.jpg: stat"), std::string::npos) << reasons;
  EXPECT_NE(reasons.find("stray.jpg: not inside a class folder"), std::string::npos) << reasons;
  TempDir out;
  auto s = Convert(src.path(), out.path(), Options16());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->inputs, s->written + s->rejected);
  EXPECT_TRUE(VerifyDataset(out.path())->ok()) << "escaped class names must match the records";
}

TEST(ConvertTest, ASecondWriterOfTheSameDirectoryFailsAtOnceNamingTheHolder) {
  Tree tree;
  TempDir out;
  {
    auto held = io::DirLock::Acquire(out.path(), "a test");
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    auto s = Convert(tree.dir.path(), out.path(), Options16());
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(s.status().message().find(out.path() + ": locked by a test (pid " +
                                        std::to_string(::getpid()) + ")"),
              std::string::npos)
        << s.status().message();
    EXPECT_EQ(fs::directory_entry(out.Join(io::kLockFileName)).exists(), true);
    EXPECT_FALSE(fs::exists(out.Join("manifest.json")));
  }
  EXPECT_FALSE(fs::exists(out.Join(io::kLockFileName))) << "the holder removes its lock file";
  auto s = Convert(tree.dir.path(), out.path(), Options16());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(fs::exists(out.Join(io::kLockFileName)));
}

TEST(ConvertTest, AConversionWithoutSamplesFailsNamingTheRejectsAndPublishesNothing) {
  TempDir src, parent;
  Write(src.Join("a/empty.jpg"), "");
  Write(src.Join("a/notes.txt"), "not an image");
  const std::string out = parent.Join("out");
  auto s = Convert(src.path(), out, Options16());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  EXPECT_NE(s.status().message().find("none of the 2 inputs could be converted"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("a/notes.txt: NotSupported"), std::string::npos)
      << s.status().message();
  EXPECT_FALSE(fs::exists(out)) << "the directory this run made is gone again";

  // With overwrite, a good dataset is not replaced by an empty one.
  Tree tree;
  ASSERT_TRUE(Convert(tree.dir.path(), out, Options16()).ok());
  ConvertOptions o = Options16();
  o.overwrite = true;
  s = Convert(src.path(), out, o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kCorruption);
  auto v = VerifyDataset(out);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->ok());
  EXPECT_EQ(v->records, static_cast<uint64_t>(tree.good));
}

TEST(ConvertTest, AnOutputDirectoryInsideTheSourceIsRefusedAlsoThroughALink) {
  Tree tree;
  const std::string src = tree.dir.path();
  for (const std::string& dst : {src + "/out", src + "/001.cat/../new/", src, src + "/"}) {
    auto s = Convert(src, dst, Options16());
    ASSERT_FALSE(s.ok()) << dst;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << dst;
    EXPECT_NE(s.status().message().find("SRC"), std::string::npos) << s.status().message();
    EXPECT_FALSE(fs::exists(src + "/out")) << dst;
  }
  TempDir elsewhere;
  fs::create_directory_symlink(src, elsewhere.Join("link"));
  auto s = Convert(elsewhere.Join("link"), src + "/out", Options16());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("inside SRC"), std::string::npos) << s.status().message();
  fs::create_directory_symlink(src + "/001.cat", elsewhere.Join("cats"));
  s = Convert(src, elsewhere.Join("cats/out"), Options16());
  ASSERT_FALSE(s.ok()) << "a DST reached through a link into SRC";
  // A sibling whose name starts like SRC's is outside it.
  TempDir parent;
  Write(parent.Join("src/001.cat/a.jpg"), testing::PatternJpeg(20, 20, 1));
  EXPECT_TRUE(Convert(parent.Join("src"), parent.Join("src-out"), Options16()).ok());
}

TEST(ConvertTest, AnInterruptedOutputIsNamedAsSuchWithHowToGoOn) {
  Tree tree;
  TempDir out;
  Write(out.Join(".shardpack-convert.json"), "{}");
  Write(out.Join("shard-00000.tfrecord"), "partial");
  auto s = Convert(tree.dir.path(), out.path(), Options16());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.status().message().find("holds an interrupted conversion"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("resume"), std::string::npos) << s.status().message();
  auto v = VerifyDataset(out.path());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("holds an interrupted conversion, not a dataset yet"),
            std::string::npos)
      << v.status().message();
}

}  // namespace
}  // namespace shardpack

namespace shardpack {
namespace {

TEST(ConvertTest, AnExistingDatasetIsRefusedUnlessOverwrite) {
  Tree tree;
  TempDir out;
  ASSERT_TRUE(Convert(tree.dir.path(), out.path(), Options16()).ok());
  auto again = Convert(tree.dir.path(), out.path(), Options16());
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find("overwrite"), std::string::npos);
  ConvertOptions o = Options16();
  o.overwrite = true;
  o.height = o.width = 8;
  auto replaced = Convert(tree.dir.path(), out.path(), o);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->manifest.image.height, 8);
  auto v = VerifyDataset(out.path());
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->ok()) << "no file of the old dataset may remain";
}

TEST(ConvertTest, RejectsTsvIsCoveredByTheManifestAndVerify) {
  Tree tree;
  TempDir out;
  auto s = Convert(tree.dir.path(), out.path(), Options16());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->manifest.rejects.has_value());
  EXPECT_EQ(s->manifest.rejects->file, "rejects.tsv");
  auto clean = VerifyDataset(out.path());
  ASSERT_TRUE(clean.ok());
  EXPECT_TRUE(clean->ok());
  // A reject line removed: the file's size and checksum differ, and so does its count.
  std::string tsv = testing::ReadFileOrDie(out.Join("rejects.tsv"));
  tsv.erase(tsv.rfind('\n', tsv.size() - 2) + 1);
  testing::WriteFileOrDie(out.Join("rejects.tsv"), tsv);
  auto v = VerifyDataset(out.path());
  ASSERT_TRUE(v.ok());
  std::string faults;
  for (const auto& f : v->faults) faults += FormatFault(f) + "\n";
  EXPECT_NE(faults.find("rejects.tsv: "), std::string::npos) << faults;
  EXPECT_NE(faults.find("2 rejects listed, the manifest's options count 3"), std::string::npos)
      << faults;
}

TEST(ConvertTest, AListLabelBeyondTheClassLimitIsRefusedNamingTheLine) {
  Tree tree;
  TempDir out;
  const std::string list = out.Join("../list-" + std::to_string(::getpid()) + ".txt");
  testing::WriteFileOrDie(list, "001.cat/a.jpg 0\n001.cat/B.JPG 1000000\n");
  ConvertOptions o = Options16();
  o.list_file = list;
  auto s = Convert(tree.dir.path(), out.Join("ds"), o);
  fs::remove(list);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("line 2: label \"1000000\" is not an integer in 0..999999"),
            std::string::npos)
      << s.status().message();
  EXPECT_FALSE(fs::exists(out.Join("ds")));
}

TEST(ConvertTest, ProgressIsReportedInOrderUpToTheTotal) {
  Tree tree;
  TempDir out;
  ConvertOptions o = Options16();
  std::vector<ConvertProgress> seen;
  o.progress = [&](const ConvertProgress& p) { seen.push_back(p); };
  auto s = Convert(tree.dir.path(), out.path(), o);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(seen.size(), static_cast<size_t>(tree.good + tree.bad));
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].done, i + 1);
  EXPECT_EQ(seen.back().total, seen.back().done);
  EXPECT_EQ(seen.back().rejected, static_cast<uint64_t>(tree.bad));
  EXPECT_EQ(seen.back().bytes_out, 6u * 16 * 16 * 3);
  EXPECT_GT(seen.back().bytes_in, 0u);
  EXPECT_EQ(s->bytes_in, seen.back().bytes_in);
}

}  // namespace
}  // namespace shardpack

namespace shardpack {
namespace {

// --encoding: the resized images stored as files. PNG is lossless: every sample decodes
// to exactly the raw conversion's pixels. JPEG output, like raw, does not depend on the
// thread count.
TEST(ConvertEncodedTest, PngHoldsTheRawPixelsAndJpegBytesDoNotDependOnThreads) {
  Tree tree;
  TempDir raw_out, png_out;
  ConvertOptions o = Options16();
  o.backend = Backend::kLmdb;
  ASSERT_OK(Convert(tree.dir.path(), raw_out.path(), o).status());
  o.encoding = ImageEncoding::kPng;
  auto png = Convert(tree.dir.path(), png_out.path(), o);
  ASSERT_OK(png.status());
  EXPECT_EQ(png->manifest.image.encoding, ImageEncoding::kPng);
  EXPECT_NE(png->manifest.options_json.find("\"encoding\":\"png\""), std::string::npos)
      << png->manifest.options_json;
  auto raw_ds = Dataset::Open(raw_out.path());
  auto png_ds = Dataset::Open(png_out.path());
  ASSERT_OK(raw_ds.status());
  ASSERT_OK(png_ds.status());
  ASSERT_EQ((*png_ds)->size(), static_cast<uint64_t>(tree.good));
  std::vector<uint8_t> pixels(16 * 16 * 3);
  for (uint64_t i = 0; i < (*png_ds)->size(); ++i) {
    SampleView r, p;
    ASSERT_OK((*raw_ds)->Get(i, &r));
    ASSERT_OK((*png_ds)->GetPixels(i, pixels, &p));
    EXPECT_EQ(std::string(p.pixels.begin(), p.pixels.end()),
              std::string(r.pixels.begin(), r.pixels.end()))
        << "sample " << i;
    EXPECT_EQ(p.filename, r.filename);
    EXPECT_EQ(p.label, r.label);
  }
  VerifyOptions vo;
  vo.decode_encoded = true;
  auto v = VerifyDataset(png_out.path(), vo);
  ASSERT_OK(v.status());
  EXPECT_TRUE(v->ok());

  std::vector<std::unique_ptr<TempDir>> outs;
  for (int threads : {1, 2, 8}) {
    outs.push_back(std::make_unique<TempDir>());
    ConvertOptions j = Options16(threads);
    j.encoding = ImageEncoding::kJpeg;
    j.jpeg_quality = 75;
    j.shuffle = true;
    j.seed = 5;
    j.max_shard_records = 2;
    ASSERT_OK(Convert(tree.dir.path(), outs.back()->path(), j).status());
  }
  for (const auto& entry : fs::directory_iterator(outs[0]->path())) {
    const std::string name = entry.path().filename();
    std::string a = testing::ReadFileOrDie(entry.path());
    EXPECT_EQ(a, testing::ReadFileOrDie(outs[1]->Join(name))) << name;
    EXPECT_EQ(a, testing::ReadFileOrDie(outs[2]->Join(name))) << name;
  }
}

// --png-compression: another deflate stream of the same pixels. The options record a
// level other than libpng's default 6 (so a resumed or merged run with another level is
// another conversion); the default is not recorded, so PNG datasets made before the
// option keep their bytes. Outside 0..9 is refused before anything is written.
TEST(ConvertEncodedTest, PngCompressionChangesTheFilesNotThePixels) {
  Tree tree;
  TempDir def_out, fast_out, bad_out;
  ConvertOptions o = Options16();
  o.encoding = ImageEncoding::kPng;
  auto by_default = Convert(tree.dir.path(), def_out.path(), o);
  ASSERT_OK(by_default.status());
  EXPECT_EQ(by_default->manifest.options_json.find("png_compression"), std::string::npos)
      << by_default->manifest.options_json;
  o.png_compression = 1;
  auto fast = Convert(tree.dir.path(), fast_out.path(), o);
  ASSERT_OK(fast.status());
  EXPECT_NE(fast->manifest.options_json.find("\"png_compression\":1"), std::string::npos)
      << fast->manifest.options_json;
  auto a = Dataset::Open(def_out.path());
  auto b = Dataset::Open(fast_out.path());
  ASSERT_OK(a.status());
  ASSERT_OK(b.status());
  ASSERT_EQ((*b)->size(), (*a)->size());
  std::vector<uint8_t> pa(16 * 16 * 3), pb(16 * 16 * 3);
  bool some_file_differs = false;
  for (uint64_t i = 0; i < (*a)->size(); ++i) {
    SampleView va, vb;
    ASSERT_OK((*a)->GetPixels(i, pa, &va));
    ASSERT_OK((*b)->GetPixels(i, pb, &vb));
    EXPECT_EQ(pa, pb) << "sample " << i;
    some_file_differs |= std::string(va.encoded.begin(), va.encoded.end()) !=
                         std::string(vb.encoded.begin(), vb.encoded.end());
  }
  EXPECT_TRUE(some_file_differs);
  for (int level : {-1, 10}) {
    o.png_compression = level;
    auto bad = Convert(tree.dir.path(), bad_out.Join("d"), o);
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << level;
    EXPECT_NE(bad.status().message().find("PNG compression level must be in 0..9"),
              std::string::npos)
        << bad.status().message();
    EXPECT_FALSE(fs::exists(bad_out.Join("d")));
  }
}

// --encoding mixed: each record is the JPEG where it is at most mixed_max_ratio of the
// raw bytes, else the raw pixels, checked here by encoding the raw conversion's pixels
// again. The smooth test photos compress; a noise image does not and stays raw. The
// bytes do not depend on the thread count.
TEST(ConvertEncodedTest, MixedKeepsRawWhereTheJpegSavesLittle) {
  Tree tree;
  std::vector<uint8_t> noise(48 * 48 * 3);
  uint32_t x = 12345;
  for (uint8_t& b : noise) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  Write(tree.dir.Join("002.dog/noise.png"), testing::EncodePng(noise, 48, 48, 3));
  TempDir raw_out;
  ConvertOptions o = Options16();
  o.height = o.width = 48;
  o.backend = Backend::kLmdb;
  ASSERT_OK(Convert(tree.dir.path(), raw_out.path(), o).status());
  o.encoding = ImageEncoding::kMixed;
  o.jpeg_quality = 95;
  o.jpeg_subsampling = 444;
  std::vector<std::unique_ptr<TempDir>> outs;
  for (int threads : {1, 2}) {
    outs.push_back(std::make_unique<TempDir>());
    o.num_threads = threads;
    auto r = Convert(tree.dir.path(), outs.back()->path(), o);
    ASSERT_OK(r.status());
    EXPECT_EQ(r->manifest.format_minor, 4);
    EXPECT_EQ(r->manifest.image.encoding, ImageEncoding::kMixed);
    EXPECT_NE(r->manifest.options_json.find("\"mixed_max_ratio\":0.5"), std::string::npos)
        << r->manifest.options_json;
  }
  for (const auto& entry : fs::directory_iterator(outs[0]->path())) {
    const std::string name = entry.path().filename();
    EXPECT_EQ(testing::ReadFileOrDie(entry.path()), testing::ReadFileOrDie(outs[1]->Join(name)))
        << name;
  }
  auto raw = Dataset::Open(raw_out.path());
  auto mixed = Dataset::Open(outs[0]->path());
  ASSERT_OK(raw.status());
  ASSERT_OK(mixed.status());
  ASSERT_EQ((*mixed)->size(), static_cast<uint64_t>(tree.good + 1));
  int kept_raw = 0;
  std::vector<uint8_t> pixels(48 * 48 * 3);
  for (uint64_t i = 0; i < (*mixed)->size(); ++i) {
    SampleView r, m, p;
    ASSERT_OK((*raw)->Get(i, &r));
    ASSERT_OK((*mixed)->Get(i, &m));
    auto jpeg = image::EncodeJpeg(r.pixels.data(), r.height, r.width, r.channels,
                                  {.quality = 95, .subsampling = 444});
    ASSERT_OK(jpeg.status());
    const bool want_raw = static_cast<double>(jpeg->size()) > 0.5 * r.pixels.size();
    EXPECT_EQ(m.encoding, want_raw ? ImageEncoding::kRaw : ImageEncoding::kJpeg)
        << r.filename << ": JPEG of " << jpeg->size() << " bytes for " << r.pixels.size();
    ASSERT_OK((*mixed)->GetPixels(i, std::span<uint8_t>(pixels.data(), r.pixels.size()), &p));
    if (m.encoding == ImageEncoding::kRaw) {
      ++kept_raw;
      EXPECT_EQ(std::string(m.pixels.begin(), m.pixels.end()),
                std::string(r.pixels.begin(), r.pixels.end()))
          << r.filename;
      EXPECT_EQ(std::string(p.pixels.begin(), p.pixels.end()),
                std::string(r.pixels.begin(), r.pixels.end()))
          << r.filename;
    } else {
      EXPECT_EQ(std::string(m.encoded.begin(), m.encoded.end()), *jpeg) << r.filename;
    }
    EXPECT_EQ(m.filename, r.filename);
  }
  EXPECT_GE(kept_raw, 1) << "the noise image";
  EXPECT_LT(kept_raw, static_cast<int>((*mixed)->size())) << "the photos";
  VerifyOptions vo;
  vo.decode_encoded = true;
  auto v = VerifyDataset(outs[0]->path(), vo);
  ASSERT_OK(v.status());
  EXPECT_TRUE(v->ok()) << FormatFault(v->faults[0]);
}

TEST(ConvertEncodedTest, BadEncodingSettingsAreRefused) {
  Tree tree;
  TempDir out;
  ConvertOptions o = Options16();
  o.encoding = ImageEncoding::kJpeg;
  o.jpeg_quality = 0;
  EXPECT_EQ(Convert(tree.dir.path(), out.path(), o).status().message(),
            "JPEG quality must be in 1..100, not 0");
  o.jpeg_quality = 90;
  o.jpeg_subsampling = 411;
  EXPECT_EQ(Convert(tree.dir.path(), out.path(), o).status().message(),
            "JPEG chroma subsampling must be 444, 422 or 420, not 411");
  o.jpeg_subsampling = 420;
  o.encoding = ImageEncoding::kMixed;
  o.mixed_max_ratio = 0;
  EXPECT_EQ(Convert(tree.dir.path(), out.path(), o).status().message(),
            "the mixed encoding's ratio must be in (0, 1], not 0");
  o.mixed_max_ratio = 0.5;
  o.backend = Backend::kLmdb;
  o.lmdb_schema = LmdbSchema::kCaffe;
  EXPECT_EQ(Convert(tree.dir.path(), out.path(), o).status().message(),
            "the mixed encoding is not written in the Caffe schema");
}

// --lmdb-schema caffe --encoding jpeg: convert_imageset --encoded's Datums, each holding
// the very file the Example schema stores as image/encoded.
TEST(ConvertEncodedTest, CaffeSchemaDatumsHoldTheExampleSchemasFiles) {
  Tree tree;
  TempDir example_out, caffe_out;
  ConvertOptions o = Options16();
  o.backend = Backend::kLmdb;
  o.encoding = ImageEncoding::kJpeg;
  ASSERT_OK(Convert(tree.dir.path(), example_out.path(), o).status());
  o.lmdb_schema = LmdbSchema::kCaffe;
  auto caffe = Convert(tree.dir.path(), caffe_out.path(), o);
  ASSERT_OK(caffe.status());
  EXPECT_EQ(caffe->manifest.format_minor, 3);
  EXPECT_EQ(caffe->manifest.lmdb_schema, LmdbSchema::kCaffe);
  EXPECT_EQ(caffe->manifest.image.encoding, ImageEncoding::kJpeg);
  auto example = Dataset::Open(example_out.path());
  ASSERT_OK(example.status());
  uint64_t i = 0;
  for (const ShardEntry& e : caffe->manifest.shards) {
    auto r = format::LmdbShardReader::Open(caffe_out.Join(e.data.file), false,
                                           format::LmdbShardReader::Keys::kAny);
    ASSERT_OK(r.status());
    ASSERT_OK((*r)->ForEach([&](std::string_view, std::string_view value) {
      format::CaffeDatumView d;
      EXPECT_OK(format::ParseCaffeDatum(reinterpret_cast<const uint8_t*>(value.data()),
                                        value.size(), &d));
      SampleView v;
      EXPECT_OK((*example)->Get(i, &v));
      EXPECT_TRUE(d.encoded);
      EXPECT_EQ(d.data,
                std::string_view(reinterpret_cast<const char*>(v.encoded.data()), v.encoded.size()))
          << "sample " << i;
      EXPECT_EQ(d.label, v.label);
      ++i;
      return Status::Ok();
    }));
  }
  EXPECT_EQ(i, static_cast<uint64_t>(tree.good));
  VerifyOptions vo;
  vo.decode_encoded = true;
  auto v = VerifyDataset(caffe_out.path(), vo);
  ASSERT_OK(v.status());
  EXPECT_TRUE(v->ok()) << FormatFault(v->faults[0]);
}

}  // namespace
}  // namespace shardpack
