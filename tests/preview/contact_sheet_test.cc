#include "preview/contact_sheet.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <climits>
#include <set>
#include <string>
#include <vector>

#include "preview/font.h"
#include "shardpack/dataset.h"
#include "shardpack/shard_writer.h"
#include "test_util.h"

namespace shardpack {
namespace {

using Rgb = std::array<uint8_t, 3>;
using testing::OpenDatasetOrDie;
using testing::TempDir;

const Rgb kBackground = {kSheetBackground[0], kSheetBackground[1], kSheetBackground[2]};
const Rgb kText = {kSheetText[0], kSheetText[1], kSheetText[2]};

// Every sample of class k is one flat colour, far from the background and the text.
Rgb ClassColour(int64_t label) {
  return {static_cast<uint8_t>(60 + 40 * label), static_cast<uint8_t>(200 - 30 * label),
          static_cast<uint8_t>(90 + 25 * label)};
}

struct FlatDataset {
  std::vector<int64_t> labels;  // label of sample i
  int num_classes = 3;
  int height = 6;
  int width = 6;
  int channels = 3;
  Backend backend = Backend::kTfrecord;
  uint64_t max_shard_records = 4;
};

// Writes a dataset whose sample i is filled with ClassColour(labels[i]) (gray: its red).
Manifest WriteFlatDataset(const std::string& dir, const FlatDataset& d) {
  ShardWriterOptions o;
  o.backend = d.backend;
  o.max_shard_records = d.max_shard_records;
  o.lmdb_initial_map_bytes = 1ull << 20;
  for (int c = 0; c < d.num_classes; ++c) o.class_names.push_back("class" + std::to_string(c));
  o.image = {.channels = d.channels, .height = d.height, .width = d.width};
  auto writer = ShardWriter::Create(dir, o);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  if (!writer.ok()) return {};
  for (size_t i = 0; i < d.labels.size(); ++i) {
    const Rgb c = ClassColour(d.labels[i]);
    std::vector<uint8_t> px(static_cast<size_t>(d.height) * d.width * d.channels);
    for (size_t p = 0; p < px.size(); ++p) px[p] = c[d.channels == 3 ? p % 3 : 0];
    const std::string name = "img" + std::to_string(i) + ".png";
    Status s = (*writer)->Add({.pixels = px,
                               .height = d.height,
                               .width = d.width,
                               .channels = d.channels,
                               .label = d.labels[i],
                               .filename = name});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  auto m = (*writer)->Finish();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Manifest{};
}

std::vector<int64_t> Interleaved(int samples, int classes) {
  std::vector<int64_t> labels;
  labels.reserve(samples);
  for (int i = 0; i < samples; ++i) labels.push_back(i % classes);
  return labels;
}

Rgb At(const image::Image& img, int x, int y) {
  const uint8_t* p = img.row(y) + static_cast<size_t>(x) * 3;
  return {p[0], p[1], p[2]};
}

// The layout of the header comment, for a thumbnail side below 256 (text scale 1).
struct Layout {
  int thumb;
  int TileWidth() const { return thumb + 2 * kSheetPad; }
  int TileHeight() const { return thumb + 3 * kSheetPad + preview::kCellHeight; }
  // Centre of the thumbnail box of the tile in cell (column, row).
  int CentreX(int column) const { return column * TileWidth() + kSheetPad + thumb / 2; }
  int CentreY(int row) const { return row * TileHeight() + kSheetPad + thumb / 2; }
};

// The pixels of the caption line of cell (column, row), row by row.
std::vector<Rgb> CaptionBand(const image::Image& img, const Layout& l, int column, int row) {
  std::vector<Rgb> band;
  for (int y = 0; y < preview::kCellHeight; ++y) {
    for (int x = 0; x < l.thumb; ++x) {
      band.push_back(At(img, column * l.TileWidth() + kSheetPad + x,
                        row * l.TileHeight() + l.thumb + 2 * kSheetPad + y));
    }
  }
  return band;
}

int CountColour(const std::vector<Rgb>& pixels, const Rgb& c) {
  return static_cast<int>(std::count(pixels.begin(), pixels.end(), c));
}

TEST(ContactSheetTest, GridSizeFollowsColumnsThumbAndSamples) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 10});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{32};
  ContactSheetInfo info;
  auto sheet = RenderContactSheet(*ds, {.columns = 4, .thumb = 32, .samples = 10}, &info);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(sheet->channels, 3);
  EXPECT_EQ(sheet->width, 4 * l.TileWidth());
  EXPECT_EQ(sheet->height, 3 * l.TileHeight());
  EXPECT_EQ(sheet->width, 160);
  EXPECT_EQ(sheet->height, 156);
  EXPECT_EQ(info.indices.size(), 10u);
  // Fewer samples than columns: one row just wide enough. More asked than there are: all.
  sheet = RenderContactSheet(*ds, {.columns = 8, .thumb = 32, .samples = 3}, &info);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(sheet->width, 3 * l.TileWidth());
  EXPECT_EQ(sheet->height, l.TileHeight());
  sheet = RenderContactSheet(*ds, {.columns = 8, .thumb = 32, .samples = 1000}, &info);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(info.indices.size(), 10u);
  EXPECT_EQ(sheet->height, 2 * l.TileHeight());
}

