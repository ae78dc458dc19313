#include "image/jpeg_decoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// jpeglib.h needs size_t and FILE declared before it.
#include <jpeglib.h>

#include "image/image.h"
#include "image_fixtures.h"
#include "test_util.h"

namespace shardpack::image {
namespace {

using Bytes = std::vector<uint8_t>;

// How a fixture is compressed with libjpeg.
struct EncodeSpec {
  J_COLOR_SPACE in_space = JCS_RGB;        // JCS_RGB, JCS_GRAYSCALE or JCS_CMYK pixels
  J_COLOR_SPACE jpeg_space = JCS_UNKNOWN;  // JCS_UNKNOWN: libjpeg's default for in_space
  int quality = 95;
  int h_samp = 1, v_samp = 1;  // first component; 2x1 is 4:2:2, 2x2 is 4:2:0
  bool progressive = false;
  std::vector<jpeg_scan_info> scans;           // a custom scan script when not empty
  int adobe_marker = -1;                       // -1: libjpeg's default; 0 or 1: forced
  std::vector<std::pair<int, Bytes>> markers;  // (marker code, payload) after SOI/APPn
};

void FailEncode(j_common_ptr cinfo) {
  char message[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, message);
  std::fprintf(stderr, "test fixture encoder: %s\n", message);
  std::abort();
}

int ComponentsOf(J_COLOR_SPACE space) {
  return space == JCS_GRAYSCALE ? 1 : space == JCS_CMYK ? 4 : 3;
}

Bytes Encode(const Bytes& pixels, int width, int height, const EncodeSpec& spec) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  err.error_exit = FailEncode;
  jpeg_create_compress(&cinfo);
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  jpeg_mem_dest(&cinfo, &out, &out_size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.in_color_space = spec.in_space;
  cinfo.input_components = ComponentsOf(spec.in_space);
  jpeg_set_defaults(&cinfo);
  if (spec.jpeg_space != JCS_UNKNOWN) jpeg_set_colorspace(&cinfo, spec.jpeg_space);
  jpeg_set_quality(&cinfo, spec.quality, TRUE);
  if (spec.h_samp != 1 || spec.v_samp != 1) {
    cinfo.comp_info[0].h_samp_factor = spec.h_samp;
    cinfo.comp_info[0].v_samp_factor = spec.v_samp;
    for (int c = 1; c < cinfo.num_components; ++c) {
      cinfo.comp_info[c].h_samp_factor = 1;
      cinfo.comp_info[c].v_samp_factor = 1;
    }
  }
  if (spec.progressive) jpeg_simple_progression(&cinfo);
  if (!spec.scans.empty()) {
    cinfo.scan_info = spec.scans.data();
    cinfo.num_scans = static_cast<int>(spec.scans.size());
  }
  if (spec.adobe_marker >= 0) cinfo.write_Adobe_marker = spec.adobe_marker ? TRUE : FALSE;
  jpeg_start_compress(&cinfo, TRUE);
  for (const auto& [marker, payload] : spec.markers) {
    jpeg_write_marker(&cinfo, marker, payload.data(), static_cast<unsigned>(payload.size()));
  }
  const size_t stride = static_cast<size_t>(width) * cinfo.input_components;
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pixels.data()) + cinfo.next_scanline * stride;
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  Bytes jpeg(out, out + out_size);
  std::free(out);
  return jpeg;
}

// A smooth picture with some structure, so that quality-95 JPEG keeps it close.
Bytes Pattern(int width, int height, int channels) {
  Bytes p(static_cast<size_t>(width) * height * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        double v = 128 + 90 * std::sin(0.05 * x * (c + 1) + 0.3 * c) * std::cos(0.04 * y + c);
        p[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(v);
      }
    }
  }
  return p;
}

double MeanAbsError(const Bytes& a, const Bytes& b) {
  EXPECT_EQ(a.size(), b.size());
  if (a.size() != b.size() || a.empty()) return 1e9;
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += std::abs(int{a[i]} - int{b[i]});
  return sum / a.size();
}

uint8_t Luma(int r, int g, int b) {
  return static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 32768) >> 16);
}

Bytes LumaOf(const Bytes& rgb) {
  Bytes y(rgb.size() / 3);
  for (size_t i = 0; i < y.size(); ++i) y[i] = Luma(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
  return y;
}

// RGB from stored CMYK bytes: Adobe files store inverted ink (255 = none).
Bytes CmykToRgb(const Bytes& cmyk, bool inverted) {
  Bytes rgb(cmyk.size() / 4 * 3);
  for (size_t i = 0; i < cmyk.size() / 4; ++i) {
    const int k = cmyk[4 * i + 3];
    for (int c = 0; c < 3; ++c) {
      const int v = cmyk[4 * i + c];
      rgb[3 * i + c] = static_cast<uint8_t>(inverted ? (v * k + 127) / 255
                                                     : ((255 - v) * (255 - k) + 127) / 255);
    }
  }
  return rgb;
}

DecodeOptions Options(int channels = 3) {
  DecodeOptions options;
  options.channels = channels;
  return options;
}

StatusOr<Image> DecodeBytes(const Bytes& jpeg, const DecodeOptions& options = Options()) {
  return DecodeJpeg(jpeg.data(), jpeg.size(), options);
}

StatusOr<Image> DecodeRaw(const Bytes& jpeg, const DecodeOptions& options, int* orientation) {
  return DecodeJpegRaw(jpeg.data(), jpeg.size(), options, orientation);
}

// Offset of the first marker `code` (0xC0 for SOF0), or npos.
size_t FindMarker(const Bytes& jpeg, uint8_t code) {
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] == code) return i;
  }
  return std::string::npos;
}

// Writes a new height and width into the first SOF0/SOF2 segment.
Bytes PatchFrameSize(Bytes jpeg, uint8_t sof, int height, int width) {
  const size_t at = FindMarker(jpeg, sof);
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return jpeg;
  jpeg[at + 5] = static_cast<uint8_t>(height >> 8);
  jpeg[at + 6] = static_cast<uint8_t>(height);
  jpeg[at + 7] = static_cast<uint8_t>(width >> 8);
  jpeg[at + 8] = static_cast<uint8_t>(width);
  return jpeg;
}

int CountScans(const Bytes& jpeg) {
  int scans = 0;
  // Entropy-coded data stuffs 0xFF as 0xFF 0x00, so 0xFF 0xDA is always an SOS marker.
  for (size_t i = 0; i + 1 < jpeg.size(); ++i) scans += jpeg[i] == 0xFF && jpeg[i + 1] == 0xDA;
  return scans;
}

void Put16(Bytes* b, int v, bool big_endian) {
  if (big_endian) {
    b->push_back(static_cast<uint8_t>(v >> 8));
    b->push_back(static_cast<uint8_t>(v));
  } else {
    b->push_back(static_cast<uint8_t>(v));
    b->push_back(static_cast<uint8_t>(v >> 8));
  }
}

