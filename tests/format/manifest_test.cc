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

namespace shardpack {
namespace {

// Sample() with a second shard (records 3..4) and the rejects list.
Manifest TwoShards() {
  Manifest m = Sample();
  m.format_minor = 2;
  m.num_samples = 5;
  m.classes[1].count = 3;
  ShardEntry s;
  s.data = {"shard-00001-of-00002.tfrecord", 999, std::string(32, 'c')};
  s.index = FileEntry{"shard-00001-of-00002.idx", 20, std::string(32, 'd')};
  s.records = 2;
  s.first_sample = 3;
  m.shards[0].data.file = "shard-00000-of-00002.tfrecord";
  m.shards[0].index->file = "shard-00000-of-00002.idx";
  m.shards.push_back(s);
  m.rejects = FileEntry{"rejects.tsv", 0, std::string(32, 'e')};
  return m;
}

// `text` with the first `"file": "<from>"` made `"file": <to_json>` (JSON text, quoted).
std::string WithFileName(std::string text, const std::string& from, const std::string& to_json) {
  const std::string key = "\"file\": \"" + from + "\"";
  const size_t at = text.find(key);
  EXPECT_NE(at, std::string::npos) << key;
  if (at != std::string::npos) text.replace(at, key.size(), "\"file\": " + to_json);
  return text;
}

// A NUL inside a name passed the old check ('/', "." and ".."): a C string ends at it, so
// "shard\0.tfrecord" opened "shard", and in the remote cache ".use\0" + ".<hash>" named
// the cache's own lock file.
TEST(ManifestTest, ANulByteInAFileNameIsRefused) {
  const std::string text = SerializeManifest(TwoShards());
  for (const char* to : {R"("shard-00000\u0000.tfrecord")", R"(".use\u0000")"}) {
    auto r = ParseManifest(WithFileName(text, "shard-00000-of-00002.tfrecord", to), "m");
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << to;
    EXPECT_NE(r.status().message().find("m: shards[0].file: \""), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("\\x00"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("is not a plain file name: it holds a control "
                                        "character"),
              std::string::npos)
        << r.status().message();
  }
}

// Every name that is not a plain portable name of a file in the dataset's directory, or
// that shardpack's own machinery uses (shardpack/manifest.h lists why each is refused),
// in each place a manifest names a file.
TEST(ManifestTest, NamesThatAreNotPlainPortableFileNamesAreRefusedInEveryPlace) {
  const std::string text = SerializeManifest(TwoShards());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"("")", "it is empty"},
      {"\"" + std::string(kMaxFileNameBytes + 1, 'a') + "\"",
       "it is 215 bytes long, more than 214"},
      {R"("a\u0001b")", "it holds a control character"},
      {R"("a\u001fb")", "it holds a control character"},
      {R"("a\nb")", "it holds a control character"},
      {R"("a\u007fb")", "it holds a control character"},
      {R"("a/b")", "it holds a '/' or '\\'"},
      {R"("../etc/passwd")", "it holds a '/' or '\\'"},
      {R"("a\\b")", "it holds a '/' or '\\'"},
      {R"(".")", "it starts with '.'"},
      {R"("..")", "it starts with '.'"},
      {R"(".lock")", "it starts with '.'"},
      {R"(".use")", "it starts with '.'"},
      {R"(".fetch")", "it starts with '.'"},
      {R"(".reserved")", "it starts with '.'"},
      {R"(".shardpack-convert.json")", "it starts with '.'"},
      {R"(".shardpack-lock")", "it starts with '.'"},
      {R"("manifest.json")", "it is the name of one of shardpack's own files"},
      {R"("parts")", "it is the name of one of shardpack's own files"},
      {R"("url")", "it is the name of one of shardpack's own files"},
      {R"("shard-00000-of-00002.tfrecord.tmp")", "it ends in \".tmp\""},
      {R"("x.partial")", "it ends in \".partial\""},
      {R"("x.bad")", "it ends in \".bad\""},
  };
  const std::vector<std::pair<std::string, std::string>> places = {
      {"shard-00000-of-00002.tfrecord", "shards[0].file"},
      {"shard-00001-of-00002.idx", "shards[1].index.file"},
      {"rejects.tsv", "rejects.file"},
  };
  for (const auto& [from, where] : places) {
    for (const auto& [to, why] : bad) {
      auto r = ParseManifest(WithFileName(text, from, to), "m");
      ASSERT_FALSE(r.ok()) << where << " = " << to;
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << where << " = " << to;
      EXPECT_NE(r.status().message().find("m: " + where + ": "), std::string::npos)
          << r.status().message();
      EXPECT_NE(r.status().message().find("is not a plain file name: " + why), std::string::npos)
          << where << " = " << to << ": " << r.status().message();
    }
  }
  // A shard's file may not take the rejects list's name.
  auto r =
      ParseManifest(WithFileName(text, "shard-00001-of-00002.tfrecord", R"("rejects.tsv")"), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("shards[1].file: \"rejects.tsv\" is not a plain file name: "
                                      "it is the name of the rejects list"),
            std::string::npos)
      << r.status().message();
}

// Bytes that are not UTF-8 never reach the name check: the JSON parser refuses them.
TEST(ManifestTest, ANameThatIsNotUtf8IsRefused) {
  const std::string text = SerializeManifest(TwoShards());
  auto r = ParseManifest(WithFileName(text, "shard-00000-of-00002.tfrecord", "\"a\xff\xfe\""), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(), "m: not valid JSON");
}

// What the rules leave: any other UTF-8 text up to the longest name.
TEST(ManifestTest, PlainNamesUpToTheLongestAreAccepted) {
  const std::string text = SerializeManifest(TwoShards());
  for (const std::string& name :
       {std::string(kMaxFileNameBytes, 'a'), std::string("données-été 01.tfrecord"),
        std::string("a.b-c_d+e=f,g@h (1)"), std::string("shard.tmp.x")}) {
    auto r =
        ParseManifest(WithFileName(text, "shard-00000-of-00002.tfrecord", "\"" + name + "\""), "m");
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(r->shards[0].data.file, name);
  }
}

// One file listed twice would be read, fetched and replaced as two: verify passed a
// manifest listing one shard twice.
TEST(ManifestTest, AFileListedTwiceIsRefused) {
  const std::string text = SerializeManifest(TwoShards());
  struct Case {
    std::string from, to, where, first;
  };
  const std::vector<Case> cases = {
      // Two shards with one data file.
      {"shard-00001-of-00002.tfrecord", "shard-00000-of-00002.tfrecord", "shards[1].file",
       "shards[0].file"},
      // An index that is another shard's data file.
      {"shard-00001-of-00002.idx", "shard-00000-of-00002.tfrecord", "shards[1].index.file",
       "shards[0].file"},
      // A data file named like another shard's index.
      {"shard-00001-of-00002.tfrecord", "shard-00000-of-00002.idx", "shards[1].file",
       "shards[0].index.file"},
      // A shard's index that is its own data file.
      {"shard-00000-of-00002.idx", "shard-00000-of-00002.tfrecord", "shards[0].index.file",
       "shards[0].file"},
      // The rejects list that is a shard's index.
      {"rejects.tsv", "shard-00001-of-00002.idx", "rejects.file", "shards[1].index.file"},
  };
  for (const Case& c : cases) {
    auto r = ParseManifest(WithFileName(text, c.from, "\"" + c.to + "\""), "m");
    ASSERT_FALSE(r.ok()) << c.where;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << c.where;
    EXPECT_EQ(r.status().message(),
              "m: " + c.where + ": \"" + c.to + "\" is listed already, as " + c.first)
        << c.where;
  }
  EXPECT_TRUE(ParseManifest(text, "m").ok());
}

// Class names are any printable UTF-8 up to what a record's image/class/text holds.
TEST(ManifestTest, ClassNamesWithAControlCharacterOrTooLongAreRefused) {
  Manifest m = Sample();
  m.classes[1].name = std::string("d\0g", 3);
  auto r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(),
            "m: classes[1].name: \"d\\x00g\" holds a control character: class names are "
            "printable UTF-8");
  m.classes[1].name = "line\nbreak";
  r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("classes[1].name: \"line\\x0abreak\""), std::string::npos)
      << r.status().message();
  m.classes[1].name = std::string(4097, 'x');
  r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "m: classes[1].name: 4097 bytes, more than 4096");
  m.classes[1].name = std::string(4096, 'x');
  EXPECT_TRUE(ParseManifest(SerializeManifest(m), "m").ok());
  m.classes[1].name = "chien \\ caf\xc3\xa9";  // a backslash and an accent are printable
  EXPECT_TRUE(ParseManifest(SerializeManifest(m), "m").ok());
}

