#include "io/env.h"

namespace shardpack::io {

namespace {

// The length of the scheme when `path` begins with "SCHEME://" (RFC 3986: a letter, then
// letters, digits, '+', '-' or '.'); 0 otherwise.
size_t SchemeLength(std::string_view path) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (path.empty() || !alpha(path[0])) return 0;
  size_t i = 1;
  while (i < path.size() && (alpha(path[i]) || (path[i] >= '0' && path[i] <= '9') ||
                             path[i] == '+' || path[i] == '-' || path[i] == '.')) {
    ++i;
  }
  return path.substr(i).rfind("://", 0) == 0 ? i : 0;
}

// How to name a local path instead: the file:// URL's own path, or ./URL for a directory
// whose name looks like one.
std::string LocalHint(const std::string& path, const std::string& scheme) {
  if (scheme == "file") {
    return "(a local path is written without file://: " + path.substr(7) + ")";
  }
  return "(a local directory of this name: ./" + path + ")";
}

}  // namespace

Status CheckPathScheme(std::string_view path, PathKind kind) {
  const size_t n = SchemeLength(path);
  if (n == 0) return Status::Ok();
  std::string scheme(path.substr(0, n));
  for (char& c : scheme) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  const bool http = scheme == "http" || scheme == "https";
  const bool s3 = scheme == "s3";
  if ((http || s3) && kind == PathKind::kDataset) return Status::Ok();
  const std::string p(path);
  if (s3) {
    return InvalidArgumentError(p +
                                ": shardpack does not support the s3:// scheme here: this path "
                                "must be a local file or directory (datasets are read from "
                                "s3:// URLs, and convert writes its DST to one) " +
                                LocalHint(p, scheme));
  }
  if (http) {
    return InvalidArgumentError(
        p + ": a URL cannot be written or scanned here: give a local " +
        "directory (shardpack reads datasets from http://, https:// " +
        "and s3:// URLs, and writes local directories and, as convert's DST, " + "s3:// URLs)");
  }
  if (kind == PathKind::kDataset) {
    return InvalidArgumentError(p + ": shardpack does not support the " + scheme +
                                ":// scheme: a dataset is a local directory or an http:// or "
                                "https:// URL, or s3://bucket/prefix " +
                                LocalHint(p, scheme));
  }
  return InvalidArgumentError(p + ": shardpack does not support the " + scheme +
                              ":// scheme here: this path must be a local file or directory " +
                              LocalHint(p, scheme));
}

void WriteCoverage::Add(uint64_t offset, uint64_t n) {
  written_.fetch_add(n, std::memory_order_relaxed);
  uint64_t end = end_.load(std::memory_order_relaxed);
  while (end < offset + n &&
         !end_.compare_exchange_weak(end, offset + n, std::memory_order_relaxed)) {
  }
}

Status WriteCoverage::Whole(const std::string& path, std::string_view what) const {
  const uint64_t written = written_.load(std::memory_order_relaxed);
  const uint64_t end = end_.load(std::memory_order_relaxed);
  if (written > end) {
    return FailedPreconditionError(path + ": " + std::to_string(written - end) +
                                   " bytes written twice: " + std::string(what) +
                                   "'s writes must not overlap");
  }
  if (written < end) {
    return FailedPreconditionError(path + ": " + std::to_string(end - written) +
                                   " bytes missing before offset " + std::to_string(end) + ": " +
                                   std::string(what) + " is written from its start without gaps");
  }
  return Status::Ok();
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  std::string out(dir);
  if (out.back() != '/') out += '/';
  out += name;
  return out;
}

std::string_view BaseName(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::string DirName(std::string_view path) {
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

Status PublishFile(Env* env, const std::string& tmp_path, const std::string& final_path) {
  SHARDPACK_RETURN_IF_ERROR(env->RenameFile(tmp_path, final_path));
  return env->SyncDir(DirName(final_path));
}

Status WriteFileAtomically(Env* env, const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  auto file = env->NewWritableFile(tmp);
  if (!file.ok()) return file.status();
  Status s = (*file)->Append(data);
  if (s.ok()) s = (*file)->Sync();
  Status c = (*file)->Close();
  if (s.ok()) s = c;
  if (s.ok()) s = PublishFile(env, tmp, path);
  if (!s.ok()) env->RemoveFile(tmp).IgnoreError();  // best effort: the error is `s`
  return s;
}

}  // namespace shardpack::io
