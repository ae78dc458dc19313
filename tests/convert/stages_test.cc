// The stages of a conversion (convert/stages.h), each alone.
#include "convert/stages.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "image/image.h"
#include "image/resize.h"
#include "image_fixtures.h"
#include "shardpack/dataset.h"
#include "test_util.h"

namespace shardpack::convert {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& data) {
  testing::WriteFileMakingDirs(path, data);
}

std::string Png(int h, int w, int channels, int seed) {
  return testing::EncodePng(testing::Pattern(h, w, channels, seed), h, w, channels);
}

ConvertOptions Crop24x20() {
  ConvertOptions o;
  o.height = 24;
  o.width = 20;
  o.fit = FitMode::kCrop;
  o.filter = ResizeFilter::kLanczos3;
  return o;
}

// Two classes of three PNGs each, and a stray file directly in SRC (a scan reject).
struct Source {
  TempDir dir;
  Source() {
    int seed = 0;
    for (const char* cls : {"a", "b"}) {
      for (int i = 0; i < 3; ++i) {
        Write(dir.Join(std::string(cls) + "/" + std::to_string(i) + ".png"),
              Png(30 + seed, 26 + seed, 3, seed));
        ++seed;
      }
    }
    Write(dir.Join("stray.txt"), "not in a class folder");
  }
};

TEST(ConvertStagesTest, ScanFindsTheInputsAndTheRangeOfEachPart) {
  Source src;
  TempDir out;
  ConvertOptions o = Crop24x20();
  auto whole = Scan(src.dir.path(), out.path(), o);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->dst, out.path());
  EXPECT_FALSE(whole->partitioned);
  EXPECT_FALSE(whole->tfrecord_source);
  EXPECT_EQ(whole->inputs.files.size(), 6u);
  EXPECT_EQ(whole->range.begin, 0u);
  EXPECT_EQ(whole->range.end, 6u);
  ASSERT_EQ(whole->rejects.size(), 1u);
  EXPECT_EQ(whole->rejects[0].path, "stray.txt");
  EXPECT_EQ(whole->fingerprint, whole->inputs_fingerprint);

  // Part 1 of 2: its own directory and half of the inputs; the scan's rejects are part 0's.
  o.part_index = 1;
  o.part_count = 2;
  auto part = Scan(src.dir.path(), out.path(), o);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(part->dst, PartDirectory(out.path(), 1, 2));
  EXPECT_EQ(part->range.begin, 3u);
  EXPECT_EQ(part->range.end, 6u);
  EXPECT_TRUE(part->rejects.empty());
  EXPECT_EQ(part->inputs_fingerprint, whole->inputs_fingerprint);
  EXPECT_EQ(part->fingerprint, whole->inputs_fingerprint + "/part-1-of-2");

  // Another option that shapes the bytes is another conversion.
  ConvertOptions other = Crop24x20();
  other.filter = ResizeFilter::kArea;
  auto changed = Scan(src.dir.path(), out.path(), other);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->inputs_fingerprint, whole->inputs_fingerprint);
}

TEST(ConvertStagesTest, ScanRefusesWhatCannotBeConvertedBeforeAnythingIsWritten) {
  Source src;
  TempDir out;
  ConvertOptions strict = Crop24x20();
  strict.strict = true;
  auto s = Scan(src.dir.path(), out.path(), strict);
  ASSERT_EQ(s.status().code(), StatusCode::kCorruption);
  EXPECT_NE(s.status().message().find("stray.txt"), std::string::npos) << s.status().ToString();

  ConvertOptions inside = Crop24x20();
  s = Scan(src.dir.path(), src.dir.Join("a/out"), inside);
  ASSERT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("inside SRC"), std::string::npos) << s.status().ToString();

  ConvertOptions no_geometry;
  EXPECT_EQ(Scan(src.dir.path(), out.path(), no_geometry).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(out.Join("manifest.json")));
  EXPECT_TRUE(fs::is_empty(out.path()));
}

TEST(ConvertStagesTest, CheckRejectsNamesTheRejectThatPassesTheLimit) {
  ConvertOptions o;
  o.max_rejects = 1;
  std::vector<ConvertReject> rejects = {{"x.jpg", "bad"}};
  EXPECT_TRUE(CheckRejects(rejects, o).ok());
  rejects.push_back({"y.jpg", "worse"});
  Status s = CheckRejects(rejects, o);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "2 inputs rejected, more than the limit of 1; last: y.jpg: worse");
  o.strict = true;
  o.max_rejects = 100;
  EXPECT_EQ(CheckRejects(rejects, o).message(), "x.jpg: bad (strict: the first reject fails)");
}

// The write order of existing datasets: a change here changes every shuffled dataset.
TEST(ConvertStagesTest, WriteOrderIsTheScanOrderOrAPinnedSeededPermutation) {
  ConvertOptions o;
  EXPECT_EQ(WriteOrder(5, o), (std::vector<size_t>{0, 1, 2, 3, 4}));
  o.shuffle = true;
  o.seed = 7;
  const std::vector<size_t> order = WriteOrder(10, o);
  EXPECT_EQ(order, (std::vector<size_t>{8, 1, 5, 9, 0, 4, 3, 2, 6, 7}));
  o.seed = 8;
  EXPECT_NE(WriteOrder(10, o), order);
  EXPECT_TRUE(WriteOrder(0, o).empty());
}

