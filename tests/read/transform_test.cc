#include "read/transform.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "image/resize.h"
#include "read/random.h"
#include "test_util.h"

namespace shardpack::read {
namespace {

ImageSpec FixedSpec(int height, int width, int channels = 3) {
  ImageSpec spec;
  spec.channels = channels;
  spec.height = height;
  spec.width = width;
  return spec;
}

ImageSpec VariableSpec(int max_side = 500, int channels = 3) {
  ImageSpec spec;
  spec.channels = channels;
  spec.max_side = max_side;
  return spec;
}

LoaderOptions Options(Transform transform, int out_height = 0, int out_width = 0) {
  LoaderOptions o;
  o.transform = transform;
  o.output_height = out_height;
  o.output_width = out_width;
  return o;
}

SampleTransformer MustCreate(const LoaderOptions& options, const ImageSpec& spec) {
  StatusOr<SampleTransformer> t = SampleTransformer::Create(options, spec);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : SampleTransformer();
}

// Deterministic noise (a 32-bit LCG).
std::vector<uint8_t> Noise(int height, int width, int channels, uint32_t seed) {
  std::vector<uint8_t> v(static_cast<size_t>(height) * width * channels);
  for (uint8_t& b : v) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(seed >> 24);
  }
  return v;
}

// Pixel (y, x) holds y, x and 7 in its channels: a window's origin can be read back.
std::vector<uint8_t> Coordinates(int height, int width) {
  std::vector<uint8_t> v(static_cast<size_t>(height) * width * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &v[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(y);
      p[1] = static_cast<uint8_t>(x);
      p[2] = 7;
    }
  }
  return v;
}

std::vector<uint8_t> MustApply(const SampleTransformer& t, const std::vector<uint8_t>& pixels,
                               int height, int width, int channels, uint64_t key,
                               TransformScratch* scratch) {
  std::vector<uint8_t> out(static_cast<size_t>(t.out_height()) * t.out_width() * t.channels());
  const Status s = t.Apply(pixels.data(), height, width, channels, key, out.data(), scratch);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out;
}

SamplePlan MustPlan(const SampleTransformer& t, int height, int width, uint64_t key) {
  StatusOr<SamplePlan> plan = t.Plan(height, width, key);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : SamplePlan();
}

std::tuple<float, float, float, float> Box(const SamplePlan& p) { return {p.x0, p.y0, p.x1, p.y1}; }

int MaxAbsDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    worst = std::max(worst, std::abs(int{a[i]} - int{b[i]}));
  }
  return worst;
}

void ExpectInvalid(const LoaderOptions& options, const ImageSpec& spec,
                   const std::string& fragment) {
  StatusOr<SampleTransformer> t = SampleTransformer::Create(options, spec);
  ASSERT_FALSE(t.ok()) << "expected an error containing \"" << fragment << "\"";
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
}

// --- Random and keys --------------------------------------------------------------------