void Put32(Bytes* b, uint32_t v, bool big_endian) {
  Put16(b, static_cast<int>(big_endian ? v >> 16 : v & 0xFFFF), big_endian);
  Put16(b, static_cast<int>(big_endian ? v & 0xFFFF : v >> 16), big_endian);
}

// An Exif APP1 payload: TIFF header and IFD0 with Make ("abc") and Orientation.
Bytes ExifPayload(int orientation, bool big_endian, int orientation_type = 3) {
  Bytes b = {'E', 'x', 'i', 'f', 0, 0};
  b.push_back(big_endian ? 'M' : 'I');
  b.push_back(big_endian ? 'M' : 'I');
  Put16(&b, 42, big_endian);
  Put32(&b, 8, big_endian);       // IFD0 right after the header
  Put16(&b, 2, big_endian);       // entries
  Put16(&b, 0x010F, big_endian);  // Make, ASCII, 4 bytes inline
  Put16(&b, 2, big_endian);
  Put32(&b, 4, big_endian);
  for (char c : {'a', 'b', 'c', '\0'}) b.push_back(static_cast<uint8_t>(c));
  Put16(&b, 0x0112, big_endian);  // Orientation
  Put16(&b, orientation_type, big_endian);
  Put32(&b, 1, big_endian);
  Put16(&b, orientation, big_endian);
  Put16(&b, 0, big_endian);
  Put32(&b, 0, big_endian);  // no IFD1
  return b;
}

Bytes ColourJpeg(int width, int height, const EncodeSpec& spec = {}) {
  return Encode(Pattern(width, height, 3), width, height, spec);
}

Bytes WithExif(int width, int height, int orientation, bool big_endian = true) {
  EncodeSpec spec;
  spec.markers.push_back({JPEG_APP0 + 1, ExifPayload(orientation, big_endian)});
  return ColourJpeg(width, height, spec);
}

// --- Pixels ---------------------------------------------------------------------------

TEST(JpegDecoderTest, Baseline444DecodesCloseToSource) {
  const Bytes source = Pattern(64, 48, 3);
  auto image = DecodeBytes(Encode(source, 64, 48, {}));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->width, 64);
  EXPECT_EQ(image->height, 48);
  EXPECT_EQ(image->channels, 3);
  EXPECT_LT(MeanAbsError(image->pixels, source), 3.0);
}

TEST(JpegDecoderTest, Baseline422DecodesCloseToSource) {
  const Bytes source = Pattern(64, 48, 3);
  EncodeSpec spec;
  spec.h_samp = 2;
  auto image = DecodeBytes(Encode(source, 64, 48, spec));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_LT(MeanAbsError(image->pixels, source), 4.0);
}

TEST(JpegDecoderTest, Baseline420DecodesCloseToSource) {
  const Bytes source = Pattern(61, 47, 3);  // partial MCUs at the right and bottom edges
  EncodeSpec spec;
  spec.h_samp = 2;
  spec.v_samp = 2;
  auto image = DecodeBytes(Encode(source, 61, 47, spec));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->width, 61);
  EXPECT_EQ(image->height, 47);
  EXPECT_LT(MeanAbsError(image->pixels, source), 5.0);
}

TEST(JpegDecoderTest, ProgressiveDecodesCloseToSource) {
  const Bytes source = Pattern(64, 48, 3);
  EncodeSpec spec;
  spec.progressive = true;
  const Bytes jpeg = Encode(source, 64, 48, spec);
  ASSERT_GT(CountScans(jpeg), 1);
  auto image = DecodeBytes(jpeg);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_LT(MeanAbsError(image->pixels, source), 3.0);
}

// Options that make DecodeJpeg pick DCT scaling at 1/8 for any image.
DecodeOptions OneEighth(int channels = 3) {
  DecodeOptions options = Options(channels);
  options.min_height = options.min_width = 1;
  return options;
}

// libjpeg's own decode of the whole stream at 1/8 (DecodeJpegExact never drops scans).
Bytes WholeStreamAtOneEighth(const Bytes& jpeg, int height, int width, int channels) {
  Bytes out(static_cast<size_t>(ScaledSide(height, 8)) * ScaledSide(width, 8) * channels);
  EXPECT_OK(DecodeJpegExact(jpeg.data(), jpeg.size(), height, width, channels, 8, out.data()));
  return out;
}

// The offset of the entropy-coded data of the first AC scan (Ss > 0) of the component
// with id `component`, and the offset of the marker that ends it.
std::pair<size_t, size_t> AcScanData(const Bytes& jpeg, int component) {
  for (size_t i = 0; i + 4 < jpeg.size(); ++i) {
    if (jpeg[i] != 0xFF || jpeg[i + 1] != 0xDA) continue;
    const size_t length = (jpeg[i + 2] << 8) | jpeg[i + 3];
    const int ns = jpeg[i + 4];
    const int ss = jpeg[i + 5 + 2 * ns];
    if (ns != 1 || jpeg[i + 5] != component || ss == 0) continue;
    const size_t begin = i + 2 + length;
    size_t end = begin;
    while (end + 1 < jpeg.size() &&
           !(jpeg[end] == 0xFF && jpeg[end + 1] != 0 && (jpeg[end + 1] & 0xF8) != 0xD0)) {
      ++end;
    }
    return {begin, end};
  }
  return {0, 0};
}

// A progressive JPEG decoded at 1/8 skips the AC scans of its full-sampling components
// (their 1x1 inverse DCT reads the DC alone): the pixels are those of the whole stream, for
// 4:2:0, 4:4:4, gray and CMYK, three channels and one.
TEST(JpegDecoderTest, ProgressiveAtOneEighthGivesTheWholeStreamsPixels) {
  struct Case {
    const char* name;
    J_COLOR_SPACE in_space;
    int samp;
  };
  for (const Case& c : {Case{"4:2:0", JCS_RGB, 2}, Case{"4:4:4", JCS_RGB, 1},
                        Case{"gray", JCS_GRAYSCALE, 1}, Case{"cmyk", JCS_CMYK, 1}}) {
    EncodeSpec spec;
    spec.progressive = true;
    spec.in_space = c.in_space;
    spec.h_samp = spec.v_samp = c.samp;
    const int components = ComponentsOf(c.in_space);
    const Bytes jpeg = Encode(Pattern(200, 136, components), 200, 136, spec);
    for (int channels : {3, 1}) {
      auto image = DecodeBytes(jpeg, OneEighth(channels));
      ASSERT_TRUE(image.ok()) << c.name << ": " << image.status().ToString();
      ASSERT_EQ(image->width, 25) << c.name;
      ASSERT_EQ(image->height, 17) << c.name;
      EXPECT_EQ(image->pixels, WholeStreamAtOneEighth(jpeg, 136, 200, channels))
          << c.name << ", " << channels << " channels";
    }
  }
}

