// ResizeFilter: the resampling filters of the converter (ConvertOptions::filter) and of the
// loader's transforms (LoaderOptions::filter). One definition, so both headers can be
// included together.
#ifndef SHARDPACK_RESIZE_FILTER_H_
#define SHARDPACK_RESIZE_FILTER_H_

namespace shardpack {

// Antialiased resampling filters: when shrinking, the kernel's support grows with the
// ratio, as Pillow's resize does. kArea is the fastest, kLanczos3 the sharpest.
enum class ResizeFilter { kArea, kBilinear, kBicubic, kLanczos3 };

}  // namespace shardpack

#endif  // SHARDPACK_RESIZE_FILTER_H_
