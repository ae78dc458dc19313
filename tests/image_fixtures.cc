#include "image_fixtures.h"

#include <jpeglib.h>
#include <png.h>
#include <stdio.h>

#include <cstdlib>
#include <stdexcept>

namespace shardpack::testing {

std::vector<uint8_t> Pattern(int height, int width, int channels, int seed) {
  std::vector<uint8_t> px(static_cast<size_t>(height) * width * channels);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        int v = (x * 255 / std::max(1, width - 1)) * (c % 3 == 0) +
                (y * 255 / std::max(1, height - 1)) * (c % 3 == 1) +
                ((x + y) * 128 / std::max(1, width + height)) * (c % 3 == 2) + seed * 37;
        px[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(v & 0xff);
      }
    }
  }
  return px;
}

std::string EncodeJpeg(const std::vector<uint8_t>& pixels, int height, int width, int channels,
                       int quality, bool progressive) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr jerr;
  cinfo.err = jpeg_std_error(&jerr);  // errors exit(): acceptable for test fixtures
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = channels;
  cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (progressive) jpeg_simple_progression(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels.data() + static_cast<size_t>(cinfo.next_scanline) *
                                                            width * channels);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<char*>(buf), size);
  std::free(buf);
  return out;
}

namespace {
void Append(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<char*>(data), n);
}
void Flush(png_structp) {}
}  // namespace

std::string EncodePng(const std::vector<uint8_t>& pixels, int height, int width, int channels) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) std::abort();  // a fixture that cannot be written
  png_set_write_fn(png, &out, Append, Flush);
  int type = channels == 1   ? PNG_COLOR_TYPE_GRAY
             : channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
             : channels == 3 ? PNG_COLOR_TYPE_RGB
                             : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(png, info, static_cast<png_uint_32>(width), static_cast<png_uint_32>(height), 8,
               type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < height; ++y) {
    png_write_row(png, pixels.data() + static_cast<size_t>(y) * width * channels);
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

}  // namespace shardpack::testing
