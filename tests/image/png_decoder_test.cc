#include "image/png_decoder.h"

#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace shardpack::image {
namespace {

using Bytes = std::vector<uint8_t>;

constexpr uint8_t kWhite[3] = {255, 255, 255};
constexpr uint8_t kTeal[3] = {30, 140, 220};

// ---------------------------------------------------------------------------------------
// Fixtures, written with libpng's write API to memory.

// A PNG to write: raw samples as stored (palette indices for palette images; 1..16-bit
// values), row-major, StoredChannels(color_type) per pixel.
struct Fixture {
  int width = 13;
  int height = 11;
  int bit_depth = 8;
  int color_type = PNG_COLOR_TYPE_RGB;
  bool interlaced = false;
  std::vector<uint16_t> samples;
  std::vector<png_color> palette;
  Bytes palette_alpha;  // tRNS of a palette image
  bool has_trans_color = false;
  png_color_16 trans_color{};  // tRNS of a gray (.gray) or RGB (.red .green .blue) image
  std::string ztxt;            // written as one zTXt chunk when not empty
  size_t idat_bytes = 8192;    // the writer's IDAT size
};

int StoredChannels(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB:
      return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return 4;
    default:  // gray, palette
      return 1;
  }
}

[[noreturn]] void AbortOnWriteError(png_structp, png_const_charp message) {
  std::fprintf(stderr, "fixture writer: libpng: %s\n", message);
  std::abort();
}
void IgnoreWriteWarning(png_structp, png_const_charp) {}
void AppendToBytes(png_structp png, png_bytep data, size_t length) {
  auto* out = static_cast<Bytes*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + length);
}
void NoFlush(png_structp) {}

Bytes PackRow(const Fixture& f, int y) {
  const int per_pixel = StoredChannels(f.color_type);
  const size_t samples = static_cast<size_t>(f.width) * per_pixel;
  Bytes row((samples * f.bit_depth + 7) / 8, 0);
  const uint16_t* in = f.samples.data() + y * samples;
  for (size_t i = 0; i < samples; ++i) {
    if (f.bit_depth == 16) {
      row[2 * i] = static_cast<uint8_t>(in[i] >> 8);
      row[2 * i + 1] = static_cast<uint8_t>(in[i]);
    } else if (f.bit_depth == 8) {
      row[i] = static_cast<uint8_t>(in[i]);
    } else {  // packed, most significant bits first
      const size_t bit = i * f.bit_depth;
      row[bit / 8] |= static_cast<uint8_t>(in[i] << (8 - f.bit_depth - bit % 8));
    }
  }
  return row;
}