TEST(RandomTest, MatchesTheSplitMix64ReferenceStream) {
  // splitmix64.c (Vigna) seeded with 0.
  Random rng(0);
  EXPECT_EQ(rng.Next64(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.Next64(), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(rng.Next64(), 0x06c45d188009454full);
}

TEST(RandomTest, BelowCoversItsRangeEvenly) {
  Random rng(MixKey(1, 2, 3));
  int counts[7] = {};
  for (int i = 0; i < 7000; ++i) {
    const uint64_t v = rng.Below(7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  for (int c : counts) {
    EXPECT_GT(c, 850);
    EXPECT_LT(c, 1150);
  }
  EXPECT_EQ(Random(5).Below(1), 0u);
  Random big(9);
  for (int i = 0; i < 100; ++i) EXPECT_LT(big.Below(UINT64_MAX - 3), UINT64_MAX - 3);
}

TEST(RandomTest, BetweenIsInclusive) {
  Random rng(MixKey(4, 5, 6));
  std::set<int64_t> seen;
  for (int i = 0; i < 400; ++i) {
    const int64_t v = rng.Between(-2, 2);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 2);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(rng.Between(3, 3), 3);
}

TEST(RandomTest, UniformDoubleIsInTheUnitIntervalWithMeanOneHalf) {
  Random rng(MixKey(7, 8, 9));
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = rng.UniformDouble();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.02);
}

TEST(RandomTest, SameKeyGivesTheSameStream) {
  Random a(MixKey(1, 1, 1));
  Random b(MixKey(1, 1, 1));
  Random c(MixKey(1, 1, 2));
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    const uint64_t va = a.Next64();
    EXPECT_EQ(va, b.Next64());
    differs |= va != c.Next64();
  }
  EXPECT_TRUE(differs);
}

TEST(SampleKeyTest, DistinctIndicesOfAnEpochGetDistinctKeys) {
  std::set<uint64_t> keys;
  for (uint64_t i = 0; i < 10000; ++i) keys.insert(SampleKey(42, 3, i));
  EXPECT_EQ(keys.size(), 10000u);
}

TEST(SampleKeyTest, DependsOnSeedEpochAndIndex) {
  const uint64_t k = SampleKey(1, 2, 3);
  EXPECT_EQ(k, SampleKey(1, 2, 3));
  EXPECT_NE(k, SampleKey(0, 2, 3));
  EXPECT_NE(k, SampleKey(1, 1, 3));
  EXPECT_NE(k, SampleKey(1, 2, 4));
  EXPECT_NE(SampleKey(0, 0, 1), SampleKey(0, 1, 0));
}

// --- Create: shapes and validation ------------------------------------------------------

TEST(SampleTransformerTest, OutputShapeDefaultsToTheFixedShape) {
  const SampleTransformer t = MustCreate(Options(Transform::kNone), FixedSpec(24, 32, 1));
  EXPECT_EQ(t.out_height(), 24);
  EXPECT_EQ(t.out_width(), 32);
  EXPECT_EQ(t.channels(), 1);
  const SampleTransformer half =
      MustCreate(Options(Transform::kRandomCrop, 0, 16), FixedSpec(24, 32));
  EXPECT_EQ(half.out_height(), 24);
  EXPECT_EQ(half.out_width(), 16);
}

TEST(SampleTransformerTest, PassThroughOnlyForNoneWithoutFlip) {
  LoaderOptions o = Options(Transform::kNone);
  EXPECT_TRUE(MustCreate(o, FixedSpec(8, 8)).pass_through());
  o.random_flip = true;
  EXPECT_FALSE(MustCreate(o, FixedSpec(8, 8)).pass_through());
  EXPECT_FALSE(MustCreate(Options(Transform::kRandomCrop, 4, 4), FixedSpec(8, 8)).pass_through());
  EXPECT_FALSE(MustCreate(Options(Transform::kCenterCrop, 8, 8), FixedSpec(8, 8)).pass_through());
}

TEST(SampleTransformerTest, NoneOnAVariableSizeDatasetIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kNone, 32, 32), VariableSpec(), "needs a fixed-size dataset");
}

TEST(SampleTransformerTest, NoneWithAnotherOutputShapeIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kNone, 16, 32), FixedSpec(24, 32),
                "keeps the stored size 24x32, but the output size is 16x32");
}

TEST(SampleTransformerTest, RandomCropLargerThanTheSampleIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kRandomCrop, 25, 10), FixedSpec(24, 32),
                "window 25x10 is larger than the stored size 24x32");
}

TEST(SampleTransformerTest, RandomCropOnAVariableSizeDatasetIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kRandomCrop, 16, 16), VariableSpec(),
                "\"random_crop\" needs a fixed-size dataset");
}

TEST(SampleTransformerTest, VariableSizeDatasetWithoutAnOutputSizeIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kCenterCrop, 224, 0), VariableSpec(),
                "a variable-size dataset needs both output sides set");
}

TEST(SampleTransformerTest, NegativeOutputSideIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kCenterCrop, -1, 224), VariableSpec(),
                "output_height x output_width -1x224 must not be negative");
}

TEST(SampleTransformerTest, OutputSideAbove65500IsInvalidArgument) {
  ExpectInvalid(Options(Transform::kCenterCrop, 65501, 8), VariableSpec(),
                "output size 65501x8 exceeds 65500");
}

