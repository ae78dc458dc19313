#include "io/env.h"

namespace shardpack::io {

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
