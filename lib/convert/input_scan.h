// Finding the inputs of a conversion: a folder of class folders (SRC/<class>/<image>, as
// Caltech-256 and ImageNet are laid out), a list file of "path label" lines relative
// to a root (as Caffe's convert_imageset takes), or the records of TFRecord files
// (TensorFlow's build_image_data.py output, or a shardpack dataset).
#ifndef SHARDPACK_CONVERT_INPUT_SCAN_H_
#define SHARDPACK_CONVERT_INPUT_SCAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shardpack/status.h"

namespace shardpack::convert {

struct InputFile {
  std::string path;      // to open: SRC joined with `relative`
  std::string relative;  // relative to SRC, raw bytes; stored as image/filename
  int64_t label = 0;
  // A TFRecord input is one record of the file at `path`: its ordinal, the offset of its
  // length field and its framed size. `relative` is then "<file>: record N at offset X"
  // (the record's own image/filename is stored). record < 0: an image file.
  int64_t record = -1;
  uint64_t offset = 0;
  uint64_t framed_size = 0;
};

// An entry found while scanning that is not an input: why it cannot be converted.
struct ScanReject {
  std::string relative;
  std::string reason;
};

struct InputSet {
  std::vector<std::string> classes;  // label i is classes[i] (escaped for display)
  std::vector<InputFile> files;      // folders: by label, then relative path; lists: as listed
  std::vector<ScanReject> rejects;   // unreadable directories, symlink loops, strays
  uint64_t hidden_ignored = 0;       // entries whose name starts with '.'
};

// Class folders: every sub-directory of `src` (sorted bytewise) is a class, its index the
// label; every regular file below it, at any depth, is an input, whatever its name or
// extension (the converter decides the format by content). Symlinks are followed; a
// directory reached twice (a loop, or two links to one folder) is scanned once and
// reported. Hidden entries are ignored and counted; files directly in `src` are rejects.
// Errors: NotFound / IOError when `src` itself cannot be read, InvalidArgument when it
// has no class folder.
StatusOr<InputSet> ScanClassFolders(const std::string& src);

// A list file: one "relative/path label" per line, split at the last run of spaces or
// tabs; the label is a non-negative integer. Blank lines and lines starting with '#' are
// skipped. Classes are named by their label number ("0", "1", ...), up to the largest
// label. InvalidArgument names the line of a malformed entry.
StatusOr<InputSet> ReadListFile(const std::string& list_path, const std::string& root);

// TFRecord files (format::FindTfrecordFiles: a file, a directory, a shardpack dataset or
// a glob pattern). Every record whose framing and checksums are intact and whose payload
// is a tf.train.Example with image/encoded (a JPEG or PNG file, as build_image_data.py
// writes it) or image/raw (pixels, shardpack's schema) and one image/class/label in
// 0..10000000 is an input, in file order, then record order. Labels are kept as stored
// (build_image_data.py's are 1-based: class 0 is then empty); classes run from 0 to the
// largest label and are named by the image/class/text of their first record (the number
// where there is none). Rejects, named "<file>: record N at offset X": damaged framing
// (the scan resynchronises as verify does), a payload that is not such an Example, a
// class text that contradicts an earlier record of the same label, and files that are
// not TFRecord files at all. `max_record_bytes` bounds a record's length. Errors:
// NotFound / InvalidArgument from FindTfrecordFiles, InvalidArgument when no record is
// usable (the message names the first reject).
StatusOr<InputSet> ScanTfrecordFiles(const std::string& src, uint64_t max_record_bytes);

}  // namespace shardpack::convert

#endif  // SHARDPACK_CONVERT_INPUT_SCAN_H_
