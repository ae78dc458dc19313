// One sample as a reader sees it (SampleView) and where it lives (SampleLocation): the
// types every reader of a dataset shares, apart from the Dataset that hands them out
// (shardpack/dataset.h), so that the library's own readers need not include it.
//
// Lifetime: a SampleView's pointers point into the reader's mapping or buffers and stay
// valid as long as the reader (the Dataset, or the loader's read-ahead unit) says.
#ifndef SHARDPACK_SAMPLE_H_
#define SHARDPACK_SAMPLE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "shardpack/manifest.h"

namespace shardpack {

struct SampleView {
  std::span<const uint8_t> pixels;  // HWC uint8; empty for an encoded image
  // A dataset of encoded images (manifest().image.encoding jpeg or png): the sample's
  // JPEG or PNG file, its checksum checked like pixels; height x width x channels is what
  // it decodes to (Dataset::GetPixels, the Loader). Empty for raw datasets.
  std::span<const uint8_t> encoded;
  ImageEncoding encoding = ImageEncoding::kRaw;
  int height = 0;
  int width = 0;
  int channels = 0;
  int64_t label = 0;
  std::string_view class_text;
  std::string_view filename;
};

// Where a sample lives, for messages and for readers that batch by shard.
struct SampleLocation {
  size_t shard = 0;     // index into manifest().shards
  uint64_t record = 0;  // ordinal within the shard
  uint64_t offset = 0;  // TFRecord: file offset of the record; LMDB: 0
};

}  // namespace shardpack

#endif  // SHARDPACK_SAMPLE_H_
