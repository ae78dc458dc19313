#include "image/encoder.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "image/image.h"
#include "image_fixtures.h"

namespace shardpack::image {
namespace {

TEST(EncoderTest, PngRoundTripsExactly) {
  for (int channels : {1, 3}) {
    std::vector<uint8_t> px = testing::Pattern(13, 7, channels, 2);
    auto png = EncodePng(px.data(), 13, 7, channels);
    ASSERT_TRUE(png.ok());
    DecodeOptions o;
    o.channels = channels;
    auto img = Decode(reinterpret_cast<const uint8_t*>(png->data()), png->size(), o);
    ASSERT_TRUE(img.ok()) << img.status().ToString();
    EXPECT_EQ(img->pixels, px);
  }
}

// The compression level changes the deflate stream, never the pixels; the default is
// libpng's own (no call to png_set_compression_level), and 6 says so explicitly.
TEST(EncoderTest, PngCompressionLevelsAllRoundTripExactly) {
  std::vector<uint8_t> px = testing::Pattern(64, 48, 3, 3);
  auto by_default = EncodePng(px.data(), 64, 48, 3);
  ASSERT_TRUE(by_default.ok());
  std::vector<std::string> files;
  for (int level = 0; level <= 9; ++level) {
    auto png = EncodePng(px.data(), 64, 48, 3, {.compression_level = level});
    ASSERT_TRUE(png.ok()) << level;
    DecodeOptions o;
    o.channels = 3;
    auto img = Decode(reinterpret_cast<const uint8_t*>(png->data()), png->size(), o);
    ASSERT_TRUE(img.ok()) << level << ": " << img.status().ToString();
    EXPECT_EQ(img->pixels, px) << level;
    files.push_back(*png);
  }
  EXPECT_EQ(files[6], *by_default);
  EXPECT_NE(files[0], files[6]);
  EXPECT_NE(files[1], files[6]);
  // Level 0 stores: at least the filtered rows (a filter byte each) plus zlib's framing.
  EXPECT_GT(files[0].size(), px.size());
  EXPECT_LT(files[9].size(), files[0].size());
  for (int level : {-1, 10}) {
    auto bad = EncodePng(px.data(), 64, 48, 3, {.compression_level = level});
    EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << level;
    EXPECT_NE(bad.status().message().find("0..9"), std::string::npos) << bad.status().message();
  }
}

TEST(EncoderTest, JpegRoundTripsCloselyAtHighQuality) {
  std::vector<uint8_t> px = testing::Pattern(32, 48, 3, 1);
  auto jpg = EncodeJpeg(px.data(), 32, 48, 3, {.quality = 98, .subsampling = 444});
  ASSERT_TRUE(jpg.ok());
  auto img = Decode(reinterpret_cast<const uint8_t*>(jpg->data()), jpg->size(), {});
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  ASSERT_EQ(img->pixels.size(), px.size());
  double err = 0;
  for (size_t i = 0; i < px.size(); ++i) err += std::abs(int(px[i]) - int(img->pixels[i]));
  EXPECT_LT(err / px.size(), 2.0);
}

TEST(EncoderTest, ImpossibleShapesAreInvalidArgument) {
  uint8_t px[4] = {};
  EXPECT_EQ(EncodeJpeg(px, 1, 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePng(px, 0, 2, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePng(px, 1, 1, 5).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardpack::image