// What skipping those scans gives up, and what it keeps: the luma's AC data is not decoded
// at 1/8, so damage there (all-ones bits: no Huffman code) fails the full-size decode and
// not the 1/8 one, whose pixels are the intact file's. A file cut short, or with more
// scans than max_scans, fails at 1/8 as it does at full size.
TEST(JpegDecoderTest, ProgressiveAtOneEighthSkipsOnlyWhatItsPixelsDoNotRead) {
  EncodeSpec spec;
  spec.progressive = true;
  spec.h_samp = spec.v_samp = 2;
  const Bytes jpeg = ColourJpeg(200, 136, spec);
  const Bytes intact = WholeStreamAtOneEighth(jpeg, 136, 200, 3);
  const auto [begin, end] = AcScanData(jpeg, 1);  // libjpeg numbers Y, Cb, Cr from 1
  ASSERT_LT(begin + 40, end);
  Bytes damaged = jpeg;
  size_t at = begin + (end - begin) / 3;
  while (damaged[at - 1] == 0xFF) ++at;
  for (int k = 0; k < 8; ++k) {
    damaged[at + 2 * k] = 0xFF;
    damaged[at + 2 * k + 1] = 0x00;
  }
  auto full = DecodeBytes(damaged);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), StatusCode::kCorruption) << full.status().ToString();
  auto small = DecodeBytes(damaged, OneEighth());
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->pixels, intact);

  for (size_t size = 0; size < jpeg.size(); size += 97) {
    const Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(size));
    EXPECT_FALSE(DecodeBytes(cut, OneEighth()).ok()) << size << " of " << jpeg.size();
  }
  const Bytes no_eoi(jpeg.begin(), jpeg.end() - 2);
  EXPECT_FALSE(DecodeBytes(no_eoi, OneEighth()).ok());

  DecodeOptions limited = OneEighth();
  limited.limits.max_scans = CountScans(jpeg) - 1;
  auto over = DecodeBytes(jpeg, limited);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted) << over.status().ToString();
}

TEST(JpegDecoderTest, GrayscaleDecodesToOneChannel) {
  const Bytes source = Pattern(40, 24, 1);
  EncodeSpec spec;
  spec.in_space = JCS_GRAYSCALE;
  auto image = DecodeBytes(Encode(source, 40, 24, spec), Options(1));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->channels, 1);
  EXPECT_LT(MeanAbsError(image->pixels, source), 3.0);
}

TEST(JpegDecoderTest, GrayscaleIsReplicatedToRgb) {
  const Bytes source = Pattern(40, 24, 1);
  EncodeSpec spec;
  spec.in_space = JCS_GRAYSCALE;
  auto image = DecodeBytes(Encode(source, 40, 24, spec), Options(3));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->channels, 3);
  Bytes red(source.size());
  for (size_t i = 0; i < red.size(); ++i) {
    ASSERT_EQ(image->pixels[3 * i], image->pixels[3 * i + 1]) << "pixel " << i;
    ASSERT_EQ(image->pixels[3 * i], image->pixels[3 * i + 2]) << "pixel " << i;
    red[i] = image->pixels[3 * i];
  }
  EXPECT_LT(MeanAbsError(red, source), 3.0);
}

TEST(JpegDecoderTest, ColourDecodesToBt601LumaWhenOneChannelIsRequested) {
  const Bytes source = Pattern(64, 48, 3);
  auto image = DecodeBytes(Encode(source, 64, 48, {}), Options(1));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->channels, 1);
  EXPECT_LT(MeanAbsError(image->pixels, LumaOf(source)), 3.0);
}

TEST(JpegDecoderTest, RgbColourSpaceJpegDecodes) {
  const Bytes source = Pattern(32, 32, 3);
  EncodeSpec spec;
  spec.jpeg_space = JCS_RGB;  // Adobe APP14 transform 0: no YCbCr conversion
  const Bytes jpeg = Encode(source, 32, 32, spec);
  auto rgb = DecodeBytes(jpeg, Options(3));
  ASSERT_TRUE(rgb.ok()) << rgb.status().ToString();
  EXPECT_LT(MeanAbsError(rgb->pixels, source), 3.0);
  auto gray = DecodeBytes(jpeg, Options(1));
  ASSERT_TRUE(gray.ok()) << gray.status().ToString();
  EXPECT_LT(MeanAbsError(gray->pixels, LumaOf(source)), 3.0);
}

TEST(JpegDecoderTest, AdobeCmykIsTreatedAsInverted) {
  const Bytes cmyk = Pattern(32, 24, 4);
  EncodeSpec spec;
  spec.in_space = JCS_CMYK;
  spec.adobe_marker = 1;
  auto image = DecodeBytes(Encode(cmyk, 32, 24, spec));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->channels, 3);
  EXPECT_LT(MeanAbsError(image->pixels, CmykToRgb(cmyk, /*inverted=*/true)), 3.0);
}

TEST(JpegDecoderTest, CmykWithoutAdobeMarkerIsTreatedAsPlain) {
  const Bytes cmyk = Pattern(32, 24, 4);
  EncodeSpec spec;
  spec.in_space = JCS_CMYK;
  spec.adobe_marker = 0;
  auto image = DecodeBytes(Encode(cmyk, 32, 24, spec));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_LT(MeanAbsError(image->pixels, CmykToRgb(cmyk, /*inverted=*/false)), 3.0);
}

TEST(JpegDecoderTest, YcckDecodesAsInvertedCmyk) {
  const Bytes cmyk = Pattern(32, 24, 4);
  EncodeSpec spec;
  spec.in_space = JCS_CMYK;
  spec.jpeg_space = JCS_YCCK;  // Adobe APP14 transform 2
  auto image = DecodeBytes(Encode(cmyk, 32, 24, spec));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_LT(MeanAbsError(image->pixels, CmykToRgb(cmyk, /*inverted=*/true)), 4.0);
}

TEST(JpegDecoderTest, CmykDecodesToLumaOfItsRgbWhenOneChannelIsRequested) {
  const Bytes cmyk = Pattern(32, 24, 4);
  EncodeSpec spec;
  spec.in_space = JCS_CMYK;
  auto image = DecodeBytes(Encode(cmyk, 32, 24, spec), Options(1));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->channels, 1);
  EXPECT_LT(MeanAbsError(image->pixels, LumaOf(CmykToRgb(cmyk, true))), 3.0);
}

TEST(JpegDecoderTest, ConcurrentDecodesAgree) {
  EncodeSpec spec;
  spec.progressive = true;
  const Bytes jpeg = ColourJpeg(64, 48, spec);
  auto reference = DecodeBytes(jpeg);
  ASSERT_TRUE(reference.ok()) << reference.status().ToString();
  std::vector<int> same(4, 0);
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        auto image = DecodeBytes(jpeg);
        same[t] += image.ok() && image->pixels == reference->pixels;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(same, std::vector<int>(4, 20));
}

