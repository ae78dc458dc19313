#include "read/normalize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace shardpack::read {
namespace {

float Bits(uint32_t bits) { return std::bit_cast<float>(bits); }

NormalizeParams Params(std::array<float, 3> scale, std::array<float, 3> bias) {
  NormalizeParams p;
  p.scale = scale;
  p.bias = bias;
  return p;
}

// The half nearest to `value` (|value| < 65520), by an independent route: scale it so that
// the half's last place is 1, round with the FPU (nearest even), scale back.
float ReferenceHalfValue(float value) {
  if (value == 0) return value;
  const int exponent = std::max(std::ilogb(value), -14);
  const double ulp = std::ldexp(1.0, exponent - 10);
  return static_cast<float>(std::nearbyint(static_cast<double>(value) / ulp) * ulp);
}

TEST(FloatToHalfTest, ExactValuesKeepTheirBits) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalf(0.5f), 0x3800);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
}

TEST(FloatToHalfTest, TiesRoundToEven) {
  const float ulp = std::ldexp(1.0f, -10);             // of a half in [1, 2)
  EXPECT_EQ(FloatToHalf(1.0f + ulp / 2), 0x3C00);      // tie, 0x3C00 is even
  EXPECT_EQ(FloatToHalf(1.0f + 3 * ulp / 2), 0x3C02);  // tie, 0x3C02 is even
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3C01);
  EXPECT_EQ(FloatToHalf(2.0f - ulp / 2), 0x4000);  // rounds up into the next exponent
}

TEST(FloatToHalfTest, LargeValuesOverflowToInfinity) {
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // tie between 65504 and 65536: even is inf
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xFC00);
  EXPECT_EQ(FloatToHalf(1e9f), 0x7C00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
}

TEST(FloatToHalfTest, SmallValuesBecomeSubnormals) {
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie with 0, which is even
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2: 2
  EXPECT_EQ(FloatToHalf(std::ldexp(5.0f, -25)), 0x0002);  // tie between 2 and 3: 2
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.5f, -24)), 0x0400);  // tie: rounds to the normal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(FloatToHalfTest, ZeroKeepsItsSign) {
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -26)), 0x8000);  // underflows to -0
}

TEST(FloatToHalfTest, NaNStaysAQuietNaNWithItsSign) {
  EXPECT_EQ(FloatToHalf(Bits(0x7FC00000u)), 0x7E00);
  EXPECT_EQ(FloatToHalf(Bits(0xFFC00000u)), 0xFE00);
  EXPECT_EQ(FloatToHalf(Bits(0x7F800001u)), 0x7E00);  // signalling, payload below the top bits
  EXPECT_EQ(FloatToHalf(Bits(0x7FFFFFFFu)), 0x7FFF);
}

TEST(FloatToHalfTest, RoundsEveryMagnitudeToTheNearestHalf) {
  // Every 4099th bit pattern below 65520, both signs: all exponents, subnormal to normal.
  for (uint32_t bits = 0; bits < 0x477FF000u; bits += 4099) {
    for (const uint32_t sign : {0u, 0x80000000u}) {
      const float value = Bits(bits | sign);
      const float expected = ReferenceHalfValue(value);
      const float got = HalfToFloat(FloatToHalf(value));
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(expected))
          << "value " << value << " (bits 0x" << std::hex << (bits | sign) << ")";
    }
  }
}

TEST(HalfToFloatTest, InvertsFloatToHalfForEveryHalf) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const float value = HalfToFloat(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(value)) << std::hex << h;
    } else {
      EXPECT_EQ(FloatToHalf(value), h) << std::hex << h;
    }
  }
}

TEST(MakeNormalizeParamsTest, FollowsTorchvisionsConvention) {
  const NormalizeParams p = MakeNormalizeParams({0.5f, 0.25f, 0.0f}, {0.5f, 0.125f, 1.0f});
  EXPECT_EQ(p.scale[0], 1.0f / 127.5f);
  EXPECT_EQ(p.bias[0], -1.0f);
  EXPECT_EQ(p.scale[1], 1.0f / (255.0f * 0.125f));
  EXPECT_EQ(p.bias[1], -2.0f);
  EXPECT_EQ(p.scale[2], 1.0f / 255.0f);
  EXPECT_EQ(p.bias[2], -0.0f);
}

