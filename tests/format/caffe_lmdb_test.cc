// Caffe-schema LMDB datasets (ShardWriterOptions::lmdb_schema = kCaffe): Datum values
// under "%08d_<path>" keys, a 1.1 manifest, verify's checks, and a clear refusal by the
// Dataset (and so the Loader).
#include <gtest/gtest.h>

#include <filesystem>

#include "format/caffe_datum.h"
#include "format/caffe_datum_test.pb.h"
#include "format/lmdb_shard.h"
#include "shardpack/dataset.h"
#include "shardpack/shard_writer.h"
#include "shardpack/verify.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::TempDir;

// Five 3x4 RGB samples, labels i % 2, shards of two records.
Manifest WriteCaffe(const std::string& dir) {
  ShardWriterOptions o;
  o.backend = Backend::kLmdb;
  o.lmdb_schema = LmdbSchema::kCaffe;
  o.class_names = {"cat", "dog"};
  o.image = {.channels = 3, .height = 3, .width = 4};
  o.max_shard_records = 2;
  o.lmdb_initial_map_bytes = 1 << 20;
  auto w = ShardWriter::Create(dir, o);
  EXPECT_TRUE(w.ok());
  for (uint64_t i = 0; i < 5; ++i) {
    std::vector<uint8_t> px = testing::TestPixels(i, 3, 4, 3);
    const std::string name = "img" + std::to_string(i) + ".jpg";
    EXPECT_OK((*w)->Add({.pixels = px,
                         .height = 3,
                         .width = 4,
                         .channels = 3,
                         .label = static_cast<int64_t>(i % 2),
                         .filename = name}));
  }
  auto m = (*w)->Finish();
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(CaffeLmdbTest, ValuesAreCaffeDatumsUnderConvertImagesetKeys) {
  TempDir dir;
  Manifest m = WriteCaffe(dir.path());
  ASSERT_EQ(m.shards.size(), 3u);
  uint64_t sample = 0;
  for (const ShardEntry& e : m.shards) {
    auto r = format::LmdbShardReader::Open(dir.Join(e.data.file), false,
                                           format::LmdbShardReader::Keys::kAny);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_OK((*r)->ForEach([&](std::string_view key, std::string_view value) {
      char want[32];
      std::snprintf(want, sizeof want, "%08llu_img%llu.jpg", (unsigned long long)sample,
                    (unsigned long long)sample);
      EXPECT_EQ(key, want);  // numbered across shards, as one convert_imageset run
      caffe_test::Datum d;
      EXPECT_TRUE(d.ParseFromArray(value.data(), static_cast<int>(value.size())));
      EXPECT_EQ(d.label(), static_cast<int>(sample % 2));
      const std::vector<uint8_t> hwc = testing::TestPixels(sample, 3, 4, 3);
      // CHW, BGR: plane 0 is HWC channel 2.
      EXPECT_EQ(static_cast<uint8_t>(d.data()[0]), hwc[2]);
      EXPECT_EQ(static_cast<uint8_t>(d.data()[2 * 12 + 11]), hwc[11 * 3 + 0]);
      ++sample;
      return Status::Ok();
    }));
  }
  EXPECT_EQ(sample, 5u);
}

// Caffe values are a 1.1 addition; datasets are written as 1.2 (the manifest checksum),
// which includes it.
TEST(CaffeLmdbTest, ManifestIsVersion12WithCaffeSchemaAndChwLayout) {
  TempDir dir;
  WriteCaffe(dir.path());
  const std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  EXPECT_NE(text.find("\"format_version\": \"1.2\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"lmdb_schema\": \"caffe\""), std::string::npos);
  EXPECT_NE(text.find("\"layout\": \"CHW\""), std::string::npos);
  EXPECT_NE(text.find("\"pixel_alignment\": 1"), std::string::npos);
  auto m = ParseManifest(text, "manifest.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->lmdb_schema, LmdbSchema::kCaffe);
  EXPECT_EQ(m->format_minor, 2);
}

TEST(CaffeLmdbTest, ExampleDatasetsHaveNoSchemaKey) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.backend = Backend::kLmdb, .samples = 2});
  const std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  EXPECT_NE(text.find("\"format_version\": \"1.2\""), std::string::npos);
  EXPECT_EQ(text.find("lmdb_schema"), std::string::npos);
}