// --- Rejected input -------------------------------------------------------------------

TEST(JpegDecoderTest, EmptyInputIsCorruption) {
  const uint8_t byte = 0;
  auto image = DecodeJpeg(&byte, 0, Options());
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("empty"), std::string::npos);
}

TEST(JpegDecoderTest, NonJpegInputIsNotSupported) {
  const Bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  auto image = DecodeBytes(png);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(image.status().message().find("not a JPEG file: starts with 0x89 0x50"),
            std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, InvalidChannelCountIsInvalidArgument) {
  auto image = DecodeBytes(ColourJpeg(16, 16), Options(4));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(image.status().message().find("channels must be 1 or 3, got 4"), std::string::npos);
}

TEST(JpegDecoderTest, HugeHeaderHitsMaxPixelsBeforeDecoding) {
  // A few hundred bytes that claim 60000 x 60000 pixels: 10.8 GB of RGB.
  for (bool progressive : {false, true}) {
    EncodeSpec spec;
    spec.progressive = progressive;
    const Bytes jpeg =
        PatchFrameSize(ColourJpeg(16, 16, spec), progressive ? 0xC2 : 0xC0, 60000, 60000);
    auto image = DecodeBytes(jpeg);
    ASSERT_FALSE(image.ok());
    EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
    EXPECT_NE(image.status().message().find("60000x60000 has 3600000000 pixels, over max_pixels"),
              std::string::npos)
        << image.status().message();
  }
}

TEST(JpegDecoderTest, SideOverMaxDimensionIsResourceExhausted) {
  DecodeOptions options;
  options.limits.max_dimension = 50;
  auto image = DecodeBytes(ColourJpeg(64, 16), options);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("64x16 has a side over max_dimension = 50"),
            std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, SideOverLibjpegMaximumIsResourceExhausted) {
  auto image = DecodeBytes(PatchFrameSize(ColourJpeg(16, 16), 0xC0, 16, 65535));
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("JERR_IMAGE_TOO_BIG"), std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, ScansOverMaxScansAreRejected) {
  EncodeSpec spec;
  spec.progressive = true;
  const Bytes jpeg = ColourJpeg(32, 32, spec);
  const int scans = CountScans(jpeg);
  ASSERT_EQ(scans, 10);  // jpeg_simple_progression for YCbCr
  DecodeOptions options;
  options.limits.max_scans = scans;
  EXPECT_TRUE(DecodeBytes(jpeg, options).ok());
  options.limits.max_scans = scans - 1;
  auto image = DecodeBytes(jpeg, options);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("more than max_scans = 9 scans"), std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, ScriptWithMoreThan500ScansIsRejectedByDefault) {
  // Every AC coefficient of every component in its own scan, at three bit depths.
  std::vector<jpeg_scan_info> script;
  script.push_back({3, {0, 1, 2, 0}, 0, 0, 0, 1});
  for (auto [ah, al] : {std::pair{0, 2}, std::pair{2, 1}, std::pair{-1, -1}, std::pair{1, 0}}) {
    if (ah < 0) {
      script.push_back({3, {0, 1, 2, 0}, 0, 0, 1, 0});  // DC refinement
      continue;
    }
    for (int c = 0; c < 3; ++c) {
      for (int k = 1; k < 64; ++k) script.push_back({1, {c, 0, 0, 0}, k, k, ah, al});
    }
  }
  EncodeSpec spec;
  spec.scans = script;
  const Bytes jpeg = ColourJpeg(16, 16, spec);
  ASSERT_EQ(CountScans(jpeg), 569);
  auto image = DecodeBytes(jpeg);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("more than max_scans = 500 scans"), std::string::npos)
      << image.status().message();
  DecodeOptions options;
  options.limits.max_scans = 1000;
  auto allowed = DecodeBytes(jpeg, options);
  EXPECT_TRUE(allowed.ok()) << allowed.status().ToString();
}

TEST(JpegDecoderTest, ProgressiveOverMaxMemoryIsResourceExhausted) {
  // The whole-image coefficient buffer of a 512 x 512 progressive JPEG is about 1.5 MB.
  EncodeSpec spec;
  spec.progressive = true;
  const Bytes jpeg = ColourJpeg(512, 512, spec);
  DecodeOptions options;
  options.limits.max_memory_bytes = 256 << 10;
  auto image = DecodeBytes(jpeg, options);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(image.status().message().find("over max_memory_bytes = 262144"), std::string::npos)
      << image.status().message();
  options.limits.max_memory_bytes = 8 << 20;
  EXPECT_TRUE(DecodeBytes(jpeg, options).ok());
}

TEST(JpegDecoderTest, TwelveBitPrecisionIsNotSupported) {
  Bytes jpeg = ColourJpeg(16, 16);
  const size_t sof = FindMarker(jpeg, 0xC0);
  ASSERT_NE(sof, std::string::npos);
  jpeg[sof + 4] = 12;
  auto image = DecodeBytes(jpeg);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(image.status().message().find("precision 12"), std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, LosslessFrameIsNotSupported) {
  Bytes jpeg = ColourJpeg(16, 16);
  const size_t sof = FindMarker(jpeg, 0xC0);
  ASSERT_NE(sof, std::string::npos);
  jpeg[sof + 1] = 0xC3;
  auto image = DecodeBytes(jpeg);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(image.status().message().find("JERR_SOF_UNSUPPORTED"), std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, WarningIsAnError) {
  // Stray bytes between two markers: libjpeg warns (JWRN_EXTRANEOUS_DATA) and goes on.
  Bytes jpeg = ColourJpeg(16, 16);
  const size_t dqt = FindMarker(jpeg, 0xDB);
  ASSERT_NE(dqt, std::string::npos);
  jpeg.insert(jpeg.begin() + static_cast<std::ptrdiff_t>(dqt), {0x01, 0x02, 0x03});
  auto image = DecodeBytes(jpeg);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find(
                "3 extraneous bytes before marker 0xdb (JWRN_EXTRANEOUS_DATA, a libjpeg warning"),
            std::string::npos)
      << image.status().message();
}

TEST(JpegDecoderTest, TruncatedEntropyDataReportsPrematureEnd) {
  const Bytes jpeg = ColourJpeg(64, 48);
  const Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() * 3 / 4));
  auto image = DecodeBytes(cut);
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.status().code(), StatusCode::kCorruption);
  EXPECT_NE(image.status().message().find("Premature end of JPEG file (JWRN_JPEG_EOF"),
            std::string::npos)
      << image.status().message();
  // libjpeg's Huffman decoder updates the source position once per MCU, so the offset
  // is where the last MCU it finished ended: at most the end of the data.
  const std::string message = image.status().message();
  const size_t at = message.find("near byte offset ");
  ASSERT_NE(at, std::string::npos) << message;
  const size_t offset = std::stoul(message.substr(at + 17));
  EXPECT_LE(offset, cut.size()) << message;
  EXPECT_GT(offset, cut.size() / 2) << message;
}