// A fixed size is at most the largest image the writer stores: 20000 x 20000 sized the
// loader's ring at 18 GB before a record was read.
TEST(ManifestTest, AFixedSizeAboveTheLargestImageIsRefused) {
  Manifest m = Sample();
  m.image.height = 20000;
  m.image.width = 20000;
  auto r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(),
            "m: image: 20000 x 20000 is 400000000 pixels, more than the 89478485 of the largest "
            "image");
}

// Raw pixels of one size: a shard's bytes hold its records' pixels, so a size that no
// record has (the manifest edited to claim more) is refused before a reader sizes
// anything by it.
TEST(ManifestTest, RawShardsTooSmallForTheirClaimedImageSizeAreRefused) {
  Manifest m = Sample();  // 3 records of 8 x 6 x 3 = 432 pixel bytes, 999 bytes
  m.image.height = 16;    // 3 x 16 x 6 x 3 = 864 still fit
  EXPECT_TRUE(ParseManifest(SerializeManifest(m), "m").ok());
  m.image.height = 20;  // 3 x 1080 = 1080 do not
  auto r = ParseManifest(SerializeManifest(m), "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(),
            "m: shards[0]: 3 records of 20 x 6 x 3 pixel bytes do not fit in its 999 bytes: the "
            "image size is not the records'");
  // Encoded images are smaller than their pixels: no such bound.
  m.image.encoding = ImageEncoding::kJpeg;
  m.format_minor = 3;
  EXPECT_TRUE(ParseManifest(SerializeManifest(m), "m").ok());
}

