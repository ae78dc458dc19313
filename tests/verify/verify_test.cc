#include "shardpack/verify.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "format/example.h"
#include "format/format.h"
#include "format/index_file.h"
#include "format/lmdb_shard.h"
#include "format/record.h"
#include "shardpack/limits.h"
#include "shardpack/manifest.h"
#include "test_util.h"
#include "util/crc32c.h"

namespace shardpack {
namespace {

using testing::TempDir;

VerifyReport MustVerify(const std::string& dir, int threads = 0) {
  auto r = VerifyDataset(dir, {.num_threads = threads});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : VerifyReport{};
}

bool HasFault(const VerifyReport& r, const std::string& file, int64_t record, int64_t offset,
              const std::string& text) {
  for (const VerifyFault& f : r.faults) {
    if (f.file == file && f.record == record && f.offset == offset &&
        f.message.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

std::string Dump(const VerifyReport& r) {
  std::string s;
  for (const auto& f : r.faults) s += FormatFault(f) + "\n";
  return s;
}

std::vector<format::IndexEntry> Index(const std::string& path) {
  auto r = format::ParseIndex(testing::ReadFileOrDie(path));
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(VerifyTest, CleanDatasetsPassForBothBackends) {
  for (Backend b : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    testing::WriteTestDataset(dir.path(), {.backend = b, .samples = 10, .variable_size = true});
    VerifyReport r = MustVerify(dir.path());
    EXPECT_TRUE(r.ok()) << Dump(r);
    EXPECT_EQ(r.records, 10u);
    EXPECT_EQ(r.fault_count, 0u);
  }
}

// A thread count outside 0..kMaxThreads is the caller's error, before anything is read.
TEST(VerifyTest, ThreadCountsOutsideTheirRangeAreInvalidArguments) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.backend = Backend::kTfrecord, .samples = 2});
  for (int threads : {-1, kMaxThreads + 1}) {
    VerifyOptions o;
    o.num_threads = threads;
    auto r = VerifyDataset(dir.path(), o);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << threads;
    EXPECT_NE(
        r.status().message().find("num_threads must be in 0..4096, not " + std::to_string(threads)),
        std::string::npos)
        << r.status().message();
    EXPECT_EQ(VerifyTfrecordFiles(dir.path(), o).status().code(), StatusCode::kInvalidArgument);
  }
  VerifyOptions most;
  most.num_threads = kMaxThreads;
  EXPECT_TRUE(MustVerify(dir.path()).ok());
  EXPECT_TRUE(VerifyDataset(dir.path(), most).ok());
}

// Every byte of a small shard flipped in turn: verify reports it, and one fault names
// the record holding that byte, at that record's offset.
TEST(VerifyTest, EveryFlippedByteIsReportedAndNamesTheRightRecord) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(
      dir.path(), {.samples = 3, .height = 2, .width = 2, .max_shard_records = 0});
  const std::string name = m.shards[0].data.file;
  const std::string path = dir.Join(name);
  const std::string original = testing::ReadFileOrDie(path);
  const auto records = Index(dir.Join(m.shards[0].index->file));
  ASSERT_EQ(records.size(), 3u);
  for (size_t i = 0; i < original.size(); ++i) {
    std::string bytes = original;
    bytes[i] ^= 0x01;
    testing::WriteFileOrDie(path, bytes);
    size_t rec = 0;
    while (rec + 1 < records.size() && records[rec + 1].offset <= i) ++rec;
    VerifyReport r = MustVerify(dir.path(), 1);
    ASSERT_FALSE(r.ok()) << "byte " << i;
    EXPECT_TRUE(
        HasFault(r, name, static_cast<int64_t>(rec), static_cast<int64_t>(records[rec].offset), ""))
        << "byte " << i << " (record " << rec << ")\n"
        << Dump(r);
    EXPECT_TRUE(HasFault(r, name, -1, -1, "xxh3_128 checksum")) << Dump(r);
  }
  testing::WriteFileOrDie(path, original);
  EXPECT_TRUE(MustVerify(dir.path()).ok());
}

TEST(VerifyTest, TruncationAtEveryOffsetOfTheLastRecordIsReported) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 3, .max_shard_records = 0});
  const std::string name = m.shards[0].data.file;
  const std::string path = dir.Join(name);
  const std::string original = testing::ReadFileOrDie(path);
  const auto records = Index(dir.Join(m.shards[0].index->file));
  const uint64_t last = records.back().offset;
  for (uint64_t cut = last; cut < original.size(); ++cut) {
    testing::WriteFileOrDie(path, original.substr(0, cut));
    VerifyReport r = MustVerify(dir.path(), 1);
    ASSERT_FALSE(r.ok());
    if (cut == last) {
      // The file ends cleanly one record early.
      EXPECT_TRUE(HasFault(r, name, -1, -1, "2 records, the manifest says 3")) << Dump(r);
    } else {
      EXPECT_TRUE(HasFault(r, name, 2, static_cast<int64_t>(last), "truncated"))
          << "cut " << cut << "\n"
          << Dump(r);
    }
    EXPECT_TRUE(HasFault(r, name, -1, -1, "size " + std::to_string(cut))) << Dump(r);
  }
}