TEST(JpegDecoderTest, TruncationAtEveryOffsetIsAnError) {
  for (bool progressive : {false, true}) {
    EncodeSpec spec;
    spec.progressive = progressive;
    spec.h_samp = spec.v_samp = 2;
    const Bytes jpeg = ColourJpeg(40, 24, spec);
    ASSERT_TRUE(DecodeBytes(jpeg).ok());
    for (size_t size = 0; size < jpeg.size(); ++size) {
      const Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(size));
      auto image = DecodeBytes(cut);
      ASSERT_FALSE(image.ok()) << "progressive " << progressive << ", " << size << " of "
                               << jpeg.size() << " bytes decoded";
      EXPECT_FALSE(image.status().message().empty());
    }
  }
}

TEST(JpegDecoderTest, ByteFlipsNeverCrash) {
  std::mt19937 rng(1234);
  EncodeSpec spec;
  spec.h_samp = spec.v_samp = 2;
  const Bytes baseline = ColourJpeg(40, 24, spec);
  spec.progressive = true;
  const Bytes progressive = ColourJpeg(40, 24, spec);
  DecodeOptions options;
  options.limits.max_pixels = 1 << 20;  // as libjpeg-turbo's fuzzers cap it
  int failures = 0;
  for (int i = 0; i < 3000; ++i) {
    Bytes jpeg = i % 2 ? progressive : baseline;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) jpeg[2 + rng() % (jpeg.size() - 2)] = rng() & 0xFF;
    options.channels = i % 3 ? 3 : 1;
    options.min_width = i % 5 ? 0 : 10;
    options.min_height = i % 7 ? 0 : 1;  // 1/8 of a progressive file: its AC scans dropped
    auto image = DecodeBytes(jpeg, options);
    if (image.ok()) {
      ASSERT_EQ(image->pixels.size(),
                static_cast<size_t>(image->width) * image->height * image->channels);
    } else {
      ++failures;
      ASSERT_FALSE(image.status().message().empty());
    }
  }
  EXPECT_GT(failures, 300);
}

TEST(JpegDecoderTest, GarbageAfterSoiIsAnError) {
  std::mt19937 rng(99);
  for (int i = 0; i < 500; ++i) {
    Bytes jpeg = {0xFF, 0xD8};
    const size_t size = rng() % 2000;
    for (size_t j = 0; j < size; ++j) jpeg.push_back(rng() & 0xFF);
    auto image = DecodeBytes(jpeg);
    ASSERT_FALSE(image.ok()) << "garbage " << i << " decoded";
    EXPECT_NE(image.status().code(), StatusCode::kOk);
  }
}

// --- DCT scaling ----------------------------------------------------------------------

struct ScaleCase {
  int min_height, min_width;
  int width, height;  // expected output
};

TEST(JpegDecoderTest, DctScalingPicksTheLargestReductionThatMeetsTheMinimum) {
  const Bytes jpeg = ColourJpeg(256, 128);
  for (const ScaleCase& c :
       {ScaleCase{0, 0, 256, 128}, ScaleCase{16, 32, 32, 16}, ScaleCase{17, 0, 64, 32},
        ScaleCase{0, 33, 64, 32}, ScaleCase{40, 100, 128, 64}, ScaleCase{64, 128, 128, 64},
        ScaleCase{65, 0, 256, 128}, ScaleCase{500, 500, 256, 128}}) {
    DecodeOptions options;
    options.min_height = c.min_height;
    options.min_width = c.min_width;
    auto image = DecodeBytes(jpeg, options);
    ASSERT_TRUE(image.ok()) << image.status().ToString();
    EXPECT_EQ(image->width, c.width) << "minimum " << c.min_height << "x" << c.min_width;
    EXPECT_EQ(image->height, c.height) << "minimum " << c.min_height << "x" << c.min_width;
  }
}

TEST(JpegDecoderTest, DctScalingRoundsOddSizesUp) {
  EXPECT_EQ(ChooseJpegScaleDenominator(100, 60, false, 8, 13), 8);
  EXPECT_EQ(ChooseJpegScaleDenominator(100, 60, false, 8, 14), 4);
  DecodeOptions options;
  options.min_height = 8;
  options.min_width = 13;
  auto image = DecodeBytes(ColourJpeg(100, 60), options);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(image->width, 13);
  EXPECT_EQ(image->height, 8);
}

TEST(JpegDecoderTest, DctScaledPixelsApproximateTheDownsampledSource) {
  const Bytes source = Pattern(128, 96, 3);
  DecodeOptions options;
  options.min_height = 24;
  options.min_width = 32;
  auto image = DecodeBytes(Encode(source, 128, 96, {}), options);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->width, 32);
  ASSERT_EQ(image->height, 24);
  Bytes box(size_t{32} * 24 * 3);
  for (int y = 0; y < 24; ++y) {
    for (int x = 0; x < 32; ++x) {
      for (int c = 0; c < 3; ++c) {
        int sum = 0;
        for (int dy = 0; dy < 4; ++dy) {
          for (int dx = 0; dx < 4; ++dx) sum += source[((4 * y + dy) * 128 + 4 * x + dx) * 3 + c];
        }
        box[(y * 32 + x) * 3 + c] = static_cast<uint8_t>((sum + 8) / 16);
      }
    }
  }
  EXPECT_LT(MeanAbsError(image->pixels, box), 4.0);
}

TEST(JpegDecoderTest, ExactScaledDecodeIsTheDctScaledDecodeInPlace) {
  const Bytes jpeg = ColourJpeg(100, 60);  // odd scaled sides: 60 / 8 and 100 / 8 round up
  for (const int d : {1, 2, 4, 8}) {
    SCOPED_TRACE("1/" + std::to_string(d));
    const int h = image::ScaledSide(60, d);
    const int w = image::ScaledSide(100, d);
    Bytes out(static_cast<size_t>(h) * w * 3 + 1, 0xAB);
    ASSERT_OK(DecodeJpegExact(jpeg.data(), jpeg.size(), 60, 100, 3, d, out.data()));
    EXPECT_EQ(out.back(), 0xAB) << "wrote past " << h << "x" << w << "x3";
    out.pop_back();
    DecodeOptions options;
    options.min_height = h;
    options.min_width = w;
    auto want = DecodeBytes(jpeg, options);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    ASSERT_EQ(want->height, h);
    ASSERT_EQ(want->width, w);
    EXPECT_EQ(out, want->pixels);
    Bytes via_image(out.size());
    ASSERT_OK(image::DecodeExactScaled(jpeg.data(), jpeg.size(), 60, 100, 3, d, via_image.data()));
    EXPECT_EQ(via_image, out);
  }
}

