// Convert: decode and resize a folder of JPEG/PNG images (class sub-folders, or a list
// file) or the records of TFRecord files (TensorFlow's image/encoded Examples, or
// image/raw ones) in parallel, once, into a dataset of pre-decoded pixels (TFRecord or
// LMDB shards and a manifest). Adopt makes TFRecord files that another tool wrote in
// shardpack's own Example schema into a dataset without rewriting them.
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

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardpack/limits.h"
#include "shardpack/manifest.h"
#include "shardpack/remote.h"
#include "shardpack/resize_filter.h"
#include "shardpack/shard_writer.h"
#include "shardpack/status.h"
#include "shardpack/verify.h"

namespace shardpack {

// Where the inputs come from.
enum class InputFormat {
  // A TFRecord source when SRC is a regular file, a glob pattern, a shardpack TFRecord
  // dataset (a directory holding manifest.json), or a directory without sub-directories
  // holding a file named like a TFRecord file (format::LooksLikeTfrecordName); class
  // folders otherwise. list_file, when set, always wins.
  kAuto,
  kFolders,   // SRC/<class>/<image>
  kTfrecord,  // the records of TFRecord files (convert/input_scan.h ScanTfrecordFiles)
};

struct ConvertProgress {
  uint64_t done = 0;   // inputs finished (written or rejected)
  uint64_t total = 0;  // inputs in all
  uint64_t rejected = 0;
  uint64_t bytes_in = 0;   // bytes of input files read
  uint64_t bytes_out = 0;  // image bytes written (pixels, or encoded files)
  double seconds = 0;      // since the conversion started
};

struct ConvertOptions {
  Backend backend = Backend::kTfrecord;
  // LMDB only: Example values (the default, what shardpack reads) or Caffe Datum values.
  LmdbSchema lmdb_schema = LmdbSchema::kExample;
  InputFormat input_format = InputFormat::kAuto;

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
  // How samples store their image (docs/FORMAT.md §2.5): the pixels (kRaw, the default),
  // or each resized image encoded as a JPEG (at `jpeg_quality` 1..100 with
  // `jpeg_subsampling` 444, 422 or 420 chroma; baseline, no EXIF) or a PNG (lossless, its
  // image data deflated at zlib level `png_compression`).
  // Encoding happens after the resize, in the parallel stage, with fixed settings, so the
  // output bytes still depend on the inputs and options only. With the Caffe schema: its
  // encoded Datums (docs/FORMAT.md §4.1).
  // kMixed (format 1.4, not with the Caffe schema): each image is encoded as the JPEG
  // above and stored so when that JPEG is at most mixed_max_ratio of its raw pixel bytes;
  // otherwise (encoding saves little: noise, tiny or flat-coded images) its raw pixels
  // are stored. The rule reads the image alone, so output still depends on nothing else.
  ImageEncoding encoding = ImageEncoding::kRaw;
  int jpeg_quality = 90;
  int jpeg_subsampling = 420;
  // kPng: zlib's level, 0 (stored) .. 9 (smallest). The default 6 is libpng's; 1 encodes
  // several times as fast for about a tenth more bytes (bench/encoded_bench.sh).
  int png_compression = 6;
  double mixed_max_ratio = 0.5;  // kMixed: in (0, 1]

  uint64_t max_shard_bytes = 64ull << 20;
  uint64_t max_shard_records = 0;  // 0: no limit
  // Where the shards are written by pwrite (write_method below), in aligned chunks of this
  // many bytes (0: record by record): ShardWriterOptions::write_chunk_bytes. The same
  // bytes. The default, 2 MiB, leaves the shards in the page cache in 2 MiB folios, and a
  // loader's first epoch from it runs about as fast as the later ones (docs/LOADER.md,
  // "The first epoch from the page cache"); so do mapped writes.
  uint64_t write_chunk_bytes = uint64_t{2} << 20;
  // How the TFRecord shards are written: ShardWriterOptions::write_method, here kAuto by
  // default. The same bytes.
  WriteMethod write_method = WriteMethod::kAuto;

  // Shuffle the write order with `seed` (recorded in the manifest). Off: class order.
  bool shuffle = false;
  uint64_t seed = 0;

  // Worker threads of this call, in a TBB task_arena of its own (nothing process-wide is
  // changed): 0..kMaxThreads (limits.h), else InvalidArgument. 0: all cores. TBB shares
  // one pool per process, at most the core count (or the application's
  // tbb::global_control limit): more threads than that add nothing.
  int num_threads = 0;

  bool apply_orientation = true;            // EXIF orientation (JPEG Exif, PNG eXIf)
  uint8_t background[3] = {255, 255, 255};  // alpha and --fit pad are filled with it

  // Limits on hostile input (../shared/reference/reliability.md section 3).
  uint64_t max_pixels = kMaxImagePixels;
  int max_scans = 500;
  uint64_t max_file_bytes = 1ull << 30;    // an input file, or a TFRecord input's payload
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

