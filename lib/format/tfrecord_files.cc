#include "format/tfrecord_files.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "format/format.h"
#include "io/env.h"
#include "shardpack/manifest.h"

namespace shardpack::format {
namespace {

constexpr std::string_view kDataSuffixes[] = {".tfrecords", ".tfrecord", ".tfr"};

// Adds `path` as a file to read, or as a reject when it is not a regular file.
void AddEntry(const std::string& path, std::string name, TfrecordFileSet* set) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    set->rejects.emplace_back(name, ErrnoError("stat", errno).message());
  } else if (S_ISDIR(st.st_mode)) {
    set->rejects.emplace_back(name, "a directory, not a TFRecord file (not read)");
  } else if (!S_ISREG(st.st_mode)) {
    set->rejects.emplace_back(name, "not a regular file (not read)");
  } else {
    set->files.push_back({path, std::move(name)});
  }
}

StatusOr<TfrecordFileSet> FromManifest(const std::string& dir) {
  auto m = ReadManifest(dir);
  if (!m.ok()) return m.status();
  if (m->backend != Backend::kTfrecord) {
    return InvalidArgumentError(dir + ": a shardpack dataset of " +
                                std::string(BackendName(m->backend)) +
                                " shards; only TFRecord files can be read here");
  }
  TfrecordFileSet set;
  set.dir = dir;
  set.from_manifest = true;
  for (const ShardEntry& e : m->shards) {
    set.files.push_back({io::JoinPath(dir, e.data.file), e.data.file});
  }
  return set;
}

StatusOr<TfrecordFileSet> FromDirectory(const std::string& dir) {
  auto names = io::Env::Posix()->ListDir(dir);
  if (!names.ok()) return names.status();
  TfrecordFileSet set;
  set.dir = dir;
  for (const std::string& n : *names) {  // ListDir sorts bytewise
    if (n[0] == '.') {
      ++set.hidden_ignored;
    } else if (!std::string_view(n).ends_with(".idx") && n != "rejects.tsv") {
      AddEntry(io::JoinPath(dir, n), n, &set);
    }
  }
  if (set.files.empty()) {
    return InvalidArgumentError(dir + ": no files to read (expected TFRecord files)");
  }
  return set;
}

StatusOr<TfrecordFileSet> FromPattern(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
  if (rc == GLOB_NOMATCH) {
    ::globfree(&g);
    return NotFoundError(pattern + ": no file matches");
  }
  if (rc != 0) {
    ::globfree(&g);
    return IOError(pattern + ": " + (rc == GLOB_NOSPACE ? "out of memory" : "read error") +
                   " while matching the pattern");
  }
  std::vector<std::string> paths(g.gl_pathv, g.gl_pathv + g.gl_pathc);
  ::globfree(&g);
  std::sort(paths.begin(), paths.end());
  TfrecordFileSet set;
  set.dir = io::DirName(pattern);
  for (const std::string& p : paths) AddEntry(p, p, &set);
  if (set.files.empty()) return InvalidArgumentError(pattern + ": matches no regular file");
  return set;
}

}  // namespace

StatusOr<TfrecordFileSet> FindTfrecordFiles(const std::string& src) {
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(src, io::PathKind::kLocal));
  struct stat st {};
  if (::stat(src.c_str(), &st) == 0) {
    if (S_ISREG(st.st_mode)) {
      TfrecordFileSet set;
      set.dir = io::DirName(src);
      set.files.push_back({src, std::string(io::BaseName(src))});
      return set;
    }
    if (S_ISDIR(st.st_mode)) {
      if (io::Env::Posix()->FileExists(io::JoinPath(src, kManifestName))) {
        return FromManifest(src);
      }
      return FromDirectory(src);
    }
    return InvalidArgumentError(src + ": not a file or directory");
  }
  const int err = errno;
  if (src.find_first_of("*?[") != std::string::npos) return FromPattern(src);
  return ErrnoError(src, err);
}

bool LooksLikeTfrecordName(std::string_view name) {
  for (std::string_view suffix : kDataSuffixes) {
    if (std::string_view(name).ends_with(suffix) && name.size() > suffix.size()) return true;
  }
  // "-NNNNN-of-NNNNN": digits, "-of-", digits at the end.
  size_t of = name.rfind("-of-");
  if (of == std::string_view::npos || of == 0) return false;
  std::string_view total = name.substr(of + 4);
  size_t dash = name.rfind('-', of - 1);
  if (dash == std::string_view::npos) return false;
  std::string_view number = name.substr(dash + 1, of - dash - 1);
  auto digits = [](std::string_view s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
  };
  return digits(number) && digits(total);
}

std::string IndexNameFor(std::string_view data_name) {
  for (std::string_view suffix : kDataSuffixes) {
    if (std::string_view(data_name).ends_with(suffix) && data_name.size() > suffix.size()) {
      return std::string(data_name.substr(0, data_name.size() - suffix.size())) + ".idx";
    }
  }
  return std::string(data_name) + ".idx";
}

}  // namespace shardpack::format
