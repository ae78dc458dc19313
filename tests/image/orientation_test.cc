#include "image/orientation.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace shardpack::image {
namespace {

// 2 rows x 3 columns, pixel value = its index:
//   0 1 2
//   3 4 5
Image Asymmetric(int channels) {
  Image img;
  img.height = 2;
  img.width = 3;
  img.channels = channels;
  for (int i = 0; i < 6; ++i) {
    for (int c = 0; c < channels; ++c) img.pixels.push_back(static_cast<uint8_t>(i + 10 * c));
  }
  return img;
}

struct Expected {
  int orientation;
  int height;
  int width;
  std::vector<uint8_t> indices;  // row-major, input pixel index of each output pixel
};

// From Pillow 13's ImageOps.exif_transpose mapping (Image.transpose on the image above).
const Expected kExpected[] = {
    {1, 2, 3, {0, 1, 2, 3, 4, 5}}, {2, 2, 3, {2, 1, 0, 5, 4, 3}},  // FLIP_LEFT_RIGHT
    {3, 2, 3, {5, 4, 3, 2, 1, 0}},                                 // ROTATE_180
    {4, 2, 3, {3, 4, 5, 0, 1, 2}},                                 // FLIP_TOP_BOTTOM
    {5, 3, 2, {0, 3, 1, 4, 2, 5}},                                 // TRANSPOSE
    {6, 3, 2, {3, 0, 4, 1, 5, 2}},                                 // ROTATE_270 (90 clockwise)
    {7, 3, 2, {5, 2, 4, 1, 3, 0}},                                 // TRANSVERSE
    {8, 3, 2, {2, 5, 1, 4, 0, 3}},  // ROTATE_90 (90 counter-clockwise)
};

TEST(OrientationTest, EveryValueMovesPixelsLikeExifTranspose) {
  for (int channels : {1, 3, 4}) {
    for (const Expected& e : kExpected) {
      SCOPED_TRACE(::testing::Message()
                   << "orientation " << e.orientation << ", " << channels << " channels");
      const Image out = ApplyOrientation(Asymmetric(channels), e.orientation);
      EXPECT_EQ(out.height, e.height);
      EXPECT_EQ(out.width, e.width);
      EXPECT_EQ(out.channels, channels);
      std::vector<uint8_t> expected;
      for (uint8_t i : e.indices) {
        for (int c = 0; c < channels; ++c) expected.push_back(static_cast<uint8_t>(i + 10 * c));
      }
      EXPECT_EQ(out.pixels, expected);
    }
  }
}

TEST(OrientationTest, ValuesOutsideOneToEightLeaveTheImageUnchanged) {
  for (int orientation : {-1, 0, 9, 255}) {
    const Image out = ApplyOrientation(Asymmetric(3), orientation);
    EXPECT_EQ(out.height, 2);
    EXPECT_EQ(out.width, 3);
    EXPECT_EQ(out.pixels, Asymmetric(3).pixels) << "orientation " << orientation;
  }
}

// Larger than one 32x32 tile in both directions, odd sizes: checks every pixel against
// the formulas in orientation.h.
TEST(OrientationTest, LargeImagesFollowTheDocumentedFormulas) {
  constexpr int kH = 45, kW = 70, kC = 3;
  Image src;
  src.height = kH;
  src.width = kW;
  src.channels = kC;
  for (int i = 0; i < kH * kW * kC; ++i)
    src.pixels.push_back(static_cast<uint8_t>(i * 7 + i / 256));
  for (int orientation = 2; orientation <= 8; ++orientation) {
    const Image out = ApplyOrientation(src, orientation);
    const bool swapped = orientation >= 5;
    ASSERT_EQ(out.height, swapped ? kW : kH);
    ASSERT_EQ(out.width, swapped ? kH : kW);
    int mismatches = 0;
    for (int y = 0; y < out.height; ++y) {
      for (int x = 0; x < out.width; ++x) {
        int sx = x, sy = y;
        switch (orientation) {
          case 2:
            sx = kW - 1 - x;
            break;
          case 3:
            sx = kW - 1 - x;
            sy = kH - 1 - y;
            break;
          case 4:
            sy = kH - 1 - y;
            break;
          case 5:
            sx = y;
            sy = x;
            break;
          case 6:
            sx = y;
            sy = kH - 1 - x;
            break;
          case 7:
            sx = kW - 1 - y;
            sy = kH - 1 - x;
            break;
          case 8:
            sx = kW - 1 - y;
            sy = x;
            break;
        }
        for (int c = 0; c < kC; ++c) {
          mismatches += out.row(y)[x * kC + c] != src.row(sy)[sx * kC + c];
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << "orientation " << orientation;
  }
}

TEST(OrientationTest, RotationsComposeBackToTheOriginal) {
  Image src = Asymmetric(3);
  // 6 (90 clockwise) then 8 (90 counter-clockwise); 3 twice; 5 twice; 7 twice.
  EXPECT_EQ(ApplyOrientation(ApplyOrientation(src, 6), 8).pixels, src.pixels);
  EXPECT_EQ(ApplyOrientation(ApplyOrientation(src, 3), 3).pixels, src.pixels);
  EXPECT_EQ(ApplyOrientation(ApplyOrientation(src, 5), 5).pixels, src.pixels);
  EXPECT_EQ(ApplyOrientation(ApplyOrientation(src, 7), 7).pixels, src.pixels);
}

TEST(OrientationTest, SinglePixelAndSingleRowImages) {
  Image dot;
  dot.height = dot.width = dot.channels = 1;
  dot.pixels = {42};
  for (int orientation = 1; orientation <= 8; ++orientation) {
    const Image out = ApplyOrientation(dot, orientation);
    EXPECT_EQ(out.pixels, std::vector<uint8_t>{42});
  }
  Image line;
  line.height = 1;
  line.width = 4;
  line.channels = 1;
  line.pixels = {1, 2, 3, 4};
  const Image turned = ApplyOrientation(line, 6);
  EXPECT_EQ(turned.height, 4);
  EXPECT_EQ(turned.width, 1);
  EXPECT_EQ(turned.pixels, (std::vector<uint8_t>{1, 2, 3, 4}));
  EXPECT_EQ(ApplyOrientation(line, 8).pixels, (std::vector<uint8_t>{4, 3, 2, 1}));
}

// Decoders never produce such an image; the contract is "no out-of-bounds access".
TEST(OrientationDeathTest, MalformedImageAssertsOrIsReturnedUnchanged) {
  Image bad = Asymmetric(3);
  bad.pixels.pop_back();
  EXPECT_DEBUG_DEATH(
      {
        const Image out = ApplyOrientation(bad, 6);
        EXPECT_EQ(out.height, 2);
        EXPECT_EQ(out.pixels.size(), 17u);
      },
      "pixels.size");
}

}  // namespace
}  // namespace shardpack::image