// One HostNormalizer per call, as the tests below want each case alone.
void NormalizeHost(const uint8_t* in, int n, int h, int w, int c, const NormalizeParams& p,
                   NormalizeType type, void* out) {
  HostNormalizer(p, type).Run(in, n, h, w, c, out);
}

TEST(NormalizeHostTest, Float32IsScaleTimesPixelPlusBias) {
  const uint8_t in[] = {0, 1, 10, 255};
  float out[4];
  NormalizeHost(in, 1, 1, 4, 1, Params({2, 0, 0}, {-1, 0, 0}), NormalizeType::kFloat32, out);
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 19.0f);
  EXPECT_EQ(out[3], 509.0f);
}

TEST(NormalizeHostTest, Float32RoundsOnceAsAFusedMultiplyAdd) {
  // 255 * (1 + 2^-23) - 255 is 255 * 2^-23 exactly; rounding the product to float first
  // would give 2^-15.
  const uint8_t in[] = {255};
  float out[1];
  NormalizeHost(in, 1, 1, 1, 1, Params({1.0f + std::ldexp(1.0f, -23), 0, 0}, {-255.0f, 0, 0}),
                NormalizeType::kFloat32, out);
  EXPECT_EQ(out[0], std::ldexp(255.0f, -23));
}

TEST(NormalizeHostTest, Float16IsTheRoundedFloat32Result) {
  const uint8_t in[] = {3, 0, 255, 2};
  uint16_t out[4];
  NormalizeHost(in, 1, 2, 2, 1, Params({0.5f, 0, 0}, {0.25f, 0, 0}), NormalizeType::kFloat16, out);
  EXPECT_EQ(out[0], 0x3F00);  // 1.75
  EXPECT_EQ(out[1], 0x3400);  // 0.25
  EXPECT_EQ(out[2], 0x57FC);  // 127.75
  EXPECT_EQ(out[3], 0x3D00);  // 1.25
}

TEST(NormalizeHostTest, Float16AgreesWithFloatToHalfOfFloat32ForEveryByte) {
  std::vector<uint8_t> in(256 * 3);
  for (int i = 0; i < 256 * 3; ++i) in[i] = static_cast<uint8_t>(i / 3);
  const NormalizeParams p = MakeNormalizeParams({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
  std::vector<float> f32(in.size());
  std::vector<uint16_t> f16(in.size());
  NormalizeHost(in.data(), 1, 16, 16, 3, p, NormalizeType::kFloat32, f32.data());
  NormalizeHost(in.data(), 1, 16, 16, 3, p, NormalizeType::kFloat16, f16.data());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(f16[i], FloatToHalf(f32[i])) << i;
}

TEST(NormalizeHostTest, ThreeChannelsGoFromNhwcToNchw) {
  constexpr int kN = 2, kH = 2, kW = 3, kC = 3;
  std::vector<uint8_t> in(kN * kH * kW * kC);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i);
  std::vector<float> out(in.size());
  NormalizeHost(in.data(), kN, kH, kW, kC, Params({1, 10, 100}, {0, 0.5f, -1}),
                NormalizeType::kFloat32, out.data());
  // Image 1, row 0, column 2, channel 1: input byte ((1 * 2 + 0) * 3 + 2) * 3 + 1 = 25,
  // output element ((1 * 3 + 1) * 2 + 0) * 3 + 2 = 26.
  EXPECT_EQ(out[26], 250.5f);
  for (int n = 0; n < kN; ++n) {
    for (int c = 0; c < kC; ++c) {
      for (int y = 0; y < kH; ++y) {
        for (int x = 0; x < kW; ++x) {
          const float pixel = in[((n * kH + y) * kW + x) * kC + c];
          const float expected = c == 0 ? pixel : c == 1 ? pixel * 10 + 0.5f : pixel * 100 - 1;
          EXPECT_EQ(out[((n * kC + c) * kH + y) * kW + x], expected)
              << "n " << n << " c " << c << " y " << y << " x " << x;
        }
      }
    }
  }
}

TEST(NormalizeHostTest, ThreeChannelFloat16UsesEachChannelsParameters) {
  const uint8_t in[] = {1, 1, 1, 2, 2, 2};  // two pixels
  uint16_t out[6];
  NormalizeHost(in, 1, 1, 2, 3, Params({1, 2, 4}, {0, 0, 1}), NormalizeType::kFloat16, out);
  const uint16_t expected[] = {0x3C00, 0x4000,   // channel 0: 1, 2
                               0x4000, 0x4400,   // channel 1: 2, 4
                               0x4500, 0x4880};  // channel 2: 5, 9
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], expected[i]) << i;
}