Bytes WritePng(const Fixture& f) {
  Bytes out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, AbortOnWriteError,
                                            IgnoreWriteWarning);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, AppendToBytes, NoFlush);
  png_set_compression_buffer_size(png, f.idat_bytes);
  png_set_check_for_invalid_index(png, 0);
  png_set_IHDR(png, info, f.width, f.height, f.bit_depth, f.color_type,
               f.interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  if (!f.palette.empty()) {
    png_set_PLTE(png, info, f.palette.data(), static_cast<int>(f.palette.size()));
  }
  if (!f.palette_alpha.empty()) {
    png_set_tRNS(png, info, f.palette_alpha.data(), static_cast<int>(f.palette_alpha.size()),
                 nullptr);
  }
  if (f.has_trans_color) png_set_tRNS(png, info, nullptr, 0, &f.trans_color);
  png_text text{};
  std::string key = "Comment";
  if (!f.ztxt.empty()) {
    text.compression = PNG_TEXT_COMPRESSION_zTXt;
    text.key = key.data();
    text.text = const_cast<char*>(f.ztxt.data());
    text.text_length = f.ztxt.size();
    png_set_text(png, info, &text, 1);
  }
  png_write_info(png, info);
  std::vector<Bytes> rows;
  std::vector<png_bytep> row_pointers;
  rows.reserve(f.height);
  row_pointers.reserve(f.height);
  for (int y = 0; y < f.height; ++y) rows.push_back(PackRow(f, y));
  for (Bytes& row : rows) row_pointers.push_back(row.data());
  png_write_image(png, row_pointers.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// A fixture with a deterministic pseudo-random pattern that uses the whole sample range,
// a full palette, and tRNS entries that some pixels actually hit.
Fixture PatternFixture(int color_type, int bit_depth, bool trns, bool interlaced, int width = 13,
                       int height = 11) {
  Fixture f;
  f.width = width;
  f.height = height;
  f.bit_depth = bit_depth;
  f.color_type = color_type;
  f.interlaced = interlaced;
  std::mt19937 rng(color_type * 1000 + bit_depth * 10 + trns);
  const int per_pixel = StoredChannels(color_type);
  const size_t pixels = static_cast<size_t>(width) * height;
  const uint32_t max_sample = (1u << bit_depth) - 1;
  f.samples.resize(pixels * per_pixel);
  for (uint16_t& v : f.samples) v = static_cast<uint16_t>(rng() % (max_sample + 1));
  // Opaque and fully transparent pixels besides the random alphas.
  if (color_type & PNG_COLOR_MASK_ALPHA) {
    for (size_t i = 0; i < pixels; i += 5) f.samples[i * per_pixel + per_pixel - 1] = 0;
    for (size_t i = 1; i < pixels; i += 5) {
      f.samples[i * per_pixel + per_pixel - 1] = static_cast<uint16_t>(max_sample);
    }
  }
  if (color_type == PNG_COLOR_TYPE_PALETTE) {
    f.palette.resize(size_t{1} << bit_depth);
    for (png_color& c : f.palette) {
      c = {static_cast<png_byte>(rng()), static_cast<png_byte>(rng()),
           static_cast<png_byte>(rng())};
    }
    if (trns) {
      // Fewer entries than the palette: indices past them are opaque.
      f.palette_alpha.resize(f.palette.size() == 2 ? 1 : f.palette.size() / 2 + 1);
      for (uint8_t& a : f.palette_alpha) a = static_cast<uint8_t>(rng());
      f.palette_alpha[0] = 0;
    }
  } else if (trns) {
    f.has_trans_color = true;
    if (color_type == PNG_COLOR_TYPE_GRAY) {
      f.trans_color.gray = f.samples[0];
    } else {
      // Make a few pixels exactly the key colour.
      for (size_t i = 7; i < pixels; i += 7) {
        std::copy_n(f.samples.begin(), 3, f.samples.begin() + i * 3);
      }
      f.trans_color.red = f.samples[0];
      f.trans_color.green = f.samples[1];
      f.trans_color.blue = f.samples[2];
    }
  }
  return f;
}

// ---------------------------------------------------------------------------------------
// The expected decode, computed independently of the decoder.

uint8_t Scale16(uint32_t v) { return static_cast<uint8_t>((v * 255 + 32895) >> 16); }

uint8_t ToEightBits(uint32_t v, int bit_depth) {
  if (bit_depth == 16) return Scale16(v);
  if (bit_depth == 8) return static_cast<uint8_t>(v);
  return static_cast<uint8_t>(v * 255 / ((1u << bit_depth) - 1));
}

uint8_t Composite(uint32_t c, uint32_t a, uint32_t bg) {
  return static_cast<uint8_t>((c * a + bg * (255 - a) + 127) / 255);
}

uint8_t PngLuma(uint32_t r, uint32_t g, uint32_t b) {
  return static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
}

Bytes ExpectedPixels(const Fixture& f, int channels, const uint8_t bg[3]) {
  const int per_pixel = StoredChannels(f.color_type);
  const bool gray = (f.color_type & PNG_COLOR_MASK_COLOR) == 0;
  Bytes out;
  for (size_t i = 0; i < f.samples.size(); i += per_pixel) {
    const uint16_t* s = &f.samples[i];
    uint32_t r, g, b, a = 255;
    if (f.color_type == PNG_COLOR_TYPE_PALETTE) {
      const png_color& c = f.palette.at(s[0]);
      r = c.red, g = c.green, b = c.blue;
      if (s[0] < f.palette_alpha.size()) a = f.palette_alpha[s[0]];
    } else if (gray) {
      r = g = b = ToEightBits(s[0], f.bit_depth);
      if (per_pixel == 2) a = ToEightBits(s[1], f.bit_depth);
      if (f.has_trans_color && s[0] == f.trans_color.gray) a = 0;
    } else {
      r = ToEightBits(s[0], f.bit_depth);
      g = ToEightBits(s[1], f.bit_depth);
      b = ToEightBits(s[2], f.bit_depth);
      if (per_pixel == 4) a = ToEightBits(s[3], f.bit_depth);
      if (f.has_trans_color && s[0] == f.trans_color.red && s[1] == f.trans_color.green &&
          s[2] == f.trans_color.blue) {
        a = 0;
      }
    }
    if (channels == 3) {
      out.push_back(Composite(r, a, bg[0]));
      out.push_back(Composite(g, a, bg[1]));
      out.push_back(Composite(b, a, bg[2]));
    } else if (gray) {
      out.push_back(Composite(g, a, PngLuma(bg[0], bg[1], bg[2])));
    } else {
      out.push_back(
          PngLuma(Composite(r, a, bg[0]), Composite(g, a, bg[1]), Composite(b, a, bg[2])));
    }
  }
  return out;
}

// Index of the first differing byte, as "pixel (x, y) channel c: got G, want W".
std::string FirstMismatch(const Image& image, const Bytes& want) {
  if (image.pixels.size() != want.size()) {
    return "size " + std::to_string(image.pixels.size()) + ", want " + std::to_string(want.size());
  }
  for (size_t i = 0; i < want.size(); ++i) {
    if (image.pixels[i] != want[i]) {
      const size_t pixel = i / image.channels;
      return "pixel (" + std::to_string(pixel % image.width) + ", " +
             std::to_string(pixel / image.width) + ") channel " +
             std::to_string(i % image.channels) + ": got " + std::to_string(image.pixels[i]) +
             ", want " + std::to_string(want[i]);
    }
  }
  return "";
}

DecodeOptions PngOptions(int channels = 3, const uint8_t* background = kWhite) {
  DecodeOptions options;
  options.channels = channels;
  std::copy_n(background, 3, options.background);
  return options;
}

StatusOr<Image> DecodePngBytes(const Bytes& png, const DecodeOptions& options = PngOptions(),
                               int* orientation = nullptr) {
  int ignored;
  return DecodePngRaw(png.data(), png.size(), options, orientation ? orientation : &ignored);
}

// ---------------------------------------------------------------------------------------
// Chunk-level editing for corrupt fixtures.

uint32_t Crc32(const uint8_t* p, size_t n, uint32_t crc = 0) {
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1)));
  }
  return ~crc;
}

void PutBigEndian32(Bytes* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<uint8_t>(v >> shift));
}