TEST(ContactSheetTest, LargeThumbnailsScaleTheCaptionText) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 2});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  auto sheet = RenderContactSheet(*ds, {.columns = 2, .thumb = 256});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(sheet->width, 2 * (256 + 2 * kSheetPad));
  EXPECT_EQ(sheet->height, 256 + 3 * kSheetPad + 2 * preview::kCellHeight);
}

TEST(ContactSheetTest, EvenlySpacedByDefault) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 10});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  ContactSheetInfo info;
  ASSERT_OK(RenderContactSheet(*ds, {.thumb = 16, .samples = 4}, &info).status());
  EXPECT_EQ(info.indices, (std::vector<uint64_t>{0, 2, 5, 7}));
}

TEST(ContactSheetTest, SeededPickIsRepeatableDistinctAndSorted) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 50, .max_shard_records = 16});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  ContactSheetInfo a, b, c;
  ASSERT_OK(RenderContactSheet(*ds, {.thumb = 16, .samples = 12, .seed = 7}, &a).status());
  ASSERT_OK(RenderContactSheet(*ds, {.thumb = 16, .samples = 12, .seed = 7}, &b).status());
  ASSERT_OK(RenderContactSheet(*ds, {.thumb = 16, .samples = 12, .seed = 8}, &c).status());
  EXPECT_EQ(a.indices, b.indices);
  EXPECT_NE(a.indices, c.indices);
  EXPECT_TRUE(std::is_sorted(a.indices.begin(), a.indices.end()));
  EXPECT_EQ(std::set<uint64_t>(a.indices.begin(), a.indices.end()).size(), 12u);
  EXPECT_LT(a.indices.back(), 50u);
}

TEST(ContactSheetTest, TileCentreHasTheSampleColour) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = Interleaved(6, 3)});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{32};
  auto sheet = RenderContactSheet(*ds, {.columns = 3, .thumb = 32, .samples = 6});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(At(*sheet, l.CentreX(i % 3), l.CentreY(i / 3)), ClassColour(i % 3)) << "sample " << i;
  }
  // Between tiles: the background.
  EXPECT_EQ(At(*sheet, l.TileWidth() - 1, l.CentreY(0)), kBackground);
}

TEST(ContactSheetTest, WideSampleIsLetterboxedOnTheBackground) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = {0}, .height = 4, .width = 16});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{32};
  auto sheet = RenderContactSheet(*ds, {.thumb = 32});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  // 16x4 fits the 32x32 box as 32x8, rows 12..19 of the box.
  EXPECT_EQ(At(*sheet, l.CentreX(0), kSheetPad + 12), ClassColour(0));
  EXPECT_EQ(At(*sheet, l.CentreX(0), kSheetPad + 19), ClassColour(0));
  EXPECT_EQ(At(*sheet, l.CentreX(0), kSheetPad + 11), kBackground);
  EXPECT_EQ(At(*sheet, l.CentreX(0), kSheetPad + 20), kBackground);
}

TEST(ContactSheetTest, GraySamplesAreShownAsGrayRgb) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = {1}, .channels = 1});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{32};
  auto sheet = RenderContactSheet(*ds, {.thumb = 32});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  const uint8_t v = ClassColour(1)[0];
  EXPECT_EQ(At(*sheet, l.CentreX(0), l.CentreY(0)), (Rgb{v, v, v}));
}