TEST(VerifyTest, LengthWithValidChecksumClaimingMoreThanTheFileIsAClearFault) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 2, .max_shard_records = 0});
  const std::string name = m.shards[0].data.file;
  std::string bytes = testing::ReadFileOrDie(dir.Join(name));
  const auto records = Index(dir.Join(m.shards[0].index->file));
  uint8_t header[format::kRecordHeaderSize];
  format::EncodeRecordHeader(1ull << 62, header);
  bytes.replace(records[1].offset, sizeof header, reinterpret_cast<char*>(header), sizeof header);
  testing::WriteFileOrDie(dir.Join(name), bytes);
  VerifyReport r = MustVerify(dir.path());
  EXPECT_TRUE(HasFault(r, name, 1, static_cast<int64_t>(records[1].offset), "exceeds the limit"))
      << Dump(r);
}

TEST(VerifyTest, MissingExtraAndRenamedShardFilesAreReported) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 9, .max_shard_records = 3});
  namespace fs = std::filesystem;
  fs::remove(dir.Join(m.shards[0].data.file));
  testing::WriteFileOrDie(dir.Join("shard-00007-of-00009.tfrecord"), "stray");
  fs::rename(dir.Join(m.shards[2].data.file), dir.Join("shard-00002-of-00004.tfrecord"));
  testing::WriteFileOrDie(dir.Join("shard-00001.tfrecord.tmp"), "leftover");
  testing::WriteFileOrDie(dir.Join("README.txt"), "a user's note is not ours to judge");
  VerifyReport r = MustVerify(dir.path());
  EXPECT_TRUE(HasFault(r, m.shards[0].data.file, -1, -1, "missing")) << Dump(r);
  EXPECT_TRUE(HasFault(r, m.shards[2].data.file, -1, -1, "missing")) << Dump(r);
  EXPECT_TRUE(HasFault(r, "(directory)", -1, -1, "shard-00007-of-00009.tfrecord: not listed"));
  EXPECT_TRUE(HasFault(r, "(directory)", -1, -1, "shard-00002-of-00004.tfrecord: not listed"));
  EXPECT_TRUE(HasFault(r, "(directory)", -1, -1, "shard-00001.tfrecord.tmp: not listed"));
  EXPECT_FALSE(HasFault(r, "(directory)", -1, -1, "README.txt"));
  EXPECT_EQ(r.fault_count, 5u) << Dump(r);
}

TEST(VerifyTest, IndexLinesThatDisagreeWithTheShardAreReported) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 3, .max_shard_records = 0});
  const std::string index_name = m.shards[0].index->file;
  auto lines = Index(dir.Join(index_name));
  std::string text;
  format::AppendIndexLine(&text, lines[0]);
  format::AppendIndexLine(&text, {lines[1].offset + 1, lines[1].size - 1});
  format::AppendIndexLine(&text, lines[2]);
  testing::WriteFileOrDie(dir.Join(index_name), text);
  VerifyReport r = MustVerify(dir.path());
  EXPECT_TRUE(HasFault(r, index_name, 1, -1, "line 2")) << Dump(r);
  EXPECT_TRUE(HasFault(r, index_name, -1, -1,
                       "no line for the record at offset " + std::to_string(lines[1].offset)))
      << Dump(r);
}

TEST(VerifyTest, UnknownMajorVersionIsAnUnreadableDatasetError) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 2});
  std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  std::string v = "\"format_version\": \"1.2\"";
  text.replace(text.find(v), v.size(), "\"format_version\": \"7.1\"");
  testing::WriteFileOrDie(dir.Join("manifest.json"), text);
  auto r = VerifyDataset(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(r.status().message().find("format version 7.1, this build reads <= 1.x"),
            std::string::npos);
}

