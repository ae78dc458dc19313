// TensorFlow's encoded-image Examples (build_image_data.py): ParseExampleView finds their
// features and DecodeEncodedSample checks them (docs/FORMAT.md §9).
#include <gtest/gtest.h>

#include "format/example.h"
#include "test_util.h"
#include "tf_fixtures.h"

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
