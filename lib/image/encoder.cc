#include "image/encoder.h"

#include <jpeglib.h>
#include <png.h>
#include <stdio.h>

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "shardpack/limits.h"

namespace shardpack::image {
namespace {

// ---- JPEG ------------------------------------------------------------------------------

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Everything the guarded function touches lives here: no C++ object with a destructor is
// in a frame that longjmp crosses.
struct JpegJob {
  jpeg_compress_struct cinfo;
  JpegError err;
  unsigned char* out = nullptr;
  unsigned long out_size = 0;
  const uint8_t* pixels;
  int height, width, channels;
  JpegEncodeOptions options;
};

bool RunJpegJob(JpegJob* job) {
  job->cinfo.err = jpeg_std_error(&job->err.mgr);
  job->err.mgr.error_exit = JpegErrorExit;
  job->err.message[0] = '\0';
  if (setjmp(job->err.jump)) {
    jpeg_destroy_compress(&job->cinfo);
    return false;
  }
  jpeg_create_compress(&job->cinfo);
  jpeg_mem_dest(&job->cinfo, &job->out, &job->out_size);
  job->cinfo.image_width = static_cast<JDIMENSION>(job->width);
  job->cinfo.image_height = static_cast<JDIMENSION>(job->height);
  job->cinfo.input_components = job->channels;
  job->cinfo.in_color_space = job->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&job->cinfo);
  jpeg_set_quality(&job->cinfo, job->options.quality, TRUE);
  if (job->channels == 3) {
    int h = job->options.subsampling == 444 ? 1 : 2;
    int v = job->options.subsampling == 420 ? 2 : 1;
    job->cinfo.comp_info[0].h_samp_factor = h;
    job->cinfo.comp_info[0].v_samp_factor = v;
  }
  if (job->options.progressive) jpeg_simple_progression(&job->cinfo);
  jpeg_start_compress(&job->cinfo, TRUE);
  while (job->cinfo.next_scanline < job->cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(
        job->pixels + static_cast<size_t>(job->cinfo.next_scanline) * job->width * job->channels);
    jpeg_write_scanlines(&job->cinfo, &row, 1);
  }
  jpeg_finish_compress(&job->cinfo);
  jpeg_destroy_compress(&job->cinfo);
  return true;
}

// ---- PNG -------------------------------------------------------------------------------

struct PngJob {
  png_structp png = nullptr;
  png_infop info = nullptr;
  char message[256];
  const uint8_t* pixels;
  int height, width, channels;
  int compression_level;
  std::string* out;  // appended to by the write callback (no longjmp crosses it)
};

void PngErrorFn(png_structp png, png_const_charp msg) {
  auto* job = static_cast<PngJob*>(png_get_error_ptr(png));
  std::snprintf(job->message, sizeof job->message, "%s", msg);
  png_longjmp(png, 1);
}
void PngWarningFn(png_structp, png_const_charp) {}
void PngWriteFn(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngJob*>(png_get_io_ptr(png))->out->append(reinterpret_cast<char*>(data), n);
}
void PngFlushFn(png_structp) {}

bool RunPngJob(PngJob* job) {
  job->message[0] = '\0';
  job->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, job, PngErrorFn, PngWarningFn);
  if (job->png == nullptr) return false;
  job->info = png_create_info_struct(job->png);
  if (job->info == nullptr || setjmp(png_jmpbuf(job->png))) {
    png_destroy_write_struct(&job->png, &job->info);
    return false;
  }
  png_set_write_fn(job->png, job, PngWriteFn, PngFlushFn);
  // libpng's default is zlib's, 6: leaving it unset keeps the default's bytes by
  // construction.
  if (job->compression_level != kPngDefaultCompression) {
    png_set_compression_level(job->png, job->compression_level);
  }
  int type = job->channels == 1   ? PNG_COLOR_TYPE_GRAY
             : job->channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
             : job->channels == 3 ? PNG_COLOR_TYPE_RGB
                                  : PNG_COLOR_TYPE_RGBA;
  png_set_IHDR(job->png, job->info, static_cast<png_uint_32>(job->width),
               static_cast<png_uint_32>(job->height), 8, type, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(job->png, job->info);
  for (int y = 0; y < job->height; ++y) {
    png_write_row(job->png, job->pixels + static_cast<size_t>(y) * job->width * job->channels);
  }
  png_write_end(job->png, nullptr);
  png_destroy_write_struct(&job->png, &job->info);
  return true;
}

Status CheckShape(int height, int width, int channels, int max_channels) {
  if (height < 1 || width < 1 || height > kMaxImageSide || width > kMaxImageSide || channels < 1 ||
      channels > max_channels) {
    return InvalidArgumentError("cannot encode a " + std::to_string(height) + "x" +
                                std::to_string(width) + "x" + std::to_string(channels) + " image");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int height, int width, int channels,
                                 const JpegEncodeOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(CheckShape(height, width, channels, 3));
  if (channels == 2) return InvalidArgumentError("JPEG has no gray+alpha form");
  auto job = std::make_unique<JpegJob>();
  job->pixels = pixels;
  job->height = height;
  job->width = width;
  job->channels = channels;
  job->options = options;
  bool ok = RunJpegJob(job.get());
  std::string out;
  if (ok) out.assign(reinterpret_cast<char*>(job->out), job->out_size);
  std::free(job->out);
  if (!ok) return InternalError(std::string("JPEG encoding failed: ") + job->err.message);
  return out;
}

StatusOr<std::string> EncodePng(const uint8_t* pixels, int height, int width, int channels,
                                const PngEncodeOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(CheckShape(height, width, channels, 4));
  if (options.compression_level < 0 || options.compression_level > 9) {
    return InvalidArgumentError("PNG compression level must be in 0..9, not " +
                                std::to_string(options.compression_level));
  }
  std::string out;
  auto job = std::make_unique<PngJob>();
  job->pixels = pixels;
  job->height = height;
  job->width = width;
  job->channels = channels;
  job->compression_level = options.compression_level;
  job->out = &out;
  if (!RunPngJob(job.get())) {
    return InternalError(std::string("PNG encoding failed: ") + job->message);
  }
  return out;
}

}  // namespace shardpack::image
