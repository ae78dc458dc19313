// Antialiased resampling of decoded images, and the fit modes the converter offers.
//
// The arithmetic is Pillow's (ImagingResample in libImaging/Resample.c), so that a model
// trained on shardpack's pixels sees what `Image.resize` would have given it:
//
// - Separable, in two passes with an 8-bit image between them. The horizontal pass goes
//   first, over only the source rows the vertical pass reads, unless the height shrinks
//   by more than twice as many pixels as the width: then the vertical pass goes first.
//   That is Pillow's choice since 13.0 (python-pillow/Pillow#9549; earlier releases
//   always went horizontal first), and the rounding between the passes depends on it.
// - Per output pixel, the filter is centred at in0 + (i + 0.5) * scale with scale =
//   source extent / output size. When downscaling (scale > 1) the kernel is stretched by
//   `scale`, so its support grows to support * scale and every source pixel contributes:
//   this is the antialiasing. When upscaling the kernel is used as is.
// - Weights are normalised to sum 1, rounded to fixed point (1 << 22), summed in 32-bit
//   integers with rounding, and clipped to 0..255 after each pass.
//
// Results are byte-identical to Pillow 13's `Image.resize` for modes "L" and "RGB" (and
// to `ImageOps.fit` for FitMode::kCrop); the tests hold them to Pillow fixtures within +-1,
// the contract. Every function is deterministic: the output depends on nothing but the
// arguments. Where the CPU has AVX2, the horizontal pass over RGB runs a hand-written
// kernel (resize_avx2.cc, about 2x faster) and the other loops an AVX2 clone; both do the
// same exact integer arithmetic as the portable code, so the bytes are the same on every
// machine.
//
// All entry points share one core. An axis whose source interval is a whole-pixel window
// exactly as long as the output (a plain crop or a same-size copy) is copied rather than
// resampled: at scale 1 and integer offsets every kernel gives one tap of weight exactly
// 1 << 22, so the bytes are the same as Pillow's and only the work is saved.
//
// Errors: InvalidArgument when a requested size (or max_side) is zero or negative, when
// the source has a zero or negative side, a channel count other than 1 or 3, or
// pixels.size() != height * width * channels, or when the output would be larger than
// kMaxImageSide (shardpack/limits.h) on a side; ResizeRegionInto also checks its strides, box and
// pointers. Messages start with "resize: " and give the values.
//
// Thread-safety: reentrant; no global state. A ResizeScratch is used by one thread at a
// time.
#ifndef SHARDPACK_IMAGE_RESIZE_H_
#define SHARDPACK_IMAGE_RESIZE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "image/image.h"
#include "shardpack/resize_filter.h"
#include "shardpack/status.h"

