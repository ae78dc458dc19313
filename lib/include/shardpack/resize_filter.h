// How images are resampled and fitted to an output shape: ResizeFilter and FitMode, used by
// the converter (ConvertOptions), the loader's transforms (LoaderOptions) and the resizer
// (lib/image/resize.h) alike. One enum per concept, one list of names, one parser each:
// the CLI, the Python package and the manifest all spell them as below.
#ifndef SHARDPACK_RESIZE_FILTER_H_
#define SHARDPACK_RESIZE_FILTER_H_

#include <span>
#include <string>
#include <string_view>

#include "shardpack/status.h"

namespace shardpack {

// Antialiased resampling filters, each Pillow's of the same name: when shrinking, the
// kernel's support (its half-width in source pixels at scale 1) grows with the ratio, as
// Pillow's resize does. kArea is the fastest, kLanczos3 the sharpest.
enum class ResizeFilter {
  kArea,      // "area", Pillow BOX: box of support 0.5; downscaling averages the covered
              // area, weighting partly covered pixels by their coverage.
  kBilinear,  // "bilinear", Pillow BILINEAR: triangle, support 1.
  kBicubic,   // "bicubic", Pillow BICUBIC: Keys cubic convolution, a = -0.5, support 2.
  kLanczos3,  // "lanczos3" (also accepted: "lanczos"), Pillow LANCZOS: sinc(x) * sinc(x / 3),
              // support 3.
};

// How a source of another aspect ratio is mapped onto a height x width output
// (image::ResizeFit has the exact geometry of each).
enum class FitMode {
  kStretch,  // "stretch": resize to height x width, aspect not kept
  kCrop,     // "crop": resize the shorter side to fit, then centre-crop (the default)
  kPad,      // "pad": resize the longer side to fit, centre, pad with the background colour
};

// The names, in enum order: what ResizeFilterName / FitModeName return and the Parse
// functions accept (the first list for filters; ParseResizeFilter also takes "lanczos").
std::span<const std::string_view> ResizeFilterNames();
std::span<const std::string_view> FitModeNames();

// "area", "bilinear", "bicubic", "lanczos3"; "?" for a value outside the enum.
const char* ResizeFilterName(ResizeFilter filter);
// "stretch", "crop", "pad"; "?" for a value outside the enum.
const char* FitModeName(FitMode fit);

// InvalidArgument for a name not in the list, naming it and the accepted names.
StatusOr<ResizeFilter> ParseResizeFilter(std::string_view name);
StatusOr<FitMode> ParseFitMode(std::string_view name);

// InvalidArgument for a value outside the enum (a cast integer), naming `what`.
Status CheckResizeFilter(ResizeFilter filter, std::string_view what);
Status CheckFitMode(FitMode fit, std::string_view what);

}  // namespace shardpack

#endif  // SHARDPACK_RESIZE_FILTER_H_
