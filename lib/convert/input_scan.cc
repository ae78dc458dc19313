#include "convert/input_scan.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <set>
#include <utility>

#include "io/env.h"
#include "util/text.h"

namespace shardpack::convert {
namespace {

using DirId = std::pair<dev_t, ino_t>;

// Lists a directory's entries (names), sorted bytewise so that the order of inputs, and
// so the output bytes, never depend on the file system.
Status ListSorted(const std::string& dir, std::vector<std::string>* names) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ErrnoError(dir + ": open directory", errno);
  names->clear();
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names->emplace_back(n);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoError(dir + ": read directory", err);
  std::sort(names->begin(), names->end());
  return Status::Ok();
}

class Scanner {
 public:
  explicit Scanner(InputSet* out) : out_(out) {}

  // Walks `dir` (whose path relative to SRC is `rel`), adding files with `label`.
  void Walk(const std::string& dir, const std::string& rel, int64_t label) {
    std::vector<std::string> names;
    Status s = ListSorted(dir, &names);
    if (!s.ok()) {
      out_->rejects.push_back({rel, s.message()});
      return;
    }
    for (const std::string& name : names) {
      if (name[0] == '.') {
        ++out_->hidden_ignored;
        continue;
      }
      const std::string path = io::JoinPath(dir, name);
      const std::string child = rel + "/" + name;
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) {  // follows symlinks
        out_->rejects.push_back({child, ErrnoError("stat", errno).message() +
                                            (errno == ENOENT ? " (a dangling symlink?)" : "")});
        continue;
      }
      if (S_ISDIR(st.st_mode)) {
        if (!visited_.insert({st.st_dev, st.st_ino}).second) {
          out_->rejects.push_back(
              {child,
               "directory already scanned through another path (a symlink loop or a "
               "second link to it); its files are counted once"});
          continue;
        }
        Walk(path, child, label);
      } else if (S_ISREG(st.st_mode)) {
        out_->files.push_back({path, child, label});
      } else {
        out_->rejects.push_back({child, "not a regular file or directory"});
      }
    }
  }

  bool MarkVisited(const struct stat& st) { return visited_.insert({st.st_dev, st.st_ino}).second; }

 private:
  InputSet* out_;
  std::set<DirId> visited_;
};

}  // namespace

StatusOr<InputSet> ScanClassFolders(const std::string& src) {
  struct stat root {};
  if (::stat(src.c_str(), &root) != 0) return ErrnoError(src, errno);
  if (!S_ISDIR(root.st_mode)) return InvalidArgumentError(src + ": not a directory");
  std::vector<std::string> names;
  SHARDPACK_RETURN_IF_ERROR(ListSorted(src, &names));
  InputSet set;
  Scanner scanner(&set);
  scanner.MarkVisited(root);
  std::vector<std::pair<std::string, std::string>> class_dirs;  // (name, path)
  for (const std::string& name : names) {
    if (name[0] == '.') {
      ++set.hidden_ignored;
      continue;
    }
    const std::string path = io::JoinPath(src, name);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      set.rejects.push_back({name, ErrnoError("stat", errno).message()});
    } else if (S_ISDIR(st.st_mode)) {
      if (scanner.MarkVisited(st)) {
        class_dirs.emplace_back(name, path);
      } else {
        set.rejects.push_back({name, "class folder is a second link to another class folder"});
      }
    } else {
      set.rejects.push_back({name, "not inside a class folder"});
    }
  }
  if (class_dirs.empty()) {
    return InvalidArgumentError(src + ": no class folders (expected SRC/<class>/<image>)");
  }
  for (size_t label = 0; label < class_dirs.size(); ++label) {
    set.classes.push_back(EscapeBytes(class_dirs[label].first));
    scanner.Walk(class_dirs[label].second, class_dirs[label].first, static_cast<int64_t>(label));
  }
  return set;
}

StatusOr<InputSet> ReadListFile(const std::string& list_path, const std::string& root) {
  auto text = io::Env::Posix()->ReadFile(list_path, 1ull << 30);
  if (!text.ok()) return text.status();
  InputSet set;
  int64_t max_label = -1;
  size_t pos = 0;
  uint64_t line_no = 0;
  while (pos < text->size()) {
    ++line_no;
    size_t eol = text->find('\n', pos);
    if (eol == std::string::npos) eol = text->size();
    std::string_view line(text->data() + pos, eol - pos);
    pos = eol + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    if (line.empty() || line[0] == '#') continue;
    auto bad = [&](const std::string& what) {
      return InvalidArgumentError(list_path + ": line " + std::to_string(line_no) + ": " + what);
    };
    size_t sep = line.find_last_of(" \t");
    if (sep == std::string_view::npos) return bad("expected \"path label\"");
    std::string_view label_text = line.substr(sep + 1);
    std::string_view rel = line.substr(0, sep);
    while (!rel.empty() && (rel.back() == ' ' || rel.back() == '\t')) rel.remove_suffix(1);
    if (rel.empty()) return bad("expected \"path label\"");
    int64_t label = -1;
    auto r = std::from_chars(label_text.data(), label_text.data() + label_text.size(), label);
    if (r.ec != std::errc() || r.ptr != label_text.data() + label_text.size() || label < 0 ||
        label > 10000000) {
      return bad("label \"" + EscapeBytes(label_text) + "\" is not an integer in 0..10000000");
    }
    max_label = std::max(max_label, label);
    set.files.push_back({io::JoinPath(root, rel), std::string(rel), label});
  }
  if (set.files.empty()) return InvalidArgumentError(list_path + ": no entries");
  for (int64_t l = 0; l <= max_label; ++l) set.classes.push_back(std::to_string(l));
  return set;
}

}  // namespace shardpack::convert