uint32_t GetBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

struct Chunk {
  std::string type;
  Bytes data;
};

std::vector<Chunk> SplitChunks(const Bytes& png) {
  std::vector<Chunk> chunks;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t length = GetBigEndian32(&png[at]);
    Chunk chunk{std::string(png.begin() + at + 4, png.begin() + at + 8),
                Bytes(png.begin() + at + 8, png.begin() + at + 8 + length)};
    chunks.push_back(std::move(chunk));
    at += 12 + length;
  }
  return chunks;
}

Bytes ChunkBytes(const std::string& type, const Bytes& data) {
  Bytes out;
  PutBigEndian32(&out, static_cast<uint32_t>(data.size()));
  out.insert(out.end(), type.begin(), type.end());
  out.insert(out.end(), data.begin(), data.end());
  PutBigEndian32(&out, Crc32(out.data() + 4, out.size() - 4));
  return out;
}

Bytes JoinChunks(const std::vector<Chunk>& chunks) {
  Bytes out = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  for (const Chunk& chunk : chunks) {
    Bytes bytes = ChunkBytes(chunk.type, chunk.data);
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

size_t IndexOf(const std::vector<Chunk>& chunks, const std::string& type) {
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].type == type) return i;
  }
  ADD_FAILURE() << "no " << type << " chunk";
  return 0;
}

// Byte offset of the first `type` chunk's length field.
size_t OffsetOf(const Bytes& png, const std::string& type) {
  for (size_t at = 8; at + 12 <= png.size(); at += 12 + GetBigEndian32(&png[at])) {
    if (std::equal(type.begin(), type.end(), png.begin() + at + 4)) return at;
  }
  ADD_FAILURE() << "no " << type << " chunk";
  return 0;
}

// `chunk` inserted just before the first `before` chunk.
Bytes InsertBefore(const Bytes& png, const std::string& before, const Bytes& chunk) {
  Bytes out = png;
  out.insert(out.begin() + OffsetOf(png, before), chunk.begin(), chunk.end());
  return out;
}

Bytes WithDimensions(const Bytes& png, uint32_t width, uint32_t height) {
  std::vector<Chunk> chunks = SplitChunks(png);
  Bytes& ihdr = chunks[IndexOf(chunks, "IHDR")].data;
  Bytes dims;
  PutBigEndian32(&dims, width);
  PutBigEndian32(&dims, height);
  std::copy(dims.begin(), dims.end(), ihdr.begin());
  return JoinChunks(chunks);
}

// A TIFF structure with IFD0 = {ImageWidth, Orientation}.
Bytes Tiff(bool big_endian, uint32_t orientation, uint16_t type = 3, uint32_t count = 1) {
  Bytes out;
  auto u16 = [&](uint32_t v) {
    if (big_endian) {
      out.push_back(static_cast<uint8_t>(v >> 8));
      out.push_back(static_cast<uint8_t>(v));
    } else {
      out.push_back(static_cast<uint8_t>(v));
      out.push_back(static_cast<uint8_t>(v >> 8));
    }
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian) {
      u16(v >> 16);
      u16(v & 0xffff);
    } else {
      u16(v & 0xffff);
      u16(v >> 16);
    }
  };
  out.push_back(big_endian ? 'M' : 'I');
  out.push_back(big_endian ? 'M' : 'I');
  u16(42);
  u32(8);                                        // IFD0 offset
  u16(2);                                        // entries
  u16(0x0100), u16(3), u32(1), u16(13), u16(0);  // ImageWidth = 13
  u16(0x0112), u16(type), u32(count), u16(orientation), u16(0);
  u32(0);  // no next IFD
  return out;
}

Bytes WithExif(const Bytes& png, const Bytes& tiff, const std::string& before = "IDAT") {
  return InsertBefore(png, before, ChunkBytes("eXIf", tiff));
}

// ---------------------------------------------------------------------------------------
// Every colour type and bit depth, plain and interlaced, decodes to the computed pixels.

struct FormatCase {
  int color_type;
  int bit_depth;
  bool trns;
  bool interlaced;
};

std::string FormatName(const FormatCase& c) {
  std::string name;
  switch (c.color_type) {
    case PNG_COLOR_TYPE_GRAY:
      name = "Gray";
      break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      name = "GrayAlpha";
      break;
    case PNG_COLOR_TYPE_RGB:
      name = "Rgb";
      break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      name = "Rgba";
      break;
    default:
      name = "Palette";
  }
  name += std::to_string(c.bit_depth);
  if (c.trns) name += "Trns";
  if (c.interlaced) name += "Interlaced";
  return name;
}

std::string CaseName(const ::testing::TestParamInfo<FormatCase>& info) {
  return FormatName(info.param);
}

void PrintTo(const FormatCase& c, std::ostream* os) { *os << FormatName(c); }

std::vector<FormatCase> AllFormats() {
  std::vector<FormatCase> cases;
  for (bool interlaced : {false, true}) {
    for (bool trns : {false, true}) {
      for (int depth : {1, 2, 4, 8, 16}) {
        cases.push_back({PNG_COLOR_TYPE_GRAY, depth, trns, interlaced});
      }
      for (int depth : {1, 2, 4, 8}) {
        cases.push_back({PNG_COLOR_TYPE_PALETTE, depth, trns, interlaced});
      }
      for (int depth : {8, 16}) cases.push_back({PNG_COLOR_TYPE_RGB, depth, trns, interlaced});
    }
    for (int depth : {8, 16}) {
      cases.push_back({PNG_COLOR_TYPE_GRAY_ALPHA, depth, false, interlaced});
      cases.push_back({PNG_COLOR_TYPE_RGB_ALPHA, depth, false, interlaced});
    }
  }
  return cases;
}

class PngFormatTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(PngFormatTest, DecodesToExpectedPixels) {
  const FormatCase& c = GetParam();
  const Fixture f = PatternFixture(c.color_type, c.bit_depth, c.trns, c.interlaced);
  const Bytes png = WritePng(f);
  for (int channels : {3, 1}) {
    for (const uint8_t* background : {kWhite, kTeal}) {
      SCOPED_TRACE("channels " + std::to_string(channels) + ", background " +
                   std::to_string(background[0]));
      StatusOr<Image> image = DecodePngBytes(png, PngOptions(channels, background));
      ASSERT_TRUE(image.ok()) << image.status().ToString();
      EXPECT_EQ(image->width, f.width);
      EXPECT_EQ(image->height, f.height);
      EXPECT_EQ(image->channels, channels);
      EXPECT_EQ(FirstMismatch(*image, ExpectedPixels(f, channels, background)), "");
      // The exact decode into a caller's buffer gives the same bytes, whether the rows go
      // straight there (8-bit, no alpha, as many samples as asked) or through a buffer.
      Bytes exact(image->pixels.size(), 0xAB);
      const Status exact_status =
          DecodePngExact(png.data(), png.size(), PngOptions(channels, background), f.height,
                         f.width, exact.data());
      ASSERT_TRUE(exact_status.ok()) << exact_status.ToString();
      EXPECT_EQ(exact, image->pixels);
    }
  }
}

TEST(PngDecoderTest, AnExactDecodeOfAnotherSizeFailsBeforeDecodingAPixel) {
  const Fixture f = PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false);
  const Bytes png = WritePng(f);
  Bytes out(static_cast<size_t>(f.height) * f.width * 3, 0xAB);
  for (const auto& [height, width] :
       {std::pair{f.height, f.width - 1}, {f.height + 1, f.width}, {1, 1}}) {
    const Status s =
        DecodePngExact(png.data(), png.size(), PngOptions(3), height, width, out.data());
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("PNG: " + std::to_string(f.height) + "x" + std::to_string(f.width) +
                               " in its header, the record says " + std::to_string(height) + "x" +
                               std::to_string(width)),
              std::string::npos)
        << s.message();
    EXPECT_EQ(out, Bytes(out.size(), 0xAB));  // untouched
  }
  EXPECT_EQ(
      DecodePngExact(png.data(), png.size(), PngOptions(3), f.height, f.width, nullptr).code(),
      StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(AllColorTypesAndDepths, PngFormatTest, ::testing::ValuesIn(AllFormats()),
                         CaseName);

TEST(PngDecoderTest, TinyInterlacedImagesWithEmptyPassesDecode) {
  for (int height = 1; height <= 9; ++height) {
    for (int width = 1; width <= 9; ++width) {
      SCOPED_TRACE(std::to_string(width) + "x" + std::to_string(height));
      const Fixture f = PatternFixture(PNG_COLOR_TYPE_GRAY, 2, false, true, width, height);
      StatusOr<Image> image = DecodePngBytes(WritePng(f));
      ASSERT_TRUE(image.ok()) << image.status().ToString();
      EXPECT_EQ(FirstMismatch(*image, ExpectedPixels(f, 3, kWhite)), "");
    }
  }
}

TEST(PngDecoderTest, SixteenBitSamplesScaleWithRounding) {
  Fixture f;
  f.width = 256;
  f.height = 256;
  f.bit_depth = 16;
  f.color_type = PNG_COLOR_TYPE_GRAY;
  for (uint32_t v = 0; v < 65536; ++v) f.samples.push_back(static_cast<uint16_t>(v));
  StatusOr<Image> image = DecodePngBytes(WritePng(f), PngOptions(1));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->pixels.size(), 65536u);
  for (uint32_t v = 0; v < 65536; ++v) {
    ASSERT_EQ(image->pixels[v], (v * 255 + 32895) >> 16) << "16-bit sample " << v;
  }
  EXPECT_EQ(image->pixels[0x7f7f], 127);  // 0x7f7f * 255 / 65535 = 127.0; strip_16 also 127
  EXPECT_EQ(image->pixels[0x80ff], 128);  // 128.5 rounds up where strip_16 would give 128
  EXPECT_EQ(image->pixels[0x7fff], 127);  // 127.498: strip_16 would also give 127
  EXPECT_EQ(image->pixels[0x00ff], 1);    // 0.99: strip_16 would give 0
}

TEST(PngDecoderTest, GrayOutputUsesBt601Luma) {
  Fixture f;
  f.width = 3;
  f.height = 1;
  f.samples = {255, 0, 0, 0, 255, 0, 0, 0, 255};
  StatusOr<Image> image = DecodePngBytes(WritePng(f), PngOptions(1));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, (Bytes{76, 150, 29}));
}

TEST(PngDecoderTest, AlphaIsCompositedOverTheBackground) {
  Fixture f;
  f.width = 1;
  f.height = 1;
  f.color_type = PNG_COLOR_TYPE_RGB_ALPHA;
  f.samples = {200, 100, 0, 128};
  const uint8_t blue[3] = {0, 0, 255};
  StatusOr<Image> image = DecodePngBytes(WritePng(f), PngOptions(3, blue));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, (Bytes{100, 50, 127}));
}

