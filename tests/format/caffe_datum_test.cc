#include "format/caffe_datum.h"

#include <gtest/gtest.h>

#include "format/caffe_datum_test.pb.h"
#include "test_util.h"

namespace shardpack::format {
namespace {

// 2x3 RGB: pixel (y, x) = (10y + x, 100 + 10y + x, 200 + 10y + x).
std::vector<uint8_t> Rgb2x3() {
  std::vector<uint8_t> px;
  for (int y = 0; y < 2; ++y) {
    for (int x = 0; x < 3; ++x) {
      for (int c = 0; c < 3; ++c) px.push_back(static_cast<uint8_t>(100 * c + 10 * y + x));
    }
  }
  return px;
}

TEST(CaffeDatumTest, EncodedDatumIsCaffesSchemaWithChwBgrData) {
  std::string value = EncodeCaffeDatum(Rgb2x3().data(), 2, 3, 3, 7);
  caffe_test::Datum d;
  ASSERT_TRUE(d.ParseFromString(value));
  EXPECT_EQ(d.channels(), 3);
  EXPECT_EQ(d.height(), 2);
  EXPECT_EQ(d.width(), 3);
  EXPECT_EQ(d.label(), 7);
  EXPECT_TRUE(d.has_encoded());
  EXPECT_FALSE(d.encoded());
  EXPECT_EQ(d.float_data_size(), 0);
  ASSERT_EQ(d.data().size(), 18u);
  // Plane 0 is blue (HWC channel 2), plane 2 red; within a plane, row-major.
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 2; ++y) {
      for (int x = 0; x < 3; ++x) {
        EXPECT_EQ(static_cast<uint8_t>(d.data()[(c * 2 + y) * 3 + x]), 100 * (2 - c) + 10 * y + x)
            << "c=" << c << " y=" << y << " x=" << x;
      }
    }
  }
  // Field-number order, as libprotobuf serializes a proto2 message.
  EXPECT_EQ(value, d.SerializeAsString());
}

TEST(CaffeDatumTest, GrayDatumHasOnePlaneAsStored) {
  std::vector<uint8_t> gray = {1, 2, 3, 4, 5, 6};
  caffe_test::Datum d;
  ASSERT_TRUE(d.ParseFromString(EncodeCaffeDatum(gray.data(), 3, 2, 1, 0)));
  EXPECT_EQ(d.channels(), 1);
  EXPECT_EQ(d.data(), std::string("\x01\x02\x03\x04\x05\x06", 6));
}

TEST(CaffeDatumTest, ParserReadsWhatLibprotobufWrites) {
  caffe_test::Datum d;
  d.set_label(3);
  d.set_width(2);
  d.set_height(1);
  d.set_channels(1);
  d.set_data("ab");
  d.add_float_data(1.5f);
  d.add_float_data(2.5f);
  const std::string bytes = d.SerializeAsString();
  CaffeDatumView v;
  ASSERT_OK(ParseCaffeDatum(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &v));
  EXPECT_EQ(v.channels, 1);
  EXPECT_EQ(v.height, 1);
  EXPECT_EQ(v.width, 2);
  EXPECT_EQ(v.label, 3);
  EXPECT_EQ(v.data, "ab");
  EXPECT_EQ(v.float_data, 2u);
  EXPECT_FALSE(v.encoded);
  Status s = CheckCaffeDatum(v, ImageEncoding::kRaw);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("float_data holds 2 values"), std::string::npos) << s.message();
}

TEST(CaffeDatumTest, TruncatedDatumIsCorruptionWithItsOffset) {
  std::string value = EncodeCaffeDatum(Rgb2x3().data(), 2, 3, 3, 1);
  value.resize(12);  // inside the data field
  CaffeDatumView v;
  Status s = ParseCaffeDatum(reinterpret_cast<const uint8_t*>(value.data()), value.size(), &v);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("runs past the value at byte 6"), std::string::npos) << s.message();
}

TEST(CaffeDatumTest, CheckNamesADataSizeThatDoesNotMatchTheShape) {
  caffe_test::Datum d;
  d.set_channels(3);
  d.set_height(2);
  d.set_width(2);
  d.set_label(0);
  d.set_data(std::string(11, 'x'));
  const std::string bytes = d.SerializeAsString();
  CaffeDatumView v;
  ASSERT_OK(ParseCaffeDatum(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &v));
  Status s = CheckCaffeDatum(v, ImageEncoding::kRaw);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("Datum.data: 11 bytes, expected 12 (3x2x2, CHW)"), std::string::npos)
      << s.message();
}

