// Constants of the shardpack on-disk format. The specification is docs/FORMAT.md; change
// both together, and bump kFormatMajor (shardpack/manifest.h) for any incompatible change.
#ifndef SHARDPACK_FORMAT_FORMAT_H_
#define SHARDPACK_FORMAT_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "shardpack/limits.h"
#include "shardpack/manifest.h"
#include "shardpack/status.h"

namespace shardpack::format {

// TFRecord framing: u64 length | u32 masked_crc32c(length) | payload | u32 masked_crc32c.
inline constexpr uint64_t kRecordHeaderSize = 12;
inline constexpr uint64_t kRecordFooterSize = 4;
inline constexpr uint64_t kRecordOverhead = kRecordHeaderSize + kRecordFooterSize;

// Pixel bytes of TFRecord shards start at file offsets that are multiples of this.
inline constexpr uint32_t kDefaultPixelAlignment = 64;

// tf.train.Example feature keys (TensorFlow's convention).
inline constexpr std::string_view kKeyRaw = "image/raw";
inline constexpr std::string_view kKeyRawCrc = "image/raw/crc32c";
inline constexpr std::string_view kKeyHeight = "image/height";
inline constexpr std::string_view kKeyWidth = "image/width";
inline constexpr std::string_view kKeyChannels = "image/channels";
inline constexpr std::string_view kKeyLabel = "image/class/label";
inline constexpr std::string_view kKeyClassText = "image/class/text";
inline constexpr std::string_view kKeyFilename = "image/filename";
inline constexpr std::string_view kKeyFormat = "image/format";
inline constexpr std::string_view kKeyPad = "image/pad";
inline constexpr std::string_view kFormatRaw = "raw";
// TensorFlow's encoded-image Examples (build_image_data.py): the JPEG or PNG file's bytes
// instead of pixels (docs/FORMAT.md §9).
inline constexpr std::string_view kKeyEncoded = "image/encoded";
inline constexpr std::string_view kKeyColorspace = "image/colorspace";
// Format 1.3, datasets of encoded images (docs/FORMAT.md §2.5): crc32c of image/encoded,
// and image/format as TensorFlow writes it.
inline constexpr std::string_view kKeyEncodedCrc = "image/encoded/crc32c";
inline constexpr std::string_view kFormatJpeg = "JPEG";
inline constexpr std::string_view kFormatPng = "PNG";

inline constexpr std::string_view kManifestName = "manifest.json";
// What a conversion leaves in its output directory until the manifest is published: the
// progress record of convert, the parts of convert --part and the plan of merge.
inline constexpr const char* kConvertProgressName = ".shardpack-convert.json";
inline constexpr const char* kPartsDirName = "parts";
inline constexpr const char* kMergePlanName = ".shardpack-merge.json";

// NotFound for a directory without a manifest, saying what it is instead: an interrupted
// conversion (and how to go on), parts waiting for merge, or no shardpack dataset at all.
Status NoManifestError(const std::string& dir);

// "shard-00003-of-00016.tfrecord"; the staged name, before the total is known, drops
// "-of-MMMMM": "shard-00003.tfrecord".
std::string ShardFileName(uint64_t shard, uint64_t num_shards, Backend backend);
std::string StagedShardFileName(uint64_t shard, Backend backend);
// "shard-00003-of-00016.idx".
std::string IndexFileName(uint64_t shard, uint64_t num_shards);
std::string StagedIndexFileName(uint64_t shard);

// LMDB key of the record at `index` within its shard: 10 decimal digits, zero-padded, so
// that keys sort in insertion order and MDB_APPEND applies.
inline constexpr size_t kLmdbKeySize = 10;
std::string LmdbKey(uint64_t index);

// Where a large LMDB value lands: in an overflow page, after LMDB's 16-byte page header
// (PAGEHDRSZ on 64-bit builds), and pages are page-aligned in the memory map. The writer
// pads values as if the payload started at this offset, so that the pixels of every value
// larger than half a page start pixel_alignment-aligned in the map (docs/FORMAT.md §3).
inline constexpr uint64_t kLmdbValueOffset = 16;

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_FORMAT_H_