TEST(PngDecoderTest, PaletteIndexPastThePaletteReadsBlack) {
  Fixture f = PatternFixture(PNG_COLOR_TYPE_PALETTE, 8, false, false, 2, 1);
  f.palette.resize(2);
  f.palette[1] = {10, 20, 30};
  f.samples = {1, 200};
  StatusOr<Image> image = DecodePngBytes(WritePng(f));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, (Bytes{10, 20, 30, 0, 0, 0}));
}

// ---------------------------------------------------------------------------------------
// Not PNG at all.

TEST(PngDecoderTest, EmptyInputIsCorruption) {
  StatusOr<Image> image = DecodePngRaw(nullptr, 0, PngOptions(), nullptr);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("empty"), std::string::npos) << image.status().message();
}

TEST(PngDecoderTest, NonPngInputIsCorruption) {
  const Bytes jpeg = {0xff, 0xd8, 0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0, 1, 1, 0};
  StatusOr<Image> image = DecodePngBytes(jpeg);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("not a PNG file"), std::string::npos);
}

TEST(PngDecoderTest, SignatureAloneIsTruncated) {
  const Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  StatusOr<Image> image = DecodePngBytes(Bytes(png.begin(), png.begin() + 8));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("truncated"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, InvalidChannelsIsInvalidArgument) {
  const Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  StatusOr<Image> image = DecodePngBytes(png, PngOptions(4));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(image.status().message().find("channels"), std::string::npos);
}

// ---------------------------------------------------------------------------------------
// Truncation and damage: always an error, never a partial image.

// Palette + tRNS, interlaced, a tEXt and an eXIf chunk and many small IDATs.
Bytes RichPng() {
  Fixture f = PatternFixture(PNG_COLOR_TYPE_PALETTE, 4, true, true, 17, 9);
  f.idat_bytes = 16;
  Bytes png = WritePng(f);
  png = InsertBefore(png, "IDAT", ChunkBytes("tEXt", Bytes{'k', 0, 'v'}));
  return WithExif(png, Tiff(true, 6));
}

TEST(PngDecoderTest, TruncationAtEveryOffsetIsAnError) {
  const Bytes png = RichPng();
  ASSERT_TRUE(DecodePngBytes(png).ok());
  for (size_t size = 1; size < png.size(); ++size) {
    int orientation = -1;
    StatusOr<Image> image =
        DecodePngRaw(png.data(), size, PngOptions(), &orientation);  // exactly `size` bytes
    ASSERT_FALSE(image.ok()) << "decoded the first " << size << " of " << png.size() << " bytes";
    EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
    EXPECT_NE(image.status().message().find("truncated"), std::string::npos)
        << size << ": " << image.status().message();
    EXPECT_EQ(orientation, 1);
  }
}

TEST(PngDecoderTest, MissingIendIsTruncated) {
  std::vector<Chunk> chunks = SplitChunks(RichPng());
  chunks.pop_back();
  ASSERT_EQ(chunks.back().type, "IDAT");
  StatusOr<Image> image = DecodePngBytes(JoinChunks(chunks));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("truncated"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, BytesAfterIendAreIgnored) {
  const Bytes png = RichPng();
  Bytes padded = png;
  padded.insert(padded.end(), {'j', 'u', 'n', 'k', 0, 0, 0, 0});
  StatusOr<Image> plain = DecodePngBytes(png);
  StatusOr<Image> image = DecodePngBytes(padded);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, plain->pixels);
}

TEST(PngDecoderTest, MissingImageDataIsCorruption) {
  // The IHDR of a 13x11 image with the IDAT of a 13x5 one.
  std::vector<Chunk> tall = SplitChunks(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0)));
  std::vector<Chunk> short_ =
      SplitChunks(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0, 13, 5)));
  tall[IndexOf(tall, "IDAT")] = short_[IndexOf(short_, "IDAT")];
  StatusOr<Image> image = DecodePngBytes(JoinChunks(tall));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("Not enough image data"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, ExtraImageDataIsIgnored) {
  // The IHDR of a 13x5 image with the IDAT of a 13x11 one: libpng's benign
  // "Too much image data"; the first five rows are the image.
  const Fixture tall_fixture = PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0);
  std::vector<Chunk> tall = SplitChunks(WritePng(tall_fixture));
  std::vector<Chunk> short_ =
      SplitChunks(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0, 13, 5)));
  short_[IndexOf(short_, "IDAT")] = tall[IndexOf(tall, "IDAT")];
  StatusOr<Image> image = DecodePngBytes(JoinChunks(short_));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  const Bytes want = ExpectedPixels(tall_fixture, 3, kWhite);
  EXPECT_EQ(image->pixels, Bytes(want.begin(), want.begin() + ptrdiff_t{13} * 5 * 3));
}

