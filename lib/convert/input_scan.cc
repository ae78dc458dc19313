#include "convert/input_scan.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <map>
#include <set>
#include <utility>

#include "format/example.h"
#include "format/format.h"
#include "format/record.h"
#include "format/tfrecord_files.h"
#include "image/image.h"
#include "io/env.h"
#include "shardpack/limits.h"
#include "shardpack/manifest.h"
#include "util/location.h"
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
        label >= static_cast<int64_t>(kMaxClasses)) {
      return bad("label \"" + EscapeBytes(label_text.substr(0, 40)) +
                 (label_text.size() > 40 ? "..." : "") + "\" is not an integer in 0.." +
                 std::to_string(kMaxClasses - 1) +
                 " (every label up to the largest becomes a class of the manifest)");
    }
    max_label = std::max(max_label, label);
    set.files.push_back({io::JoinPath(root, rel), std::string(rel), label});
  }
  if (set.files.empty()) return InvalidArgumentError(list_path + ": no entries");
  for (int64_t l = 0; l <= max_label; ++l) set.classes.push_back(std::to_string(l));
  return set;
}

namespace {

std::string RecordName(const std::string& file, uint64_t record, uint64_t offset) {
  return RecordLocation{file, static_cast<int64_t>(record), static_cast<int64_t>(offset)}
      .ToString();
}

// The class text each label was first seen with, and where.
struct ClassSeen {
  bool has_text = false;
  std::string text;
  std::string where;
};

// Scans one file's records into `set`.
void ScanTfrecordFile(const format::TfrecordFile& file, uint64_t max_record_bytes,
                      std::map<int64_t, ClassSeen>* classes, InputSet* set) {
  auto mapped = io::Env::Posix()->MapFile(file.path, io::AccessPattern::kSequential);
  if (!mapped.ok()) {
    set->rejects.push_back({file.name, mapped.status().ToString()});
    return;
  }
  const uint8_t* data = (*mapped)->data();
  const uint64_t size = (*mapped)->size();
  if (size == 0) {
    set->rejects.push_back({file.name, "empty file (0 bytes): no records"});
    return;
  }
  format::RecordScanner scanner(
      data, size, {.max_length = max_record_bytes, .check_payload_crc = true},
      [&](uint64_t record, uint64_t offset, const std::string& message) {
        std::string reason = "Corruption: " + message;
        // A picture where a TFRecord file was expected: say so rather than quote framing.
        if (offset == 0 && image::Sniff(data, size) != image::Format::kUnknown) {
          reason += " (the file is a JPEG or PNG image, not a TFRecord file)";
        }
        set->rejects.push_back({RecordName(file.name, record, offset), std::move(reason)});
      });
  format::RecordView r;
  while (scanner.Next(&r)) {
    const std::string where = RecordName(file.name, r.index, r.offset);
    format::ExampleView view;
    Status s = format::ParseExampleView(r.payload, r.length, &view);
    if (s.ok()) s = format::ClassifyExample(view).status();
    if (s.ok() && (view.label.kind != format::FeatureRef::Kind::kInt64 || view.label.count != 1)) {
      s = CorruptionError("feature image/class/label: expected one int64 value");
    }
    if (s.ok() && (view.label.int64 < 0 || view.label.int64 > kMaxLabel)) {
      s = CorruptionError("feature image/class/label: " + std::to_string(view.label.int64) +
                          " is outside 0.." + std::to_string(kMaxLabel));
    }
    const format::FeatureRef& text = view.class_text;
    if (s.ok() && text.kind != format::FeatureRef::Kind::kAbsent &&
        (text.kind != format::FeatureRef::Kind::kBytes || text.count != 1)) {
      s = CorruptionError("feature image/class/text: expected one bytes value");
    }
    if (s.ok()) {
      const auto label = static_cast<size_t>(view.label.int64);
      ClassSeen& seen = (*classes)[view.label.int64];
      if (text.kind == format::FeatureRef::Kind::kBytes) {
        if (!seen.has_text) {
          seen = {true, std::string(text.bytes), where};
        } else if (seen.text != text.bytes) {
          s = CorruptionError("feature image/class/text: \"" + EscapeBytes(text.bytes) +
                              "\", but label " + std::to_string(label) + " is \"" +
                              EscapeBytes(seen.text) + "\" (" + EscapeBytes(seen.where) + ")");
        }
      }
    }
    if (!s.ok()) {
      set->rejects.push_back({where, s.ToString()});
      continue;
    }
    InputFile in;
    in.path = file.path;
    in.relative = where;
    in.label = view.label.int64;
    in.record = static_cast<int64_t>(r.index);
    in.offset = r.offset;
    in.framed_size = r.framed_size();
    set->files.push_back(std::move(in));
  }
}

}  // namespace

StatusOr<InputSet> ScanTfrecordFiles(const std::string& src, uint64_t max_record_bytes) {
  auto found = format::FindTfrecordFiles(src);
  if (!found.ok()) return found.status();
  InputSet set;
  set.hidden_ignored = found->hidden_ignored;
  for (auto& [name, reason] : found->rejects) set.rejects.push_back({name, reason});
  std::map<int64_t, ClassSeen> classes;  // only labels seen: a label may be large
  if (found->from_manifest) {
    // A shardpack dataset names its classes, empty ones included.
    auto m = ReadManifest(src);
    if (!m.ok()) return m.status();
    for (size_t i = 0; i < m->classes.size(); ++i) {
      classes[static_cast<int64_t>(i)] = {true, m->classes[i].name, "manifest.json"};
    }
  }
  for (const format::TfrecordFile& f : found->files) {
    ScanTfrecordFile(f, max_record_bytes, &classes, &set);
  }
  if (set.files.empty()) {
    std::string first = set.rejects.empty()
                            ? ""
                            : "; first: " + EscapeBytes(set.rejects.front().relative) + ": " +
                                  set.rejects.front().reason;
    return InvalidArgumentError(src + ": no usable TFRecord record (" +
                                std::to_string(set.rejects.size()) + " rejected" + first + ")");
  }
  const int64_t max_label = classes.rbegin()->first;
  for (int64_t label = 0; label <= max_label; ++label) {
    auto it = classes.find(label);
    set.classes.push_back(it != classes.end() && it->second.has_text ? EscapeBytes(it->second.text)
                                                                     : std::to_string(label));
  }
  return set;
}

}  // namespace shardpack::convert
