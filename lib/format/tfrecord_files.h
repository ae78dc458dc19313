// Finding the TFRecord files of a data set written by another tool (TensorFlow's
// TFRecordWriter, build_image_data.py) or by shardpack: what `convert` reads from a
// TFRecord SRC, what `verify --tfrecord` checks and what `adopt` indexes
// (docs/CLI.md, docs/FORMAT.md §9).
#ifndef SHARDPACK_FORMAT_TFRECORD_FILES_H_
#define SHARDPACK_FORMAT_TFRECORD_FILES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/status.h"

namespace shardpack::format {

struct TfrecordFile {
  std::string path;  // to open
  std::string name;  // for messages and rejects: relative to the directory, or as matched
};

struct TfrecordFileSet {
  std::string dir;                  // the directory holding the files ("." for a bare name)
  std::vector<TfrecordFile> files;  // in reading order
  // Entries that are not files to read (a sub-directory, a special file): name (raw
  // bytes), reason.
  std::vector<std::pair<std::string, std::string>> rejects;
  uint64_t hidden_ignored = 0;  // names starting with '.'
  bool from_manifest = false;   // the shard list of a shardpack dataset's manifest
};

// What `src` names, in this order:
//   - a regular file: that one file;
//   - a directory holding manifest.json: the shards of that shardpack dataset, in
//     manifest order (InvalidArgument for an LMDB dataset);
//   - a directory: every regular file in it except hidden ones, DALI index sidecars
//     (*.idx), manifest.json and rejects.tsv, bytewise sorted; sub-directories and
//     special files are rejects (listed, not read);
//   - otherwise, when it holds * ? or [: a glob(3) pattern, its matches bytewise sorted
//     (no hidden or .idx exclusion: the pattern says what it wants).
// NotFound when `src` does not exist or a pattern matches nothing; InvalidArgument when a
// directory holds no file to read.
StatusOr<TfrecordFileSet> FindTfrecordFiles(const std::string& src);

// True for names TensorFlow's tools give TFRecord files: "*.tfrecord", "*.tfrecords",
// "*.tfr", or a "-NNNNN-of-NNNNN" shard suffix ("train-00000-of-01024").
bool LooksLikeTfrecordName(std::string_view name);

// The DALI index name for a data file: a .tfrecord/.tfrecords/.tfr suffix replaced by
// ".idx", or ".idx" appended ("train-00000-of-01024.idx").
std::string IndexNameFor(std::string_view data_name);

}  // namespace shardpack::format

#endif  // SHARDPACK_FORMAT_TFRECORD_FILES_H_