TEST(SampleTransformerTest, NegativeResizeShorterIsInvalidArgument) {
  LoaderOptions o = Options(Transform::kCenterCrop, 224, 224);
  o.resize_shorter = -5;
  ExpectInvalid(o, VariableSpec(), "resize_shorter -5 must not be negative");
}

TEST(SampleTransformerTest, BadRandomResizedCropRangesAreInvalidArgument) {
  const LoaderOptions base = Options(Transform::kRandomResizedCrop, 224, 224);
  LoaderOptions o = base;
  o.rrc_scale_min = 0.6f;
  o.rrc_scale_max = 0.5f;
  ExpectInvalid(o, VariableSpec(), "has min > max");
  o = base;
  o.rrc_scale_min = 0.0f;
  ExpectInvalid(o, VariableSpec(), "must lie in (0, 1]");
  o = base;
  o.rrc_scale_max = 1.5f;
  ExpectInvalid(o, VariableSpec(), "must lie in (0, 1]");
  o = base;
  o.rrc_scale_min = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid(o, VariableSpec(), "rrc_scale");
  o = base;
  o.rrc_ratio_min = 0.0f;
  ExpectInvalid(o, VariableSpec(), "rrc_ratio [0.000000, 1.333333] must be positive");
  o = base;
  o.rrc_ratio_min = 2.0f;
  o.rrc_ratio_max = 1.0f;
  ExpectInvalid(o, VariableSpec(), "has min > max");
  o = base;
  o.rrc_ratio_max = std::numeric_limits<float>::infinity();
  ExpectInvalid(o, VariableSpec(), "not finite");
}

TEST(SampleTransformerTest, RandomResizedCropRangesAreOnlyCheckedWhenUsed) {
  LoaderOptions o = Options(Transform::kCenterCrop, 224, 224);
  o.rrc_scale_min = 0.0f;
  EXPECT_TRUE(SampleTransformer::Create(o, VariableSpec()).ok());
}

TEST(SampleTransformerTest, DatasetWithTwoChannelsIsInvalidArgument) {
  ExpectInvalid(Options(Transform::kNone), FixedSpec(8, 8, 2), "2 channels, expected 1 or 3");
}

// --- Apply: errors ------------------------------------------------------------------------

TEST(SampleTransformerTest, ApplyWithOtherChannelsIsInvalidArgument) {
  const SampleTransformer t = MustCreate(Options(Transform::kCenterCrop, 8, 8), VariableSpec());
  const std::vector<uint8_t> gray = Noise(10, 12, 1, 1);
  std::vector<uint8_t> out(8 * 8 * 3, 0x5A);
  TransformScratch scratch;
  const Status s = t.Apply(gray.data(), 10, 12, 1, 0, out.data(), &scratch);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sample of 10x12x1 (height x width x channels): expected 3 channels"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t v) { return v == 0x5A; }));
}

TEST(SampleTransformerTest, ApplyWithAZeroSideIsInvalidArgument) {
  const SampleTransformer t = MustCreate(Options(Transform::kCenterCrop, 8, 8), VariableSpec());
  const std::vector<uint8_t> pixels(30);
  std::vector<uint8_t> out(8 * 8 * 3);
  TransformScratch scratch;
  const Status s = t.Apply(pixels.data(), 0, 10, 3, 0, out.data(), &scratch);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sides must be positive"), std::string::npos) << s.message();
}

TEST(SampleTransformerTest, ApplyNoneToAnotherShapeIsInvalidArgument) {
  LoaderOptions o = Options(Transform::kNone);
  o.random_flip = true;
  const SampleTransformer t = MustCreate(o, FixedSpec(8, 8));
  const std::vector<uint8_t> pixels = Noise(8, 9, 3, 2);
  std::vector<uint8_t> out(8 * 8 * 3);
  TransformScratch scratch;
  const Status s = t.Apply(pixels.data(), 8, 9, 3, 0, out.data(), &scratch);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("8x9x3 (height x width x channels): expected 8x8"), std::string::npos)
      << s.message();
}