TEST(PngDecoderTest, IhdrCrcErrorIsCorruption) {
  Bytes png = RichPng();
  png[OffsetOf(png, "IHDR") + 8] ^= 0x01;  // width's top byte; the CRC no longer matches
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("IHDR: CRC error"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, IdatCrcErrorIsCorruption) {
  Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  const size_t idat = OffsetOf(png, "IDAT");
  png[idat + 8 + GetBigEndian32(&png[idat])] ^= 0x40;  // the CRC itself
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("IDAT: CRC error"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, DamagedImageDataIsCorruption) {
  // zlib's check value or the IDAT CRC, whichever libpng reaches first.
  Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  png[OffsetOf(png, "IDAT") + 20] ^= 0x40;
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("libpng: IDAT: "), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, PlteCrcErrorIsCorruption) {
  Bytes png = RichPng();
  png[OffsetOf(png, "PLTE") + 9] ^= 0x01;
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("PLTE: CRC error"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, IendCrcErrorIsCorruption) {
  Bytes png = RichPng();
  png.back() ^= 0x01;
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("IEND: CRC error"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, AncillaryChunkCrcErrorDropsOnlyThatChunk) {
  const Bytes png = RichPng();
  Bytes damaged = png;
  damaged[OffsetOf(damaged, "tEXt") + 8] ^= 0x01;
  StatusOr<Image> plain = DecodePngBytes(png);
  StatusOr<Image> image = DecodePngBytes(damaged);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, plain->pixels);
}

TEST(PngDecoderTest, TrnsWithCrcErrorIsDroppedAndTheImageIsOpaque) {
  Fixture f = PatternFixture(PNG_COLOR_TYPE_PALETTE, 8, true, false);
  Bytes png = WritePng(f);
  png[OffsetOf(png, "tRNS") + 8] ^= 0x01;
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  f.palette_alpha.clear();
  EXPECT_EQ(FirstMismatch(*image, ExpectedPixels(f, 3, kWhite)), "");
}

TEST(PngDecoderTest, UnknownCriticalChunkIsCorruption) {
  const Bytes png = InsertBefore(RichPng(), "IDAT", ChunkBytes("ZZZZ", Bytes{1, 2, 3}));
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("ZZZZ"), std::string::npos) << image.status().message();
}

TEST(PngDecoderTest, UnknownAncillaryChunkIsIgnored) {
  const Bytes png = RichPng();
  StatusOr<Image> image =
      DecodePngBytes(InsertBefore(png, "IDAT", ChunkBytes("zzZz", Bytes(100, 7))));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, DecodePngBytes(png)->pixels);
}

// ---------------------------------------------------------------------------------------
// Limits, before any pixel memory.

TEST(PngDecoderTest, HugeDimensionsAreRejectedFromTheHeader) {
  // 20000 x 20000 = 400M pixels declared by a file of a few hundred bytes: rejected from
  // IHDR alone (otherwise the tiny IDAT would give "Not enough image data").
  const Bytes png =
      WithDimensions(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0, 1, 1)), 20000, 20000);
  ASSERT_LT(png.size(), 100u);
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("20000x20000 is 400000000 pixels, over max_pixels"),
            std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, SideOverMaxDimensionIsResourceExhausted) {
  const Bytes png =
      WithDimensions(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0, 1, 1)), 70000, 1);
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("70000x1 exceeds max_dimension 65500"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, MaxDimensionOptionIsEnforced) {
  DecodeOptions options = PngOptions();
  options.limits.max_dimension = 12;
  StatusOr<Image> image = DecodePngBytes(RichPng(), options);  // 17 x 9
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("17x9 exceeds max_dimension 12"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, MaxPixelsOptionIsEnforced) {
  DecodeOptions options = PngOptions();
  options.limits.max_pixels = 152;
  StatusOr<Image> image = DecodePngBytes(RichPng(), options);  // 17 x 9 = 153
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("17x9 is 153 pixels, over max_pixels 152"),
            std::string::npos)
      << image.status().message();
  options.limits.max_pixels = 153;
  EXPECT_TRUE(DecodePngBytes(RichPng(), options).ok());
}

TEST(PngDecoderTest, MaxMemoryBytesBoundsTheDecodeBuffer) {
  DecodeOptions options = PngOptions();
  options.limits.max_memory_bytes = 17 * 9 * 4 - 1;  // RGBA after tRNS expansion
  StatusOr<Image> image = DecodePngBytes(RichPng(), options);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("max_memory_bytes"), std::string::npos)
      << image.status().message();
}

// A chunk header declaring `length` bytes, then nothing of the sort.
Bytes ChunkHeaderOnly(uint32_t length, const std::string& type) {
  Bytes out;
  PutBigEndian32(&out, length);
  out.insert(out.end(), type.begin(), type.end());
  return out;
}

TEST(PngDecoderTest, HugeChunkLengthIsTruncation) {
  const Bytes png = InsertBefore(RichPng(), "IDAT", ChunkHeaderOnly(0x7ffffff0, "tEXt"));
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("truncated PNG: chunk 'tEXt' at byte offset"),
            std::string::npos)
      << image.status().message();
  EXPECT_NE(image.status().message().find("declares 2147483632 bytes"), std::string::npos);
}

TEST(PngDecoderTest, HugeExifLengthIsRejectedBeforeLibpngAllocatesIt) {
  // libpng 1.6.39 would malloc the declared 2 GiB and only then run out of input.
  Bytes png = InsertBefore(RichPng(), "IDAT", ChunkHeaderOnly(0x7ff00000, "eXIf"));
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("truncated PNG: chunk 'eXIf'"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, HugeIdatLengthIsTruncation) {
  Bytes png = RichPng();
  png[OffsetOf(png, "IDAT")] = 0x7f;
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("truncated PNG: chunk 'IDAT'"), std::string::npos)
      << image.status().message();
}

TEST(PngDecoderTest, ChunkLengthOver2GiBIsCorruption) {
  const Bytes png = InsertBefore(RichPng(), "IDAT", ChunkHeaderOnly(0xffffffff, "tEXt"));
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("libpng"), std::string::npos) << image.status().message();
}

