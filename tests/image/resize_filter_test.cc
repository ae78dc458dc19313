// ResizeFilter and FitMode: one list of names, one parser each, values outside the enum
// refused by name.
#include "shardpack/resize_filter.h"

#include <gtest/gtest.h>

#include <string>

namespace shardpack {
namespace {

TEST(ResizeFilterTest, EveryNameParsesBackToItsValue) {
  ASSERT_EQ(ResizeFilterNames().size(), 4u);
  for (size_t i = 0; i < ResizeFilterNames().size(); ++i) {
    const auto filter = static_cast<ResizeFilter>(i);
    EXPECT_EQ(ResizeFilterNames()[i], ResizeFilterName(filter));
    auto parsed = ParseResizeFilter(ResizeFilterNames()[i]);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, filter);
  }
  ASSERT_EQ(FitModeNames().size(), 3u);
  for (size_t i = 0; i < FitModeNames().size(); ++i) {
    const auto fit = static_cast<FitMode>(i);
    EXPECT_EQ(FitModeNames()[i], FitModeName(fit));
    auto parsed = ParseFitMode(FitModeNames()[i]);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, fit);
  }
}

TEST(ResizeFilterTest, LanczosIsAnAliasOfLanczos3WhichTheManifestWrites) {
  EXPECT_STREQ(ResizeFilterName(ResizeFilter::kLanczos3), "lanczos3");
  auto parsed = ParseResizeFilter("lanczos");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, ResizeFilter::kLanczos3);
}

TEST(ResizeFilterTest, UnknownNamesAreErrorsListingTheNames) {
  for (const char* name : {"", "Lanczos3", "lanczos2", "nearest", "area "}) {
    auto parsed = ParseResizeFilter(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              "unknown resize filter \"" + std::string(name) +
                  "\": expected \"area\", \"bilinear\", \"bicubic\" or \"lanczos3\"");
  }
  auto fit = ParseFitMode("fill");
  ASSERT_FALSE(fit.ok());
  EXPECT_EQ(fit.status().message(),
            "unknown fit mode \"fill\": expected \"stretch\", \"crop\" or \"pad\"");
}

TEST(ResizeFilterTest, ValuesOutsideTheEnumAreRefusedByName) {
  EXPECT_TRUE(CheckResizeFilter(ResizeFilter::kBicubic, "filter").ok());
  EXPECT_TRUE(CheckFitMode(FitMode::kPad, "fit").ok());
  Status s = CheckResizeFilter(static_cast<ResizeFilter>(7), "filter");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("filter is not a resize filter (value 7)"), std::string::npos)
      << s.message();
  s = CheckFitMode(static_cast<FitMode>(-1), "fit");
  EXPECT_NE(s.message().find("fit is not a fit mode (value -1)"), std::string::npos) << s.message();
  EXPECT_STREQ(ResizeFilterName(static_cast<ResizeFilter>(4)), "?");
  EXPECT_STREQ(FitModeName(static_cast<FitMode>(3)), "?");
}

}  // namespace
}  // namespace shardpack