TEST(SampleTransformerTest, EmptyTransformerIsFailedPrecondition) {
  const SampleTransformer t;
  const std::vector<uint8_t> pixels(12);
  std::vector<uint8_t> out(12);
  TransformScratch scratch;
  EXPECT_EQ(t.Apply(pixels.data(), 2, 2, 3, 0, out.data(), &scratch).code(),
            StatusCode::kFailedPrecondition);
}

// --- Apply: determinism and scratch ---------------------------------------------------

TEST(SampleTransformerTest, SameKeyGivesTheSameBytes) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 48, 40);
  o.random_flip = true;
  o.filter = ResizeFilter::kBicubic;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  const std::vector<uint8_t> pixels = Noise(75, 100, 3, 3);
  TransformScratch a;
  TransformScratch b;
  for (uint64_t i = 0; i < 20; ++i) {
    const uint64_t key = SampleKey(7, 0, i);
    EXPECT_EQ(MustApply(t, pixels, 75, 100, 3, key, &a), MustApply(t, pixels, 75, 100, 3, key, &b));
  }
}

TEST(SampleTransformerTest, DifferentKeysGiveDifferentBytes) {
  const SampleTransformer t =
      MustCreate(Options(Transform::kRandomResizedCrop, 32, 32), VariableSpec());
  const std::vector<uint8_t> pixels = Noise(75, 100, 3, 4);
  TransformScratch scratch;
  std::set<std::vector<uint8_t>> outputs;
  for (uint64_t i = 0; i < 20; ++i) {
    outputs.insert(MustApply(t, pixels, 75, 100, 3, SampleKey(7, 0, i), &scratch));
  }
  EXPECT_EQ(outputs.size(), 20u);
}

TEST(SampleTransformerTest, ReusedScratchGivesTheSameBytesAsFreshOnes) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 40, 56);
  o.random_flip = true;
  o.filter = ResizeFilter::kLanczos3;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  const int sizes[][2] = {{75, 100}, {120, 60}, {40, 56}, {300, 200}, {17, 23}};
  TransformScratch shared;
  for (uint64_t i = 0; i < 30; ++i) {
    const int h = sizes[i % 5][0];
    const int w = sizes[i % 5][1];
    const std::vector<uint8_t> pixels = Noise(h, w, 3, static_cast<uint32_t>(i));
    TransformScratch fresh;
    const uint64_t key = SampleKey(1, 1, i);
    EXPECT_EQ(MustApply(t, pixels, h, w, 3, key, &shared),
              MustApply(t, pixels, h, w, 3, key, &fresh))
        << "sample " << i;
  }
}

TEST(SampleTransformerTest, ScratchStopsGrowingAfterWarmUp) {
  const SampleTransformer t =
      MustCreate(Options(Transform::kRandomResizedCrop, 64, 64), VariableSpec());
  const std::vector<uint8_t> pixels = Noise(150, 200, 3, 5);
  TransformScratch scratch;
  EXPECT_EQ(scratch.capacity_bytes(), 0u);
  for (uint64_t i = 0; i < 50; ++i) MustApply(t, pixels, 150, 200, 3, SampleKey(0, 0, i), &scratch);
  const size_t warm = scratch.capacity_bytes();
  for (uint64_t i = 50; i-- > 0;) MustApply(t, pixels, 150, 200, 3, SampleKey(0, 0, i), &scratch);
  EXPECT_EQ(scratch.capacity_bytes(), warm);
}

// --- kRandomResizedCrop -----------------------------------------------------------------

TEST(SampleTransformerTest, RandomResizedCropBoxesVaryWithTheKey) {
  const SampleTransformer t =
      MustCreate(Options(Transform::kRandomResizedCrop, 224, 224), VariableSpec());
  std::set<std::tuple<float, float, float, float>> boxes;
  for (uint64_t i = 0; i < 200; ++i) boxes.insert(Box(MustPlan(t, 375, 500, SampleKey(3, 0, i))));
  EXPECT_GT(boxes.size(), 190u);
}