TEST(ContactSheetTest, CaptionsAreDrawnAndDifferBetweenLabels) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = {0, 1, 0}});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{64};
  auto sheet = RenderContactSheet(*ds, {.thumb = 64});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  const std::vector<Rgb> first = CaptionBand(*sheet, l, 0, 0);
  const std::vector<Rgb> second = CaptionBand(*sheet, l, 1, 0);
  const std::vector<Rgb> third = CaptionBand(*sheet, l, 2, 0);
  // Text colour on the background, nothing else.
  EXPECT_GT(CountColour(first, kText), 10);
  EXPECT_EQ(CountColour(first, kText) + CountColour(first, kBackground),
            static_cast<int>(first.size()));
  EXPECT_NE(first, second);  // "0 class0" and "1 class1"
  EXPECT_EQ(first, third);   // the same label, the same caption
}

TEST(ContactSheetTest, LongCaptionIsCutToTheTile) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = {0}});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{16};  // room for 2 characters: "0 class0" becomes ".."
  auto sheet = RenderContactSheet(*ds, {.thumb = 16});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  image::Image dots = {.height = preview::kCellHeight, .width = 16, .channels = 3};
  dots.pixels.assign(static_cast<size_t>(dots.height) * dots.width * 3, kBackground[0]);
  preview::DrawText(&dots, 0, 0, "..", kSheetText);
  std::vector<Rgb> expected;
  for (int y = 0; y < dots.height; ++y) {
    for (int x = 0; x < dots.width; ++x) expected.push_back(At(dots, x, y));
  }
  EXPECT_EQ(CaptionBand(*sheet, l, 0, 0), expected);
}

TEST(ContactSheetTest, PerClassPutsClassKInRowK) {
  TempDir dir;
  // Class 2 has a single sample; the classes are interleaved in the dataset.
  WriteFlatDataset(dir.path(), {.labels = {0, 1, 0, 1, 2, 0, 1, 0}});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{32};
  ContactSheetInfo info;
  auto sheet =
      RenderContactSheet(*ds, {.thumb = 32, .per_class = true, .samples_per_class = 3}, &info);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(sheet->width, 4 * l.TileWidth());
  EXPECT_EQ(sheet->height, 3 * l.TileHeight());
  EXPECT_EQ(info.indices, (std::vector<uint64_t>{0, 2, 5, 1, 3, 6, 4}));
  for (int k = 0; k < 3; ++k) {
    const int tiles = k == 2 ? 1 : 3;
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(At(*sheet, l.CentreX(1 + j), l.CentreY(k)),
                j < tiles ? ClassColour(k) : kBackground)
          << "row " << k << ", tile " << j;
    }
  }
  // The header cell holds text and no thumbnail.
  std::vector<Rgb> header;
  for (int y = 0; y < l.TileHeight(); ++y) {
    for (int x = 0; x < l.TileWidth(); ++x) header.push_back(At(*sheet, x, l.TileHeight() + y));
  }
  EXPECT_GT(CountColour(header, kText), 20);
  EXPECT_EQ(CountColour(header, kText) + CountColour(header, kBackground),
            static_cast<int>(header.size()));
}

TEST(ContactSheetTest, PerClassFindsClassesInASortedDataset) {
  TempDir dir;
  std::vector<int64_t> labels(40, 0);
  std::fill(labels.begin() + 30, labels.end() - 2, 1);
  std::fill(labels.end() - 2, labels.end(), 2);
  WriteFlatDataset(dir.path(), {.labels = labels, .max_shard_records = 16});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{16};
  ContactSheetInfo info;
  auto sheet =
      RenderContactSheet(*ds, {.thumb = 16, .per_class = true, .samples_per_class = 2}, &info);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  ASSERT_EQ(info.indices.size(), 6u);
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 2; ++j) {
      EXPECT_EQ(labels[info.indices[2 * k + j]], k);
      EXPECT_EQ(At(*sheet, l.CentreX(1 + j), l.CentreY(k)), ClassColour(k));
    }
  }
}

TEST(ContactSheetTest, PerClassScanStopsWhenEveryRowIsFull) {
  TempDir dir;
  WriteFlatDataset(
      dir.path(),
      {.labels = Interleaved(3000, 3), .height = 2, .width = 2, .max_shard_records = 1000});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  ContactSheetInfo info;
  ASSERT_OK(RenderContactSheet(*ds, {.thumb = 16, .per_class = true, .samples_per_class = 4}, &info)
                .status());
  EXPECT_EQ(info.indices.size(), 12u);
  EXPECT_LT(info.scanned, 100u);
}

