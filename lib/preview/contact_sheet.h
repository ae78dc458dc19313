// Contact sheets: one RGB image showing a dataset's samples as captioned thumbnails, so a
// person can look at what was packed (`shardpack preview`).
//
//   auto ds = Dataset::Open("data/caltech256");                      // StatusOr
//   auto sheet = RenderContactSheet(**ds, {.columns = 8, .thumb = 128});
//   auto png = image::EncodePng(sheet->pixels.data(), sheet->height, sheet->width, 3);
//
// Each tile is the sample's thumbnail (aspect ratio kept, letterboxed on the background;
// gray samples shown as gray RGB) with a caption under it: "<label> <class text>", cut
// with ".." when it does not fit. The class text is the record's own, or the manifest's
// name for the label when the record has none.
//
// Layout, in pixels, with s = max(1, thumb / 128) the text scale and p = kSheetPad:
//   tile       (thumb + 2p) wide, (p + thumb + p + 8s + p) tall: the thumbnail at (p, p),
//              the caption's 8s-pixel line at (p, thumb + 2p).
//   grid       min(columns, n) tiles a row, ceil(n / columns) rows, in index order.
//   per class  one row per class, label k in row k (k < max_classes); the first cell holds
//              the label, the class name (wrapped) and its sample count from the manifest,
//              then up to samples_per_class tiles, in index order; every row is
//              (1 + samples_per_class) cells wide, whatever each class has.
//
// Thread-safety: reentrant; the Dataset is only read, through Dataset::Get.
#ifndef SHARDPACK_PREVIEW_CONTACT_SHEET_H_
#define SHARDPACK_PREVIEW_CONTACT_SHEET_H_

#include <cstdint>
#include <vector>

#include "image/image.h"
#include "shardpack/dataset.h"
#include "shardpack/limits.h"
#include "shardpack/status.h"

namespace shardpack {

// Margin around every thumbnail and caption, in pixels.
inline constexpr int kSheetPad = 4;
// Range of ContactSheetOptions::thumb, in pixels.
inline constexpr int kMinSheetThumb = 16;
inline constexpr int kMaxSheetThumb = 4096;
// Largest sheet accepted: each side at most kMaxImageSide pixels (shardpack/limits.h) and
// at most kMaxSheetPixels pixels in all (768 MiB of RGB).
inline constexpr uint64_t kMaxSheetPixels = 1ull << 28;
// Colours, RGB: the background (also the letterbox around thumbnails) and all text.
inline constexpr uint8_t kSheetBackground[3] = {24, 24, 24};
inline constexpr uint8_t kSheetText[3] = {235, 235, 235};

struct ContactSheetOptions {
  // Grid mode: tiles per row (>= 1; default 8).
  int columns = 8;
  // Side of the square thumbnail box, in pixels (kMinSheetThumb..kMaxSheetThumb; default
  // 128). Samples are scaled to fit it, up or down, with the area filter (nearest
  // neighbour when enlarging: the pixels as packed, not smoothed).
  int thumb = 128;
  // Grid mode: how many samples to show (>= 1; default 32), at most the dataset's size.
  uint64_t samples = 32;
  // Per-class mode instead of the grid: a row for each of the first max_classes labels
  // with up to samples_per_class of its samples (each >= 1; defaults 8 and 20). `columns`
  // and `samples` are then unused.
  bool per_class = false;
  int samples_per_class = 8;
  int max_classes = 20;
  // Which samples. 0 (default): evenly spaced over the dataset: grid sample i is index
  // floor(i * size / n); per-class mode scans in bit-reversed order (0, 1/2, 1/4, 3/4, ...
  // of the dataset), which spreads the picks over each class in sorted and shuffled
  // datasets alike. Other values: a random pick seeded by this value, the same on every
  // machine.
  uint64_t seed = 0;
};

// What a rendering drew, for callers that report or check it.
struct ContactSheetInfo {
  // Global indices of the samples drawn, in drawing order (row by row).
  std::vector<uint64_t> indices;
  // Per-class mode: how many samples, in scan order, had their label looked at. The scan
  // stops as soon as every row has min(samples_per_class, the class's count in the
  // manifest) samples, so it goes through the whole dataset only when a shown class is
  // rare (or its manifest count is wrong). Labels are read in parallel batches of 1024,
  // so up to 1023 more samples may have been read.
  uint64_t scanned = 0;
};

// The most bytes RenderContactSheet holds at once for these options, without reading a
// sample: the sheet as laid out above (at most kMaxSheetPixels x 3; a larger one is
// refused), and twice one sample at the largest size the manifest allows (its fixed size,
// else min(max_side^2, kMaxImagePixels) pixels, kMaxImagePixels without a max_side): the
// sample copied or decoded, then its resampling. For callers that check their memory
// before rendering (`shardpack preview`).
uint64_t ContactSheetMemory(const Dataset& ds, const ContactSheetOptions& o);

// Draws a contact sheet of `ds` as a 3-channel image; fills `info` when not null.
//
// Errors: InvalidArgument for an option out of range, an empty dataset, a manifest without
// classes (per-class mode) or a sheet larger than the limits above ("contact sheet: ..."
// with the values); any error of Dataset::Get, unchanged (a Corruption names the shard
// file, the record and its offset), for a sample read while choosing or drawing; a
// resampling error prefixed with "sample N: ".
//
// Cost: one Get per sample drawn, plus one per sample scanned in per-class mode, on all
// cores. A Dataset opened with verify_crc checks the checksums of every record scanned (a
// damaged record met on the way is reported), which reads its pixels: on 256x256 RGB
// samples about 10 us a record from the page cache, 1 us without the check.
StatusOr<image::Image> RenderContactSheet(const Dataset& ds, const ContactSheetOptions& o,
                                          ContactSheetInfo* info = nullptr);

}  // namespace shardpack

#endif  // SHARDPACK_PREVIEW_CONTACT_SHEET_H_