TEST(SampleTransformerTest, RandomResizedCropBoxesRespectScaleAndRatio) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 224, 224);
  o.rrc_scale_min = 0.2f;
  o.rrc_scale_max = 0.6f;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  for (uint64_t i = 0; i < 200; ++i) {
    const SamplePlan p = MustPlan(t, 375, 500, SampleKey(3, 1, i));
    SCOPED_TRACE(::testing::Message()
                 << "key " << i << ": " << p.x0 << "," << p.y0 << " to " << p.x1 << "," << p.y1);
    ASSERT_GE(p.x0, 0.0f);
    ASSERT_GE(p.y0, 0.0f);
    ASSERT_LE(p.x1, 500.0f);
    ASSERT_LE(p.y1, 375.0f);
    EXPECT_EQ(p.x0, std::floor(p.x0));
    EXPECT_EQ(p.y1, std::floor(p.y1));
    const double w = p.x1 - p.x0;
    const double h = p.y1 - p.y0;
    // Rounding each side moves the area and the ratio a little.
    EXPECT_GE(w * h, 0.2 * 375 * 500 * 0.98);
    EXPECT_LE(w * h, 0.6 * 375 * 500 * 1.02);
    EXPECT_GE(w / h, 0.75 * 0.98);
    EXPECT_LE(w / h, 4.0 / 3.0 * 1.02);
  }
}

TEST(SampleTransformerTest, RandomResizedCropOfUnitScaleAndRatioOnASquareIsTheWholeImage) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 64, 64);
  o.rrc_scale_min = o.rrc_scale_max = 1.0f;
  o.rrc_ratio_min = o.rrc_ratio_max = 1.0f;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  const std::vector<uint8_t> pixels = Noise(64, 64, 3, 6);
  TransformScratch scratch;
  for (uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(Box(MustPlan(t, 64, 64, i)), std::make_tuple(0.0f, 0.0f, 64.0f, 64.0f));
    EXPECT_EQ(MustApply(t, pixels, 64, 64, 3, i, &scratch), pixels);
  }
}

// torchvision on a 100x50 (H x W) image with scale (1, 1), ratio (1, 1): every try wants
// w = h = round(sqrt(5000)) = 71 > 50, so the fallback: in_ratio 0.5 < 1, w = 50,
// h = round(50 / 1) = 50, top = (100 - 50) // 2 = 25, left = 0.
TEST(SampleTransformerTest, RandomResizedCropFallsBackToTheClampedCentre) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 32, 32);
  o.rrc_scale_min = o.rrc_scale_max = 1.0f;
  o.rrc_ratio_min = o.rrc_ratio_max = 1.0f;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  EXPECT_EQ(Box(MustPlan(t, 100, 50, 12345)), std::make_tuple(0.0f, 25.0f, 50.0f, 75.0f));
  // Wide: in_ratio 4 > 1: h = 30, w = round(30 * 1) = 30, left = (120 - 30) // 2 = 45.
  EXPECT_EQ(Box(MustPlan(t, 30, 120, 12345)), std::make_tuple(45.0f, 0.0f, 75.0f, 30.0f));
}

// torchvision's draws, by hand: on 100x100 with scale (0.5, 0.5) and ratio (2, 2), the
// first try has target 5000 and aspect 2, so w = round(sqrt(10000)) = 100 and
// h = round(sqrt(2500)) = 50: accepted; then top = randint(0, 50), left = randint(0, 0).
// Our stream: one draw for the scale, one for the ratio, then top and left.
TEST(SampleTransformerTest, RandomResizedCropFollowsTorchvisionDraws) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 16, 32);
  o.rrc_scale_min = o.rrc_scale_max = 0.5f;
  o.rrc_ratio_min = o.rrc_ratio_max = 2.0f;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  std::set<float> tops;
  for (uint64_t key = 0; key < 50; ++key) {
    Random rng(key);
    rng.UniformDouble();
    rng.UniformDouble();
    const float top = static_cast<float>(rng.Below(51));
    EXPECT_EQ(Box(MustPlan(t, 100, 100, key)), std::make_tuple(0.0f, top, 100.0f, top + 50.0f))
        << "key " << key;
    tops.insert(top);
  }
  EXPECT_GT(tops.size(), 20u);
}

// --- kCenterCrop --------------------------------------------------------------------------