TEST(ContactSheetTest, PerClassShowsAtMostMaxClassesRows) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = Interleaved(12, 4), .num_classes = 4});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{16};
  ContactSheetInfo info;
  auto sheet = RenderContactSheet(
      *ds, {.thumb = 16, .per_class = true, .samples_per_class = 5, .max_classes = 2}, &info);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(sheet->width, 6 * l.TileWidth());
  EXPECT_EQ(sheet->height, 2 * l.TileHeight());
  EXPECT_EQ(info.indices, (std::vector<uint64_t>{0, 4, 8, 1, 5, 9}));
}

TEST(ContactSheetTest, PerClassSeededPickIsRepeatable) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = Interleaved(60, 3), .max_shard_records = 16});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const ContactSheetOptions o = {
      .thumb = 16, .per_class = true, .samples_per_class = 3, .seed = 99};
  ContactSheetInfo a, b;
  ASSERT_OK(RenderContactSheet(*ds, o, &a).status());
  ASSERT_OK(RenderContactSheet(*ds, o, &b).status());
  EXPECT_EQ(a.indices, b.indices);
  ASSERT_EQ(a.indices.size(), 9u);
  for (size_t i = 0; i < a.indices.size(); ++i) EXPECT_EQ(a.indices[i] % 3, i / 3);
}

TEST(ContactSheetTest, LmdbDatasetRenders) {
  TempDir dir;
  WriteFlatDataset(dir.path(), {.labels = Interleaved(5, 3), .backend = Backend::kLmdb});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const Layout l{32};
  auto sheet = RenderContactSheet(*ds, {.thumb = 32, .samples = 5});
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  EXPECT_EQ(At(*sheet, l.CentreX(4), l.CentreY(0)), ClassColour(1));
}

// Flips a pixel byte of sample `index` in its shard; returns the shard's file name.
std::string CorruptSample(const std::string& dir, const Manifest& m, uint64_t index) {
  auto ds = Dataset::Open(dir);
  EXPECT_TRUE(ds.ok());
  auto loc = (*ds)->Locate(index);
  EXPECT_TRUE(loc.ok());
  SampleView s;
  EXPECT_OK((*ds)->Get(index, &s));
  std::string file = m.shards[loc->shard].data.file;
  std::string bytes = testing::ReadFileOrDie(dir + "/" + file);
  const size_t at =
      bytes.find(std::string(reinterpret_cast<const char*>(s.pixels.data()), s.pixels.size()));
  EXPECT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x40;
  testing::WriteFileOrDie(dir + "/" + file, bytes);
  return file;
}

TEST(ContactSheetTest, CorruptedSampleIsAnErrorNamingTheFile) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 8, .max_shard_records = 3});
  const std::string file = CorruptSample(dir.path(), m, 4);
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  auto sheet = RenderContactSheet(*ds, {.thumb = 16, .samples = 8});
  ASSERT_FALSE(sheet.ok());
  EXPECT_EQ(sheet.status().code(), StatusCode::kCorruption);
  EXPECT_NE(sheet.status().message().find(file + ": record 1 at offset "), std::string::npos)
      << sheet.status().message();
  // The per-class scan meets it too.
  sheet = RenderContactSheet(*ds, {.thumb = 16, .per_class = true, .samples_per_class = 8});
  ASSERT_FALSE(sheet.ok());
  EXPECT_EQ(sheet.status().code(), StatusCode::kCorruption);
  EXPECT_NE(sheet.status().message().find(file), std::string::npos) << sheet.status().message();
}

TEST(ContactSheetTest, PerClassScanReportsADamagedRecordItWouldNotDraw) {
  TempDir dir;
  // Scan order 0 4 2 6 1 5 3 7: sample 5 (class 2, not shown) is met after row 0 is full
  // and before row 1 is.
  Manifest m = WriteFlatDataset(dir.path(), {.labels = {0, 0, 1, 1, 1, 2, 1, 1}});
  const std::string file = CorruptSample(dir.path(), m, 5);
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  auto sheet = RenderContactSheet(
      *ds, {.thumb = 16, .per_class = true, .samples_per_class = 5, .max_classes = 2});
  ASSERT_FALSE(sheet.ok());
  EXPECT_EQ(sheet.status().code(), StatusCode::kCorruption);
  EXPECT_NE(sheet.status().message().find(file + ": record "), std::string::npos)
      << sheet.status().message();
}