TEST(PngDecoderTest, ExifOverChunkMallocMaxIsResourceExhausted) {
  Bytes tiff = Tiff(true, 6);
  tiff.resize(2000);
  const Bytes png = WithExif(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0)), tiff);
  DecodeOptions options = PngOptions();
  options.limits.png_chunk_malloc_max = 1000;
  StatusOr<Image> image = DecodePngBytes(png, options);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("of 2000 bytes exceeds png_chunk_malloc_max 1000"),
            std::string::npos)
      << image.status().message();
  int orientation = 0;
  ASSERT_TRUE(DecodePngBytes(png, PngOptions(), &orientation).ok());
  EXPECT_EQ(orientation, 6);
}

TEST(PngDecoderTest, SkippedChunkOverChunkMallocMaxIsIgnored) {
  // Skipped chunks are never held in memory, so the limit does not apply to them.
  const Bytes png = InsertBefore(RichPng(), "IDAT", ChunkBytes("iTXt", Bytes(2000, 'x')));
  DecodeOptions options = PngOptions();
  options.limits.png_chunk_malloc_max = 1000;
  StatusOr<Image> image = DecodePngBytes(png, options);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->pixels, DecodePngBytes(RichPng())->pixels);
}

TEST(PngDecoderTest, CompressedTextBombIsNeverInflated) {
  Fixture f = PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false);
  f.ztxt.assign(64 << 20, 'a');  // 64 MiB that deflate to about 64 KiB
  const Bytes png = WritePng(f);
  ASSERT_LT(png.size(), 1u << 20);
  StatusOr<Image> image = DecodePngBytes(png);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(FirstMismatch(*image, ExpectedPixels(f, 3, kWhite)), "");
}

TEST(PngDecoderTest, HundredThousandTextChunksAreSkipped) {
  const Fixture f = PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false);
  const Bytes png = WritePng(f);
  const Bytes text = ChunkBytes("tEXt", Bytes{'k', 0, 'v'});
  Bytes many(png.begin(), png.begin() + OffsetOf(png, "IDAT"));
  for (int i = 0; i < 100000; ++i) many.insert(many.end(), text.begin(), text.end());
  many.insert(many.end(), png.begin() + OffsetOf(png, "IDAT"), png.end());
  StatusOr<Image> image = DecodePngBytes(many);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(FirstMismatch(*image, ExpectedPixels(f, 3, kWhite)), "");
}

// ---------------------------------------------------------------------------------------
// Random damage: errors or images, never a crash (run under ASan/UBSan).

void ExpectImageOrError(const StatusOr<Image>& image, size_t iteration) {
  if (image.ok()) {
    EXPECT_EQ(image->pixels.size(),
              static_cast<size_t>(image->width) * image->height * image->channels)
        << "iteration " << iteration;
  } else {
    EXPECT_TRUE(image.status().code() == StatusCode::kCorruption ||
                image.status().code() == StatusCode::kResourceExhausted)
        << "iteration " << iteration << ": " << image.status().ToString();
    EXPECT_FALSE(image.status().message().empty());
  }
}

TEST(PngDecoderTest, RandomByteFlipsNeverCrash) {
  const Bytes bases[] = {RichPng(), WritePng(PatternFixture(PNG_COLOR_TYPE_RGB_ALPHA, 16, 0, 1))};
  std::mt19937 rng(1234);
  size_t errors = 0;
  for (const Bytes& base : bases) {
    const int width = DecodePngBytes(base)->width;
    for (size_t i = 0; i < 2000; ++i) {
      Bytes png = base;
      for (int flips = 1 + rng() % 4; flips > 0; --flips) {
        png[8 + rng() % (png.size() - 8)] ^= static_cast<uint8_t>(1 + rng() % 255);
      }
      StatusOr<Image> image = DecodePngBytes(png, PngOptions(1 + 2 * (i % 2)));
      ExpectImageOrError(image, i);
      if (image.ok()) {
        EXPECT_EQ(image->width, width);  // IHDR damage never gets through
      } else {
        ++errors;
      }
    }
  }
  EXPECT_GT(errors, 3000u);
}

TEST(PngDecoderTest, RandomFlipsBehindValidCrcsNeverCrash) {
  // Damage inside chunks with their CRCs recomputed, so that it reaches the IHDR checks,
  // zlib, the filters and the interlace code.
  const Bytes bases[] = {RichPng(), WritePng(PatternFixture(PNG_COLOR_TYPE_GRAY, 16, 1, 1)),
                         WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0))};
  std::mt19937 rng(99);
  for (const Bytes& base : bases) {
    const std::vector<Chunk> chunks = SplitChunks(base);
    for (size_t i = 0; i < 2000; ++i) {
      std::vector<Chunk> damaged = chunks;
      for (int flips = 1 + rng() % 3; flips > 0; --flips) {
        Chunk& chunk = damaged[rng() % damaged.size()];
        if (chunk.data.empty()) continue;
        chunk.data[rng() % chunk.data.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
      }
      ExpectImageOrError(DecodePngBytes(JoinChunks(damaged), PngOptions(1 + 2 * (i % 2))), i);
    }
  }
}