TEST(SampleTransformerTest, CenterCropOfAnImageOfTheOutputShapeIsACopy) {
  const std::vector<uint8_t> pixels = Noise(40, 50, 3, 7);
  for (ResizeFilter filter : {ResizeFilter::kArea, ResizeFilter::kBilinear, ResizeFilter::kBicubic,
                              ResizeFilter::kLanczos3}) {
    LoaderOptions o = Options(Transform::kCenterCrop, 40, 50);
    o.resize_shorter = 40;
    o.filter = filter;
    const SampleTransformer t = MustCreate(o, VariableSpec());
    TransformScratch scratch;
    EXPECT_EQ(MustApply(t, pixels, 40, 50, 3, 99, &scratch), pixels)
        << "filter " << static_cast<int>(filter);
  }
}

// 375x500 with the default S = round(224 * 8 / 7) = 256: scaled to 256 x floor(256 * 500 /
// 375) = 256x341; the window starts at round(16.0) = 16 and round(58.5) = 58 (half to
// even), so the source box is y 16 * 375 / 256 .. 240 * 375 / 256, x 58 * 500 / 341 ..
// 282 * 500 / 341.
TEST(SampleTransformerTest, CenterCropBoxIsTorchvisionsWindow) {
  const SampleTransformer t = MustCreate(Options(Transform::kCenterCrop, 224, 224), VariableSpec());
  const SamplePlan p = MustPlan(t, 375, 500, 0);
  EXPECT_EQ(p.y0, static_cast<float>(16.0 * 375 / 256));
  EXPECT_EQ(p.y1, static_cast<float>(240.0 * 375 / 256));
  EXPECT_EQ(p.x0, static_cast<float>(58.0 * 500 / 341));
  EXPECT_EQ(p.x1, static_cast<float>(282.0 * 500 / 341));
  EXPECT_FALSE(p.flip);
}

TEST(SampleTransformerTest, CenterCropDefaultShorterSideUsesTheLongerOutputSide) {
  // out 100x150: S = round(150 * 8 / 7) = round(171.43) = 171; a 171x171 square crops
  // rows round(35.5) = 36 (half to even) .. 136 and columns round(10.5) = 10 .. 160.
  const SampleTransformer t = MustCreate(Options(Transform::kCenterCrop, 100, 150), VariableSpec());
  const SamplePlan p = MustPlan(t, 171, 171, 0);
  EXPECT_EQ(Box(p), std::make_tuple(10.0f, 36.0f, 160.0f, 136.0f));
}

TEST(SampleTransformerTest, CenterCropMatchesResizeThenCropWithinOne) {
  const std::vector<uint8_t> pixels = Noise(375, 500, 3, 8);
  image::Image src;
  src.height = 375;
  src.width = 500;
  src.channels = 3;
  src.pixels = pixels;
  for (ResizeFilter filter : {ResizeFilter::kBilinear, ResizeFilter::kBicubic}) {
    LoaderOptions o = Options(Transform::kCenterCrop, 224, 224);
    o.filter = filter;
    const SampleTransformer t = MustCreate(o, VariableSpec());
    TransformScratch scratch;
    const std::vector<uint8_t> ours = MustApply(t, pixels, 375, 500, 3, 0, &scratch);
    StatusOr<image::Image> resized = image::Resize(src, 256, 341, filter);
    ASSERT_TRUE(resized.ok()) << resized.status().ToString();
    std::vector<uint8_t> cropped;
    for (int y = 16; y < 240; ++y) {
      cropped.insert(cropped.end(), resized->row(y) + 58 * 3, resized->row(y) + 282 * 3);
    }
    EXPECT_LE(MaxAbsDiff(ours, cropped), 1) << "filter " << static_cast<int>(filter);
  }
}

TEST(SampleTransformerTest, CenterCropStretchesAnAxisTheScaledImageCannotCover) {
  LoaderOptions o = Options(Transform::kCenterCrop, 20, 20);
  o.resize_shorter = 10;
  const SampleTransformer t = MustCreate(o, VariableSpec());
  EXPECT_EQ(Box(MustPlan(t, 40, 40, 0)), std::make_tuple(0.0f, 0.0f, 40.0f, 40.0f));
  // 40x80 scales to 10x20: the width fits exactly, the height is stretched.
  EXPECT_EQ(Box(MustPlan(t, 40, 80, 0)), std::make_tuple(0.0f, 0.0f, 80.0f, 40.0f));
}