TEST(ContactSheetTest, OptionsOutOfRangeAreInvalidArguments) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 3});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  const std::vector<std::pair<ContactSheetOptions, std::string>> cases = {
      {{.columns = 0}, "contact sheet: columns is 0"},
      {{.thumb = 8}, "contact sheet: thumb is 8, must be 16..4096"},
      {{.samples = 0}, "contact sheet: samples is 0"},
      {{.per_class = true, .samples_per_class = 0}, "contact sheet: samples_per_class is 0"},
      {{.per_class = true, .max_classes = -1}, "contact sheet: max_classes is -1"},
  };
  for (const auto& [o, message] : cases) {
    auto sheet = RenderContactSheet(*ds, o);
    ASSERT_FALSE(sheet.ok()) << message;
    EXPECT_EQ(sheet.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(sheet.status().message().find(message), std::string::npos)
        << sheet.status().message();
  }
}

TEST(ContactSheetTest, SheetAboveTheSizeLimitIsRefusedBeforeReading) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 200, .max_shard_records = 100});
  auto ds = OpenDatasetOrDie(dir.path());
  ASSERT_NE(ds, nullptr);
  auto sheet = RenderContactSheet(*ds, {.columns = 200, .thumb = 1024, .samples = 200});
  ASSERT_FALSE(sheet.ok());
  EXPECT_EQ(sheet.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sheet.status().message().find("206400x1100 pixels"), std::string::npos)
      << sheet.status().message();
}

TEST(FontTest, TextWidthIsTheAdvance) {
  EXPECT_EQ(preview::TextWidth(""), 0);
  EXPECT_EQ(preview::TextWidth("abc"), 3 * preview::kCellWidth);
  EXPECT_EQ(preview::TextWidth("abc", 3), 9 * preview::kCellWidth);
  EXPECT_EQ(preview::TextWidth("\xc3\xa9"), 2 * preview::kCellWidth);  // bytes, not characters
  EXPECT_EQ(preview::TextWidth("abc", 0), 0);
}

image::Image Blank(int height, int width, int channels) {
  image::Image img = {.height = height, .width = width, .channels = channels};
  img.pixels.assign(static_cast<size_t>(height) * width * channels, 0);
  return img;
}

int Ink(const image::Image& img) {
  return static_cast<int>(img.pixels.size() -
                          std::count(img.pixels.begin(), img.pixels.end(), uint8_t{0}));
}

constexpr uint8_t kWhite[3] = {255, 255, 255};

TEST(FontTest, EveryPrintableGlyphIsDistinct) {
  std::set<std::vector<uint8_t>> seen;
  for (int c = 33; c <= 126; ++c) {
    image::Image img = Blank(preview::kCellHeight, preview::kCellWidth, 1);
    preview::DrawText(&img, 0, 0, std::string(1, static_cast<char>(c)), kWhite);
    EXPECT_GT(Ink(img), 0) << "'" << static_cast<char>(c) << "'";
    // Ink stays in the 5x7 glyph: the spacing column and row are blank.
    for (int y = 0; y < preview::kCellHeight; ++y) EXPECT_EQ(img.row(y)[preview::kGlyphWidth], 0);
    for (int x = 0; x < preview::kCellWidth; ++x) EXPECT_EQ(img.row(preview::kGlyphHeight)[x], 0);
    seen.insert(img.pixels);
  }
  EXPECT_EQ(seen.size(), 94u);
  image::Image space = Blank(preview::kCellHeight, preview::kCellWidth, 1);
  preview::DrawText(&space, 0, 0, " ", kWhite);
  EXPECT_EQ(Ink(space), 0);
}

TEST(FontTest, NonAsciiBytesAreDrawnAsQuestionMarks) {
  image::Image a = Blank(8, 30, 3), b = Blank(8, 30, 3);
  preview::DrawText(&a, 0, 0, "\xc3\xa9\n\x7f", kWhite);
  preview::DrawText(&b, 0, 0, "????", kWhite);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_GT(Ink(a), 0);
}