TEST(PngDecoderTest, GarbageFromAnyOffsetOnIsAnError) {
  const Bytes png = RichPng();
  for (size_t from = 8; from < png.size(); ++from) {
    Bytes damaged = png;
    for (size_t i = from; i < damaged.size(); ++i) damaged[i] ^= 0x5a;
    StatusOr<Image> image = DecodePngBytes(damaged);
    ASSERT_FALSE(image.ok()) << "garbage from byte " << from << " decoded";
    EXPECT_EQ(image.status().code(), StatusCode::kCorruption) << image.status().ToString();
  }
}

// ---------------------------------------------------------------------------------------
// EXIF orientation from eXIf.

TEST(PngDecoderTest, ExifOrientationIsParsedInBothByteOrders) {
  const Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  for (bool big_endian : {true, false}) {
    for (uint32_t want = 1; want <= 8; ++want) {
      int orientation = 0;
      StatusOr<Image> image =
          DecodePngBytes(WithExif(png, Tiff(big_endian, want)), PngOptions(), &orientation);
      ASSERT_TRUE(image.ok()) << image.status().ToString();
      EXPECT_EQ(orientation, static_cast<int>(want)) << (big_endian ? "MM" : "II");
    }
  }
}

TEST(PngDecoderTest, ExifAfterTheImageDataIsParsed) {
  const Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  int orientation = 0;
  StatusOr<Image> image =
      DecodePngBytes(WithExif(png, Tiff(false, 3), "IEND"), PngOptions(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 3);
}

TEST(PngDecoderTest, NoExifMeansOrientationOne) {
  int orientation = 0;
  StatusOr<Image> image = DecodePngBytes(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0)),
                                         PngOptions(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 1);
}

TEST(PngDecoderTest, MalformedExifMeansOrientationOne) {
  const Bytes png = WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false));
  std::vector<std::pair<std::string, Bytes>> cases;
  cases.emplace_back("value 0", Tiff(true, 0));
  cases.emplace_back("value 9", Tiff(true, 9));
  cases.emplace_back("type LONG", Tiff(true, 6, 4));
  cases.emplace_back("count 2", Tiff(true, 6, 3, 2));
  Bytes bad_magic = Tiff(true, 6);
  bad_magic[3] = 43;
  cases.emplace_back("magic 43", bad_magic);
  Bytes far_ifd = Tiff(false, 6);
  far_ifd[4] = 0xf0;
  cases.emplace_back("IFD offset past the end", far_ifd);
  Bytes header_ifd = Tiff(false, 6);
  header_ifd[4] = 2;
  cases.emplace_back("IFD offset inside the header", header_ifd);
  Bytes cut = Tiff(true, 6);
  cut.resize(8 + 2 + 12 + 6);  // the orientation entry is cut short
  cases.emplace_back("entry cut short", cut);
  Bytes many = Tiff(true, 6);
  many[9] = 0xff;  // 255 entries claimed; only ImageWidth is there
  many.resize(8 + 2 + 12);
  cases.emplace_back("count past the end", many);
  cases.emplace_back("byte order XX", Bytes{'X', 'X', 0, 42, 0, 0, 0, 8});
  cases.emplace_back("two bytes", Bytes{'M', 'M'});
  cases.emplace_back("one byte", Bytes{'M'});
  cases.emplace_back("empty", Bytes{});
  for (const auto& [name, tiff] : cases) {
    int orientation = 0;
    StatusOr<Image> image = DecodePngBytes(WithExif(png, tiff), PngOptions(), &orientation);
    ASSERT_TRUE(image.ok()) << name << ": " << image.status().ToString();
    EXPECT_EQ(orientation, 1) << name;
  }
}

TEST(PngDecoderTest, ExifWithCrcErrorMeansOrientationOne) {
  Bytes png = WithExif(WritePng(PatternFixture(PNG_COLOR_TYPE_RGB, 8, 0, 0)), Tiff(true, 6));
  png[OffsetOf(png, "eXIf") + 8 + 21] ^= 0x01;
  int orientation = 0;
  StatusOr<Image> image = DecodePngBytes(png, PngOptions(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 1);
}

TEST(PngDecoderTest, DecodePngAppliesTheOrientation) {
  const Fixture f = PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false);  // 13 x 11
  const Bytes png = WithExif(WritePng(f), Tiff(true, 6));                 // rotate 90° cw
  const Bytes stored = ExpectedPixels(f, 3, kWhite);
  DecodeOptions options = PngOptions();
  StatusOr<Image> image = DecodePng(png.data(), png.size(), options);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->width, 11);
  ASSERT_EQ(image->height, 13);
  for (int y = 0; y < 13; ++y) {
    for (int x = 0; x < 11; ++x) {
      const size_t from = (static_cast<size_t>(10 - x) * 13 + y) * 3;  // stored (y, 10 - x)
      ASSERT_TRUE(std::equal(stored.begin() + from, stored.begin() + from + 3,
                             image->row(y) + size_t{3} * x))
          << "displayed (" << x << ", " << y << ")";
    }
  }
}

TEST(PngDecoderTest, DecodePngWithoutApplyOrientationKeepsStoredPixels) {
  const Fixture f = PatternFixture(PNG_COLOR_TYPE_RGB, 8, false, false);
  const Bytes png = WithExif(WritePng(f), Tiff(true, 6));
  DecodeOptions options = PngOptions();
  options.apply_orientation = false;
  StatusOr<Image> image = DecodePng(png.data(), png.size(), options);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->width, 13);
  EXPECT_EQ(FirstMismatch(*image, ExpectedPixels(f, 3, kWhite)), "");
}

}  // namespace
}  // namespace shardpack::image