TEST(VerifyTest, LabelOutsideTheClassListIsReported) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 4, .num_classes = 3});
  // Drop the last class from the manifest: samples labelled 2 now point outside it.
  m.classes.pop_back();
  m.num_samples = 4;
  m.classes[0].count += 1;  // keep the counts consistent so the manifest parses
  testing::WriteFileOrDie(dir.Join("manifest.json"), SerializeManifest(m));
  VerifyReport r = MustVerify(dir.path());
  bool found = false;
  for (const auto& f : r.faults) {
    found |= f.file == m.shards[0].data.file && f.record == 2 &&
             f.message.find("label 2 is outside the 2 classes") == 0;
  }
  EXPECT_TRUE(found) << Dump(r);
}

// Edits of the manifest that leave it well-formed: each is a fault of manifest.json.
TEST(VerifyTest, AnyEditOfTheManifestIsAFaultOfTheManifest) {
  const std::vector<std::pair<std::string, std::string>> edits = {
      {"\"seed\": 42", "\"seed\": 43"},
      {"\"format_version\": \"1.2\"", "\"format_version\": \"1.1\""},
      {"\"format_version\": \"1.2\"", "\"format_version\": \"1.3\""},
      {"\"pixel_alignment\": 64", "\"pixel_alignment\": 32"},
      {"\"tool_version\": \"shardpack ", "\"tool_version\": \"shardpack 9"},
      {"\"source\": \"test\"", "\"source\": \"edited\""},
  };
  for (const auto& [from, to] : edits) {
    TempDir dir;
    testing::WriteTestDataset(dir.path(), {.samples = 4});
    std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
    ASSERT_NE(text.find(from), std::string::npos) << from << " in " << text;
    text.replace(text.find(from), from.size(), to);
    testing::WriteFileOrDie(dir.Join("manifest.json"), text);
    VerifyReport r = MustVerify(dir.path());
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_EQ(r.faults[0].file, "manifest.json") << to << "\n" << Dump(r);
    EXPECT_NE(r.faults[0].message.find("the manifest was edited after it was written"),
              std::string::npos)
        << to << "\n"
        << Dump(r);
  }
  // The checksum removed from a 1.2 manifest.
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 4});
  std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  const size_t at = text.find(",\n  \"manifest_xxh3_128\"");
  ASSERT_NE(at, std::string::npos);
  text = text.substr(0, at) + "\n}\n";
  testing::WriteFileOrDie(dir.Join("manifest.json"), text);
  VerifyReport r = MustVerify(dir.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(Dump(r).find("manifest.json: manifest_xxh3_128: missing"), std::string::npos)
      << Dump(r);
}

TEST(VerifyTest, ClassCountsAreCheckedAgainstTheRecordsLabels) {
  for (Backend b : {Backend::kTfrecord, Backend::kLmdb}) {
    TempDir dir;
    Manifest m =
        testing::WriteTestDataset(dir.path(), {.backend = b, .samples = 6, .num_classes = 3});
    // Counts that still add up (the manifest parses), checksum recomputed: only the
    // records can tell.
    m.classes[0].count += 1;
    m.classes[1].count -= 1;
    testing::WriteFileOrDie(dir.Join("manifest.json"), SerializeManifest(m));
    VerifyReport r = MustVerify(dir.path());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(Dump(r).find("manifest.json: class 0 (\"" + m.classes[0].name +
                           "\"): the manifest counts " + std::to_string(m.classes[0].count) +
                           " samples, the records hold " + std::to_string(m.classes[0].count - 1)),
              std::string::npos)
        << Dump(r);
    EXPECT_EQ(r.fault_count, 2u) << Dump(r);
  }
}

