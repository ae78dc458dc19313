// EXIF orientation: turns an image as stored into the upright image it depicts.
//
// The decoders (JPEG APP1 Exif, PNG eXIf) read the Orientation tag (0x0112) and call
// ApplyOrientation when DecodeOptions::apply_orientation is set. The mapping is the
// EXIF 2.3 one, the same as Pillow's ImageOps.exif_transpose (Pillow's ROTATE_* turn
// counter-clockwise):
//
//   value  stored image is ...            applied here         Pillow transpose
//   1      upright                        nothing              -
//   2      mirrored left-right            mirror horizontally  FLIP_LEFT_RIGHT
//   3      turned 180                     rotate 180           ROTATE_180
//   4      mirrored top-bottom            mirror vertically    FLIP_TOP_BOTTOM
//   5      mirrored along the main diag.  transpose            TRANSPOSE
//   6      turned 90 counter-clockwise    rotate 90 clockwise  ROTATE_270
//   7      mirrored along the anti-diag.  transverse           TRANSVERSE
//   8      turned 90 clockwise            rotate 270 clockwise ROTATE_90
//
// For 5..8 the result has height and width swapped. With (x, y) the column and row of the
// result and W x H the size of the input, the result pixel comes from input pixel
//   2: (W-1-x, y)   3: (W-1-x, H-1-y)   4: (x, H-1-y)      5: (y, x)
//   6: (y, H-1-x)   7: (W-1-y, H-1-x)   8: (W-1-y, x)
//
// Thread-safety: reentrant; no global state.
#ifndef SHARDPACK_IMAGE_ORIENTATION_H_
#define SHARDPACK_IMAGE_ORIENTATION_H_

#include "image/image.h"

namespace shardpack::image {

// Returns `img` turned upright according to the EXIF `orientation` value. Values outside
// 1..8 (0 and 9+ appear in the wild; EXIF says readers ignore them) and 1 return `img`
// unchanged, without copying the pixels. 2, 3 and 4 work in place; 5..8 allocate one new
// pixel buffer.
//
// Precondition: img.pixels.size() == height * width * channels with channels >= 1, as
// every decoder returns. An image that breaks it is returned unchanged (and asserts in
// debug builds): this function has no error channel and never reads out of bounds.
Image ApplyOrientation(Image img, int orientation);

// The orientation (EXIF tag 0x0112, one SHORT in IFD0) of a TIFF structure: the payload of
// a PNG eXIf chunk, or a JPEG APP1 Exif segment after its "Exif\0\0" prefix. 1 when the
// tag is absent, its value is outside 1..8, or anything is malformed; every read is
// bounds-checked.
int TiffOrientation(const uint8_t* tiff, size_t size);

}  // namespace shardpack::image

#endif  // SHARDPACK_IMAGE_ORIENTATION_H_
