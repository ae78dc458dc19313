// The input of dataset_fuzzer: a whole small dataset directory in one byte string, and
// what the harness's mutator knows of the structure of its files (tests/fuzz/).
//
// Container (all integers little-endian):
//
//   input := "SPDS" version:u8(=1) flags:u8 entry*
//   entry := name_size:u16 data_size:u32 name:byte[name_size] data:byte[data_size]
//
// Each entry is a file of the dataset directory (manifest.json, the shards, their .idx
// files). Unpack never fails: input without the magic is an empty dataset, a last entry
// cut short keeps the bytes there are, more than kMaxFiles entries are ignored. The
// harness writes only entries with plain names (IsPlainName); the manifest may name
// anything.
//
// flags: kPristine marks a dataset exactly as the project's writer made it (the seeds of
// tests/fuzz/make_seeds.cc): verify must find no fault in it, and the fix-ups below must
// leave it byte for byte as it is. The mutator clears it on every mutation. The other
// bits choose how the harness reads (Flag).
//
// Fix-ups (FixUp) recompute what the project's checksums and cross-references would
// otherwise catch, so that a mutation reaches the code behind them: TFRecord framing
// (masked CRC32C of each length and payload), index lines from a scan of the framing,
// optionally the records, sample and class counts and the image/pad alignment, the
// manifest's per-file sizes and XXH3-128, and the manifest's own manifest_xxh3_128.
// (Pixel checksums inside payloads are the mutator's: FixPixelCrc, after an edit.)
#ifndef SHARDPACK_TESTS_FUZZ_DATASET_INPUT_H_
#define SHARDPACK_TESTS_FUZZ_DATASET_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace shardpack::fuzz {

inline constexpr std::string_view kMagic = "SPDS";
inline constexpr uint8_t kContainerVersion = 1;
inline constexpr size_t kMaxFiles = 64;

enum Flag : uint8_t {
  kPristine = 1,         // as the writer made it: verify finds nothing, fix-ups change nothing
  kLoaderReadAhead = 2,  // the loader reads through its read-ahead path (pread), not mapped
  kLoaderShuffle = 4,    // the loader shuffles globally
  kUncheckedGet = 8,     // Dataset::Get also without checking the checksums
};

struct DatasetFile {
  std::string name;
  std::string data;
};

struct DatasetInput {
  uint8_t flags = 0;
  std::vector<DatasetFile> files;

  // The last entry named `name` (the one the harness's writes leave), or nullptr.
  DatasetFile* Find(std::string_view name);
  const DatasetFile* Find(std::string_view name) const;
};

std::string Pack(const DatasetInput& input);
DatasetInput Unpack(const uint8_t* data, size_t size);

// A name the harness writes into its directory: not empty, at most 255 bytes, no '/' and
// no NUL, not "." or "..".
bool IsPlainName(std::string_view name);

// ---- TFRecord framing (docs/FORMAT.md §1) ----

struct Framed {
  uint64_t offset = 0;  // of the length field
  uint64_t length = 0;  // payload bytes
  uint64_t size() const { return length + 16; }
};
// The records back to back from offset 0, by their length fields alone (no checksum
// checked), up to the first that does not fit in the file.
std::vector<Framed> ScanFraming(std::string_view shard);
// Rewrites each header's length checksum, and the payload checksum of each record that
// fits, walking the lengths from offset 0 (a header whose record does not fit still gets
// its length checksum: the reader then reports a truncation, not a checksum).
void FixFraming(std::string* shard);
// The .idx text of the records ScanFraming finds: "offset size\n" lines.
std::string IndexText(std::string_view shard);

// ---- tf.train.Example payloads (docs/FORMAT.md §2), as far as the writer lays them out ----

struct Feature {
  std::string key;
  // 1 bytes_list, 2 float_list, 3 int64_list: Feature's oneof field numbers.
  int kind = 0;
  std::vector<std::string> bytes;  // bytes_list values
  std::vector<uint64_t> ints;      // int64_list values (two's complement)
  std::string floats;              // float_list: its packed payload, kept as bytes
  // Where, in the payload parsed, the first int64 varint and the first bytes value are
  // (for in-place edits of LMDB values), and the varint's size; 0 when absent.
  size_t int_offset = 0, int_size = 0, bytes_offset = 0;
};

