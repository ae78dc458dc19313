#include "shardpack/manifest.h"

#include <gtest/gtest.h>

namespace shardpack {
namespace {

Manifest Sample() {
  Manifest m;
  m.tool_version = "shardpack test";
  m.backend = Backend::kTfrecord;
  m.num_samples = 3;
  m.image = {.channels = 3, .height = 8, .width = 6};
  m.classes = {{"cat", 2}, {"dog", 1}};
  ShardEntry s;
  s.data = {"shard-00000-of-00001.tfrecord", 999, std::string(32, 'a')};
  s.index = FileEntry{"shard-00000-of-00001.idx", 20, std::string(32, 'b')};
  s.records = 3;
  m.shards = {s};
  m.seed = 7;
  m.options_json = R"({"resize":"8x6"})";
  return m;
}

TEST(ManifestTest, RoundTripsThroughJson) {
  Manifest m = Sample();
  std::string text = SerializeManifest(m);
  auto back = ParseManifest(text, "manifest.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(SerializeManifest(*back), text);
  EXPECT_EQ(back->classes[1].name, "dog");
  EXPECT_EQ(back->shards[0].index->file, "shard-00000-of-00001.idx");
  EXPECT_EQ(back->image.height, 8);
}

TEST(ManifestTest, UnknownMajorVersionSaysWhatThisBuildReads) {
  std::string text = SerializeManifest(Sample());
  std::string v = "\"format_version\": \"1.0\"";
  text.replace(text.find(v), v.size(), "\"format_version\": \"2.3\"");
  auto r = ParseManifest(text, "d/manifest.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_EQ(r.status().message(), "d/manifest.json: format version 2.3, this build reads <= 1.x");
}

// Found with tests/fuzz/manifest_fuzzer: `options` nested 200,000 levels deep overflowed the
// stack when the parsed options were written back to text (nlohmann's dump recurses).
TEST(ManifestTest, DeeplyNestedJsonIsCorruptionNotAStackOverflow) {
  std::string text = SerializeManifest(Sample());
  const std::string option = R"("resize": "8x6")";
  ASSERT_NE(text.find(option), std::string::npos) << text;
  const size_t depth = 200000;
  text.replace(text.find(option), option.size(),
               "\"resize\": " + std::string(depth, '[') + std::string(depth, ']'));
  auto r = ParseManifest(text, "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(), "m: nested deeper than 100 levels");
}

TEST(ManifestTest, NewerMinorVersionIsAccepted) {
  std::string text = SerializeManifest(Sample());
  std::string v = "\"format_version\": \"1.0\"";
  text.replace(text.find(v), v.size(), "\"format_version\": \"1.9\"");
  EXPECT_TRUE(ParseManifest(text, "m").ok());
}

TEST(ManifestTest, InconsistentCountsAndBadFieldsAreNamed) {
  Manifest m = Sample();
  m.shards[0].records = 2;
  auto r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("record counts add up to 2, num_samples is 3"),
            std::string::npos)
      << r.status().message();

  m = Sample();
  m.shards[0].data.file = "../etc/passwd";
  r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a plain file name"), std::string::npos);

  for (const char* bad : {"1.0junk", "1.0.7", "1", ".1", "-1.0"}) {
    std::string text = SerializeManifest(Sample());
    std::string v = "\"format_version\": \"1.0\"";
    text.replace(text.find(v), v.size(), std::string("\"format_version\": \"") + bad + "\"");
    r = ParseManifest(text, "m");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("is not MAJOR.MINOR"), std::string::npos) << bad;
  }

  m = Sample();
  m.pixel_alignment = 48;
  r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pixel_alignment: 48 is not a power of two"),
            std::string::npos);

  r = ParseManifest("{not json", "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace shardpack

namespace shardpack {
namespace {

// Format 1.3: image.encoding, with image.layout "encoded" so that a 1.2 reader, which
// requires "HWC", refuses the dataset at open instead of reading image/raw it lacks.
TEST(ManifestTest, EncodedImagesRoundTripAndTheLayoutMustSayEncoded) {
  Manifest m = Sample();
  m.format_minor = 3;
  m.image.encoding = ImageEncoding::kJpeg;
  const std::string text = SerializeManifest(m);
  EXPECT_NE(text.find("\"layout\": \"encoded\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"encoding\": \"jpeg\""), std::string::npos) << text;
  auto back = ParseManifest(text, "m");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->image.encoding, ImageEncoding::kJpeg);
  EXPECT_EQ(SerializeManifest(*back), text);

  // A raw dataset's manifest carries neither key.
  const std::string raw = SerializeManifest(Sample());
  EXPECT_EQ(raw.find("encoding"), std::string::npos);
  EXPECT_NE(raw.find("\"layout\": \"HWC\""), std::string::npos);

  auto edited = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    t.replace(t.find(from), from.size(), to);
    return ParseManifest(t, "m");
  };
  auto r = edited("\"layout\": \"encoded\"", "\"layout\": \"HWC\"");
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("image.layout: \"HWC\", expected \"encoded\""),
            std::string::npos)
      << r.status().ToString();
  r = edited("\"encoding\": \"jpeg\"", "\"encoding\": \"gif\"");
  EXPECT_NE(
      r.status().message().find("image.encoding: \"gif\", expected \"jpeg\", \"png\" or \"mixed\""),
      std::string::npos)
      << r.status().ToString();
  r = edited("\"encoding\": \"jpeg\"", "\"encoding\": \"raw\"");
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_TRUE(ParseImageEncoding("png").ok());
  EXPECT_EQ(ParseImageEncoding("webp").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardpack
