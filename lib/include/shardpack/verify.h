// verify: proves a dataset intact or names each fault by file, record and byte offset.
//
// Checks: the manifest parses and its version is supported; every listed file exists and
// its size and XXH3-128 match; no unlisted shard files (or leftover temporaries); every
// record's length and data checksums; every payload parses as a tf.train.Example with the
// required features, len(image/raw) == H*W*C, the pixel checksum, the shape contract of
// the manifest; labels within the class list and class text matching; LMDB keys in
// sequence; index lines matching a scan of the shard; record counts adding up to the
// manifest. It reports every fault and does not stop at the first.
//
// An LMDB file is read in this process whatever its checksum (which whoever made the
// dataset computed): its pages are checked before they are followed (format/lmdb_file.h),
// and the tree is audited (keys in order, no page reached twice, the meta page's counts).
#ifndef SHARDPACK_VERIFY_H_
#define SHARDPACK_VERIFY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shardpack/remote.h"
#include "shardpack/status.h"

namespace shardpack {

struct VerifyFault {
  std::string file;     // relative to the dataset directory
  int64_t record = -1;  // ordinal within the file, -1 when the fault is about the file
  int64_t offset = -1;  // byte offset in the file, -1 when unknown or not applicable
  std::string message;  // what is wrong, with expected versus actual
};

// "<file>: record N at offset X: <message>", omitting the parts that are -1.
std::string FormatFault(const VerifyFault& f);

struct VerifyOptions {
  // Threads checking shards in parallel, 0..kMaxThreads (limits.h), else InvalidArgument;
  // 0: all cores.
  int num_threads = 0;
  // Called once per fault as it is found, from any thread, never concurrently.
  std::function<void(const VerifyFault&)> on_fault;
  // Faults kept per file before the rest are summarised in one line (the counts stay
  // exact). Default 1000.
  uint64_t max_faults_per_file = 1000;
  // VerifyTfrecordFiles: decode every image/encoded image (see there). Off: framing,
  // checksums and the Example schema only.
  bool decode_images = true;
  // VerifyDataset of encoded images (manifest image.encoding jpeg or png): also decode
  // every image and check it is the size its record declares (CLI --decode). Off: the
  // checksums of the encoded bytes prove them what the writer wrote.
  bool decode_encoded = false;
  // With decode_encoded, the memory the decoding threads may hold: each holds up to three
  // times the largest image the manifest allows, and the threads are lowered to fit (one
  // that does not fit is ResourceExhausted). 0 (default): io::MemoryBudget, 7/8 of what
  // this process may hold (MemAvailable, lowered to its cgroups' limits).
  uint64_t max_memory_bytes = 0;
  // VerifyDataset of an http(s):// URL: the local cache and the network policy.
  RemoteOptions remote;
};

struct VerifyReport {
  uint64_t files = 0;    // files checked (shards, indexes, manifest)
  uint64_t records = 0;  // records checked
  uint64_t bytes = 0;    // bytes read
  double seconds = 0;
  uint64_t fault_count = 0;         // every fault found
  std::vector<VerifyFault> faults;  // in file order, then offset order
  bool ok() const { return fault_count == 0; }
};

// Verifies the dataset in `dir`. A non-OK Status means the dataset could not be read at
// all (no manifest, unreadable or unsupported manifest); faults inside a readable dataset
// are in the report.
//
// `dir` may be an http(s):// URL (shardpack/remote.h): every file is downloaded again
// (what the server holds now is what is proved, whatever the cache holds) into the cache
// of options.remote, then verified there in full. A file that fails its checksum on
// download is verified from a copy kept aside (and removed afterwards), so its damaged
// records are named; a file the server does not have, or has at another size, is a fault
// of that file. Fault file names stay relative to the URL; there is no check for unlisted
// files (HTTP has no directory listing). Network failures after the retries, and a cache
// too small for the dataset, are a non-OK Status.
StatusOr<VerifyReport> VerifyDataset(const std::string& dir, const VerifyOptions& options = {});

// Verifies TFRecord files without a manifest: a data set written by TensorFlow
// (build_image_data.py, tf.io.TFRecordWriter) or any TFRecord files, named as
// FindTfrecordFiles takes them (a file, a directory, a glob pattern; a shardpack dataset's
// shards). Per record: the framing and both checksums (resynchronising after a damaged
// header, as VerifyDataset does), then the payload is a tf.train.Example with either
//   - image/raw: shardpack's schema, as far as it goes without a manifest (FORMAT.md
//     §2.4: features, len(image/raw) == H*W*C, image/raw/crc32c where present); or
//   - image/encoded: TensorFlow's schema (FORMAT.md §9): one non-empty encoded value, one
//     image/class/label, and image/height, image/width, image/channels, image/format,
//     image/colorspace, image/class/text, image/filename well-formed where present;
//     image/format, if present, names what the bytes are (JPEG or PNG, by their magic
//     bytes). With options.decode_images every image is decoded as stored (no EXIF
//     orientation): a JPEG at 1/8 scale (libjpeg's DCT scaling still reads all its
//     entropy-coded data, so truncation and corrupt data are found without the full-size
//     inverse DCT and colour conversion), and its size compared with image/height and
//     image/width as they scale (ceil(side / 8)); a PNG at full size, compared exactly.
// Files are checked in parallel (options.num_threads). Entries that are not files (a
// sub-directory) are faults of "(directory)". Errors as FindTfrecordFiles.
StatusOr<VerifyReport> VerifyTfrecordFiles(const std::string& src,
                                           const VerifyOptions& options = {});

}  // namespace shardpack

#endif  // SHARDPACK_VERIFY_H_