TEST(CaffeLmdbTest, ManifestWithCaffeSchemaAndHwcLayoutIsCorruption) {
  TempDir dir;
  WriteCaffe(dir.path());
  std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  text.replace(text.find("\"CHW\""), 5, "\"HWC\"");
  auto m = ParseManifest(text, "manifest.json");
  EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
  EXPECT_NE(m.status().message().find("image.layout: \"HWC\", expected \"CHW\""), std::string::npos)
      << m.status().message();
}

TEST(CaffeLmdbTest, CaffeSchemaOnATfrecordManifestIsCorruption) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 2});
  std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  text.replace(text.find("\"num_samples\""), 0, "\"lmdb_schema\": \"caffe\", ");
  auto m = ParseManifest(text, "manifest.json");
  EXPECT_EQ(m.status().code(), StatusCode::kCorruption);
  EXPECT_NE(m.status().message().find("lmdb_schema: present, but the backend is \"tfrecord\""),
            std::string::npos)
      << m.status().message();
}

TEST(CaffeLmdbTest, CaffeSchemaNeedsLmdb) {
  TempDir dir;
  ShardWriterOptions o;
  o.class_names = {"a"};
  o.lmdb_schema = LmdbSchema::kCaffe;
  EXPECT_EQ(ShardWriter::Create(dir.path(), o).status().code(), StatusCode::kInvalidArgument);
}

TEST(CaffeLmdbTest, VerifyChecksEveryDatum) {
  TempDir dir;
  WriteCaffe(dir.path());
  auto r = VerifyDataset(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->ok()) << FormatFault(r->faults[0]);
  EXPECT_EQ(r->records, 5u);
}

TEST(CaffeLmdbTest, VerifyNamesADatumWhoseDataDoesNotMatchItsShape) {
  TempDir dir;
  Manifest m = WriteCaffe(dir.path());
  // Rewrite shard 1 with a short Datum as its second record.
  const std::string path = dir.Join(m.shards[1].data.file);
  std::filesystem::remove(path);
  format::LmdbWriterOptions lo;
  lo.initial_map_bytes = 1 << 20;
  auto w = format::LmdbShardWriter::Create(path, lo);
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> px = testing::TestPixels(2, 3, 4, 3);
  ASSERT_OK((*w)->AppendValue(format::CaffeKey(2, "img2.jpg"),
                              format::EncodeCaffeDatum(px.data(), 3, 4, 3, 0)));
  ASSERT_OK((*w)->AppendValue(format::CaffeKey(3, "img3.jpg"),
                              format::EncodeCaffeDatum(px.data(), 2, 4, 3, 1)));  // 2 rows
  FileEntry unused;
  ASSERT_OK((*w)->Finish(&unused));
  auto r = VerifyDataset(dir.path());
  ASSERT_TRUE(r.ok());
  bool found = false;
  for (const VerifyFault& f : r->faults) {
    if (f.file == m.shards[1].data.file && f.record == 1) {
      found = true;
      EXPECT_NE(f.message.find("shape 2x4x3, the manifest says 3x4x3"), std::string::npos)
          << f.message;
    }
  }
  EXPECT_TRUE(found);
}

