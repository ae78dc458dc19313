// PNG decoding with libpng's classic API from a memory buffer (see image.h for the shared
// contract: Image layout, DecodeOptions, DecodeLimits, error codes).
//
// What comes out:
//   - Every PNG colour type and bit depth: palette (1, 2, 4, 8 bits), gray (1, 2, 4, 8, 16),
//     gray+alpha (8, 16), RGB (8, 16), RGBA (8, 16), Adam7 interlaced or not, tRNS on palette,
//     gray and RGB images. Output is 8 bits per sample, options.channels (1 or 3) channels.
//   - Samples are taken as stored: gAMA, cHRM, sRGB and iCCP are ignored (not even parsed).
//   - 16-bit samples are reduced with rounding, round(v * 255 / 65535) ==
//     (v * 255 + 32895) >> 16 (png_set_scale_16), never by dropping the low byte.
//   - Low bit depths expand to the full 8-bit range (a 2-bit 3 is 255, a 4-bit 1 is 17).
//   - Alpha (an alpha channel or tRNS) is composited over options.background after the
//     reduction to 8 bits: out = (c * a + bg * (255 - a) + 127) / 255 per channel. A gray
//     source is composited over the background's luma when options.channels == 1, over the
//     background colour when options.channels == 3.
//   - options.channels == 1 for a colour source: composite first, then ITU-R BT.601 luma,
//     (19595 * R + 38470 * G + 7471 * B + 32768) >> 16. options.channels == 3 for a gray
//     source: the gray value in all three channels.
//
// Chunk policy:
//   - Only IHDR, PLTE, tRNS, IDAT, IEND and eXIf are interpreted. Every other chunk, known or
//     unknown, is skipped after its CRC is checked, so text, iCCP and zTXt bombs cost nothing;
//     an unknown critical chunk is an error.
//   - A CRC error in a critical chunk (IHDR, PLTE, IDAT, IEND) is Corruption. A CRC error in
//     an ancillary chunk drops that chunk and decoding goes on (libpng's default): a damaged
//     tRNS leaves the image opaque, a damaged eXIf leaves orientation 1.
//   - libpng's "benign errors" (extra compressed data after the image, a zlib check value
//     mismatch after all rows decoded, palette indices past the palette, which read as black,
//     a duplicate or misplaced ancillary chunk) are warnings and are ignored.
//   - Truncated input, missing image data and a missing IEND are Corruption: no partially
//     decoded image is ever returned. Bytes after IEND are ignored.
//   - A chunk whose declared length runs past the end of the input is Corruption
//     ("truncated"), reported before libpng allocates anything for it.
//   - limits.png_chunk_malloc_max bounds the one ancillary chunk held in memory, eXIf: a
//     larger one is ResourceExhausted. Skipped chunks take no memory and may be of any
//     length. limits.png_chunk_cache_max is handed to libpng, which with this policy caches
//     no chunks. For both, 0 means no limit, as in libpng.
//
// Limits (limits.max_dimension per side, limits.max_pixels for width * height and
// limits.max_memory_bytes for the decode buffer, at most 4 bytes per pixel) are checked
// from IHDR before any pixel memory is allocated; a hit is ResourceExhausted.
//
// Errors: Corruption for data that is not a valid PNG (the message names libpng's complaint,
// e.g. "IDAT: CRC error", and the byte offset reached), ResourceExhausted for a limit,
// InvalidArgument for options.channels other than 1 or 3 or a non-positive
// limits.max_dimension, Internal when libpng cannot allocate its own structures.
//
// Thread-safety: reentrant; no global state. libpng errors are caught with setjmp/longjmp
// inside this module and never cross a C++ frame of the caller.
#ifndef SHARDPACK_IMAGE_PNG_DECODER_H_
#define SHARDPACK_IMAGE_PNG_DECODER_H_

#include <cstddef>
#include <cstdint>

#include "image/image.h"
#include "shardpack/status.h"

namespace shardpack::image {

// Decodes the PNG in data[0, size) with pixels as stored (options.apply_orientation is not
// looked at). When exif_orientation is not null it receives the EXIF orientation (1..8) from
// an eXIf chunk, before or after the image data, or 1 when there is none or it cannot be
// parsed; it is set to 1 on error. data need not outlive the call.
StatusOr<Image> DecodePngRaw(const uint8_t* data, size_t size, const DecodeOptions& options,
                             int* exif_orientation);

// image::DecodeExact (image.h) for a PNG: pixels as stored (no orientation), into `dst`,
// height * width * options.channels bytes. The header's size is checked against height x
// width before any pixel memory exists (Corruption "PNG: AxB in its header, the record
// says HxW"). Where libpng's rows already have the output's layout (8 bits, options.channels
// samples, no alpha) they are decoded straight into `dst`; otherwise through a buffer of
// their own, converted, then copied. On error `dst` may hold part of the image.
Status DecodePngExact(const uint8_t* data, size_t size, const DecodeOptions& options, int height,
                      int width, uint8_t* dst);

// DecodePngRaw, then, when options.apply_orientation is set, ApplyOrientation
// (image/orientation.h) with the eXIf orientation, so that the image is upright.
StatusOr<Image> DecodePng(const uint8_t* data, size_t size, const DecodeOptions& options);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_PNG_DECODER_H_
