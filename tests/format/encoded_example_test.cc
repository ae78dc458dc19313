// TensorFlow's encoded-image Examples (build_image_data.py): ParseExampleView finds their
// features and DecodeEncodedSample checks them (docs/FORMAT.md §9).
#include <gtest/gtest.h>

#include "format/example.h"
#include "test_util.h"
#include "tf_fixtures.h"
#include "util/crc32c.h"

namespace shardpack::format {
namespace {

Status Decode(const std::string& payload, EncodedSample* out, PayloadKind* kind = nullptr) {
  ExampleView view;
  SHARDPACK_RETURN_IF_ERROR(
      ParseExampleView(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &view));
  auto k = ClassifyExample(view);
  if (!k.ok()) return k.status();
  if (kind != nullptr) *kind = *k;
  return DecodeEncodedSample(view, out);
}

TEST(EncodedExampleTest, BuildImageDataExampleDecodesWithEveryFeature) {
  testing::TfImageExample e{.encoded = "\xff\xd8\xff\xe0 jpeg bytes",
                            .label = 12,
                            .height = 375,
                            .width = 500,
                            .class_text = "tench",
                            .filename = "n01440764_10026.JPEG"};
  EncodedSample s;
  PayloadKind kind = PayloadKind::kRaw;
  const std::string payload = e.Serialize();  // s points into it
  ASSERT_OK(Decode(payload, &s, &kind));
  EXPECT_EQ(kind, PayloadKind::kEncoded);
  EXPECT_EQ(s.encoded, e.encoded);
  EXPECT_EQ(s.format, "JPEG");
  EXPECT_EQ(s.colorspace, "RGB");
  EXPECT_EQ(s.label, 12);
  EXPECT_EQ(s.height, 375);
  EXPECT_EQ(s.width, 500);
  EXPECT_EQ(s.channels, 3);
  EXPECT_EQ(s.class_text, "tench");
  EXPECT_EQ(s.filename, "n01440764_10026.JPEG");
}

TEST(EncodedExampleTest, OptionalFeaturesMayBeAbsent) {
  testing::TfImageExample e{.encoded = "png", .label = 0, .format = ""};
  EncodedSample s;
  const std::string payload = e.Serialize();  // s points into it
  ASSERT_OK(Decode(payload, &s));
  EXPECT_EQ(s.height, 0);
  EXPECT_EQ(s.format, "");
  EXPECT_EQ(s.class_text, "");
}

TEST(EncodedExampleTest, RawExampleIsClassifiedRaw) {
  std::string payload = testing::TfRawExample({1, 2, 3}, 1, 1, 3, 0, "a", "a.png");
  ExampleView view;
  ASSERT_OK(
      ParseExampleView(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &view));
  auto kind = ClassifyExample(view);
  ASSERT_TRUE(kind.ok());
  EXPECT_EQ(*kind, PayloadKind::kRaw);
}

TEST(EncodedExampleTest, ExampleWithBothRawAndEncodedIsCorruption) {
  testing::TfImageExample e{.encoded = "x"};
  std::string payload = e.Serialize() + testing::TfRawExample({1}, 1, 1, 1, 0, "a", "a");
  EncodedSample s;
  Status st = Decode(payload, &s);  // two Example.features occurrences merge
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("both image/raw and image/encoded"), std::string::npos)
      << st.message();
}

TEST(EncodedExampleTest, ExampleWithNeitherIsCorruption) {
  EncodedSample s;
  Status st = Decode("", &s);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("neither image/raw"), std::string::npos) << st.message();
}

TEST(EncodedExampleTest, EmptyEncodedImageIsCorruption) {
  testing::TfImageExample e{.encoded = ""};
  EncodedSample s;
  Status st = Decode(e.Serialize(), &s);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("image/encoded: empty"), std::string::npos) << st.message();
}

TEST(EncodedExampleTest, HeightOutsideTheFormatsRangeIsCorruption) {
  testing::TfImageExample e{.encoded = "x", .height = 70000, .width = 10};
  EncodedSample s;
  Status st = Decode(e.Serialize(), &s);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("image/height: 70000 is outside 1..65500"), std::string::npos)
      << st.message();
}