TEST(NormalizeHostTest, OneChannelUsesTheFirstParametersOnly) {
  const uint8_t in[] = {1, 2, 3, 4, 5, 6};  // two images of 1 x 3
  float out[6];
  NormalizeHost(in, 2, 1, 3, 1, Params({3, 100, 100}, {1, 100, 100}), NormalizeType::kFloat32, out);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], 3.0f * in[i] + 1) << i;
}

TEST(NormalizeHostTest, EmptyBatchWritesNothing) {
  const uint8_t in[] = {7};
  float out[1] = {42.0f};
  NormalizeHost(in, 0, 1, 1, 1, NormalizeParams(), NormalizeType::kFloat32, out);
  NormalizeHost(in, 1, 0, 1, 1, NormalizeParams(), NormalizeType::kFloat32, out);
  EXPECT_EQ(out[0], 42.0f);
}

TEST(HostNormalizerTest, ARunGivesTheSameBytesAsOneRunPerImage) {
  constexpr int kN = 3, kH = 5, kW = 7;
  std::vector<uint8_t> in(kN * kH * kW * 3);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 37 + 11);
  const NormalizeParams p = MakeNormalizeParams({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
  for (const NormalizeType type : {NormalizeType::kFloat32, NormalizeType::kFloat16}) {
    const HostNormalizer normalizer(p, type);
    EXPECT_EQ(normalizer.type(), type);
    for (const int c : {1, 3}) {
      const size_t image = kH * kW * c * NormalizeTypeSize(type);
      std::vector<uint8_t> whole(kN * image), each(kN * image);
      normalizer.Run(in.data(), kN, kH, kW, c, whole.data());
      for (int n = 0; n < kN; ++n) {
        normalizer.Run(in.data() + n * kH * kW * c, 1, kH, kW, c, each.data() + n * image);
      }
      EXPECT_EQ(whole, each) << "type " << static_cast<int>(type) << " c " << c;
    }
  }
}

TEST(CheckNormalizeStatisticsTest, TorchvisionUnitsPass) {
  EXPECT_TRUE(CheckNormalizeStatistics({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}).ok());
  EXPECT_TRUE(CheckNormalizeStatistics({0, 0.5f, 1}, {1, 0.5f, 1e-3f}).ok());
}

TEST(CheckNormalizeStatisticsTest, ZeroNegativeOrNonFiniteStdIsRefused) {
  for (const float bad : {0.0f, -0.2f, std::nanf(""), INFINITY}) {
    Status s = CheckNormalizeStatistics({0.5f, 0.5f, 0.5f}, {0.2f, bad, 0.2f});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("std[1] is"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("(0, 1]"), std::string::npos) << s.message();
  }
}

TEST(CheckNormalizeStatisticsTest, ValuesIn0To255UnitsAreRefusedWithTheFix) {
  Status s = CheckNormalizeStatistics({123.675f, 116.28f, 103.53f}, {58.395f, 57.12f, 57.375f});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("mean[0] is 123.675"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("divided by 255"), std::string::npos) << s.message();
  s = CheckNormalizeStatistics({0.5f, 0.5f, 0.5f}, {0.2f, 0.2f, 57.375f});
  EXPECT_NE(s.message().find("std[2] is 57.375"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace shardpack::read