// --- kRandomCrop and kNone ----------------------------------------------------------------

TEST(SampleTransformerTest, RandomCropCopiesTheWindowAtItsOffsets) {
  const std::vector<uint8_t> pixels = Coordinates(60, 80);
  const SampleTransformer t =
      MustCreate(Options(Transform::kRandomCrop, 16, 24), FixedSpec(60, 80));
  TransformScratch scratch;
  std::set<std::pair<int, int>> origins;
  for (uint64_t i = 0; i < 100; ++i) {
    const uint64_t key = SampleKey(5, 0, i);
    const std::vector<uint8_t> out = MustApply(t, pixels, 60, 80, 3, key, &scratch);
    const int top = out[0];
    const int left = out[1];
    ASSERT_LE(top, 60 - 16);
    ASSERT_LE(left, 80 - 24);
    const SamplePlan p = MustPlan(t, 60, 80, key);
    EXPECT_EQ(Box(p), std::make_tuple(static_cast<float>(left), static_cast<float>(top),
                                      static_cast<float>(left + 24), static_cast<float>(top + 16)));
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 24; ++x) {
        const uint8_t* q = &out[(static_cast<size_t>(y) * 24 + x) * 3];
        ASSERT_EQ(q[0], top + y);
        ASSERT_EQ(q[1], left + x);
        ASSERT_EQ(q[2], 7);
      }
    }
    origins.insert({top, left});
  }
  EXPECT_GT(origins.size(), 80u);
}

TEST(SampleTransformerTest, NoneWithFlipMirrorsOrCopies) {
  for (int channels : {1, 3}) {
    LoaderOptions o = Options(Transform::kNone);
    o.random_flip = true;
    const SampleTransformer t = MustCreate(o, FixedSpec(5, 7, channels));
    const std::vector<uint8_t> pixels = Noise(5, 7, channels, 9);
    std::vector<uint8_t> mirrored(pixels.size());
    for (int y = 0; y < 5; ++y) {
      for (int x = 0; x < 7; ++x) {
        for (int c = 0; c < channels; ++c) {
          mirrored[(y * 7 + x) * channels + c] = pixels[(y * 7 + (6 - x)) * channels + c];
        }
      }
    }
    TransformScratch scratch;
    int flipped = 0;
    for (uint64_t key = 0; key < 20; ++key) {
      const std::vector<uint8_t> out = MustApply(t, pixels, 5, 7, channels, key, &scratch);
      const bool flip = MustPlan(t, 5, 7, key).flip;
      EXPECT_EQ(out, flip ? mirrored : pixels) << "key " << key << ", " << channels << " channels";
      flipped += flip;
    }
    EXPECT_GT(flipped, 0);
    EXPECT_LT(flipped, 20);
  }
}

TEST(SampleTransformerTest, FlipHappensAboutHalfTheTime) {
  LoaderOptions o = Options(Transform::kNone);
  o.random_flip = true;
  const SampleTransformer t = MustCreate(o, FixedSpec(4, 4));
  int flips = 0;
  for (uint64_t i = 0; i < 200; ++i) flips += MustPlan(t, 4, 4, SampleKey(11, 2, i)).flip;
  EXPECT_GE(flips, 60);
  EXPECT_LE(flips, 140);
}

TEST(SampleTransformerTest, FlipDoesNotChangeTheCrop) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 32, 32);
  const SampleTransformer plain = MustCreate(o, VariableSpec());
  o.random_flip = true;
  const SampleTransformer flipping = MustCreate(o, VariableSpec());
  for (uint64_t i = 0; i < 50; ++i) {
    const uint64_t key = SampleKey(2, 2, i);
    EXPECT_EQ(Box(MustPlan(plain, 120, 90, key)), Box(MustPlan(flipping, 120, 90, key)));
  }
}

