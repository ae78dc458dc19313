// JPEG decoding through libjpeg-turbo's libjpeg API (not TurboJPEG: the libjpeg API gives
// DCT scaling, APP1 marker access for EXIF and CMYK/YCCK output, and TurboJPEG 2.1.5
// rejects valid CMYK files as ImageMagick writes them).
//
// Handles baseline and progressive (and multi-scan sequential) 8-bit JPEGs, any chroma
// subsampling, grayscale, YCbCr, RGB, CMYK and YCCK. The contract of image.h applies:
//   - DecodeLimits are checked right after the header, before any pixel memory exists:
//     max_dimension per side and max_pixels (width * height) on the stored image (not
//     the DCT-scaled output). max_scans is enforced by a progress monitor as djpeg
//     -maxscans does (0 or less: no limit). max_memory_bytes becomes libjpeg's
//     max_memory_to_use, which bounds libjpeg's whole-image buffers (the coefficients
//     of a progressive or multi-scan file) but not the output Image (0: no limit, as in
//     libjpeg).
//   - libjpeg warnings are errors (djpeg -strict): a truncated file or a corrupt entropy
//     segment fails instead of returning a partly grey image. One exception: a
//     progressive JPEG decoded at 1/8 is given to libjpeg without the AC scans of the
//     components its 1x1 inverse DCT makes from the DC alone (same pixels, a fraction of
//     the work), so damage inside those scans' entropy data is not seen at that scale;
//     a file whose markers do not parse to EOI is decoded whole and fails as ever.
//   - libjpeg's setjmp/longjmp never crosses a C++ frame. Each thread keeps its libjpeg
//     decompressors and lends one to one decode at a time (a decode inside another takes
//     another), so every function here is reentrant. A kept decompressor is taken back to
//     what a new one would be before each decode (no tables or state of the last image),
//     and its memory is arenas kept from image to image (image/jpeg_memory.h): decoding
//     allocates nothing on the heap once a thread has decoded an image of the size.
//
// Status codes:
//   InvalidArgument   options.channels is not 1 or 3, or a minimum size is negative.
//   Corruption        empty input, or data that starts like a JPEG but is not a valid
//                     one (libjpeg's message and code name, with the byte offset).
//   NotSupported      input without a JPEG SOI marker ("not a JPEG file"), or a valid
//                     JPEG this build cannot decode (12-bit, lossless, unusual colour
//                     space).
//   ResourceExhausted a DecodeLimits value was hit, libjpeg ran out of memory or its
//                     65500-pixel dimension limit, or the output buffer could not be
//                     allocated.
#ifndef SHARDPACK_IMAGE_JPEG_DECODER_H_
#define SHARDPACK_IMAGE_JPEG_DECODER_H_

#include <cstddef>
#include <cstdint>

#include "image/image.h"
#include "shardpack/status.h"

namespace shardpack::image {

// Decodes [data, data + size) into options.channels channels (3: RGB, gray sources
// replicated; 1: BT.601 luma), downscaled by DCT scaling as options.min_height and
// options.min_width allow, and turned upright by the EXIF orientation when
// options.apply_orientation (through ApplyOrientation of image/orientation.h).
// The input is only read during the call.
StatusOr<Image> DecodeJpeg(const uint8_t* data, size_t size, const DecodeOptions& options);

// As DecodeJpeg, but returns the pixels as stored, not oriented, and stores the EXIF
// orientation (1..8; 1 when there is no Exif APP1 segment or it is unreadable or holds
// an invalid value) in *exif_orientation when that is not null; it is set on success
// and on failures after the header was read, and is 1 otherwise.
// The choice of DCT scale still honours options.apply_orientation: with it on and an
// orientation of 5..8, min_height bounds the stored width and min_width the stored
// height, so that the image is large enough once the caller orients it.
StatusOr<Image> DecodeJpegRaw(const uint8_t* data, size_t size, const DecodeOptions& options,
                              int* exif_orientation);

// DecodeWindow (image.h) for a JPEG: only `needed` of the upright image is decoded
// when the image is stored upright (or orientation is not applied).
StatusOr<ImageWindow> DecodeJpegWindow(const uint8_t* data, size_t size,
                                       const DecodeOptions& options, const NeededRegion& needed);
// The same into *window, reusing its pixels' memory (DecodeWindow's second form).
Status DecodeJpegWindow(const uint8_t* data, size_t size, const DecodeOptions& options,
                        const NeededRegion& needed, ImageWindow* window);

// image::DecodeExact (image.h) for a JPEG: decodes straight into `dst`, without an
// intermediate image. The stored size must be height x width (checked from the header,
// before decoding; Corruption otherwise); no orientation. scale_denom (1, 2, 4 or 8;
// InvalidArgument otherwise) is libjpeg's DCT scaling: `dst` receives
// ScaledSide(height, scale_denom) x ScaledSide(width, scale_denom) x channels bytes.
Status DecodeJpegExact(const uint8_t* data, size_t size, int height, int width, int channels,
                       int scale_denom, uint8_t* dst);

// The EXIF orientation from the payload of an APP1 segment (the bytes after the length
// field: "Exif\0\0" and a TIFF header, either byte order), read from tag 0x0112 (SHORT)
// of IFD0. Returns 1..8, or 1 when the payload is not Exif, is truncated or malformed,
// or holds another value. Never reads outside [app1, app1 + size).
int ParseExifOrientation(const uint8_t* app1, size_t size);

// The DCT scale denominator (1, 2, 4 or 8; the numerator is 1) that DecodeJpegRaw picks
// for a stored image of width x height, with libjpeg's rounding (a side s scales to
// ceil(s / denominator)): the largest denominator whose output, transposed when
// `transpose` (orientations 5..8 applied), is still at least min_height x min_width.
// A minimum of 0 does not constrain its side; both 0 means 1 (full size).
int ChooseJpegScaleDenominator(int width, int height, bool transpose, int min_height,
                               int min_width);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_JPEG_DECODER_H_