// A damaged LMDB file must not crash verify: its pages are checked before they are followed.
TEST(VerifyTest, CorruptLmdbFilesAreReportedWithoutCrashing) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.backend = Backend::kLmdb,
                                                      .samples = 12,
                                                      .height = 16,
                                                      .width = 16,
                                                      .max_shard_records = 0});
  const std::string name = m.shards[0].data.file;
  const std::string path = dir.Join(name);
  const std::string original = testing::ReadFileOrDie(path);
  std::mt19937 rng(1);
  for (int trial = 0; trial < 40; ++trial) {
    std::string bytes = original;
    if (trial % 4 == 0) {
      // Zero a whole page (structure, not just data).
      size_t page = (rng() % (bytes.size() / 4096)) * 4096;
      std::fill(bytes.begin() + page, bytes.begin() + page + 4096, '\0');
    } else {
      for (int k = 0; k < 1 + trial % 8; ++k)
        bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    testing::WriteFileOrDie(path, bytes);
    VerifyReport r = MustVerify(dir.path());
    EXPECT_FALSE(r.ok()) << "trial " << trial;
    EXPECT_TRUE(HasFault(r, name, -1, -1, "xxh3_128 checksum")) << Dump(r);
  }
  testing::WriteFileOrDie(path, std::string(original.size(), '\xff'));
  VerifyReport r = MustVerify(dir.path());
  EXPECT_FALSE(r.ok());
}

// A record that says JPEG over the bytes of a PNG decodes all the same (decoders go by
// the bytes), so only a check of the declared format against the file finds the lie.
TEST(VerifyTest, AnEncodedRecordWhoseFileIsNotTheFormatItDeclaresIsAFault) {
  TempDir dir;
  const Manifest m = testing::WriteTestDataset(dir.path(), {.backend = Backend::kLmdb,
                                                            .samples = 3,
                                                            .height = 8,
                                                            .width = 8,
                                                            .max_shard_records = 0,
                                                            .encoding = ImageEncoding::kJpeg});
  const std::string shard = dir.Join(m.shards[0].data.file);
  std::filesystem::remove(shard);
  auto w = format::LmdbShardWriter::Create(shard, {.initial_map_bytes = 1 << 20});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  for (uint64_t i = 0; i < 3; ++i) {
    const std::vector<uint8_t> px = testing::TestPixels(i, 8, 8, 3);
    // Sample 1 stores a PNG under image/format "JPEG".
    const std::string file =
        testing::TestEncodedImage(i == 1 ? ImageEncoding::kPng : ImageEncoding::kJpeg, px, 8, 8, 3);
    const int64_t label = static_cast<int64_t>(i % 3);
    const std::string entries = format::EncodeEncodedFeatureEntries(
        {8, 8, 3, label, m.classes[label].name, ""}, ImageEncoding::kJpeg,
        crc32c::Value(file.data(), file.size()));
    ASSERT_OK((*w)->Append(entries, file, 0, format::kKeyEncoded));
  }
  FileEntry written;
  ASSERT_OK((*w)->Finish(&written));
  testing::ResealDataset(dir.path());
  for (bool decode : {false, true}) {
    auto r = VerifyDataset(dir.path(), {.decode_encoded = decode});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->fault_count, 1u) << Dump(*r);
    EXPECT_TRUE(HasFault(*r, m.shards[0].data.file, 1, -1,
                         "image/encoded: the record says JPEG, but the file is a PNG"))
        << Dump(*r);
  }
}

// Decoding threads hold a decoded image each (three times its bytes, with the decoder's):
// the threads are lowered to what the memory allows, and a memory that holds none of them
// is refused before anything is decoded.
TEST(VerifyTest, DecodingThreadsAreBoundedByTheMemoryAndNoneFittingIsRefused) {
  TempDir dir;
  testing::WriteTestDataset(
      dir.path(), {.samples = 6, .height = 32, .width = 24, .encoding = ImageEncoding::kJpeg});
  const uint64_t per_thread = 3 * 32 * 24 * 3;
  auto r = VerifyDataset(
      dir.path(), {.num_threads = 8, .decode_encoded = true, .max_memory_bytes = per_thread - 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(
      r.status().message().find("verify --decode needs " + std::to_string(per_thread) + " bytes"),
      std::string::npos)
      << r.status().message();
  r = VerifyDataset(dir.path(),
                    {.num_threads = 8, .decode_encoded = true, .max_memory_bytes = per_thread});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << Dump(*r);
  EXPECT_EQ(r->records, 6u);
}

TEST(VerifyTest, ResultIsTheSameForAnyThreadCount) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 20, .max_shard_records = 3});
  for (const ShardEntry& e : m.shards) {
    std::string bytes = testing::ReadFileOrDie(dir.Join(e.data.file));
    bytes[bytes.size() / 2] ^= 4;
    testing::WriteFileOrDie(dir.Join(e.data.file), bytes);
  }
  EXPECT_EQ(Dump(MustVerify(dir.path(), 1)), Dump(MustVerify(dir.path(), 4)));
}

}  // namespace
}  // namespace shardpack