TEST(ManifestTest, ATopLevelKeyGivenTwiceIsRefused) {
  std::string text = SerializeManifest(Sample());
  const std::string seed = "\"seed\": 7,";
  ASSERT_NE(text.find(seed), std::string::npos);
  text.replace(text.find(seed), seed.size(), seed + " \"seed\": 8,");
  auto r = ParseManifest(text, "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(), "m: key \"seed\" is given twice");
}

// Values outside the entries of classes and shards are held as JSON: at most 10,000.
TEST(ManifestTest, MoreThanTenThousandValuesBesidesTheEntriesAreRefused) {
  auto with_options = [](size_t values) {
    Manifest m = Sample();
    std::string list;
    for (size_t i = 0; i < values; ++i) list += i == 0 ? "0" : ",0";
    m.options_json = "{\"a\":[" + list + "]}";
    return ParseManifest(SerializeManifest(m), "m");
  };
  EXPECT_TRUE(with_options(9000).ok());
  auto r = with_options(10000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("m: more than 10000 JSON values besides the entries of "
                                      "classes and shards"),
            std::string::npos)
      << r.status().message();
}

TEST(ManifestTest, AnEntryOfMoreThanSixtyFourValuesIsRefused) {
  std::string text = SerializeManifest(Sample());
  const std::string records = "\"records\": 3,";
  ASSERT_NE(text.find(records), std::string::npos);
  std::string keys;
  for (int i = 0; i < 60; ++i) keys += "\"k" + std::to_string(i) + "\": 0, ";
  text.replace(text.find(records), records.size(), records + keys);
  auto r = ParseManifest(text, "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(r.status().message(), "m: shards[0]: more than 64 JSON values in one entry");
}

// Entries are read as the parser meets them, but their faults are reported in the order
// of the checks: a manifest of a newer major version is NotSupported, whatever its
// shards hold, even when they come first in the file.
TEST(ManifestTest, EntryFaultsComeAfterTheChecksBeforeThem) {
  std::string text = SerializeManifest(Sample());
  const std::string v = "\"format_version\": \"1.0\"";
  text.replace(text.find(v), v.size(), "\"format_version\": \"2.0\"");
  text = WithFileName(text, "shard-00000-of-00001.tfrecord", R"("a/b")");
  // The shards first: moved to the start of the object (they are its last key).
  const size_t at = text.find(",\n  \"shards\": [");
  const size_t end = text.rfind("]") + 1;
  ASSERT_NE(at, std::string::npos) << text;
  const std::string shards = text.substr(at + 1, end - at - 1);
  text.erase(at, end - at);
  text.insert(1, shards + ",");
  auto r = ParseManifest(text, "m");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported) << r.status().ToString();
}

}  // namespace
}  // namespace shardpack
