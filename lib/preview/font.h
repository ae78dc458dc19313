// A built-in 5x7 bitmap font for labelling images (contact sheets, debug output): no font
// files, no FreeType, the same pixels on every machine.
//
// Glyphs cover printable ASCII (32..126); any other byte, including every byte of a UTF-8
// sequence and control characters such as '\n', is drawn as '?'. Text is one line: each
// byte advances the pen by one cell of kCellWidth x kCellHeight pixels (the 5x7 glyph
// plus one blank column on its right and one blank row below), times `scale`.
//
// Thread-safety: reentrant; the glyph table is immutable.
#ifndef SHARDPACK_PREVIEW_FONT_H_
#define SHARDPACK_PREVIEW_FONT_H_

#include <cstdint>
#include <string_view>

#include "image/image.h"

namespace shardpack::preview {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 7;
inline constexpr int kCellWidth = kGlyphWidth + 1;
inline constexpr int kCellHeight = kGlyphHeight + 1;

// Draws `text` with the top-left corner of its first cell at (x, y); each glyph pixel
// becomes a scale x scale square of colour `rgb` (R, G, B). Only ink is drawn: the
// background shows through. Anything outside the image is clipped, so x and y may be
// negative or beyond the edges. A 1-channel image gets the colour's BT.601 luma,
// (19595 R + 38470 G + 7471 B + 32768) >> 16; an image with another channel count, or
// pixels.size() != height * width * channels, or scale < 1, is left untouched.
void DrawText(image::Image* img, int x, int y, std::string_view text, const uint8_t rgb[3],
              int scale = 1);

// The advance width of `text` in pixels: text.size() * kCellWidth * scale, including the
// blank column after the last glyph; 0 for empty text or scale < 1.
int TextWidth(std::string_view text, int scale = 1);

}  // namespace shardpack::preview

#endif  // SHARDPACK_PREVIEW_FONT_H_