TEST(CaffeLmdbTest, VerifyNamesAKeyOutOfSequence) {
  TempDir dir;
  Manifest m = WriteCaffe(dir.path());
  const std::string path = dir.Join(m.shards[0].data.file);
  std::filesystem::remove(path);
  format::LmdbWriterOptions lo;
  lo.initial_map_bytes = 1 << 20;
  auto w = format::LmdbShardWriter::Create(path, lo);
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> px = testing::TestPixels(0, 3, 4, 3);
  ASSERT_OK(
      (*w)->AppendValue(format::CaffeKey(0, "a"), format::EncodeCaffeDatum(px.data(), 3, 4, 3, 0)));
  ASSERT_OK(
      (*w)->AppendValue(format::CaffeKey(7, "b"), format::EncodeCaffeDatum(px.data(), 3, 4, 3, 0)));
  FileEntry unused;
  ASSERT_OK((*w)->Finish(&unused));
  auto r = VerifyDataset(dir.path());
  ASSERT_TRUE(r.ok());
  bool found = false;
  for (const VerifyFault& f : r->faults) {
    if (f.record == 1 &&
        f.message.find("key \"00000007_b\", expected \"00000001_<path>\"") != std::string::npos) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(CaffeLmdbTest, DatasetRefusesACaffeDatasetNamingTheSchema) {
  TempDir dir;
  WriteCaffe(dir.path());
  auto ds = Dataset::Open(dir.path());
  EXPECT_EQ(ds.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(ds.status().message().find("Caffe Datum values (lmdb_schema \"caffe\")"),
            std::string::npos)
      << ds.status().message();
}

// convert_imageset --encoded's Datums (FORMAT.md §4.1): the manifest is 1.3 with
// image.layout "encoded"; verify checks each Datum's kind and label, and decodes the files
// only with decode_encoded (sample 2 is cut short); the Dataset refuses the schema as for
// raw Datums.
TEST(CaffeLmdbTest, EncodedDatumsAreVerifiedAndDecodedOnRequest) {
  TempDir dir;
  ShardWriterOptions o;
  o.backend = Backend::kLmdb;
  o.lmdb_schema = LmdbSchema::kCaffe;
  o.class_names = {"cat", "dog"};
  o.image = {.channels = 3, .height = 8, .width = 8, .encoding = ImageEncoding::kJpeg};
  o.max_shard_records = 2;
  o.lmdb_initial_map_bytes = 1 << 20;
  auto w = ShardWriter::Create(dir.path(), o);
  ASSERT_OK(w.status());
  for (uint64_t i = 0; i < 4; ++i) {
    const std::vector<uint8_t> px = testing::TestPixels(i, 8, 8, 3);
    std::string file = testing::TestEncodedImage(ImageEncoding::kJpeg, px, 8, 8, 3);
    if (i == 2) file.resize(file.size() / 2);
    ASSERT_OK((*w)->Add({.pixels = px,
                         .encoded = {reinterpret_cast<const uint8_t*>(file.data()), file.size()},
                         .height = 8,
                         .width = 8,
                         .channels = 3,
                         .label = static_cast<int64_t>(i % 2),
                         .filename = "img" + std::to_string(i) + ".jpg"}));
  }
  ASSERT_OK((*w)->Finish().status());
  const std::string text = testing::ReadFileOrDie(dir.Join("manifest.json"));
  EXPECT_NE(text.find("\"format_version\": \"1.3\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"layout\": \"encoded\""), std::string::npos);
  EXPECT_NE(text.find("\"lmdb_schema\": \"caffe\""), std::string::npos);
  auto m = ParseManifest(text, "manifest.json");
  ASSERT_OK(m.status());
  EXPECT_EQ(m->image.encoding, ImageEncoding::kJpeg);

  auto quick = VerifyDataset(dir.path());
  ASSERT_OK(quick.status());
  EXPECT_TRUE(quick->ok()) << FormatFault(quick->faults[0]);
  EXPECT_EQ(quick->records, 4u);
  VerifyOptions vo;
  vo.decode_encoded = true;
  auto full = VerifyDataset(dir.path(), vo);
  ASSERT_OK(full.status());
  ASSERT_EQ(full->faults.size(), 1u);
  EXPECT_EQ(full->faults[0].record, 0);  // the first record of the second shard
  EXPECT_NE(full->faults[0].message.find("Datum.data: "), std::string::npos)
      << FormatFault(full->faults[0]);
  EXPECT_EQ(Dataset::Open(dir.path()).status().code(), StatusCode::kNotSupported);
}

}  // namespace
}  // namespace shardpack
