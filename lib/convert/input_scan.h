// Finding the inputs of a conversion: a folder of class folders (SRC/<class>/<image>, as
// Caltech-256 and ImageNet are laid out), or a list file of "path label" lines relative
// to a root (as Caffe's convert_imageset takes).
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

}  // namespace shardpack::convert

#endif  // SHARDPACK_CONVERT_INPUT_SCAN_H_