TEST(SampleTransformerTest, GraySamplesAreTransformed) {
  LoaderOptions o = Options(Transform::kRandomResizedCrop, 12, 10);
  o.random_flip = true;
  const SampleTransformer t = MustCreate(o, VariableSpec(0, 1));
  const std::vector<uint8_t> pixels(30 * 40, 77);
  TransformScratch scratch;
  const std::vector<uint8_t> out = MustApply(t, pixels, 30, 40, 1, 3, &scratch);
  EXPECT_EQ(out, std::vector<uint8_t>(12 * 10, 77));
}

// --- DCT-scaled decoding (the loader's encoded path) -------------------------------------

TEST(SampleTransformerTest, ApplyPlanOfTheKeysPlanIsApply) {
  const std::vector<uint8_t> px = Noise(40, 56, 3, 9);
  for (const Transform t : {Transform::kCenterCrop, Transform::kRandomResizedCrop}) {
    LoaderOptions o = Options(t, 12, 10);
    o.random_flip = true;
    const SampleTransformer tr = MustCreate(o, VariableSpec());
    TransformScratch scratch;
    for (uint64_t key = 0; key < 20; ++key) {
      std::vector<uint8_t> out(12 * 10 * 3);
      ASSERT_OK(
          tr.ApplyPlan(px.data(), 40, 56, 3, MustPlan(tr, 40, 56, key), out.data(), &scratch));
      EXPECT_EQ(out, MustApply(tr, px, 40, 56, 3, key, &scratch)) << "key " << key;
    }
  }
}

TEST(SampleTransformerTest, ShrinkDenominatorIsTheLargestThatKeepsTheBoxAtLeastTheOutput) {
  const SampleTransformer tr = MustCreate(Options(Transform::kCenterCrop, 10, 20), VariableSpec());
  auto plan = [](float w, float h) {
    SamplePlan p;
    p.x0 = 3;
    p.y0 = 5;
    p.x1 = 3 + w;
    p.y1 = 5 + h;
    return p;
  };
  EXPECT_EQ(tr.ShrinkDenominator(plan(20, 10)), 1);
  EXPECT_EQ(tr.ShrinkDenominator(plan(39.9f, 100)), 1);  // width: 19.95 < 20 at 1/2
  EXPECT_EQ(tr.ShrinkDenominator(plan(40, 20)), 2);
  EXPECT_EQ(tr.ShrinkDenominator(plan(80, 39)), 2);  // height: 9.75 < 10 at 1/4
  EXPECT_EQ(tr.ShrinkDenominator(plan(80, 40)), 4);
  EXPECT_EQ(tr.ShrinkDenominator(plan(160, 80)), 8);
  EXPECT_EQ(tr.ShrinkDenominator(plan(1000, 1000)), 8);  // 1/8 is libjpeg's smallest
  // A copy (kNone) or a window (kRandomCrop) never shrinks.
  const SampleTransformer none = MustCreate(Options(Transform::kNone), FixedSpec(80, 160));
  EXPECT_EQ(none.ShrinkDenominator(plan(160, 80)), 1);
  const SampleTransformer crop =
      MustCreate(Options(Transform::kRandomCrop, 10, 20), FixedSpec(80, 160));
  EXPECT_EQ(crop.ShrinkDenominator(MustPlan(crop, 80, 160, 3)), 1);
}

TEST(ScalePlanTest, DividesTheBoxAndClampsItToTheScaledSides) {
  SamplePlan p;
  p.x0 = 2;
  p.y0 = 4.5f;
  p.x1 = 101;  // the whole of a 101-wide image
  p.y1 = 40;
  p.flip = true;
  const SamplePlan s = ScalePlan(p, 4, /*scaled_height=*/11, /*scaled_width=*/26);
  EXPECT_FLOAT_EQ(s.x0, 0.5f);
  EXPECT_FLOAT_EQ(s.y0, 1.125f);
  EXPECT_FLOAT_EQ(s.x1, 25.25f);  // the last scaled column covers 1 of 4 stored ones
  EXPECT_FLOAT_EQ(s.y1, 10.0f);
  EXPECT_TRUE(s.flip);
  p.x1 = 104;  // beyond: clamped
  EXPECT_FLOAT_EQ(ScalePlan(p, 4, 11, 26).x1, 26.0f);
}
}  // namespace
}  // namespace shardpack::read