TEST(JpegDecoderTest, ExactScaledDecodeRefusesOtherScalesSizesAndPngs) {
  const Bytes jpeg = ColourJpeg(100, 60);
  Bytes out(100 * 60 * 3);
  for (const int d : {0, 3, 16, -2}) {
    EXPECT_EQ(DecodeJpegExact(jpeg.data(), jpeg.size(), 60, 100, 3, d, out.data()).code(),
              StatusCode::kInvalidArgument)
        << d;
  }
  const Status wrong = DecodeJpegExact(jpeg.data(), jpeg.size(), 60, 99, 3, 2, out.data());
  EXPECT_EQ(wrong.code(), StatusCode::kCorruption);
  EXPECT_NE(wrong.message().find("the record says 60x99"), std::string::npos) << wrong.message();
  const std::vector<uint8_t> pixels = testing::Pattern(6, 10, 3, 1);
  const std::string png = testing::EncodePng(pixels, 6, 10, 3);
  const auto* data = reinterpret_cast<const uint8_t*>(png.data());
  EXPECT_EQ(image::DecodeExactScaled(data, png.size(), 6, 10, 3, 2, out.data()).code(),
            StatusCode::kInvalidArgument);
  ASSERT_OK(image::DecodeExactScaled(data, png.size(), 6, 10, 3, 1, out.data()));
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 6 * 10 * 3), pixels);
}

TEST(JpegDecoderTest, DctScalingCountsTransposingOrientationsAsSwappedSides) {
  // Stored 256 wide, 64 high; orientation 6 makes it 64 wide, 256 high.
  const Bytes jpeg = WithExif(256, 64, 6);
  DecodeOptions options;
  options.min_height = 100;
  options.min_width = 30;
  int orientation = 0;
  auto raw = DecodeRaw(jpeg, options, &orientation);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(orientation, 6);
  EXPECT_EQ(raw->width, 128);  // 1/2: upright 32 x 128 meets 30 x 100; 1/4 would not
  EXPECT_EQ(raw->height, 32);

  options.apply_orientation = false;  // as stored: height 64 < 100, no reduction
  auto unoriented = DecodeRaw(jpeg, options, &orientation);
  ASSERT_TRUE(unoriented.ok()) << unoriented.status().ToString();
  EXPECT_EQ(unoriented->width, 256);
  EXPECT_EQ(unoriented->height, 64);
  EXPECT_EQ(orientation, 6);
}

// --- EXIF orientation -----------------------------------------------------------------

TEST(JpegDecoderTest, ReportsOrientationFromBigEndianExif) {
  int orientation = 0;
  auto image = DecodeRaw(WithExif(32, 16, 6, /*big_endian=*/true), Options(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 6);
  EXPECT_EQ(image->width, 32);  // as stored
  EXPECT_EQ(image->height, 16);
}

TEST(JpegDecoderTest, ReportsOrientationFromLittleEndianExif) {
  int orientation = 0;
  auto image = DecodeRaw(WithExif(32, 16, 8, /*big_endian=*/false), Options(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 8);
}

TEST(JpegDecoderTest, NoExifMeansOrientationOne) {
  int orientation = 0;
  auto image = DecodeRaw(ColourJpeg(16, 16), Options(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 1);
}

TEST(JpegDecoderTest, ExifAfterAnXmpApp1SegmentIsFound) {
  const std::string xmp = "http://ns.adobe.com/xap/1.0/";
  EncodeSpec spec;
  spec.markers.push_back({JPEG_APP0 + 1, Bytes(xmp.begin(), xmp.end() + 1)});
  spec.markers.push_back({JPEG_APP0 + 1, ExifPayload(3, true)});
  int orientation = 0;
  auto image = DecodeRaw(ColourJpeg(16, 16, spec), Options(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 3);
}

TEST(JpegDecoderTest, InvalidOrientationValuesMeanOne) {
  EXPECT_EQ(ParseExifOrientation(ExifPayload(5, true).data(), ExifPayload(5, true).size()), 5);
  for (int value : {0, 9, 0xFFFF}) {
    const Bytes exif = ExifPayload(value, true);
    EXPECT_EQ(ParseExifOrientation(exif.data(), exif.size()), 1) << value;
  }
  const Bytes as_long = ExifPayload(6, false, /*orientation_type=*/4);
  EXPECT_EQ(ParseExifOrientation(as_long.data(), as_long.size()), 1);
}

TEST(JpegDecoderTest, TruncatedExifIsReadInBoundsAsOrientationOne) {
  const Bytes exif = ExifPayload(6, false);
  const size_t entry_end = exif.size() - 4;  // the orientation entry, then the IFD1 link
  for (size_t size = 0; size <= exif.size(); ++size) {
    // An exact-size heap copy, so that AddressSanitizer sees any read past the end.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[size == 0 ? 1 : size]);
    std::memcpy(copy.get(), exif.data(), size);
    EXPECT_EQ(ParseExifOrientation(copy.get(), size), size >= entry_end ? 6 : 1) << size;
  }
}

TEST(JpegDecoderTest, GarbageExifNeverFailsTheDecode) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    Bytes exif = ExifPayload(6, i % 2 == 0);
    for (int f = 0; f < 3; ++f) exif[6 + rng() % (exif.size() - 6)] = rng() & 0xFF;
    const int parsed = ParseExifOrientation(exif.data(), exif.size());
    EXPECT_TRUE(parsed >= 1 && parsed <= 8) << parsed;
  }
  // IFD0 offset and entry count far beyond the segment.
  Bytes exif = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0x7F, 0xFF, 0xFF, 0xF0, 0xFF, 0xFF};
  EXPECT_EQ(ParseExifOrientation(exif.data(), exif.size()), 1);
  exif = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 0xFF, 0xFF, 0x12, 0x01};
  EXPECT_EQ(ParseExifOrientation(exif.data(), exif.size()), 1);
  EncodeSpec spec;
  spec.markers.push_back({JPEG_APP0 + 1, exif});
  int orientation = 0;
  auto image = DecodeRaw(ColourJpeg(16, 16, spec), Options(), &orientation);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  EXPECT_EQ(orientation, 1);
}

TEST(JpegDecoderTest, DecodeJpegReturnsTheImageUpright) {
  // Stored 64 x 32, red in the top-left 16 x 16, blue elsewhere; orientation 6 (rotate
  // 90 degrees clockwise to display) puts the red block at the top right.
  Bytes source(size_t{64} * 32 * 3);
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 64; ++x) {
      const bool red = x < 16 && y < 16;
      uint8_t* p = &source[static_cast<size_t>(y * 64 + x) * 3];
      p[0] = red ? 220 : 20;
      p[1] = 20;
      p[2] = red ? 20 : 220;
    }
  }
  EncodeSpec spec;
  spec.markers.push_back({JPEG_APP0 + 1, ExifPayload(6, true)});
  auto image = DecodeBytes(Encode(source, 64, 32, spec));
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  ASSERT_EQ(image->width, 32);
  ASSERT_EQ(image->height, 64);
  const uint8_t* top_right = &image->row(8)[size_t{24} * 3];  // pixel (24, 8)
  const uint8_t* top_left = &image->row(8)[size_t{8} * 3];    // pixel (8, 8)
  EXPECT_GT(top_right[0], 180);
  EXPECT_LT(top_right[2], 60);
  EXPECT_LT(top_left[0], 60);
  EXPECT_GT(top_left[2], 180);
}