TEST(EncodedExampleTest, LabelOfTheWrongTypeIsCorruption) {
  // A float label: the key is there with the wrong kind of list.
  std::string payload = testing::TfImageExample{.encoded = "x"}.Serialize();
  ExampleView view;
  ASSERT_OK(
      ParseExampleView(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &view));
  view.label.kind = FeatureRef::Kind::kFloat;
  EncodedSample s;
  Status st = DecodeEncodedSample(view, &s);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("image/class/label: expected one int64 value, found 1 float"),
            std::string::npos)
      << st.message();
}

}  // namespace
}  // namespace shardpack::format

namespace shardpack::format {
namespace {

// A dataset's encoded sample (§2.5) as the writer lays it out: the features of a raw
// sample with image/format "JPEG" and image/encoded/crc32c, then image/encoded.
std::string StoredEncodedPayload(std::string_view file, ImageEncoding encoding, int64_t channels,
                                 std::string_view format_override = {}) {
  SampleMeta meta{.height = 3,
                  .width = 2,
                  .channels = channels,
                  .label = 1,
                  .class_text = "dog",
                  .filename = "a.png"};
  std::string entries = EncodeEncodedFeatureEntries(meta, encoding, crc32c::Value(file));
  if (!format_override.empty()) {
    const std::string from = encoding == ImageEncoding::kPng ? "PNG" : "JPEG";
    entries.replace(entries.find(from), from.size(), format_override);
  }
  std::string payload = EncodePayloadPrefix(entries, file.size(), 0, 1, kKeyEncoded);
  payload.append(file);
  return payload;
}

DecodedSample ParseOk(const std::string& payload) {
  DecodedSample d;
  Status s =
      ParseStoredSample(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &d);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return d;
}

Status ParseError(const std::string& payload) {
  DecodedSample d;
  return ParseStoredSample(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &d);
}

TEST(StoredEncodedSampleTest, TheWritersLayoutParsesBackWithEveryField) {
  const std::string file = "\x89PNG\r\n\x1a\n not really the rest";
  const std::string payload = StoredEncodedPayload(file, ImageEncoding::kPng, 3);
  EXPECT_TRUE(payload.ends_with(file)) << "image/encoded is the last entry";
  const DecodedSample d = ParseOk(payload);
  EXPECT_EQ(d.encoding, ImageEncoding::kPng);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.pixels), d.pixel_bytes), file);
  EXPECT_EQ(d.height, 3);
  EXPECT_EQ(d.width, 2);
  EXPECT_EQ(d.channels, 3);
  EXPECT_EQ(d.label, 1);
  EXPECT_EQ(d.class_text, "dog");
  EXPECT_EQ(d.filename, "a.png");
  ASSERT_TRUE(d.has_pixel_crc);
  EXPECT_EQ(d.pixel_crc, crc32c::Value(file));
  EXPECT_OK(CheckPixelCrc(d, crc32c::Value(file)));
  EXPECT_EQ(CheckPixelCrc(d, 0).message().rfind("image/encoded checksum 0x00000000", 0), 0u)
      << CheckPixelCrc(d, 0).message();
  EXPECT_EQ(ParseOk(StoredEncodedPayload(file, ImageEncoding::kJpeg, 1)).encoding,
            ImageEncoding::kJpeg);
  // The raw-only parser (adopt, TFRecord inputs) still wants image/raw.
  DecodedSample raw;
  EXPECT_EQ(
      ParseSample(reinterpret_cast<const uint8_t*>(payload.data()), payload.size(), &raw).code(),
      StatusCode::kCorruption);
}

TEST(StoredEncodedSampleTest, AnUnknownFormatOrChannelCountIsNamed) {
  const std::string file = "\xff\xd8\xff";
  Status s = ParseError(StoredEncodedPayload(file, ImageEncoding::kJpeg, 3, "GIFF"));
  EXPECT_EQ(s.message(), "feature image/format: \"GIFF\", expected \"JPEG\" or \"PNG\"");
  s = ParseError(StoredEncodedPayload(file, ImageEncoding::kJpeg, 4));
  EXPECT_EQ(s.message(), "feature image/channels: 4, expected 1 (gray) or 3 (RGB)");
  s = ParseError(StoredEncodedPayload("", ImageEncoding::kJpeg, 3));
  EXPECT_EQ(s.message(), "feature image/encoded: empty (0 bytes)");
}

}  // namespace
}  // namespace shardpack::format