TEST(ConvertStagesTest, DecodeStageGivesTheImageTheOptionsAskForOrTheReason) {
  TempDir dir;
  const std::string png = Png(40, 60, 3, 11);
  Write(dir.Join("c/x.png"), png);
  Write(dir.Join("c/bad.png"), png.substr(0, png.size() / 2));
  const ConvertOptions o = Crop24x20();
  const DecodeStage stage(o);
  DecodeScratch scratch;

  InputFile good{dir.Join("c/x.png"), "c/x.png", 0};
  Item item;
  item.input = &good;
  stage.Process(&item, &scratch);
  ASSERT_TRUE(item.status.ok()) << item.status.ToString();
  EXPECT_EQ(item.filename, "c/x.png");
  EXPECT_EQ(item.bytes_in, png.size());
  // The same bytes as decoding the whole image and resizing it.
  image::DecodeOptions d;
  d.channels = 3;
  auto whole = image::Decode(reinterpret_cast<const uint8_t*>(png.data()), png.size(), d);
  ASSERT_TRUE(whole.ok());
  auto expected =
      image::ResizeFit(*whole, 24, 20, FitMode::kCrop, ResizeFilter::kLanczos3, o.background);
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(item.image.height, 24);
  EXPECT_EQ(item.image.width, 20);
  EXPECT_EQ(item.image.channels, 3);
  EXPECT_EQ(item.image.pixels, expected->pixels);
  // Each stage it went through is timed; raw output is not encoded.
  EXPECT_GT(item.read_seconds, 0.0);
  EXPECT_GT(item.decode_seconds, 0.0);
  EXPECT_GT(item.resize_seconds, 0.0);
  EXPECT_EQ(item.encode_seconds, 0.0);

  InputFile bad{dir.Join("c/bad.png"), "c/bad.png", 0};
  Item broken;
  broken.input = &bad;
  stage.Process(&broken, &scratch);
  EXPECT_FALSE(broken.status.ok());
  EXPECT_EQ(broken.bytes_in, png.size() / 2);

  InputFile gone{dir.Join("c/gone.png"), "c/gone.png", 0};
  Item missing;
  missing.input = &gone;
  stage.Process(&missing, &scratch);
  EXPECT_EQ(missing.status.code(), StatusCode::kNotFound) << missing.status.ToString();
  EXPECT_EQ(missing.bytes_in, 0u);  // not the size of the file before it
}

TEST(ConvertStagesTest, WriteStageWritesInOrderAndCountsRejectsAgainstTheLimit) {
  TempDir out;
  ShardWriterOptions wo;
  wo.class_names = {"c"};
  wo.image.height = 2;
  wo.image.width = 2;
  wo.image.channels = 3;
  auto writer = ShardWriter::Create(out.path(), wo);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  ConvertOptions o;
  o.max_rejects = 1;
  std::vector<ConvertProgress> seen;
  o.progress = [&](const ConvertProgress& p) { seen.push_back(p); };
  RunState state{0, {}};
  WriteStage write(o, writer->get(), &state, 0, 3, std::chrono::steady_clock::now());

  InputFile a{"", "c/a.png", 0}, b{"", "c/b.png", 0}, c{"", "c/c.png", 0};
  Item good;
  good.position = 0;
  good.input = &a;
  good.bytes_in = 100;
  good.filename = "c/a.png";
  good.image.height = good.image.width = 2;
  good.image.channels = 3;
  good.image.pixels.assign(12, 7);
  good.read_seconds = 0.25;
  good.decode_seconds = 1.5;
  good.resize_seconds = 0.5;
  good.encode_seconds = 0.125;
  ASSERT_OK(write.Consume(&good));
  EXPECT_EQ((*writer)->samples(), 1u);
  // The items' stage times add up, and the write is timed by the stage itself.
  EXPECT_EQ(write.stages().read, 0.25);
  EXPECT_EQ(write.stages().decode, 1.5);
  EXPECT_EQ(write.stages().resize, 0.5);
  EXPECT_EQ(write.stages().encode, 0.125);
  EXPECT_GT(write.stages().write, 0.0);

  Item failed;
  failed.position = 1;
  failed.input = &b;
  failed.bytes_in = 5;
  failed.status = CorruptionError("truncated");
  ASSERT_OK(write.Consume(&failed));
  ASSERT_EQ(state.rejects.size(), 1u);
  EXPECT_EQ(state.rejects[0].path, "c/b.png");
  EXPECT_EQ(state.rejects[0].reason, "Corruption: truncated");
  EXPECT_EQ(state.position, 1u);

  failed.position = 2;
  failed.input = &c;
  Status s = write.Consume(&failed);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("more than the limit of 1"), std::string::npos) << s.ToString();
  EXPECT_EQ((*writer)->samples(), 1u);

  ASSERT_EQ(seen.size(), 2u);  // the failing item is not counted as done
  EXPECT_EQ(seen[1].done, 2u);
  EXPECT_EQ(seen[1].total, 3u);
  EXPECT_EQ(seen[1].rejected, 1u);
  EXPECT_EQ(seen[1].bytes_in, 105u);
  EXPECT_EQ(seen[1].bytes_out, 12u);
  EXPECT_EQ(write.bytes_in(), 105u);
}

}  // namespace
}  // namespace shardpack::convert