// --- Decoding a window ----------------------------------------------------------------

// Noise over a gradient: every edge effect of a cropped decode would show.
Bytes Noisy(int width, int height, int channels, uint32_t seed) {
  Bytes p = Pattern(width, height, channels);
  for (uint8_t& v : p) {
    seed = seed * 1664525u + 1013904223u;
    v = static_cast<uint8_t>(v / 2 + (seed >> 25));
  }
  return p;
}

// The pixels of `r` in a whole decode.
Bytes Cut(const Image& whole, const Region& r) {
  Bytes out;
  for (int y = r.y0; y < r.y1; ++y) {
    const uint8_t* row = whole.row(y) + static_cast<size_t>(r.x0) * whole.channels;
    out.insert(out.end(), row, row + static_cast<size_t>(r.x1 - r.x0) * whole.channels);
  }
  return out;
}

struct WindowCase {
  const char* name;
  EncodeSpec spec;
  int channels;  // decoded
};

std::vector<WindowCase> WindowCases() {
  std::vector<WindowCase> cases;
  EncodeSpec s444;
  EncodeSpec s422;
  s422.h_samp = 2;
  EncodeSpec s420;
  s420.h_samp = s420.v_samp = 2;
  EncodeSpec s440;
  s440.v_samp = 2;
  EncodeSpec progressive = s420;
  progressive.progressive = true;
  EncodeSpec gray;
  gray.in_space = JCS_GRAYSCALE;
  EncodeSpec cmyk;
  cmyk.in_space = JCS_CMYK;
  cmyk.adobe_marker = 1;
  cases.push_back({"4:4:4", s444, 3});
  cases.push_back({"4:2:2", s422, 3});
  cases.push_back({"4:2:0", s420, 3});
  cases.push_back({"4:4:0", s440, 3});
  cases.push_back({"progressive 4:2:0", progressive, 3});
  cases.push_back({"4:2:0 to gray", s420, 1});
  cases.push_back({"grayscale", gray, 1});
  cases.push_back({"grayscale to RGB", gray, 3});
  cases.push_back({"Adobe CMYK", cmyk, 3});
  return cases;
}

// The window's own pixels, row after row.
std::vector<uint8_t> WindowPixels(const ImageWindow& window) {
  const size_t row_bytes = static_cast<size_t>(window.width) * window.image.channels;
  std::vector<uint8_t> pixels;
  pixels.reserve(row_bytes * window.height);
  for (int y = 0; y < window.height; ++y) {
    pixels.insert(pixels.end(), window.row(y), window.row(y) + row_bytes);
  }
  return pixels;
}

// Every window, whatever the sampling, coding and output colour, holds exactly the
// whole decode's pixels of the region: interior regions (cropped columns and skipped
// rows, with margins at odd offsets), regions touching each edge, one pixel, single rows
// and columns, and the whole image.
TEST(JpegDecoderTest, WindowHoldsExactlyTheWholeDecodesPixels) {
  constexpr int kWidth = 203, kHeight = 157;  // partial MCUs at the right and bottom
  const Region regions[] = {
      {37, 0, 165, kHeight}, {0, 21, kWidth, 136},    {17, 9, 190, 148},    {0, 0, 1, 1},
      {202, 156, 203, 157},  {90, 0, 91, kHeight},    {0, 77, kWidth, 78},  {31, 33, 32, 100},
      {1, 1, 202, 156},      {0, 0, kWidth, kHeight}, {150, 100, 203, 157}, {16, 16, 32, 32},
  };
  for (const WindowCase& wc : WindowCases()) {
    const int in_channels = ComponentsOf(wc.spec.in_space);
    const Bytes jpeg = Encode(Noisy(kWidth, kHeight, in_channels, 7), kWidth, kHeight, wc.spec);
    const StatusOr<Image> whole = DecodeBytes(jpeg, Options(wc.channels));
    ASSERT_TRUE(whole.ok()) << wc.name << ": " << whole.status().ToString();
    for (const Region& r : regions) {
      SCOPED_TRACE(::testing::Message() << wc.name << ", region x " << r.x0 << ".." << r.x1
                                        << ", y " << r.y0 << ".." << r.y1);
      int calls = 0;
      const StatusOr<ImageWindow> window = DecodeJpegWindow(
          jpeg.data(), jpeg.size(), Options(wc.channels), [&](int height, int width) {
            ++calls;
            EXPECT_EQ(height, kHeight);
            EXPECT_EQ(width, kWidth);
            return r;
          });
      ASSERT_TRUE(window.ok()) << window.status().ToString();
      EXPECT_EQ(calls, 1);
      EXPECT_EQ(window->left, r.x0);
      EXPECT_EQ(window->top, r.y0);
      EXPECT_EQ(window->full_width, kWidth);
      EXPECT_EQ(window->full_height, kHeight);
      EXPECT_EQ(window->width, r.x1 - r.x0);
      EXPECT_EQ(window->height, r.y1 - r.y0);
      EXPECT_EQ(window->image.channels, wc.channels);
      ASSERT_LE(window->x0 + window->width, window->image.width);
      ASSERT_LE(window->y0 + window->height, window->image.height);
      EXPECT_TRUE(WindowPixels(*window) == Cut(*whole, r));
    }
  }
}

TEST(JpegDecoderTest, WindowIsInDctScaledCoordinates) {
  const Bytes jpeg = Encode(Noisy(200, 120, 3, 3), 200, 120, {});
  DecodeOptions options = Options();
  options.min_height = options.min_width = 50;  // 1/2: 100 x 60
  const StatusOr<Image> whole = DecodeBytes(jpeg, options);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(whole->width, 100);
  const Region r = {21, 5, 80, 60};
  const auto window =
      DecodeJpegWindow(jpeg.data(), jpeg.size(), options, [&](int, int) { return r; });
  ASSERT_TRUE(window.ok()) << window.status().ToString();
  EXPECT_EQ(window->full_width, 100);
  EXPECT_EQ(window->full_height, 60);
  EXPECT_TRUE(WindowPixels(*window) == Cut(*whole, r));
}

