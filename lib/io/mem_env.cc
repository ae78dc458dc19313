#include "io/mem_env.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace shardpack::io {

class MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(MemEnv* env, std::string path, std::shared_ptr<std::string> data)
      : env_(env), path_(std::move(path)), data_(std::move(data)) {}

  Status Append(std::string_view d) override {
    if (closed_) return FailedPreconditionError(path_ + ": append after close");
    SHARDPACK_RETURN_IF_ERROR(env_->Tick(FaultOp::kAppend, path_ + ": write"));
    std::lock_guard<std::mutex> l(env_->mu_);
    data_->append(d);
    return Status::Ok();
  }
  // Counts as an append (FaultOp::kAppend); a failed one writes nothing.
  Status WriteAt(uint64_t offset, std::span<const std::string_view> pieces) override {
    if (closed_) return FailedPreconditionError(path_ + ": write after close");
    SHARDPACK_RETURN_IF_ERROR(
        env_->Tick(FaultOp::kAppend, path_ + ": write at offset " + std::to_string(offset)));
    std::lock_guard<std::mutex> l(env_->mu_);
    for (std::string_view p : pieces) {
      if (p.empty()) continue;
      if (data_->size() < offset + p.size()) data_->resize(offset + p.size());
      std::memcpy(data_->data() + offset, p.data(), p.size());
      offset += p.size();
    }
    return Status::Ok();
  }
  Status Sync() override { return env_->Tick(FaultOp::kSync, path_ + ": fsync"); }
  Status Close() override {
    if (closed_) return Status::Ok();
    closed_ = true;
    return env_->Tick(FaultOp::kClose, path_ + ": close");
  }
  uint64_t Size() const override {
    std::lock_guard<std::mutex> l(env_->mu_);
    return data_->size();
  }

 private:
  MemEnv* env_;
  std::string path_;
  std::shared_ptr<std::string> data_;
  bool closed_ = false;
};

class MemRandomAccessFile final : public RandomAccessFile {
 public:
  MemRandomAccessFile(MemEnv* env, std::string path) : env_(env), path_(std::move(path)) {}

  StatusOr<size_t> Read(uint64_t offset, size_t n, uint8_t* dst) const override {
    const std::string what =
        path_ + ": read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset);
    SHARDPACK_RETURN_IF_ERROR(env_->Tick(FaultOp::kRead, what));
    std::lock_guard<std::mutex> l(env_->mu_);
    auto it = env_->files_.find(path_);
    if (it == env_->files_.end()) return ErrnoError(what, ENOENT);
    const std::string& data = *it->second;
    if (offset >= data.size()) return size_t{0};
    const size_t k = std::min<uint64_t>(n, data.size() - offset);
    std::memcpy(dst, data.data() + offset, k);
    return k;
  }

 private:
  MemEnv* env_;
  std::string path_;
};

namespace {
class MemMappedFile final : public MappedFile {
 public:
  explicit MemMappedFile(std::shared_ptr<const std::string> data) : data_(std::move(data)) {}
  const uint8_t* data() const override { return reinterpret_cast<const uint8_t*>(data_->data()); }
  uint64_t size() const override { return data_->size(); }

 private:
  std::shared_ptr<const std::string> data_;
};

Status Missing(const std::string& path) { return ErrnoError(path, ENOENT); }
}  // namespace

void MemEnv::InjectFault(FaultOp op, int nth, int err) {
  std::lock_guard<std::mutex> l(mu_);
  faults_[op] = {counts_[op] + nth, err};
}

int MemEnv::Count(FaultOp op) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

Status MemEnv::Tick(FaultOp op, const std::string& what) {
  std::lock_guard<std::mutex> l(mu_);
  int n = ++counts_[op];
  auto it = faults_.find(op);
  if (it != faults_.end() && it->second.first == n) {
    int err = it->second.second;
    faults_.erase(it);
    return ErrnoError(what, err);
  }
  return Status::Ok();
}

void MemEnv::SetFileContents(const std::string& path, std::string data) {
  std::lock_guard<std::mutex> l(mu_);
  files_[path] = std::make_shared<std::string>(std::move(data));
}

std::string MemEnv::FileContents(const std::string& path) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  return it == files_.end() ? std::string() : *it->second;
}

StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewWritableFile(const std::string& path) {
  auto data = std::make_shared<std::string>();
  {
    std::lock_guard<std::mutex> l(mu_);
    files_[path] = data;
  }
  return std::unique_ptr<WritableFile>(new MemWritableFile(this, path, data));
}

StatusOr<std::unique_ptr<MappedFile>> MemEnv::MapFile(const std::string& path, AccessPattern,
                                                      MapMode) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Missing(path + ": open");
  // A snapshot: later writes to the file do not move bytes under the reader.
  return std::unique_ptr<MappedFile>(
      new MemMappedFile(std::make_shared<const std::string>(*it->second)));
}

StatusOr<std::unique_ptr<RandomAccessFile>> MemEnv::OpenRandomAccess(const std::string& path,
                                                                     bool) {
  std::lock_guard<std::mutex> l(mu_);
  if (files_.find(path) == files_.end()) return Missing(path + ": open");
  return std::unique_ptr<RandomAccessFile>(new MemRandomAccessFile(this, path));
}

StatusOr<std::string> MemEnv::ReadFile(const std::string& path, uint64_t max_bytes) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Missing(path + ": open");
  if (it->second->size() > max_bytes) {
    return ResourceExhaustedError(path + ": larger than the " + std::to_string(max_bytes) +
                                  "-byte limit for this kind of file");
  }
  return *it->second;
}

Status MemEnv::RenameFile(const std::string& from, const std::string& to) {
  SHARDPACK_RETURN_IF_ERROR(Tick(FaultOp::kRename, "rename " + from + " to " + to));
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return Missing("rename " + from);
  files_[to] = it->second;
  files_.erase(from);
  return Status::Ok();
}

Status MemEnv::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (files_.erase(path) == 0) return Missing(path + ": unlink");
  return Status::Ok();
}

Status MemEnv::SyncDir(const std::string& dir) {
  return Tick(FaultOp::kSyncDir, dir + ": fsync directory");
}

Status MemEnv::CreateDirs(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  dirs_.insert(dir);
  return Status::Ok();
}

StatusOr<std::vector<std::string>> MemEnv::ListDir(const std::string& dir) {
  std::lock_guard<std::mutex> l(mu_);
  std::vector<std::string> names;
  std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  for (const auto& [path, data] : files_) {
    if (path.compare(0, prefix.size(), prefix) == 0 &&
        path.find('/', prefix.size()) == std::string::npos) {
      names.push_back(path.substr(prefix.size()));
    }
  }
  if (names.empty() && dirs_.count(dir) == 0) return Missing(dir + ": open directory");
  return names;  // std::map iterates in sorted order
}

StatusOr<uint64_t> MemEnv::FileSize(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Missing(path + ": stat");
  return static_cast<uint64_t>(it->second->size());
}

bool MemEnv::FileExists(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  return files_.count(path) != 0;
}

}  // namespace shardpack::io
