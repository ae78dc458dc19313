// The dataset manifest, DST/manifest.json: what a dataset holds and how to check it.
// A directory without a manifest is not a dataset. Byte-level spec: docs/FORMAT.md.
#ifndef SHARDPACK_MANIFEST_H_
#define SHARDPACK_MANIFEST_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/status.h"

namespace shardpack {

// The version of this build of shardpack, e.g. "0.1.0".
std::string_view Version();

// Manifest format versions. A reader accepts any minor version of a major it knows
// (minor versions only add fields) and refuses a newer major. kFormatMinor is the newest
// minor this build reads; a writer records the lowest version that describes its dataset:
// 1.2 (the manifest's own checksum and rejects.tsv's entry), which includes 1.1 (the
// Caffe schema); 1.3 for a dataset of encoded images; 1.4 for one of mixed records.
inline constexpr int kFormatMajor = 1;
inline constexpr int kFormatMinor = 4;

enum class Backend {
  kTfrecord,  // shard-NNNNN-of-MMMMM.tfrecord + .idx (DALI tfrecord2idx format)
  kLmdb,      // shard-NNNNN-of-MMMMM.lmdb, one LMDB environment per file (MDB_NOSUBDIR)
};
std::string_view BackendName(Backend b);  // "tfrecord" / "lmdb"

// What the values of LMDB shards hold (docs/FORMAT.md §4).
enum class LmdbSchema {
  kExample,  // tf.train.Example payloads, keys "0000000000"...: what shardpack reads
  kCaffe,    // Caffe Datum messages (CHW, BGR), keys "%08d_<path>": for Caffe and DALI's
             // Caffe reader; verify checks them, the Dataset and Loader do not read them
};
std::string_view LmdbSchemaName(LmdbSchema s);  // "example" / "caffe"

// How a dataset's samples store their image (docs/FORMAT.md §2.5; format 1.3): the
// pixels themselves (image/raw), or a JPEG or PNG file of exactly the declared size
// (image/encoded), which readers decode to the same HWC uint8 pixels. kMixed (format
// 1.4): each record holds a JPEG, or the raw pixels where the JPEG saved little (the
// records say which: image/encoded or image/raw).
enum class ImageEncoding { kRaw, kJpeg, kPng, kMixed };
std::string_view ImageEncodingName(ImageEncoding e);  // "raw" / "jpeg" / "png" / "mixed"
// "raw", "jpeg", "png" or "mixed"; InvalidArgument naming the choices otherwise.
StatusOr<ImageEncoding> ParseImageEncoding(std::string_view name);

// The shape contract of every sample. Pixels are HWC uint8, RGB (3 channels) or gray (1).
struct ImageSpec {
  int channels = 3;  // 1 (gray) or 3 (RGB)
  // Fixed-size datasets: every sample is height x width. Zero for variable size.
  int height = 0;
  int width = 0;
  // Variable-size datasets: no side exceeds max_side (0: no bound promised).
  int max_side = 0;
  // 1.3: the samples hold encoded images (the manifest's image.encoding, with
  // image.layout "encoded"); 1.4: kMixed; kRaw for every older dataset.
  ImageEncoding encoding = ImageEncoding::kRaw;
  bool fixed() const { return height > 0 && width > 0; }
};

// The longest file name a manifest may list: NAME_MAX (255) less what shardpack appends
// to it on disk (a remote dataset's cache keeps "<name>.<32 hex digits>.partial").
inline constexpr size_t kMaxFileNameBytes = 255 - 33 - 8;

// A file the manifest lists. ParseManifest refuses (Corruption naming the field) a name
// that is not a plain, portable file name of the dataset's directory:
//   - empty, or longer than kMaxFileNameBytes;
//   - holding a control character (NUL included: a C string would end there), bytes that
//     are not UTF-8, '/' or '\\';
//   - starting with '.': ".", "..", hidden files, and so every name of shardpack's own
//     machinery: the cache's .lock, .use, .fetch and .reserved (lib/remote/shard_cache.h),
//     the converter's and merge's .shardpack-* records, .shardpack-lock;
//   - another of shardpack's own names: "manifest.json", "parts" (a partitioned
//     conversion's folder), "url" (the cache's record of a dataset's URL), and names
//     ending in ".tmp", ".partial" or ".bad" (files being written or set aside);
//   - for a shard's data file or index, "rejects.tsv" (the rejects list's name).
// And every file is listed once: two shards with one data file, an index that is another
// entry's data file or index, or rejects.tsv that is a shard's, are refused too.
struct FileEntry {
  std::string file;      // name relative to the dataset directory (rules above)
  uint64_t bytes = 0;    // exact file size
  std::string xxh3_128;  // XXH3-128 of the whole file, 32 hex digits (canonical order)
};

struct ShardEntry {
  FileEntry data;
  std::optional<FileEntry> index;  // TFRecord shards only
  uint64_t records = 0;
  uint64_t first_sample = 0;  // global index of the shard's first record
};

struct ClassEntry {
  // Any printable UTF-8 text (the converter escapes other bytes of a folder name, as
  // util/text.h's EscapeBytes does) of at most kMaxTextBytes (4096) bytes, what a record's
  // image/class/text holds; ParseManifest refuses a control character (NUL included) or a
  // longer name. At most kMaxClasses classes.
  std::string name;
  uint64_t count = 0;  // samples with this label
};

struct Manifest {
  int format_major = kFormatMajor;
  int format_minor = 0;      // writers set 2, or 3 for encoded images (docs/FORMAT.md §7)
  std::string tool_version;  // "shardpack 0.1.0"
  Backend backend = Backend::kTfrecord;
  uint64_t num_samples = 0;
  ImageSpec image;
  uint32_t pixel_alignment = 64;    // alignment of every image/raw (see ShardWriterOptions)
  std::vector<ClassEntry> classes;  // label i is classes[i]; labels are 0-based
  std::vector<ShardEntry> shards;
  uint64_t seed = 0;
  // The options the dataset was made with, as a JSON object text ("{}" when none).
  std::string options_json = "{}";
  // LMDB only; kCaffe is written as "lmdb_schema": "caffe" with image.layout "CHW".
  LmdbSchema lmdb_schema = LmdbSchema::kExample;
  // 1.2: rejects.tsv (the inputs the conversion rejected), when the writer made one.
  std::optional<FileEntry> rejects;
  // 1.2: "manifest_xxh3_128" as read from the file (SerializeManifest computes its own):
  // XXH3-128 of the manifest serialized without this key (docs/FORMAT.md §5). Empty when
  // absent.
  std::string manifest_xxh3_128;
};

// Serialized form: pretty-printed JSON with a stable key order, ending in a newline. From
// format 1.2 on it ends with "manifest_xxh3_128", the checksum of the rest.
std::string SerializeManifest(const Manifest& m);

// The manifest_xxh3_128 of `m`: XXH3-128 of SerializeManifest(m) without that key. verify
// compares it with the one read, so that an edit of any field (seed, options, format
// version, pixel alignment, class counts, ...) is a fault.
std::string ManifestChecksum(const Manifest& m);

// Parses and checks a manifest. `source` names the file in messages. A manifest of an
// unknown major version gives NotSupported: "version X.Y, this build reads <= Z".
// Corruption for anything else that is wrong, naming the field, among which:
//   - file names and class names outside the rules above, a file listed twice;
//   - a fixed image size of more than kMaxImagePixels pixels (the writer stores none), and
//     for raw pixels of one size, a shard whose bytes cannot hold its records' pixels
//     (records x height x width x channels > the file's bytes): a size no record has;
//   - counts that do not add up, more than kMaxClasses classes;
//   - JSON nested deeper than 100 levels, a top-level key given twice, more than 10,000
//     JSON values besides the entries of classes and shards (a writer's manifest has a
//     few dozen), more than 64 in one entry (a writer's has at most 10).
// Memory: the entries of classes and shards are read one at a time as the text is parsed,
// so what is held at once is the Manifest returned, one entry, at most 10,000 other values
// and the parser's buffers (the longest string; nlohmann's lexer also keeps the text of a
// run of brackets and commas for its messages): at most 6 bytes per byte of `text` plus
// 2 MiB. Measured (tests/format/parser_memory_test.cc, the shapes that cost most per byte):
// 5.45 for a list of the smallest classes, 5.12 for the smallest shard entries, 4.88 for
// one long string, 1.71 for a writer's manifest of 21,841 classes and 20,000 shards; a
// whole JSON tree took up to 30. The caller holds `text` besides; kMaxManifestBytes bounds
// it when read from a file.
StatusOr<Manifest> ParseManifest(std::string_view text, std::string_view source);

// Reads DIR/manifest.json.
StatusOr<Manifest> ReadManifest(const std::string& dir);

// The files a manifest lists, in its order: each shard's data file and index, then
// rejects.tsv. Pointers into `m`.
std::vector<const FileEntry*> ListedFiles(const Manifest& m);

}  // namespace shardpack

#endif  // SHARDPACK_MANIFEST_H_