// The region is in upright coordinates; a rotated file is decoded whole, turned and cut.
TEST(JpegDecoderTest, WindowOfARotatedImageIsCutFromTheUprightImage) {
  const Bytes jpeg = WithExif(64, 48, 6);  // 90 degrees: upright it is 48 x 64
  const StatusOr<Image> upright = DecodeBytes(jpeg);
  ASSERT_TRUE(upright.ok());
  ASSERT_EQ(upright->width, 48);
  const Region r = {5, 10, 40, 50};
  const auto window =
      DecodeJpegWindow(jpeg.data(), jpeg.size(), Options(), [&](int height, int width) {
        EXPECT_EQ(height, 64);
        EXPECT_EQ(width, 48);
        return r;
      });
  ASSERT_TRUE(window.ok()) << window.status().ToString();
  EXPECT_EQ(window->left, 5);
  EXPECT_EQ(window->top, 10);
  EXPECT_TRUE(WindowPixels(*window) == Cut(*upright, r));
}

// Rows after the region are skipped, not ignored: their entropy-coded data is still read,
// so a file cut short there fails as it does when decoded whole.
TEST(JpegDecoderTest, WindowOfATruncatedFileIsStillAnError) {
  const Bytes jpeg = ColourJpeg(64, 96);
  const Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() * 3 / 4));
  const auto window = DecodeJpegWindow(cut.data(), cut.size(), Options(), [](int, int) {
    return Region{8, 0, 40, 16};  // the top rows only
  });
  ASSERT_FALSE(window.ok());
  EXPECT_EQ(window.status().code(), StatusCode::kCorruption);
  EXPECT_NE(window.status().message().find("Premature end of JPEG file"), std::string::npos)
      << window.status().message();
}

TEST(JpegDecoderTest, EmptyOrOutsideRegionMeansTheWholeImage) {
  const Bytes jpeg = ColourJpeg(40, 30);
  const StatusOr<Image> whole = DecodeBytes(jpeg);
  ASSERT_TRUE(whole.ok());
  for (const Region& r : {Region{10, 10, 10, 20}, Region{50, 0, 60, 30}, Region{-5, -5, 0, 0}}) {
    const auto window =
        DecodeJpegWindow(jpeg.data(), jpeg.size(), Options(), [&](int, int) { return r; });
    ASSERT_TRUE(window.ok());
    EXPECT_EQ(window->left, 0);
    EXPECT_EQ(window->top, 0);
    EXPECT_TRUE(WindowPixels(*window) == whole->pixels);
  }
  const auto none = DecodeJpegWindow(jpeg.data(), jpeg.size(), Options(), NeededRegion());
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(WindowPixels(*none) == whole->pixels);
}

// --- One decompressor per thread, reused (image/jpeg_memory.h) ------------------------

// What DecodeBytes gives on a thread of its own, whose decompressor is new.
StatusOr<Image> DecodeOnANewThread(const Bytes& jpeg, const DecodeOptions& options = Options()) {
  StatusOr<Image> result = InternalError("not run");
  std::thread([&] { result = DecodeBytes(jpeg, options); }).join();
  return result;
}

// libjpeg on its own, with its own memory manager: the reference for the arena manager.
void FailPlainDecode(j_common_ptr cinfo) {
  char message[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, message);
  std::fprintf(stderr, "reference decoder: %s\n", message);
  std::abort();
}

Bytes PlainLibjpegRgb(const Bytes& jpeg, unsigned scale_denom) {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  err.error_exit = FailPlainDecode;
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  cinfo.scale_num = 1;
  cinfo.scale_denom = scale_denom;
  jpeg_start_decompress(&cinfo);
  const size_t stride = static_cast<size_t>(cinfo.output_width) * 3;
  Bytes pixels(stride * cinfo.output_height);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels.data() + cinfo.output_scanline * stride;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return pixels;
}

// One thread decodes images of every kind and size one after another, from small to a
// progressive one whose coefficients (about 9 MB) are over what a pool keeps, and back:
// each gives libjpeg's own pixels, at full size and DCT-scaled.
TEST(JpegDecoderTest, AReusedDecompressorGivesLibjpegsPixelsImageAfterImage) {
  struct Case {
    int width, height;
    EncodeSpec spec;
  };
  EncodeSpec progressive_420;
  progressive_420.progressive = true;
  progressive_420.h_samp = progressive_420.v_samp = 2;
  EncodeSpec baseline_422;
  baseline_422.h_samp = 2;
  EncodeSpec progressive_444;
  progressive_444.progressive = true;
  const Case cases[] = {{32, 24, {}},
                        {200, 136, progressive_420},
                        {1536, 1024, progressive_444},
                        {48, 40, baseline_422},
                        {33, 17, progressive_420},
                        {1536, 1024, progressive_444},
                        {32, 24, {}}};
  for (const Case& c : cases) {
    const Bytes jpeg = ColourJpeg(c.width, c.height, c.spec);
    for (int scale : {1, 2, 8}) {
      SCOPED_TRACE(std::to_string(c.width) + "x" + std::to_string(c.height) +
                   (c.spec.progressive ? " progressive" : " baseline") + " at 1/" +
                   std::to_string(scale));
      const Bytes expected = PlainLibjpegRgb(jpeg, static_cast<unsigned>(scale));
      Bytes pixels(expected.size());
      ASSERT_OK(
          DecodeJpegExact(jpeg.data(), jpeg.size(), c.height, c.width, 3, scale, pixels.data()));
      EXPECT_TRUE(pixels == expected);
    }
  }
}

// libjpeg keeps an image's tables for the next one (an abbreviated stream may use them):
// a stream without its quantisation tables fails after one with them as it fails first.
TEST(JpegDecoderTest, AStreamWithoutItsTablesFailsAfterOneWithThem) {
  const Bytes whole = ColourJpeg(32, 24);
  Bytes stripped = whole;
  for (size_t at = FindMarker(stripped, 0xDB); at != std::string::npos;
       at = FindMarker(stripped, 0xDB)) {
    const size_t length = (size_t{stripped[at + 2]} << 8) | stripped[at + 3];
    stripped.erase(stripped.begin() + static_cast<std::ptrdiff_t>(at),
                   stripped.begin() + static_cast<std::ptrdiff_t>(at + 2 + length));
  }
  ASSERT_NE(stripped.size(), whole.size());
  const auto first = DecodeOnANewThread(stripped);
  ASSERT_FALSE(first.ok());
  EXPECT_NE(first.status().message().find("JERR_NO_QUANT_TABLE"), std::string::npos)
      << first.status().message();
  ASSERT_TRUE(DecodeBytes(whole).ok());
  const auto after = DecodeBytes(stripped);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().ToString(), first.status().ToString());
}

// A failure report names the row reached in this image, never the last image's.
TEST(JpegDecoderTest, AFailureAfterAnotherImageIsReportedAsOnANewDecompressor) {
  EncodeSpec spec;
  spec.progressive = true;
  const Bytes jpeg = ColourJpeg(64, 48, spec);
  const Bytes cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() * 3 / 4));
  const auto first = DecodeOnANewThread(cut);
  ASSERT_FALSE(first.ok());
  ASSERT_TRUE(DecodeBytes(ColourJpeg(40, 40)).ok());
  const auto after = DecodeBytes(cut);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().ToString(), first.status().ToString());
}

}  // namespace
}  // namespace shardpack::image