namespace shardpack::image {

// ResizeFilter and FitMode (shardpack/resize_filter.h) are the kernels (each Pillow's of the
// same name) and the ways of fitting another aspect ratio; the geometry of each FitMode is
// given at ResizeFit below.

class ResizeScratch;  // below

// Resamples `src` to out_height x out_width with `filter`, stretching if the aspect
// ratio changes. Same size as the source: an exact copy. Upscaling works too (the kernel
// is then not stretched; kArea upscales like nearest neighbour). The result has src's
// channel count.
StatusOr<Image> Resize(const Image& src, int out_height, int out_width, ResizeFilter filter);

// How ResizeFit maps a source of another aspect ratio onto the output size:
//
// - FitMode::kStretch: resize to exactly out_height x out_width; the aspect ratio may change.
// - FitMode::kCrop: scale so the output is covered (the side that is relatively shorter
//   matches), and keep the centred part: only the source region that survives is
//   resampled, straight to the output size, with a fractional source box where the crop
//   is not pixel aligned (its coordinates in single precision, as Pillow takes them). This
//   is Pillow's ImageOps.fit(image, size, method) (centering 0.5, no bleed), i.e.
//   Image.resize(size, method, box=centred box). The filter centres stay inside the box;
//   kernels wider than a pixel still read source pixels just outside it, as Pillow's do.
// - FitMode::kPad: scale so the whole image fits (the side that is relatively longer
//   matches), centre it and fill the rest with the pad colour. The other side is
//   round-half-up(side * scale), at least 1; the image sits at offset
//   floor((out - resized) / 2) from the top or left, so an odd margin leaves the extra
//   pixel at the bottom or right. Like Pillow's ImageOps.pad except at exact halves,
//   where Python's round() goes to even.
//
// Resizes `src` to out_height x out_width according to `fit`. pad_rgb, read only for
// FitMode::kPad, is the fill colour as R, G, B; a gray image is filled with its BT.601 luma
// computed as libjpeg does ((19595 R + 38470 G + 7471 B + 32768) >> 16). pad_rgb may be
// null except with FitMode::kPad (InvalidArgument).
//
// `scratch`, when not null, is the working memory (see ResizeScratch): a caller that
// resizes many images gives each thread one, and only the returned image is allocated.
StatusOr<Image> ResizeFit(const Image& src, int out_height, int out_width, FitMode fit,
                          ResizeFilter filter, const uint8_t pad_rgb[3],
                          ResizeScratch* scratch = nullptr);

// ResizeFit of the full image that `src` is a window of (image.h, ImageWindow; e.g. from
// DecodeWindow): the same bytes as ResizeFit on the whole image, as long as the window
// holds every source pixel the resize reads, which FitReadRegion names. InvalidArgument
// when it does not, or when the window is not inside its pixels or its image.
StatusOr<Image> ResizeFitWindow(const ImageWindow& src, int out_height, int out_width, FitMode fit,
                                ResizeFilter filter, const uint8_t pad_rgb[3],
                                ResizeScratch* scratch = nullptr);

// The source pixels that ResizeFit of a src_height x src_width image reads (a bound, a
// pixel or two wider than the kernels reach): with FitMode::kCrop the centred box and its
// kernels' reach, with kStretch and kPad the whole image. The whole image for
// non-positive sizes.
Region FitReadRegion(int src_height, int src_width, int out_height, int out_width, FitMode fit,
                     ResizeFilter filter);

// Scales `src` so that its longer side is max_side, keeping the aspect ratio; if neither
// side exceeds max_side, returns an exact copy (never upscales). The longer side becomes
// max_side and the shorter one round-half-up(shorter * max_side / longer), at least 1,
// in exact integer arithmetic; a square stays square.
// `scratch` as for ResizeFit.
StatusOr<Image> ResizeMaxSide(const Image& src, int max_side, ResizeFilter filter,
                              ResizeScratch* scratch = nullptr);

// Whether resizes can run: an error when the environment variable SHARDPACK_RESIZE_KERNELS
// (which caps the vector kernels, to compare them on one machine: "portable", "avx2" or
// "avx512"; unset, the best this CPU runs) names no level or one this CPU or build lacks.
// Every resize then fails with that error; callers that resize many images check it first.
Status ResizeKernelsStatus();

namespace internal {
// For tests and benchmarks (resize_kernels.h): makes `scratch` run the portable kernels
// even where the CPU has AVX2, or the AVX2 ones even where it has AVX-512 (VNNI, VBMI).
void UsePortableKernels(ResizeScratch* scratch);
void UseAvx2Kernels(ResizeScratch* scratch);
// Makes `scratch` transpose the horizontal pass's blocks with AVX2 even where the CPU has
// AVX-512 VBMI (the AVX-512 VNNI kernel still runs where it has that): what a CPU with VNNI
// but no VBMI runs.
void UseAvx2Transposes(ResizeScratch* scratch);
// Makes `scratch` sum with the AVX2 vertical kernel (pairs of taps) even where the CPU has
// AVX-512 VNNI, the transposes left as they are (VBMI's where the CPU has it).
void UseAvx2Sums(ResizeScratch* scratch);
// For tests: makes `scratch` weigh every output sample itself, never taking the weights of
// the other axis's sample with the same taps.
void WeighEachSampleAlone(ResizeScratch* scratch);
}  // namespace internal

// The reusable working memory of ResizeRegionInto: the 8-bit image between the two
// passes, the fixed-point weights of both axes, and the transposed row block of the
// horizontal pass. Every buffer only grows, to the largest size a call has needed, so
// once a scratch has seen the largest source, box and output of a workload, calls with it
// allocate nothing. Creating an empty scratch allocates nothing either; the first call
// does.
//
// Thread-safety: one thread at a time (give each worker its own). Move-only.
class ResizeScratch {
 public:
  ResizeScratch();
  ~ResizeScratch();
  ResizeScratch(ResizeScratch&& other) noexcept;
  ResizeScratch& operator=(ResizeScratch&& other) noexcept;
  ResizeScratch(const ResizeScratch&) = delete;
  ResizeScratch& operator=(const ResizeScratch&) = delete;

