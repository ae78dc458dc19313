// Datasets of encoded images (format 1.3, docs/FORMAT.md §2.5): what Dataset and Loader
// give for them, against the same pixels stored raw, and what a damaged image does.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "image/image.h"
#include "read/delivered_batch.h"
#include "read/transform.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "shardpack/shard_writer.h"
#include "shardpack/verify.h"
#include "test_util.h"

namespace shardpack {
namespace {

using testing::Got;
using testing::OpenDatasetOrDie;
using testing::TempDir;
using testing::TestDatasetSpec;

std::vector<Got> ReadEpoch(std::shared_ptr<const Dataset> ds, const LoaderOptions& o) {
  auto loader = Loader::Create(std::move(ds), o);
  EXPECT_TRUE(loader.ok()) << loader.status().ToString();
  if (!loader.ok()) return {};
  return testing::ReadRest(**loader);
}

// Batches of 4, 2 threads, a global shuffle with `seed`, on the I/O path `io` (every batch
// read from storage on the read-ahead path), with `t` out to 12x12 unless kNone.
LoaderOptions PathOptions(IoPath io, Transform t, uint64_t seed) {
  LoaderOptions o;
  o.batch_size = 4;
  o.num_threads = 2;
  o.shuffle = ShuffleMode::kGlobal;
  o.seed = seed;
  o.io = io;
  o.io_reuse_page_cache = false;
  o.transform = t;
  if (t != Transform::kNone) o.output_height = o.output_width = 12;
  return o;
}

std::string PathName(IoPath io, Transform t) {
  return std::string(io == IoPath::kMapped ? "mapped" : "read-ahead") +
         (t == Transform::kNone ? ", no transform" : ", random-resized crop");
}

struct EncodedParam {
  Backend backend;
  ImageEncoding encoding;
};

class EncodedDatasetTest : public ::testing::TestWithParam<EncodedParam> {
 protected:
  TestDatasetSpec Spec(ImageEncoding encoding) const {
    TestDatasetSpec s;
    s.backend = GetParam().backend;
    s.encoding = encoding;
    s.samples = 11;
    s.height = 16;
    s.width = 24;
    s.max_shard_records = 4;
    return s;
  }
};

TEST_P(EncodedDatasetTest, GetGivesTheFileAndGetPixelsItsDecode) {
  TempDir dir;
  const Manifest m = testing::WriteTestDataset(dir.path(), Spec(GetParam().encoding));
  EXPECT_EQ(m.image.encoding, GetParam().encoding);
  EXPECT_EQ(m.format_minor, 3);
  EXPECT_EQ(m.pixel_alignment, 1u);
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  std::vector<uint8_t> pixels(16 * 24 * 3);
  for (uint64_t i = 0; i < ds->size(); ++i) {
    SampleView v;
    ASSERT_OK(ds->Get(i, &v));
    EXPECT_TRUE(v.pixels.empty());
    EXPECT_EQ(v.encoding, GetParam().encoding);
    EXPECT_EQ(v.label, static_cast<int64_t>(i % 3));
    const std::vector<uint8_t> stored = testing::TestPixels(i, 16, 24, 3);
    const std::string file = testing::TestEncodedImage(GetParam().encoding, stored, 16, 24, 3);
    EXPECT_EQ(std::string(v.encoded.begin(), v.encoded.end()), file) << "sample " << i;
    SampleView d;
    ASSERT_OK(ds->GetPixels(i, pixels, &d));
    EXPECT_EQ(d.pixels.data(), pixels.data());
    auto want = image::Decode(reinterpret_cast<const uint8_t*>(file.data()), file.size(), {});
    ASSERT_OK(want.status());
    EXPECT_EQ(pixels, want->pixels) << "sample " << i;
    if (GetParam().encoding == ImageEncoding::kPng) {
      EXPECT_EQ(pixels, stored) << "lossless";
    }
  }
  SampleView v;
  std::vector<uint8_t> small(16 * 24 * 3 - 1);
  EXPECT_EQ(ds->GetPixels(0, small, &v).code(), StatusCode::kInvalidArgument);
}

// A PNG dataset holds exactly the raw dataset's pixels, so every batch, with or without a
// transform, on either I/O path, must be the raw dataset's byte for byte. A JPEG dataset's
// batches must be its own images decoded.
TEST_P(EncodedDatasetTest, LoaderBatchesAreTheDecodedImagesOnEveryPath) {
  TempDir raw_dir, enc_dir;
  testing::WriteTestDataset(raw_dir.path(), Spec(ImageEncoding::kRaw));
  testing::WriteTestDataset(enc_dir.path(), Spec(GetParam().encoding));
  auto raw = OpenDatasetOrDie(raw_dir.path());
  auto enc = OpenDatasetOrDie(enc_dir.path());
  ASSERT_NE(raw, nullptr);
  ASSERT_NE(enc, nullptr);
  for (const IoPath io : {IoPath::kMapped, IoPath::kReadAhead}) {
    for (const Transform t : {Transform::kNone, Transform::kRandomResizedCrop}) {
      SCOPED_TRACE(PathName(io, t));
      const LoaderOptions o = PathOptions(io, t, 5);
      const std::vector<Got> got = ReadEpoch(enc, o);
      ASSERT_EQ(got.size(), 3u);
      if (GetParam().encoding == ImageEncoding::kPng) {
        EXPECT_EQ(got, ReadEpoch(raw, o));
      } else if (t == Transform::kNone) {
        std::vector<uint8_t> pixels(16 * 24 * 3);
        for (const Got& b : got) {
          for (int s = 0; s < b.valid; ++s) {
            SampleView v;
            ASSERT_OK(enc->GetPixels(b.indices[static_cast<size_t>(s)], pixels, &v));
            EXPECT_EQ(b.bytes.substr(static_cast<size_t>(s) * pixels.size(), pixels.size()),
                      std::string(pixels.begin(), pixels.end()));
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EncodedDatasetTest,
                         ::testing::Values(EncodedParam{Backend::kTfrecord, ImageEncoding::kJpeg},
                                           EncodedParam{Backend::kTfrecord, ImageEncoding::kPng},
                                           EncodedParam{Backend::kLmdb, ImageEncoding::kJpeg},
                                           EncodedParam{Backend::kLmdb, ImageEncoding::kPng}));

// A mixed dataset (format 1.4): even samples JPEG, odd ones raw. Dataset gives each as
// stored; GetPixels and every Loader batch, on both I/O paths, with and without a
// transform, give the JPEGs decoded and the raw pixels as they are.
class MixedDatasetTest : public ::testing::TestWithParam<Backend> {};

TEST_P(MixedDatasetTest, RecordsAreReadEachAsItIsStored) {
  TempDir dir;
  TestDatasetSpec spec;
  spec.backend = GetParam();
  spec.encoding = ImageEncoding::kMixed;
  spec.samples = 11;
  spec.height = 16;
  spec.width = 24;
  const Manifest m = testing::WriteTestDataset(dir.path(), spec);
  EXPECT_EQ(m.format_minor, 4);
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  std::vector<std::vector<uint8_t>> want;
  for (uint64_t i = 0; i < ds->size(); ++i) {
    SampleView v;
    ASSERT_OK(ds->Get(i, &v));
    const std::vector<uint8_t> stored = testing::TestPixels(i, 16, 24, 3);
    std::vector<uint8_t> pixels(stored.size());
    SampleView d;
    ASSERT_OK(ds->GetPixels(i, pixels, &d));
    if (i % 2 == 1) {
      EXPECT_EQ(v.encoding, ImageEncoding::kRaw);
      EXPECT_EQ(std::vector<uint8_t>(v.pixels.begin(), v.pixels.end()), stored);
      EXPECT_EQ(pixels, stored);
    } else {
      EXPECT_EQ(v.encoding, ImageEncoding::kJpeg);
      const std::string file = testing::TestEncodedImage(ImageEncoding::kJpeg, stored, 16, 24, 3);
      EXPECT_EQ(std::string(v.encoded.begin(), v.encoded.end()), file);
      auto decoded = image::Decode(reinterpret_cast<const uint8_t*>(file.data()), file.size(), {});
      ASSERT_OK(decoded.status());
      EXPECT_EQ(pixels, decoded->pixels);
    }
    want.push_back(pixels);
  }
  for (const IoPath io : {IoPath::kMapped, IoPath::kReadAhead}) {
    for (const Transform t : {Transform::kNone, Transform::kRandomResizedCrop}) {
      SCOPED_TRACE(PathName(io, t));
      const LoaderOptions o = PathOptions(io, t, 9);
      auto tr = read::SampleTransformer::Create(o, ds->manifest().image);
      ASSERT_OK(tr.status());
      read::TransformScratch scratch;
      const std::vector<Got> got = ReadEpoch(ds, o);
      ASSERT_EQ(got.size(), 3u);
      for (const Got& b : got) {
        const size_t out = static_cast<size_t>(tr->out_height()) * tr->out_width() * 3;
        for (int s = 0; s < b.valid; ++s) {
          const uint64_t index = b.indices[static_cast<size_t>(s)];
          std::vector<uint8_t> expect(out);
          ASSERT_OK(tr->Apply(want[index].data(), 16, 24, 3, read::SampleKey(9, 0, index),
                              expect.data(), &scratch));
          EXPECT_EQ(b.bytes.substr(static_cast<size_t>(s) * out, out),
                    std::string(expect.begin(), expect.end()))
              << "sample " << index;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MixedDatasetTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb));

// A transform that shrinks a JPEG 4x (64x96 resized to 16x24 and centre-cropped to 12x12)
// decodes it at 1/4 by DCT scaling and resamples the scaled crop; decode_scaled off
// decodes it whole. Both are checked against decoding and transforming by hand.
TEST(EncodedLoaderTest, AShrinkingTransformDecodesJpegsDctScaled) {
  TempDir dir;
  TestDatasetSpec spec;
  spec.encoding = ImageEncoding::kJpeg;
  spec.samples = 6;
  spec.height = 64;
  spec.width = 96;
  spec.max_shard_records = 4;
  testing::WriteTestDataset(dir.path(), spec);
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  LoaderOptions o;
  o.batch_size = 3;
  o.num_threads = 2;
  o.shuffle = ShuffleMode::kNone;
  o.transform = Transform::kCenterCrop;
  o.output_height = o.output_width = 12;
  o.resize_shorter = 16;
  auto t = read::SampleTransformer::Create(o, ds->manifest().image);
  ASSERT_OK(t.status());
  read::TransformScratch scratch;
  std::vector<std::string> epochs;
  for (const bool scaled : {false, true}) {
    SCOPED_TRACE(scaled ? "decode_scaled" : "full-size decode");
    o.decode_scaled = scaled;
    const std::vector<Got> got = ReadEpoch(ds, o);
    ASSERT_EQ(got.size(), 2u);
    std::string all;
    for (const Got& b : got) {
      for (int i = 0; i < b.valid; ++i) {
        const uint64_t index = b.indices[static_cast<size_t>(i)];
        SampleView v;
        ASSERT_OK(ds->Get(index, &v));
        const uint64_t key = read::SampleKey(o.seed, 0, index);
        auto plan = t->Plan(64, 96, key);
        ASSERT_OK(plan.status());
        const int d = scaled ? 4 : 1;
        EXPECT_EQ(t->ShrinkDenominator(*plan), 4);
        const int h = image::ScaledSide(64, d);
        const int w = image::ScaledSide(96, d);
        std::vector<uint8_t> decoded(static_cast<size_t>(h) * w * 3);
        ASSERT_OK(image::DecodeExactScaled(v.encoded.data(), v.encoded.size(), 64, 96, 3, d,
                                           decoded.data()));
        std::vector<uint8_t> want(12 * 12 * 3);
        ASSERT_OK(t->ApplyPlan(decoded.data(), h, w, 3,
                               scaled ? read::ScalePlan(*plan, d, h, w) : *plan, want.data(),
                               &scratch));
        EXPECT_EQ(b.bytes.substr(static_cast<size_t>(i) * want.size(), want.size()),
                  std::string(want.begin(), want.end()))
            << "sample " << index;
      }
      all += b.bytes;
    }
    epochs.push_back(all);
  }
  EXPECT_NE(epochs[0], epochs[1]) << "decode_scaled changed nothing";
}

// Sample 2 stores a JPEG cut short: its checksums hold (the writer summed what it was
// given), so only decoding finds it.
std::string WriteDatasetWithATruncatedJpeg(const std::string& dir, Backend backend) {
  ShardWriterOptions o;
  o.backend = backend;
  o.class_names = {"a"};
  o.image.channels = 3;
  o.image.height = 16;
  o.image.width = 24;
  o.image.encoding = ImageEncoding::kJpeg;
  o.lmdb_initial_map_bytes = 1 << 20;
  auto writer = ShardWriter::Create(dir, o);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  if (!writer.ok()) return "";
  for (uint64_t i = 0; i < 5; ++i) {
    std::string file = testing::TestEncodedImage(ImageEncoding::kJpeg,
                                                 testing::TestPixels(i, 16, 24, 3), 16, 24, 3);
    if (i == 2) file.resize(file.size() / 2);
    EXPECT_OK(
        (*writer)->Add({.encoded = {reinterpret_cast<const uint8_t*>(file.data()), file.size()},
                        .height = 16,
                        .width = 24,
                        .channels = 3,
                        .label = 0}));
  }
  auto m = (*writer)->Finish();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? m->shards[0].data.file : "";
}

class DamagedEncodedTest : public ::testing::TestWithParam<Backend> {};

TEST_P(DamagedEncodedTest, AnImageThatDoesNotDecodeIsTheRecordsCorruption) {
  TempDir dir;
  const std::string shard = WriteDatasetWithATruncatedJpeg(dir.path(), GetParam());
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  SampleView v;
  EXPECT_OK(ds->Get(2, &v));  // the checksums hold
  std::vector<uint8_t> pixels(16 * 24 * 3);
  Status s = ds->GetPixels(2, pixels, &v);
  EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find(shard + ": record 2"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("image/encoded: JPEG"), std::string::npos) << s.ToString();

  for (const Transform t : {Transform::kNone, Transform::kCenterCrop}) {
    LoaderOptions o;
    o.batch_size = 5;
    o.transform = t;
    if (t != Transform::kNone) o.output_height = o.output_width = 8;
    auto loader = Loader::Create(ds, o);
    ASSERT_OK(loader.status());
    auto b = (*loader)->Next();
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().code(), StatusCode::kCorruption);
    EXPECT_NE(b.status().message().find(shard + ": record 2"), std::string::npos)
        << b.status().ToString();
    o.on_corrupt = OnCorrupt::kSkip;
    auto skipping = Loader::Create(ds, o);
    ASSERT_OK(skipping.status());
    auto got = (*skipping)->Next();
    ASSERT_OK(got.status());
    EXPECT_EQ((*skipping)->stats().skipped_corrupt, 1u);
  }

  VerifyOptions vo;
  auto quick = VerifyDataset(dir.path(), vo);
  ASSERT_OK(quick.status());
  EXPECT_TRUE(quick->ok()) << "without decoding, the checksums prove the bytes the writer's";
  vo.decode_encoded = true;
  auto full = VerifyDataset(dir.path(), vo);
  ASSERT_OK(full.status());
  ASSERT_EQ(full->fault_count, 1u);
  EXPECT_EQ(full->faults[0].file, shard);
  EXPECT_EQ(full->faults[0].record, 2);
  EXPECT_NE(full->faults[0].message.find("image/encoded: JPEG"), std::string::npos)
      << full->faults[0].message;
}

INSTANTIATE_TEST_SUITE_P(Backends, DamagedEncodedTest,
                         ::testing::Values(Backend::kTfrecord, Backend::kLmdb));

// Writes a 3-sample dataset of `stored` images, sets the manifest's image.encoding (and
// layout "encoded") to `claimed`, and gets sample 0: a record of a kind the manifest does
// not allow must be the record's Corruption, never pixels read as a file or the reverse.
Status GetWithEncodingClaimed(ImageEncoding stored, const std::string& claimed) {
  TempDir dir;
  TestDatasetSpec spec;
  spec.samples = 3;
  spec.encoding = stored;
  testing::WriteTestDataset(dir.path(), spec);
  const std::string path = dir.path() + "/manifest.json";
  auto j = nlohmann::ordered_json::parse(testing::ReadFileOrDie(path));
  j["image"]["layout"] = "encoded";
  j["image"]["encoding"] = claimed;
  testing::WriteFileOrDie(path, j.dump(2) + "\n");
  auto ds = OpenDatasetOrDie(dir.path());
  if (ds == nullptr) return InternalError("the edited dataset does not open");
  SampleView v;
  return ds->Get(0, &v);
}

TEST(EncodedManifestTest, ARecordOfAnotherKindIsCorruption) {
  Status s = GetWithEncodingClaimed(ImageEncoding::kRaw, "jpeg");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("the record holds raw pixels, the manifest says jpeg"),
            std::string::npos)
      << s.ToString();
  // A mixed dataset's records are JPEG files or raw pixels, never PNG files.
  s = GetWithEncodingClaimed(ImageEncoding::kPng, "mixed");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("the record holds a png image, the manifest says mixed (jpeg or raw)"),
            std::string::npos)
      << s.ToString();
  EXPECT_OK(GetWithEncodingClaimed(ImageEncoding::kRaw, "mixed"));
}

}  // namespace
}  // namespace shardpack