  // Partitioned conversion (docs/SCALE.md): this run is part `part_index` of `part_count`
  // runs of the same SRC and options, on any machines that share DST. The write order
  // (shuffled or not) is cut into part_count contiguous ranges of inputs (PartitionInputs);
  // the part converts its range into a complete dataset of its own,
  // PartDirectory(DST, part_index, part_count), and Merge(DST) joins the parts into one.
  // A failed part is re-run alone (resume and overwrite apply to its directory). Caffe-schema
  // LMDB output cannot be partitioned: its keys number samples across the whole dataset.
  // part_count 1: no partitioning (part_index must be 0).
  int part_index = 0;
  int part_count = 1;

  // DST s3://bucket/prefix (docs/REMOTE.md, "Writing to S3"): the conversion goes into
  // this local staging directory, then is uploaded, manifest.json last, and the staging
  // directory removed. Empty (the default): CACHE/staging/<32 hex digits of the URL's
  // XXH3-128> under the cache directory of `remote` (RemoteOptions::cache_dir). A failed
  // upload leaves it; the same call again goes on with it (the conversion resumes, or finds
  // it complete; files already uploaded are not sent again). Unused for a local DST.
  std::string staging;
  // Credentials come from the environment; this gives the cache directory (staging's
  // default), retries and multipart sizes of the upload.
  RemoteOptions remote;

  // Called from one thread after every input, in order (cheap: it may decide itself how
  // often to print).
  std::function<void(const ConvertProgress&)> progress;
};

struct ConvertReject {
  // Relative to SRC, escaped (util EscapeBytes) where not UTF-8; for a TFRecord input,
  // "<file>: record N at offset X".
  std::string path;
  std::string reason;
};

// Where a conversion's time went (`convert --stats`, `--json`). scan, plan, pipeline and
// publish are wall-clock seconds, one after another (plan: the output made ready; publish:
// rejects.tsv, the last shard's fsync and the manifest). read to write are seconds summed
// over the threads that spent them, inside the pipeline: read the input files, decode
// (orientation and colour conversion included; a TFRecord input's record read too),
// resize, encode (`encoding` jpeg, png or mixed), write (in order: checksums, framing,
// the file's hash and, when a shard fills, its fsync; on any thread: the record's write
// into its shard file). A pipeline of `threads` threads has threads x pipeline
// thread-seconds: what the stages did not use of them is idle (waiting for the in-order
// steps, or for work).
struct ConvertStageSeconds {
  double scan = 0, plan = 0, pipeline = 0, publish = 0;
  int threads = 0;
  double read = 0, decode = 0, resize = 0, encode = 0, write = 0;
  double busy() const { return read + decode + resize + encode + write; }
  double idle() const { return threads * pipeline - busy(); }

  // Each stage by name, in the order `convert --stats` prints them (idle derived);
  // `summed` marks the pipeline's thread-seconds against wall-clock seconds.
  struct Named {
    const char* name;
    double seconds;
    bool summed;
  };
  std::array<Named, 9> Listed() const {
    return {{{"scan", scan, false},
             {"plan", plan, false},
             {"read", read, true},
             {"decode", decode, true},
             {"resize", resize, true},
             {"encode", encode, true},
             {"write", write, true},
             {"idle", idle(), true},
             {"publish", publish, false}}};
  }
};

struct ConvertSummary {
  uint64_t inputs = 0;    // files considered (scan rejects included)
  uint64_t written = 0;   // samples in the dataset
  uint64_t rejected = 0;  // inputs = written + rejected
  uint64_t hidden_ignored = 0;
  uint64_t bytes_in = 0;  // bytes of input files read (this run)
  double seconds = 0;
  ConvertStageSeconds stages;
  // How this run wrote the TFRecord shards: "write" or "map" (write_method's auto
  // resolved); "" where it opened none (LMDB, or a resumed run with nothing left).
  std::string write_method;
  std::vector<ConvertReject> rejects;
  Manifest manifest;
  uint64_t resumed_from = 0;  // inputs already done by an interrupted run (resume)
  // resume found DST complete, made from the same inputs and options: nothing was done.
  // Never for an s3:// DST: a complete staging directory is still uploaded.
  bool already_complete = false;
  // For an s3:// DST: the staging directory used, and what its upload sent (objects and
  // bytes, manifest.json included; objects a failed run had sent are not counted again).
  std::string staging;
  uint64_t uploaded_files = 0;
  uint64_t uploaded_bytes = 0;
  // With overwrite: objects of the replaced dataset (listed by its manifest) that the new
  // one does not list, deleted once the new manifest is up.
  uint64_t deleted_objects = 0;
};

// Converts SRC into DST (created; must not hold a dataset). Errors: InvalidArgument for
// bad options or an input layout that cannot be converted; Corruption (naming the file)
// when `strict` and an input is rejected, or when rejects pass max_rejects; I/O errors.
// On error nothing is published: DST holds no manifest.
//
// DST may be s3://bucket/prefix: converted into `staging`, then uploaded (remote/
// s3_upload.h; the manifest last). AlreadyExists when the prefix holds a manifest.json
// and `overwrite` is off (with it, that manifest is deleted first, so that no reader
// takes the objects being replaced for a dataset, and the files it listed that the new
// dataset does not are deleted after the new manifest is up; the replaced manifest waits in
// the staging directory meanwhile, for a rerun after a failed upload); InvalidArgument
// with part_count > 1.
// An upload error names the s3:// object and S3's code, and says that the staging
// directory was kept for a rerun.
StatusOr<ConvertSummary> Convert(const std::string& src, const std::string& dst,
                                 const ConvertOptions& options);

// Partitioned conversion --------------------------------------------------------------

// Most parts a conversion may be cut into (part directories number them with 5 digits).
inline constexpr int kMaxParts = 99999;

// DST/parts/part-IIIII-of-NNNNN: where part `index` of `count` writes its dataset.
std::string PartDirectory(const std::string& dst, int index, int count);

// The inputs [begin, end) of the write order that part `index` of `count` converts, out
// of `inputs`: the even cut floor(index * inputs / count), rounded down to a multiple of
// `shard_records` when that is not 0 so that every part but the last ends on a shard
// boundary of the single-process conversion (Merge's result is then byte-identical to it
// when no input is rejected). Parts may be empty.
struct InputRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};
InputRange PartitionInputs(uint64_t inputs, int index, int count, uint64_t shard_records);

struct MergeOptions {
  // Verify every part in full (VerifyDataset) before anything moves. Off: only that every
  // file a part's manifest lists is there with its size (for parts verified where they
  // were made, as `convert --mpi` does).
  bool verify = true;
  int num_threads = 0;  // verify threads, 0..kMaxThreads; 0: all cores
  // Called once per fault as verify finds it; faults are also in the summary.
  std::function<void(const VerifyFault&)> on_fault;
};

struct MergeSummary {
  int parts = 0;
  uint64_t inputs = 0, written = 0, rejected = 0;
  bool already_merged = false;  // DST was merged before; nothing to do
  // Faults verify found, named "parts/part-.../<file>". With any fault nothing is merged.
  std::vector<VerifyFault> faults;
  Manifest manifest;  // as written, when there was no fault
  double seconds = 0;
  bool ok() const { return faults.empty(); }
};

// Joins the parts of a partitioned conversion, DST/parts/part-*, into one dataset in DST:
// checks that all part_count parts are there and complete, of the same inputs and options,
// with contiguous ranges (errors name each missing or mismatched part and say how to redo
// it); verifies them; then renames their shards into DST, numbered in part order
// (shard-NNNNN-of-MMMMM, indexes with them), joins their rejects.tsv in order and writes
// manifest.json last, atomically; then removes the part directories. Shard files are not
// rewritten: each part's last shard may hold fewer records than the single-process
// conversion's, so shard boundaries match it only when max_shard_records is set and no
// input is rejected; the samples, their order and bytes, the classes, the rejects and the
// options recorded always match it. An interrupted merge goes on where it stopped when run
// again (its plan is DST/.shardpack-merge.json); a merged DST is left as it is.
StatusOr<MergeSummary> Merge(const std::string& dst, const MergeOptions& options = {});

// Adopt: TFRecord files that another tool wrote (tf.io.TFRecordWriter) in shardpack's
// Example schema (docs/FORMAT.md §2.4: image/raw, image/height, image/width,
// image/channels, image/class/label and image/raw/crc32c) become a dataset where they
// are, unchanged: Adopt checks every record, then writes a DALI index per file
// (format::IndexNameFor: "train-00000-of-00004.idx") and manifest.json, last. Classes run
// from 0 to the largest label, named by their image/class/text (the number where there is
// none); the image spec is the fixed size every sample shares, or else the largest side
// seen; pixel_alignment is the largest power of two (up to 4096) that every pixel offset
// is a multiple of. Records without image/raw/crc32c, or with image/encoded, cannot be
// adopted: Convert re-packs those.
struct AdoptOptions {
  // Called once per fault as it is found; faults are also in the summary.
  std::function<void(const VerifyFault&)> on_fault;
};

struct AdoptSummary {
  std::string dir;  // the dataset directory: the one holding the files
  uint64_t files = 0, records = 0, bytes = 0;
  // Entries of SRC that were not adopted (sub-directories, special files): path, reason.
  std::vector<ConvertReject> skipped;
  // Faults found: a damaged record, a record outside the schema, a label whose class text
  // differs between records, mixed channel counts, a file without records, two files
  // whose index names collide. With any fault nothing is written.
  std::vector<VerifyFault> faults;
  Manifest manifest;  // as written, when there was no fault
  double seconds = 0;
  bool ok() const { return faults.empty(); }
};

// SRC as format::FindTfrecordFiles takes it (a file, a directory, a glob pattern); all its
// files must be in one directory. Errors (nothing written): NotFound for a SRC that does
// not exist, AlreadyExists when the directory holds manifest.json, InvalidArgument when
// the files are in several directories, I/O errors.
StatusOr<AdoptSummary> Adopt(const std::string& src, const AdoptOptions& options = {});

}  // namespace shardpack

#endif  // SHARDPACK_CONVERT_H_