TEST(FontTest, ScaleMakesSquaresOfEachGlyphPixel) {
  image::Image one = Blank(8, 6, 3), three = Blank(24, 18, 3);
  preview::DrawText(&one, 0, 0, "A", kWhite);
  preview::DrawText(&three, 0, 0, "A", kWhite, 3);
  for (int y = 0; y < 24; ++y) {
    for (int x = 0; x < 18; ++x) {
      EXPECT_EQ(At(three, x, y), At(one, x / 3, y / 3)) << x << "," << y;
    }
  }
}

TEST(FontTest, GrayImageGetsTheLuma) {
  image::Image img = Blank(8, 6, 1);
  const uint8_t red[3] = {255, 0, 0};
  preview::DrawText(&img, 0, 0, "H", red);
  EXPECT_EQ(img.row(0)[0], 76);  // (19595 * 255 + 32768) >> 16
}

TEST(FontTest, DrawTextClipsAtTheEdgesWithoutCrashing) {
  image::Image full = Blank(8, 12, 3);
  preview::DrawText(&full, 0, 0, "HH", kWhite);
  // Shifted by (-3, -2): the visible part is the same text, cut.
  image::Image cut = Blank(8, 12, 3);
  preview::DrawText(&cut, -3, -2, "HH", kWhite);
  for (int y = 0; y < 6; ++y) {
    for (int x = 0; x < 9; ++x) {
      EXPECT_EQ(At(cut, x, y), At(full, x + 3, y + 2)) << x << "," << y;
    }
  }
  // Off every edge, far off, huge scales, long texts: nothing drawn, nothing touched.
  image::Image img = Blank(10, 10, 3);
  const std::string long_text(100000, 'W');
  preview::DrawText(&img, 10, 0, "W", kWhite);
  preview::DrawText(&img, 0, 10, "W", kWhite);
  preview::DrawText(&img, -6, 0, "W", kWhite);
  preview::DrawText(&img, 0, -8, "W", kWhite);
  preview::DrawText(&img, INT_MAX, INT_MAX, long_text, kWhite, INT_MAX);
  preview::DrawText(&img, INT_MIN, INT_MIN, long_text, kWhite);
  preview::DrawText(&img, INT_MIN, 0, long_text, kWhite);
  EXPECT_EQ(Ink(img), 0);
  // Partly inside at a huge scale: the visible corner is filled, no overflow.
  preview::DrawText(&img, -5, -5, "W", kWhite, 1 << 20);
  EXPECT_EQ(Ink(img), 10 * 10 * 3);
  // A malformed image is left alone.
  image::Image bad = Blank(4, 4, 3);
  bad.pixels.resize(5);
  preview::DrawText(&bad, 0, 0, "W", kWhite);
  EXPECT_EQ(Ink(bad), 0);
}

// ContactSheetMemory, what `shardpack preview` checks against the memory available: the
// sheet's bytes, and twice the largest sample the manifest claims, not the records'.
TEST(ContactSheetTest, MemoryIsTheSheetAndTwiceTheLargestClaimedSample) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 5, .height = 4, .width = 5});
  auto ds = OpenDatasetOrDie(dir.path());
  ContactSheetOptions o{.columns = 8, .thumb = 16, .samples = 32};
  auto sheet = RenderContactSheet(*ds, o);
  ASSERT_TRUE(sheet.ok()) << sheet.status().ToString();
  const uint64_t sheet_bytes = static_cast<uint64_t>(sheet->width) * sheet->height * 3;
  EXPECT_EQ(ContactSheetMemory(*ds, o), sheet_bytes + 2 * 4 * 5 * 3);

  // The same 4 x 5 records under a manifest claiming 8000 x 8000 (encoded images: a size
  // their bytes cannot bound).
  TempDir jpegs;
  testing::WriteTestDataset(
      jpegs.path(), {.samples = 5, .height = 32, .width = 32, .encoding = ImageEncoding::kJpeg});
  auto m = ReadManifest(jpegs.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  m->image.height = 8000;
  m->image.width = 8000;
  testing::WriteFileOrDie(jpegs.Join("manifest.json"), SerializeManifest(*m));
  auto claimed = OpenDatasetOrDie(jpegs.path());
  EXPECT_EQ(ContactSheetMemory(*claimed, o), sheet_bytes + 2ull * 8000 * 8000 * 3);
}

}  // namespace
}  // namespace shardpack