// Parses a payload made of Example.features, map entries of a key and a Feature, and one
// list per Feature (packed or unpacked int64s). False for anything else: unknown fields,
// groups, a feature of two kinds. Features keep their order; repeated keys stay repeated.
bool ParseExample(std::string_view payload, std::vector<Feature>* out);
// The writer's layout (§2.2): one Features message, the features in their order, int64
// lists packed, shortest varints.
std::string EncodeExample(const std::vector<Feature>& features);
// Sets the image/raw/crc32c (image/encoded/crc32c) feature to the CRC32C of the first
// image/raw (image/encoded) value, where both are there. False when neither pair is.
bool FixPixelCrc(std::vector<Feature>* features);
// Resizes the image/pad feature right before a last image/raw so that, with the payload
// at file offset `payload_offset`, the pixels start at a multiple of `alignment` (§2.3).
// False (nothing changed) when the features are not laid out so.
bool AlignPixels(std::vector<Feature>* features, uint64_t payload_offset, uint32_t alignment);

// The varint `v` in exactly `size` bytes (1..10; non-minimal forms padded with 0x80
// continuation bytes, which protobuf parsers accept). False when it needs more.
bool EncodeVarintInPlace(uint64_t v, uint8_t* dst, size_t size);

// ---- LMDB files (docs/FORMAT.md §4; LMDB's mdb.c, 64-bit layout) ----
//
// Every page starts with a 16-byte header: pgno u64, pad u16, flags u16, then lower u16
// and upper u16 (branch and leaf pages) or pages u32 (overflow pages). Pages 0 and 1 are
// meta pages: the MDB_meta at offset 16 holds magic 0xBEEFC0DE, version 1, address,
// mapsize, two MDB_db {pad u32 (the free DB's: the page size), flags u16, depth u16,
// branch_pages, leaf_pages, overflow_pages, entries, root: u64}, last_pg u64, txnid u64.
// Branch and leaf pages hold u16 node offsets from offset 16 up to `lower`; a node is
// lo u16, hi u16, flags u16, ksize u16, the key, then the data (leaf: lo | hi << 16 bytes,
// or with F_BIGDATA the u64 number of its first overflow page; branch: the child's page
// number is lo | hi << 16 | flags << 32).

namespace lmdb {
inline constexpr size_t kPageHeader = 16;
inline constexpr uint16_t kBranch = 0x01, kLeaf = 0x02, kOverflow = 0x04, kMeta = 0x08;
inline constexpr uint16_t kBigData = 0x01;
inline constexpr uint32_t kMagic = 0xBEEFC0DE;
// Offsets within a meta page.
inline constexpr size_t kMetaMagic = 16, kMetaVersion = 20, kMetaAddress = 24, kMetaMapsize = 32,
                        kMetaDbs = 40, kDbSize = 48, kMetaLastPage = 136, kMetaTxnid = 144;
// Offsets within an MDB_db.
inline constexpr size_t kDbPad = 0, kDbFlags = 4, kDbDepth = 6, kDbBranch = 8, kDbLeaf = 16,
                        kDbOverflow = 24, kDbEntries = 32, kDbRoot = 40;
}  // namespace lmdb

// The page size a meta page records (the free DB's pad), if it is a power of two in
// 512..65536; else 4096.
uint32_t LmdbPageSize(std::string_view file);

struct LmdbNode {
  size_t page = 0;        // page number
  size_t offset = 0;      // of the node header in the file
  size_t ptr_offset = 0;  // of the page's u16 pointing at it
};
struct LmdbValue {
  size_t key_offset = 0, key_size = 0;
  size_t offset = 0, size = 0;  // the value's bytes in the file (inline or overflow)
};
// Nodes of every branch or leaf page whose header and node lie inside the file.
std::vector<LmdbNode> LmdbNodes(std::string_view file, uint16_t page_kind);
// The keys and values of the leaf pages, in file order, where they lie inside the file.
std::vector<LmdbValue> LmdbValues(std::string_view file);

// ---- Fix-ups ----

struct FixUpOptions {
  bool framing = true;  // TFRecord length and payload checksums
  bool index = true;    // .idx files from a scan of their shard
  // TFRecord: records, first_sample, num_samples, class counts, image/pad alignment, from
  // the shards' framing and payloads; LMDB: class counts, from the leaf values' labels.
  bool counts = false;
  bool entries = true;  // the manifest's bytes and xxh3_128 of each file it lists
  bool manifest_checksum = true;
  // Files left as they are (the ones a mutation just edited on purpose).
  std::vector<std::string> keep;
};

// The TFRecord shard and index names the manifest lists, in order (data, index); from
// the file names ("x.tfrecord" and "x.idx") when the manifest does not parse.
struct ShardFiles {
  std::string data, index;
};
std::vector<ShardFiles> TfrecordShards(const DatasetInput& input);
// The LMDB shards the manifest lists (or, without one, the files named "*.lmdb").
std::vector<std::string> LmdbShards(const DatasetInput& input);

void FixUp(DatasetInput* input, const FixUpOptions& options);

}  // namespace shardpack::fuzz

#endif  // SHARDPACK_TESTS_FUZZ_DATASET_INPUT_H_