CaffeDatumView MustParseDatum(const std::string& bytes) {
  CaffeDatumView v;
  EXPECT_OK(ParseCaffeDatum(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &v));
  return v;
}

TEST(CaffeDatumTest, CheckRefusesAnEncodedDatumInARawDataset) {
  caffe_test::Datum d;
  d.set_encoded(true);
  d.set_data("\xff\xd8\xff");
  d.set_label(0);
  const std::string bytes = d.SerializeAsString();
  EXPECT_NE(CheckCaffeDatum(MustParseDatum(bytes), ImageEncoding::kRaw)
                .message()
                .find("Datum.encoded is true"),
            std::string::npos);
  EXPECT_OK(CheckCaffeDatum(MustParseDatum(bytes), ImageEncoding::kJpeg));
}

// convert_imageset --encoded (caffe::ReadImageToDatum): the file as data, the label, and
// encoded = true; no shape.
TEST(CaffeDatumTest, EncodedImageDatumIsWhatConvertImagesetEncodedWrites) {
  const std::string file = "\xff\xd8\xff\xe0 a JPEG's bytes";
  const std::string value =
      EncodeCaffeEncodedDatum({reinterpret_cast<const uint8_t*>(file.data()), file.size()}, 300);
  caffe_test::Datum want;
  want.set_data(file);
  want.set_label(300);
  want.set_encoded(true);
  EXPECT_EQ(value, want.SerializeAsString());
  EXPECT_EQ(value.substr(0, 2), std::string("\x22") + static_cast<char>(file.size()));
  caffe_test::Datum d;
  ASSERT_TRUE(d.ParseFromString(value));
  EXPECT_FALSE(d.has_channels());
  EXPECT_FALSE(d.has_height());
  EXPECT_FALSE(d.has_width());
  const CaffeDatumView v = MustParseDatum(value);
  EXPECT_TRUE(v.encoded);
  EXPECT_EQ(v.data, file);
  EXPECT_OK(CheckCaffeDatum(v, ImageEncoding::kJpeg));
}

TEST(CaffeDatumTest, CheckNamesAnEncodedDatumOfTheWrongKind) {
  const std::string jpeg = "\xff\xd8\xff\xdb...";
  const std::string png = "\x89PNG\r\n\x1a\n...";
  auto datum = [](const std::string& file) {
    return EncodeCaffeEncodedDatum({reinterpret_cast<const uint8_t*>(file.data()), file.size()}, 1);
  };
  EXPECT_OK(CheckCaffeDatum(MustParseDatum(datum(png)), ImageEncoding::kPng));
  Status s = CheckCaffeDatum(MustParseDatum(datum(jpeg)), ImageEncoding::kPng);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("Datum.data: 7 bytes that do not start with the png signature"),
            std::string::npos)
      << s.message();
  // A raw Datum in an encoded dataset.
  s = CheckCaffeDatum(MustParseDatum(EncodeCaffeDatum(Rgb2x3().data(), 2, 3, 3, 7)),
                      ImageEncoding::kJpeg);
  EXPECT_NE(s.message().find("Datum.encoded is false: the manifest says jpeg files"),
            std::string::npos)
      << s.message();
  // No label.
  caffe_test::Datum d;
  d.set_encoded(true);
  d.set_data(jpeg);
  EXPECT_NE(CheckCaffeDatum(MustParseDatum(d.SerializeAsString()), ImageEncoding::kJpeg)
                .message()
                .find("Datum.label: missing"),
            std::string::npos);
}

TEST(CaffeDatumTest, KeyIsEightDigitsUnderscoreAndPathAsConvertImagesetWritesIt) {
  EXPECT_EQ(CaffeKey(0, "cat/a.jpg"), "00000000_cat/a.jpg");
  EXPECT_EQ(CaffeKey(12345678, "x"), "12345678_x");
}

TEST(CaffeDatumTest, KeyIsCutToLmdbsLimit) {
  std::string key = CaffeKey(5, std::string(1000, 'p'));
  EXPECT_EQ(key.size(), kLmdbMaxKeySize);
  EXPECT_EQ(key.substr(0, 10), "00000005_p");
}

}  // namespace
}  // namespace shardpack::format
