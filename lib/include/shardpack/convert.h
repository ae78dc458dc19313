// Convert: decode and resize a folder of JPEG/PNG images (class sub-folders, or a list
// file) in parallel, once, into a dataset of pre-decoded pixels (TFRecord or LMDB shards
// and a manifest).
//
//   ConvertOptions o;
//   o.height = 256; o.width = 256; o.fit = FitMode::kCrop;
//   auto summary = Convert("caltech256/", "data/caltech256", o);   // StatusOr
//
// Every input is accounted for: inputs = written + rejected, in the summary and in the
// manifest's options. A bad input (undecodable, truncated, not an image, over a limit)
// never stops the conversion: it is listed in DST/rejects.tsv (path, reason), unless
// `strict` asks to fail on the first. The output bytes depend only on the inputs and the
// options, never on the thread count.
//
// Thread-safety: Convert may run concurrently on different destinations.
#ifndef SHARDPACK_CONVERT_H_
#define SHARDPACK_CONVERT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardpack/manifest.h"
#include "shardpack/resize_filter.h"
#include "shardpack/status.h"

namespace shardpack {

enum class FitMode {
  kStretch,  // resize to height x width, aspect not kept
  kCrop,     // resize the shorter side to fit, then centre-crop (the default)
  kPad,      // resize the longer side to fit, centre, pad with the background colour
};

struct ConvertProgress {
  uint64_t done = 0;   // inputs finished (written or rejected)
  uint64_t total = 0;  // inputs in all
  uint64_t rejected = 0;
  uint64_t bytes_in = 0;   // bytes of input files read
  uint64_t bytes_out = 0;  // pixel bytes written
  double seconds = 0;      // since the conversion started
};

struct ConvertOptions {
  Backend backend = Backend::kTfrecord;

  // Output geometry, one of:
  //   height and width > 0: every sample is height x width, by `fit`;
  //   max_side > 0: the longer side is at most max_side, aspect kept (variable size);
  //   keep: the decoded size, unchanged (variable size).
  int height = 0;
  int width = 0;
  FitMode fit = FitMode::kCrop;
  int max_side = 0;
  bool keep = false;
  // Default Lanczos (support 3): the sharpest of the four without visible ringing at
  // training resolutions; kArea is the fastest.
  ResizeFilter filter = ResizeFilter::kLanczos3;
  int channels = 3;  // 3: RGB; 1: gray

  uint64_t max_shard_bytes = 64ull << 20;
  uint64_t max_shard_records = 0;  // 0: no limit

  // Shuffle the write order with `seed` (recorded in the manifest). Off: class order.
  bool shuffle = false;
  uint64_t seed = 0;

  int num_threads = 0;  // 0: all cores

  bool apply_orientation = true;            // EXIF orientation (JPEG Exif, PNG eXIf)
  uint8_t background[3] = {255, 255, 255};  // alpha and --fit pad are filled with it

  // Limits on hostile input (../shared/reference/reliability.md section 3).
  uint64_t max_pixels = 89478485;
  int max_scans = 500;
  uint64_t max_file_bytes = 1ull << 30;
  uint64_t max_png_chunk_bytes = 8000000;  // largest PNG ancillary chunk kept (libpng's)

  bool strict = false;                // the first reject fails the conversion
  uint64_t max_rejects = UINT64_MAX;  // abort once more inputs than this are rejected

  // Go on with an interrupted conversion of the same inputs and options into DST: the
  // staged shards recorded in DST/.shardpack-convert.json are checked and kept, the rest
  // is redone, and the result is byte-identical to an uninterrupted run. Without a
  // progress record DST's partial files are removed and the conversion starts over; a
  // complete DST is left as it is.
  bool resume = false;

  // Inputs from a list file ("relative/path label" per line, relative to SRC) instead of
  // class folders.
  std::string list_file;

  // Replace a dataset DST already holds (its manifest, shards, rejects and temporaries are
  // removed first). Without it such a DST is refused.
  bool overwrite = false;

  // Called from one thread after every input, in order (cheap: it may decide itself how
  // often to print).
  std::function<void(const ConvertProgress&)> progress;
};

struct ConvertReject {
  std::string path;  // relative to SRC, escaped (util EscapeBytes) where not UTF-8
  std::string reason;
};

struct ConvertSummary {
  uint64_t inputs = 0;    // files considered (scan rejects included)
  uint64_t written = 0;   // samples in the dataset
  uint64_t rejected = 0;  // inputs = written + rejected
  uint64_t hidden_ignored = 0;
  uint64_t bytes_in = 0;  // bytes of input files read (this run)
  double seconds = 0;
  std::vector<ConvertReject> rejects;
  Manifest manifest;
  uint64_t resumed_from = 0;  // inputs already done by an interrupted run (resume)
};

// Converts SRC into DST (created; must not hold a dataset). Errors: InvalidArgument for
// bad options or an input layout that cannot be converted; Corruption (naming the file)
// when `strict` and an input is rejected, or when rejects pass max_rejects; I/O errors.
// On error nothing is published: DST holds no manifest.
StatusOr<ConvertSummary> Convert(const std::string& src, const std::string& dst,
                                 const ConvertOptions& options);

}  // namespace shardpack

#endif  // SHARDPACK_CONVERT_H_