  // Heap bytes held now (the capacity of every buffer). Constant across calls that need
  // no more than the scratch already has.
  size_t capacity_bytes() const;

  // Grows every buffer to what any ResizeRegionInto call needs whose source is at most
  // max_src_height x max_src_width (any box in it), with this output size, channel count
  // and filter: such calls then allocate nothing. Does nothing for a non-positive value.
  void Reserve(int max_src_height, int max_src_width, int out_height, int out_width, int channels,
               ResizeFilter filter);
  // What Reserve allocates on an empty scratch, at most (the vector kernels' buffers
  // counted whatever the CPU has), without allocating: for callers that check their
  // memory first. 0 where Reserve does nothing.
  static size_t ReserveBytes(int max_src_height, int max_src_width, int out_height, int out_width,
                             int channels, ResizeFilter filter);

  // The buffers themselves: for resize.cc, the only place where Buffers is complete.
  struct Buffers;
  Buffers& buffers();

 private:
  friend void internal::UsePortableKernels(ResizeScratch* scratch);
  friend void internal::UseAvx2Kernels(ResizeScratch* scratch);
  friend void internal::UseAvx2Transposes(ResizeScratch* scratch);
  friend void internal::UseAvx2Sums(ResizeScratch* scratch);
  friend Status ResizeRegionInto(const uint8_t* src, int src_height, int src_width, int channels,
                                 size_t src_stride, float x0, float y0, float x1, float y1,
                                 int out_height, int out_width, ResizeFilter filter, uint8_t* out,
                                 size_t out_stride, ResizeScratch* scratch);
  std::unique_ptr<Buffers> buffers_;
};

// Resamples the region [x0, x1) x [y0, y1) of `src` (source pixels, fractions allowed, as
// Pillow's Image.resize(size, filter, box=(x0, y0, x1, y1))) to out_height x out_width
// with `filter`, into caller-owned memory. Same arithmetic, so the same bytes, as Resize
// and ResizeFit, which are built on it: ResizeRegionInto(whole image) == Resize, and the
// centred box of FitMode::kCrop gives ResizeFit(kCrop). The filter centres stay inside the
// box; kernels wider than a pixel still read source pixels just outside it (never outside
// the image).
//
// src: src_height rows of src_width * channels bytes, row y at src + y * src_stride
// (src_stride >= src_width * channels). out: out_height rows of out_width * channels
// bytes at out + y * out_stride (out_stride >= out_width * channels); it must not overlap
// src. channels is 1 or 3. The box must satisfy 0 <= x0 < x1 <= src_width and
// 0 <= y0 < y1 <= src_height (finite values). `scratch` is required and reused: see
// ResizeScratch; this function allocates nothing once it has grown.
//
// InvalidArgument ("resize: ...") for a null pointer, a bad channel count, a non-
// positive source side, a stride shorter than a row, an output side outside
// 1..kMaxImageSide, or a box that is empty, not finite or not inside the source; out is
// then untouched.
Status ResizeRegionInto(const uint8_t* src, int src_height, int src_width, int channels,
                        size_t src_stride, float x0, float y0, float x1, float y1, int out_height,
                        int out_width, ResizeFilter filter, uint8_t* out, size_t out_stride,
                        ResizeScratch* scratch);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_RESIZE_H_
