#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "convert/input_scan.h"
#include "convert/record_input.h"
#include "convert/stages.h"
#include "format/format.h"
#include "format/tfrecord_files.h"
#include "image/encoder.h"
#include "image/image.h"
#include "image/resize.h"
#include "io/chunked_file.h"
#include "io/dir_lock.h"
#include "io/env.h"
#include "read/random.h"
#include "remote/http.h"
#include "remote/s3.h"
#include "remote/s3_upload.h"
#include "remote/shard_cache.h"
#include "shardpack/convert.h"
#include "shardpack/shard_writer.h"
#include "util/hash.h"
#include "util/text.h"
#include "util/thread_count.h"

namespace shardpack {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A seeded permutation that is the same on every platform and library version
// (std::shuffle's algorithm is unspecified): Fisher-Yates driven by splitmix64 seeded with
// `seed` itself (read::Random; not a mixed key: the write order of existing datasets).
void Shuffle(std::vector<size_t>* order, uint64_t seed) {
  read::Random random(seed);
  auto next = [&random] { return random.Next64(); };
  for (size_t i = order->size(); i > 1; --i) {
    // Rejection sampling: an unbiased index in [0, i).
    const uint64_t limit = UINT64_MAX - UINT64_MAX % i;
    uint64_t r;
    do {
      r = next();
    } while (r >= limit);
    std::swap((*order)[i - 1], (*order)[r % i]);
  }
}

// *out becomes the file's bytes. Its memory is reused (resizing it zero-fills only what it
// grows by); it is empty after a failure to open, stat or accept the file.
Status ReadWholeFile(const std::string& path, uint64_t max_bytes, std::vector<uint8_t>* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    out->clear();
    return ErrnoError("open", err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    out->clear();
    return ErrnoError("stat", err);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    out->clear();
    return ResourceExhaustedError("file of " + std::to_string(st.st_size) +
                                  " bytes exceeds the limit of " + std::to_string(max_bytes));
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out->size()) {
    ssize_t r = ::read(fd, out->data() + got, out->size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      ::close(fd);
      return ErrnoError("read", err);
    }
    if (r == 0) break;  // the file shrank while being read
    got += static_cast<size_t>(r);
  }
  ::close(fd);
  if (got != out->size()) {
    return IOError("file shrank from " + std::to_string(out->size()) + " to " +
                   std::to_string(got) + " bytes while being read");
  }
  if (out->empty()) return CorruptionError("empty file (0 bytes)");
  return Status::Ok();
}

// Asks the kernel to start reading `path` into the page cache, without waiting: the
// converter calls it for the files a few dozen items ahead of the workers, so that a
// worker rarely stops for the disk (on a 2-core machine whose page cache had dropped
// the inputs, each blocked read idled a core: 2 threads ran at 86% CPU). Only a hint:
// every failure is ignored here and reported by the real read. O_NONBLOCK, so that a
// path swapped for a FIFO since the scan cannot block the pipeline's input stage.
void PrefetchFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return;
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
  ::close(fd);
}

// The pipeline's tokens: how many images may be in flight. A worker holds one decoded
// image at a time; an image done early and waiting for its turn at the in-order writer
// holds only its output. Images cost very different times, and with few tokens one slow
// image stalls the rest: with 2 * threads + 2 tokens, 2 threads on 3,000 Caltech-sized
// photos sat idle 11% of the time, with 32 * threads + 2 about 5%. So: as many as fit
// kInFlightOutputBytes of largest-possible outputs, between those two bounds (the
// lower one when outputs may be full-size images, --keep).
size_t PipelineTokens(const ConvertOptions& o, int threads) {
  constexpr uint64_t kInFlightOutputBytes = 256ull << 20;
  const uint64_t fewest = 2 * static_cast<uint64_t>(threads) + 2;
  const uint64_t most = 32 * static_cast<uint64_t>(threads) + 2;
  const uint64_t channels = static_cast<uint64_t>(std::max(o.channels, 1));
  uint64_t largest = o.max_pixels * channels;
  if (o.height > 0 && o.width > 0) {
    largest = static_cast<uint64_t>(o.height) * static_cast<uint64_t>(o.width) * channels;
  } else if (o.max_side > 0) {
    largest = static_cast<uint64_t>(o.max_side) * static_cast<uint64_t>(o.max_side) * channels;
  }
  const uint64_t fit = kInFlightOutputBytes / std::max<uint64_t>(largest, 1);
  return static_cast<size_t>(std::clamp(fit, fewest, most));
}

// The output geometry: one of a fixed size, max_side or keep, in range, and how images
// are resized to it.
Status CheckGeometry(const ConvertOptions& o) {
  int modes = (o.height > 0 || o.width > 0 ? 1 : 0) + (o.max_side > 0 ? 1 : 0) + (o.keep ? 1 : 0);
  if (modes != 1) {
    return InvalidArgumentError(
        "choose exactly one output geometry: a fixed size (height and width), max_side, or "
        "keep");
  }
  if ((o.height > 0) != (o.width > 0) || o.height < 0 || o.width < 0 || o.height > kMaxImageSide ||
      o.width > kMaxImageSide || o.max_side < 0 || o.max_side > kMaxImageSide) {
    return InvalidArgumentError("output size must be positive and at most " +
                                std::to_string(kMaxImageSide) + " a side");
  }
  if (Status s = CheckResizeFilter(o.filter, "filter"); !s.ok()) return s;
  if (Status s = CheckFitMode(o.fit, "fit"); !s.ok()) return s;
  if (!o.keep) SHARDPACK_RETURN_IF_ERROR(image::ResizeKernelsStatus());
  return Status::Ok();
}

// What is decoded: the channels, and the pixel and scan limits on an input.
Status CheckDecodeSettings(const ConvertOptions& o) {
  if (o.channels != 1 && o.channels != 3) {
    return InvalidArgumentError("channels must be 1 or 3, not " + std::to_string(o.channels));
  }
  if (o.max_pixels == 0 || o.max_pixels > kMaxImagePixels) {
    return InvalidArgumentError("max_pixels must be in 1.." + std::to_string(kMaxImagePixels));
  }
  if (o.max_scans < 1) return InvalidArgumentError("max_scans must be positive");
  return CheckThreadCount(o.num_threads, "num_threads");
}

// The settings of the encoders: JPEG quality and subsampling, PNG compression, the mixed
// encoding's ratio.
Status CheckEncoderSettings(const ConvertOptions& o) {
  if (o.jpeg_quality < 1 || o.jpeg_quality > 100) {
    return InvalidArgumentError("JPEG quality must be in 1..100, not " +
                                std::to_string(o.jpeg_quality));
  }
  if (o.jpeg_subsampling != 444 && o.jpeg_subsampling != 422 && o.jpeg_subsampling != 420) {
    return InvalidArgumentError("JPEG chroma subsampling must be 444, 422 or 420, not " +
                                std::to_string(o.jpeg_subsampling));
  }
  if (o.png_compression < 0 || o.png_compression > 9) {
    return InvalidArgumentError("PNG compression level must be in 0..9, not " +
                                std::to_string(o.png_compression));
  }
  if (o.encoding == ImageEncoding::kMixed &&
      !(o.mixed_max_ratio > 0.0 && o.mixed_max_ratio <= 1.0)) {
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%g", o.mixed_max_ratio);
    return InvalidArgumentError(std::string("the mixed encoding's ratio must be in (0, 1], not ") +
                                ratio);
  }
  return Status::Ok();
}

// Where the output goes and what is read: the Caffe schema's combinations, the part,
// the write chunk, a list file's input format.
Status CheckOutputAndInput(const ConvertOptions& o) {
  if (o.lmdb_schema == LmdbSchema::kCaffe && o.backend != Backend::kLmdb) {
    return InvalidArgumentError("the Caffe schema is for LMDB output (--format lmdb)");
  }
  if (o.encoding == ImageEncoding::kMixed && o.lmdb_schema == LmdbSchema::kCaffe) {
    return InvalidArgumentError("the mixed encoding is not written in the Caffe schema");
  }
  if (o.part_count < 1 || o.part_count > kMaxParts || o.part_index < 0 ||
      o.part_index >= o.part_count) {
    return InvalidArgumentError("part " + std::to_string(o.part_index) + "/" +
                                std::to_string(o.part_count) +
                                ": expected I/N with 0 <= I < N <= " + std::to_string(kMaxParts));
  }
  if (o.part_count > 1 && o.lmdb_schema == LmdbSchema::kCaffe) {
    return InvalidArgumentError(
        "Caffe-schema LMDB output cannot be converted in parts: its keys number samples "
        "across the whole dataset; convert it in one process");
  }
  if (Status s = io::CheckWriteChunk(o.write_chunk_bytes); !s.ok()) return s;
  if (!o.list_file.empty() && o.input_format == InputFormat::kTfrecord) {
    return InvalidArgumentError("a list file names image files; it cannot be a TFRecord input");
  }
  return Status::Ok();
}

// The first fault of `o`, in the order of the groups above.
Status CheckOptions(const ConvertOptions& o) {
  SHARDPACK_RETURN_IF_ERROR(CheckGeometry(o));
  SHARDPACK_RETURN_IF_ERROR(CheckDecodeSettings(o));
  SHARDPACK_RETURN_IF_ERROR(CheckEncoderSettings(o));
  return CheckOutputAndInput(o);
}

// InputFormat::kAuto resolved for `src` (convert.h says how).
bool IsTfrecordSource(const std::string& src, const ConvertOptions& o) {
  if (!o.list_file.empty()) return false;
  if (o.input_format != InputFormat::kAuto) return o.input_format == InputFormat::kTfrecord;
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) return src.find_first_of("*?[") != std::string::npos;
  if (S_ISREG(st.st_mode)) return true;
  if (!S_ISDIR(st.st_mode)) return false;
  io::Env* env = io::Env::Posix();
  if (env->FileExists(io::JoinPath(src, format::kManifestName))) return true;
  auto names = env->ListDir(src);
  if (!names.ok()) return false;  // the folder scan reports it
  bool tfrecord_name = false;
  for (const std::string& n : *names) {
    if (n[0] == '.') continue;
    struct stat e {};
    if (::stat(io::JoinPath(src, n).c_str(), &e) == 0 && S_ISDIR(e.st_mode)) return false;
    tfrecord_name = tfrecord_name || format::LooksLikeTfrecordName(n);
  }
  return tfrecord_name;
}

std::string OptionsJson(const std::string& src, const ConvertOptions& o, bool tfrecord_source,
                        uint64_t inputs, uint64_t written, uint64_t rejected) {
  nlohmann::ordered_json j;
  j["source"] = EscapeBytes(src);
  j["inputs_from"] = tfrecord_source       ? "tfrecord"
                     : o.list_file.empty() ? "class folders"
                                           : "list file";
  if (!o.list_file.empty()) j["list_file"] = EscapeBytes(o.list_file);
  if (o.height > 0) {
    j["size"] = {{"height", o.height}, {"width", o.width}};
    j["fit"] = FitModeName(o.fit);
  } else if (o.max_side > 0) {
    j["max_side"] = o.max_side;
  } else {
    j["keep"] = true;
  }
  j["filter"] = ResizeFilterName(o.filter);
  j["channels"] = o.channels;
  // Only for encoded output: a raw dataset's options, and so its bytes, stay as they were.
  if (o.encoding != ImageEncoding::kRaw) {
    j["encoding"] = ImageEncodingName(o.encoding);
    if (o.encoding == ImageEncoding::kJpeg || o.encoding == ImageEncoding::kMixed) {
      j["jpeg_quality"] = o.jpeg_quality;
      j["jpeg_subsampling"] = o.jpeg_subsampling;
    }
    if (o.encoding == ImageEncoding::kMixed) j["mixed_max_ratio"] = o.mixed_max_ratio;
    // Only when not libpng's default: a PNG dataset made before the option keeps its bytes.
    if (o.encoding == ImageEncoding::kPng && o.png_compression != image::kPngDefaultCompression) {
      j["png_compression"] = o.png_compression;
    }
  }
  j["orientation"] = o.apply_orientation ? "applied" : "ignored";
  char bg[8];
  std::snprintf(bg, sizeof bg, "%02x%02x%02x", o.background[0], o.background[1], o.background[2]);
  j["background"] = bg;
  if (o.backend == Backend::kLmdb && o.lmdb_schema == LmdbSchema::kCaffe) {
    j["lmdb_schema"] = "caffe";
  }
  j["shuffle"] = o.shuffle;
  j["max_pixels"] = o.max_pixels;
  j["max_scans"] = o.max_scans;
  j["max_png_chunk_bytes"] = o.max_png_chunk_bytes;
  j["strict"] = o.strict;
  j["inputs"] = inputs;
  j["written"] = written;
  j["rejected"] = rejected;
  return j.dump();
}

constexpr const char* kProgressName = format::kConvertProgressName;

// What identifies a conversion: everything that shapes the output bytes. A progress
// record made for another fingerprint is not resumed.
std::string Fingerprint(const std::string& src, const ConvertOptions& o, bool tfrecord_source,
                        const convert::InputSet& inputs) {
  Xxh3Hasher h;
  h.Update(OptionsJson(src, o, tfrecord_source, 0, 0, 0));
  h.Update(std::string(BackendName(o.backend)) + "|" + std::to_string(o.max_shard_bytes) + "|" +
           std::to_string(o.max_shard_records) + "|" + std::to_string(o.seed) + "|");
  for (const auto& c : inputs.classes) h.Update(c + "\n");
  for (const auto& f : inputs.files) h.Update(f.relative + "\t" + std::to_string(f.label) + "\n");
  for (const auto& r : inputs.rejects) h.Update(r.relative + "\t" + r.reason + "\n");
  return h.HexDigest();
}

nlohmann::ordered_json FileJson(const FileEntry& f) {
  return {{"file", f.file}, {"bytes", f.bytes}, {"xxh3_128", f.xxh3_128}};
}

std::string ProgressJson(const std::string& fingerprint, uint64_t next_input,
                         const std::vector<ConvertReject>& rejects, const ShardWriterState& s) {
  nlohmann::ordered_json j;
  j["version"] = 1;
  j["fingerprint"] = fingerprint;
  j["next_input"] = next_input;
  nlohmann::ordered_json rj = nlohmann::ordered_json::array();
  for (const auto& r : rejects) rj.push_back({{"path", r.path}, {"reason", r.reason}});
  j["rejects"] = rj;
  j["samples"] = s.samples;
  j["class_counts"] = s.class_counts;
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (const ShardEntry& e : s.shards) {
    nlohmann::ordered_json sj = FileJson(e.data);
    sj["records"] = e.records;
    sj["first_sample"] = e.first_sample;
    if (e.index) sj["index"] = FileJson(*e.index);
    shards.push_back(sj);
  }
  j["shards"] = shards;
  return j.dump(1);
}

struct Progress {
  uint64_t next_input = 0;
  std::vector<ConvertReject> rejects;
  ShardWriterState state;
};

// Reads a progress record; NotFound when there is none. Anything unreadable or made for
// another conversion is InvalidArgument, naming the file.
StatusOr<Progress> ReadProgress(const std::string& dst, const std::string& fingerprint) {
  const std::string path = io::JoinPath(dst, kProgressName);
  auto text = io::Env::Posix()->ReadFile(path, 256ull << 20);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  try {
    if (j.is_discarded() || j.at("version").get<int>() != 1) {
      return InvalidArgumentError(path + ": not a progress record of this version");
    }
    if (j.at("fingerprint").get<std::string>() != fingerprint) {
      return InvalidArgumentError(path +
                                  ": made by a conversion with other inputs or options; "
                                  "remove the output directory to start again");
    }
    Progress p;
    p.next_input = j.at("next_input").get<uint64_t>();
    for (const auto& r : j.at("rejects")) {
      p.rejects.push_back({r.at("path").get<std::string>(), r.at("reason").get<std::string>()});
    }
    p.state.samples = j.at("samples").get<uint64_t>();
    p.state.class_counts = j.at("class_counts").get<std::vector<uint64_t>>();
    auto file = [](const nlohmann::json& f) {
      return FileEntry{f.at("file").get<std::string>(), f.at("bytes").get<uint64_t>(),
                       f.at("xxh3_128").get<std::string>()};
    };
    for (const auto& s : j.at("shards")) {
      ShardEntry e;
      e.data = file(s);
      e.records = s.at("records").get<uint64_t>();
      e.first_sample = s.at("first_sample").get<uint64_t>();
      if (s.contains("index")) e.index = file(s.at("index"));
      p.state.shards.push_back(std::move(e));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(path + ": unreadable progress record: " + e.what());
  }
}

// Removes what an interrupted conversion left in `dst` when there is nothing to resume.
Status RemovePartialOutput(const std::string& dst) {
  io::Env* env = io::Env::Posix();
  if (!env->FileExists(dst)) return Status::Ok();
  auto names = env->ListDir(dst);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    bool ours = n.rfind("shard-", 0) == 0 || n == "rejects.tsv" || n == kProgressName ||
                (n.size() > 4 && n.ends_with(".tmp"));
    if (ours) SHARDPACK_RETURN_IF_ERROR(env->RemoveFile(io::JoinPath(dst, n)));
  }
  return Status::Ok();
}

// The dataset that overwrite replaces waits in this directory inside DST until the new
// one is published, and comes back if the new one fails: a failed or empty conversion
// never costs the good dataset. A run killed meanwhile leaves it there; the next run with
// overwrite puts it back first, and a resumed run that completes removes it.
constexpr const char* kReplacedDirName = ".shardpack-replaced";

// A symlink planted at the aside directory's name (shardpack never makes one there) would
// have the replaced dataset moved into the directory it leads to, outside DST: it is
// removed, never followed.
Status RemoveSymlinkAt(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return Status::Ok();
  if (::unlink(path.c_str()) != 0) return ErrnoError(path + ": removing a symlink", errno);
  return Status::Ok();
}

bool IsDatasetFileName(const std::string& n) {
  return n == format::kManifestName || n.rfind("shard-", 0) == 0 || n == "rejects.tsv";
}

// Moves the dataset in `dst` (manifest first: from then on DST holds no dataset) aside.
Status SetAsideDataset(const std::string& dst) {
  io::Env* env = io::Env::Posix();
  const std::string aside = io::JoinPath(dst, kReplacedDirName);
  SHARDPACK_RETURN_IF_ERROR(RemoveSymlinkAt(aside));
  SHARDPACK_RETURN_IF_ERROR(env->CreateDirs(aside));
  SHARDPACK_RETURN_IF_ERROR(env->RenameFile(io::JoinPath(dst, format::kManifestName),
                                            io::JoinPath(aside, format::kManifestName)));
  auto names = env->ListDir(dst);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (IsDatasetFileName(n)) {
      SHARDPACK_RETURN_IF_ERROR(env->RenameFile(io::JoinPath(dst, n), io::JoinPath(aside, n)));
    }
  }
  SHARDPACK_RETURN_IF_ERROR(env->SyncDir(aside));
  return env->SyncDir(dst);
}

// Puts a dataset set aside back in place of what a failed run wrote (manifest last).
Status RestoreSetAside(const std::string& dst) {
  io::Env* env = io::Env::Posix();
  const std::string aside = io::JoinPath(dst, kReplacedDirName);
  SHARDPACK_RETURN_IF_ERROR(RemoveSymlinkAt(aside));
  if (!env->FileExists(aside)) return Status::Ok();
  SHARDPACK_RETURN_IF_ERROR(RemovePartialOutput(dst));
  auto names = env->ListDir(aside);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (n != format::kManifestName) {
      SHARDPACK_RETURN_IF_ERROR(env->RenameFile(io::JoinPath(aside, n), io::JoinPath(dst, n)));
    }
  }
  const std::string manifest = io::JoinPath(aside, format::kManifestName);
  if (env->FileExists(manifest)) {
    SHARDPACK_RETURN_IF_ERROR(env->RenameFile(manifest, io::JoinPath(dst, format::kManifestName)));
  }
  if (::rmdir(aside.c_str()) != 0) return ErrnoError(aside + ": rmdir", errno);
  return env->SyncDir(dst);
}

// Removes the replaced dataset once the new one is published.
void DropSetAside(const std::string& dst) {
  std::error_code ec;
  std::filesystem::remove_all(io::JoinPath(dst, kReplacedDirName), ec);
}

// What differs between the options a finished dataset was made with and this run's: "fit:
// crop -> pad, filter: lanczos3 -> area", or "" when only the inputs differ.
std::string ChangedOptions(const nlohmann::json& made, const nlohmann::json& now) {
  std::string changed;
  for (const auto& [key, value] : now.items()) {
    if (key == "inputs" || key == "written" || key == "rejected" || key == "fingerprint") continue;
    const std::string before = made.contains(key) ? made.at(key).dump() : "(none)";
    if (before != value.dump()) {
      changed += (changed.empty() ? "" : ", ") + key + ": " + before + " -> " + value.dump();
    }
  }
  return changed;
}

// A directory scanned for inputs must not hold the output: the next run would read the
// dataset as a class folder (or its shards as TFRecord inputs). Links are resolved first.
Status CheckDestinationOutsideSource(const std::string& src, const std::string& dst,
                                     const ConvertOptions& o) {
  std::error_code ec;
  if (!o.list_file.empty() || !std::filesystem::is_directory(src, ec)) return Status::Ok();
  auto resolved = [](const std::string& path) {
    std::error_code e;
    std::filesystem::path p = std::filesystem::weakly_canonical(path, e);
    if (e) p = std::filesystem::absolute(path, e).lexically_normal();
    if (!p.has_filename() && p.has_parent_path()) p = p.parent_path();  // "dir/"
    return p;
  };
  const std::filesystem::path s = resolved(src), d = resolved(dst);
  auto [in_s, in_d] = std::mismatch(s.begin(), s.end(), d.begin(), d.end());
  if (in_s != s.end()) return Status::Ok();
  return InvalidArgumentError(dst + ": the output directory is " +
                              (in_d == d.end() ? "SRC itself" : "inside SRC") + " (" + s.string() +
                              "): the next conversion would read it as input; choose a "
                              "directory outside SRC");
}

// A directory holding what an interrupted conversion wrote (shards or its progress record,
// no manifest) is no dataset: say so, and how to go on, instead of "holds a dataset".
Status CheckNotInterrupted(const std::string& dst) {
  io::Env* env = io::Env::Posix();
  if (!env->FileExists(dst) || env->FileExists(io::JoinPath(dst, format::kManifestName))) {
    return Status::Ok();
  }
  auto names = env->ListDir(dst);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (n == kProgressName || n.rfind("shard-", 0) == 0) {
      return AlreadyExistsError(
          dst + " holds an interrupted conversion (" + n +
          ", no manifest.json): go on with resume (the same SRC and options; the result is "
          "identical to an uninterrupted run), or start again with overwrite");
    }
  }
  return Status::Ok();
}

// The manifest lists every class by name: their number and length are bounded, so that a
// typo cannot make a manifest of hundreds of megabytes that readers then refuse.
Status CheckClasses(const std::string& src, const convert::InputSet& inputs) {
  if (inputs.classes.size() > kMaxClasses) {
    return InvalidArgumentError(src + ": " + std::to_string(inputs.classes.size()) +
                                " classes, more than the " + std::to_string(kMaxClasses) +
                                " a dataset may have");
  }
  for (size_t i = 0; i < inputs.classes.size(); ++i) {
    if (inputs.classes[i].size() > kMaxClassNameBytes) {
      return InvalidArgumentError(
          src + ": class " + std::to_string(i) + " (\"" + inputs.classes[i].substr(0, 40) +
          "...\") has a name of " + std::to_string(inputs.classes[i].size()) +
          " bytes, more than the " + std::to_string(kMaxClassNameBytes) + " allowed");
    }
  }
  return Status::Ok();
}

// The error of a conversion that produced no sample, with the first rejects.
Status NoSamplesError(const std::string& src, const std::vector<ConvertReject>& rejects) {
  if (rejects.empty()) {
    return NotFoundError(src +
                         ": no inputs: no JPEG, PNG or TFRecord input was found; "
                         "nothing was written");
  }
  std::string message = src + ": none of the " + std::to_string(rejects.size()) +
                        " inputs could be converted, each was rejected; nothing was written. ";
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < rejects.size() && i < kShown; ++i) {
    message += (i == 0 ? "" : "; ") + rejects[i].path + ": " + rejects[i].reason;
  }
  if (rejects.size() > kShown) {
    message += "; and " + std::to_string(rejects.size() - kShown) + " more";
  }
  return CorruptionError(message);
}

ShardWriterOptions WriterOptions(const convert::ScanResult& scan, const ConvertOptions& o) {
  ShardWriterOptions wo;
  wo.backend = o.backend;
  wo.lmdb_schema = o.lmdb_schema;
  wo.max_shard_bytes = o.max_shard_bytes;
  wo.max_shard_records = o.max_shard_records;
  wo.write_chunk_bytes = o.write_chunk_bytes;
  wo.write_method = o.write_method;
  wo.class_names = scan.inputs.classes;
  wo.image.channels = o.channels;
  wo.image.encoding = o.encoding;
  if (o.height > 0) {
    wo.image.height = o.height;
    wo.image.width = o.width;
  } else {
    wo.image.max_side = o.max_side;  // 0 with --keep: no bound promised
  }
  wo.seed = o.seed;
  return wo;
}

// A finished dataset that resume found in DST: what it was made of, as a summary, or
// InvalidArgument when that is not this run's inputs and options.
StatusOr<ConvertSummary> CompleteDataset(const std::string& src, const convert::ScanResult& scan,
                                         const ConvertOptions& o) {
  const std::string& dst = scan.dst;
  auto manifest = ReadManifest(dst);
  if (!manifest.ok()) return manifest.status();
  auto j = nlohmann::json::parse(manifest->options_json, nullptr, false);
  // Complete, but of these inputs and options? Datasets made before the fingerprint was
  // recorded cannot tell, and are taken as they are.
  const std::string made_from = j.is_object() ? j.value("fingerprint", std::string()) : "";
  if (!made_from.empty() && made_from != scan.inputs_fingerprint) {
    const std::string changed = ChangedOptions(
        j, nlohmann::json::parse(OptionsJson(src, o, scan.tfrecord_source, 0, 0, 0)));
    return InvalidArgumentError(
        dst + " holds a complete dataset made from other " +
        (changed.empty() ? "inputs (files added, removed or relabelled in SRC)"
                         : "options (" + changed + ")") +
        ": resume goes on only with the same SRC and options; convert into another "
        "directory, or replace it with overwrite");
  }
  ConvertSummary summary;
  summary.hidden_ignored = scan.inputs.hidden_ignored;
  summary.inputs = j.value("inputs", uint64_t{0});
  summary.written = manifest->num_samples;
  summary.rejected = j.value("rejected", uint64_t{0});
  summary.resumed_from = summary.inputs;
  summary.already_complete = true;
  summary.manifest = std::move(manifest).value();
  return summary;
}

}  // namespace

namespace convert {

// ---- 1. Scan ----------------------------------------------------------------------------

Status CheckRejects(const std::vector<ConvertReject>& rejects, const ConvertOptions& o) {
  if (o.strict && !rejects.empty()) {
    const ConvertReject& r = rejects.front();
    return CorruptionError(r.path + ": " + r.reason + " (strict: the first reject fails)");
  }
  if (rejects.size() > o.max_rejects) {
    return CorruptionError(std::to_string(rejects.size()) +
                           " inputs rejected, more than the limit of " +
                           std::to_string(o.max_rejects) + "; last: " + rejects.back().path + ": " +
                           rejects.back().reason);
  }
  return Status::Ok();
}

StatusOr<ScanResult> Scan(const std::string& src, const std::string& target,
                          const ConvertOptions& o) {
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(src, io::PathKind::kLocal));
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(target, io::PathKind::kLocal));
  SHARDPACK_RETURN_IF_ERROR(CheckOptions(o));
  ScanResult scan;
  scan.partitioned = o.part_count > 1;
  scan.dst = scan.partitioned ? PartDirectory(target, o.part_index, o.part_count) : target;
  if (scan.partitioned &&
      io::Env::Posix()->FileExists(io::JoinPath(target, format::kManifestName))) {
    return Status(StatusCode::kAlreadyExists,
                  target +
                      " holds a dataset (manifest.json): its parts were merged; remove it "
                      "to convert again");
  }
  SHARDPACK_RETURN_IF_ERROR(CheckDestinationOutsideSource(src, target, o));
  scan.tfrecord_source = IsTfrecordSource(src, o);
  SHARDPACK_ASSIGN_OR_RETURN(scan.inputs, scan.tfrecord_source
                                              ? ScanTfrecordFiles(src, kMaxRecordBytes)
                                          : o.list_file.empty() ? ScanClassFolders(src)
                                                                : ReadListFile(o.list_file, src));
  SHARDPACK_RETURN_IF_ERROR(CheckClasses(src, scan.inputs));
  scan.range = scan.partitioned ? PartitionInputs(scan.inputs.files.size(), o.part_index,
                                                  o.part_count, o.max_shard_records)
                                : InputRange{0, scan.inputs.files.size()};
  if (o.part_index == 0) {
    for (const auto& r : scan.inputs.rejects) {
      scan.rejects.push_back({EscapeBytes(r.relative), r.reason});
    }
  }
  SHARDPACK_RETURN_IF_ERROR(CheckRejects(scan.rejects, o));
  scan.inputs_fingerprint = Fingerprint(src, o, scan.tfrecord_source, scan.inputs);
  scan.fingerprint = scan.partitioned
                         ? scan.inputs_fingerprint + "/part-" + std::to_string(o.part_index) +
                               "-of-" + std::to_string(o.part_count)
                         : scan.inputs_fingerprint;
  return scan;
}

// ---- 2. Plan ----------------------------------------------------------------------------

std::vector<size_t> WriteOrder(size_t inputs, const ConvertOptions& o) {
  std::vector<size_t> order(inputs);
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (o.shuffle) Shuffle(&order, o.seed);
  return order;
}

Output::Output(Output&& other) noexcept
    : dst_(std::move(other.dst_)),
      dst_existed_(other.dst_existed_),
      restore_(std::exchange(other.restore_, false)),
      lock_(std::move(other.lock_)),
      writer_(std::move(other.writer_)),
      first_(other.first_),
      complete_(std::move(other.complete_)) {}

Output::~Output() {
  if (restore_) RestoreSetAside(dst_).IgnoreError();
}

StatusOr<Output> Output::Open(const std::string& src, const ScanResult& scan,
                              const ConvertOptions& o, RunState* state) {
  io::Env* env = io::Env::Posix();
  const std::string& dst = scan.dst;
  Output out;
  out.dst_ = dst;
  out.dst_existed_ = env->FileExists(dst);
  // From here on this run writes into dst: no other may at the same time.
  SHARDPACK_ASSIGN_OR_RETURN(out.lock_, io::DirLock::Acquire(dst, "shardpack convert"));

  // Progress: each shard, once durable under its staged name, is recorded with the
  // position of the first input it does not hold and the rejects before that input.
  ShardWriterOptions wo = WriterOptions(scan, o);
  wo.on_shard_staged = [env, dst, fingerprint = scan.fingerprint,
                        state](const ShardWriterState& staged) {
    return io::WriteFileAtomically(
        env, io::JoinPath(dst, kProgressName),
        ProgressJson(fingerprint, state->position, state->rejects, staged));
  };
  if (!o.overwrite && !o.resume) SHARDPACK_RETURN_IF_ERROR(CheckNotInterrupted(dst));
  const bool has_manifest = env->FileExists(io::JoinPath(dst, format::kManifestName));
  if (o.overwrite && !o.resume) {
    // A dataset set aside by a run that was killed goes back first: it is the one to keep
    // until this run has published its own.
    if (!has_manifest) SHARDPACK_RETURN_IF_ERROR(RestoreSetAside(dst));
    DropSetAside(dst);  // a new dataset was published, the old one not yet removed
    if (env->FileExists(io::JoinPath(dst, format::kManifestName))) {
      SHARDPACK_RETURN_IF_ERROR(SetAsideDataset(dst));
    }
    SHARDPACK_RETURN_IF_ERROR(RemovePartialOutput(dst));
    // Any failure of this run from here on puts the dataset it replaces back. (A resumed
    // run that fails leaves everything as it is, for the next resume.)
    out.restore_ = true;
  }
  if (o.resume && has_manifest) {
    SHARDPACK_ASSIGN_OR_RETURN(out.complete_, CompleteDataset(src, scan, o));
    DropSetAside(dst);
    // Already complete: the manifest is the commit point. A run killed between publishing
    // it and removing the progress record left that record behind; it has no use now.
    const std::string progress = io::JoinPath(dst, kProgressName);
    if (env->FileExists(progress)) SHARDPACK_RETURN_IF_ERROR(env->RemoveFile(progress));
    return out;
  }
  StatusOr<std::unique_ptr<ShardWriter>> writer = InternalError("no writer");
  out.first_ = scan.range.begin;
  if (o.resume) {
    auto progress = ReadProgress(dst, scan.fingerprint);
    if (progress.ok()) {
      state->rejects = progress->rejects;
      out.first_ = progress->next_input;
      writer = ShardWriter::Resume(dst, wo, progress->state);
    } else if (progress.status().code() == StatusCode::kNotFound) {
      SHARDPACK_RETURN_IF_ERROR(RemovePartialOutput(dst));
      writer = ShardWriter::Create(dst, wo);
    } else {
      return progress.status();
    }
  } else {
    writer = ShardWriter::Create(dst, wo);
  }
  if (!writer.ok()) {
    if (writer.status().code() == StatusCode::kAlreadyExists && !o.resume) {
      return Status(StatusCode::kAlreadyExists,
                    writer.status().message() +
                        " (overwrite replaces it; an interrupted conversion of the same inputs "
                        "goes on with resume)");
    }
    return writer.status();
  }
  out.writer_ = std::move(writer).value();
  if (out.first_ < scan.range.begin || out.first_ > scan.range.end) {
    return InvalidArgumentError(dst + "/" + kProgressName + ": next input " +
                                std::to_string(out.first_) + " is outside this run's inputs [" +
                                std::to_string(scan.range.begin) + ", " +
                                std::to_string(scan.range.end) + ")");
  }
  return out;
}

void Output::Committed() {
  // The manifest is the commit point; the progress record and the replaced dataset have
  // served their purpose.
  restore_ = false;
  io::Env::Posix()->RemoveFile(io::JoinPath(dst_, kProgressName)).IgnoreError();
  DropSetAside(dst_);
}

void Output::Abandon() {
  writer_.reset();
  RemovePartialOutput(dst_).IgnoreError();
  if (restore_) RestoreSetAside(dst_).IgnoreError();
  restore_ = false;
  lock_.reset();
  if (!dst_existed_) ::rmdir(dst_.c_str());  // made by this run; removed only if empty
}

// ---- 3. Decode --------------------------------------------------------------------------

DecodeStage::DecodeStage(const ConvertOptions& o) : o_(o) {
  decode_.limits.max_pixels = o.max_pixels;
  decode_.limits.max_scans = o.max_scans;
  decode_.limits.png_chunk_malloc_max = o.max_png_chunk_bytes;
  decode_.channels = o.channels;
  decode_.apply_orientation = o.apply_orientation;
  std::copy(o.background, o.background + 3, decode_.background);
  if (o.height > 0 && o.fit != FitMode::kPad) {
    decode_.min_height = o.height;
    decode_.min_width = o.width;
  } else if (o.max_side > 0) {
    // Both sides at least max_side guarantees the longer one is: a safe, if cautious,
    // bound for DCT scaling.
    decode_.min_height = decode_.min_width = o.max_side;
  }
}

// DecodeScratch's window and file bytes beyond this are freed after the image (a photo of
// 12 MP decoded at 1/2 is 9 MB): the common sizes stay, the rare large ones are not held
// by the worker until the end.
constexpr size_t kKeptScratchBytes = size_t{16} << 20;

void DecodeStage::Process(Item* item, DecodeScratch* scratch) const {
  try {
    item->status =
        item->input->record >= 0 ? DecodeRecord(item, scratch) : DecodeFile(item, scratch);
    if (item->status.ok() && o_.encoding != ImageEncoding::kRaw) {
      const auto t0 = Clock::now();
      item->status = Encode(item);
      item->encode_seconds = SecondsSince(t0);
    }
  } catch (const std::bad_alloc&) {
    item->status = ResourceExhaustedError("out of memory decoding the image");
  } catch (const std::exception& e) {
    item->status = InternalError(std::string("unexpected exception: ") + e.what());
  }
  if (scratch->window.image.pixels.capacity() > kKeptScratchBytes) {
    scratch->window = image::ImageWindow();
  }
  if (scratch->file.capacity() > kKeptScratchBytes) scratch->file = std::vector<uint8_t>();
}

Status DecodeStage::DecodeRecord(Item* item, DecodeScratch* scratch) const {
  const auto t0 = Clock::now();
  auto decoded = DecodeRecordInput(*item->input, o_.max_file_bytes, decode_);
  item->decode_seconds = SecondsSince(t0);
  SHARDPACK_ASSIGN_OR_RETURN(auto record, std::move(decoded));
  item->bytes_in = record.bytes_in;
  item->filename = std::move(record.filename);
  if (item->filename.size() > kMaxTextBytes) {
    return CorruptionError("feature image/filename: " + std::to_string(item->filename.size()) +
                           " bytes, more than " + std::to_string(kMaxTextBytes));
  }
  if (item->filename.empty()) item->filename = item->input->relative;
  return Resize(std::move(record.image), item, &scratch->resize);
}

Status DecodeStage::DecodeFile(Item* item, DecodeScratch* scratch) const {
  item->filename = item->input->relative;
  std::vector<uint8_t>& bytes = scratch->file;
  auto t0 = Clock::now();
  const Status read = ReadWholeFile(item->input->path, o_.max_file_bytes, &bytes);
  item->read_seconds = SecondsSince(t0);
  item->bytes_in = bytes.size();
  SHARDPACK_RETURN_IF_ERROR(read);
  t0 = Clock::now();
  if (o_.height > 0 && o_.fit == FitMode::kCrop) {
    // A centre crop reads only part of the image: decode only that part (for a 4:3 JPEG
    // cropped square, a fifth of the columns is never decoded), then resize the window,
    // with the same bytes as decoding and resizing the whole image.
    image::ImageWindow& window = scratch->window;
    const Status decoded = image::DecodeWindow(
        bytes.data(), bytes.size(), decode_,
        [&](int height, int width) {
          return image::FitReadRegion(height, width, o_.height, o_.width, FitMode::kCrop,
                                      o_.filter);
        },
        &window);
    item->decode_seconds = SecondsSince(t0);
    SHARDPACK_RETURN_IF_ERROR(decoded);
    t0 = Clock::now();
    auto resized = image::ResizeFitWindow(window, o_.height, o_.width, FitMode::kCrop, o_.filter,
                                          o_.background, &scratch->resize);
    item->resize_seconds = SecondsSince(t0);
    if (!resized.ok()) return resized.status();
    item->image = std::move(resized).value();
    return Status::Ok();
  }
  auto decoded = image::Decode(bytes.data(), bytes.size(), decode_);
  item->decode_seconds = SecondsSince(t0);
  if (!decoded.ok()) return decoded.status();
  return Resize(std::move(decoded).value(), item, &scratch->resize);
}

// The output geometry, applied to a decoded image.
Status DecodeStage::Resize(image::Image decoded, Item* item, image::ResizeScratch* scratch) const {
  const auto t0 = Clock::now();
  struct Timed {
    Clock::time_point t0;
    double* seconds;
    ~Timed() { *seconds = SecondsSince(t0); }
  } timed{t0, &item->resize_seconds};
  if (o_.height > 0) {
    SHARDPACK_ASSIGN_OR_RETURN(item->image, image::ResizeFit(decoded, o_.height, o_.width, o_.fit,
                                                             o_.filter, o_.background, scratch));
  } else if (o_.max_side > 0) {
    SHARDPACK_ASSIGN_OR_RETURN(item->image,
                               image::ResizeMaxSide(decoded, o_.max_side, o_.filter, scratch));
  } else {
    item->image = std::move(decoded);
  }
  return Status::Ok();
}

// The resized image as the file the sample stores; its pixels are not kept. Mixed: the
// JPEG, unless it is more than mixed_max_ratio of the pixels' bytes; then the pixels stay
// and there is no file.
Status DecodeStage::Encode(Item* item) const {
  const image::Image& im = item->image;
  StatusOr<std::string> file =
      o_.encoding != ImageEncoding::kPng
          ? image::EncodeJpeg(im.pixels.data(), im.height, im.width, im.channels,
                              {.quality = o_.jpeg_quality,
                               .progressive = false,
                               .subsampling = o_.jpeg_subsampling})
          : image::EncodePng(im.pixels.data(), im.height, im.width, im.channels,
                             {.compression_level = o_.png_compression});
  if (!file.ok()) return file.status();
  if (o_.encoding == ImageEncoding::kMixed &&
      static_cast<double>(file->size()) >
          o_.mixed_max_ratio * static_cast<double>(im.pixels.size())) {
    return Status::Ok();
  }
  item->encoded = std::move(file).value();
  item->image.pixels = {};
  item->image.pixels.shrink_to_fit();
  return Status::Ok();
}

// ---- 4. Write ---------------------------------------------------------------------------

WriteStage::WriteStage(const ConvertOptions& o, ShardWriter* writer, RunState* state, uint64_t done,
                       uint64_t total, std::chrono::steady_clock::time_point start)
    : o_(o),
      writer_(writer),
      placed_(o.backend == Backend::kTfrecord),
      state_(state),
      done_(done),
      total_(total),
      start_(start) {}

namespace {

SampleInput SampleOf(const Item& item) {
  const image::Image& im = item.image;
  return {.pixels = im.pixels,
          .encoded = {reinterpret_cast<const uint8_t*>(item.encoded.data()), item.encoded.size()},
          .height = im.height,
          .width = im.width,
          .channels = im.channels,
          .label = item.input->label,
          .filename = item.filename};
}

}  // namespace

void WriteStage::Place(Item* item) {
  if (!placed_ || !item->status.ok() || !item->write_status.ok()) return;
  const auto t0 = Clock::now();
  item->write_status = writer_->Reserve(SampleOf(*item), &item->reservation);
  item->write_seconds += SecondsSince(t0);
}

void WriteStage::Write(Item* item) const {
  if (!placed_ || !item->status.ok() || !item->write_status.ok()) return;
  const auto t0 = Clock::now();
  item->write_status = writer_->Write(item->reservation);
  item->write_seconds += SecondsSince(t0);
}

Status WriteStage::Commit(const Item& item) {
  SHARDPACK_RETURN_IF_ERROR(item.write_status);
  state_->position = item.position;
  stages_.read += item.read_seconds;
  stages_.decode += item.decode_seconds;
  stages_.resize += item.resize_seconds;
  stages_.encode += item.encode_seconds;
  if (item.status.ok()) {
    const auto t0 = Clock::now();
    // LMDB: the whole Add runs here, in order, so that a shard it stages is recorded with
    // the progress record's current position.
    Status committed = placed_ ? writer_->Commit(item.reservation) : writer_->Add(SampleOf(item));
    stages_.write += item.write_seconds + SecondsSince(t0);
    SHARDPACK_RETURN_IF_ERROR(committed);
  } else {
    state_->rejects.push_back({EscapeBytes(item.input->relative), item.status.ToString()});
    SHARDPACK_RETURN_IF_ERROR(CheckRejects(state_->rejects, o_));
  }
  ++done_;
  bytes_in_ += item.bytes_in;
  if (item.status.ok()) bytes_out_ += item.image.pixels.size() + item.encoded.size();
  if (o_.progress) {
    o_.progress({done_, total_, state_->rejects.size(), bytes_in_, bytes_out_,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count()});
  }
  return Status::Ok();
}

Status WriteStage::Consume(Item* item) {
  Place(item);
  Write(item);
  return Commit(*item);
}

int PipelineThreads(const ConvertOptions& o) {
  const int pool = tbb::this_task_arena::max_concurrency();
  return o.num_threads > 0 ? std::min(o.num_threads, pool) : pool;
}

Status RunPipeline(const InputSet& inputs, const std::vector<size_t>& order, uint64_t first,
                   uint64_t end, const DecodeStage& decode, WriteStage* write,
                   const ConvertOptions& o) {
  const int threads = o.num_threads > 0 ? o.num_threads : tbb::this_task_arena::max_concurrency();
  // The decode and resize working memory, one per worker thread, kept from image to image
  // and freed when this call returns.
  tbb::enumerable_thread_specific<DecodeScratch> scratches;
  Status failure;
  std::atomic<bool> stop{false};
  uint64_t next = first;
  // Files handed to the kernel for reading ahead of the workers (PrefetchFile): far
  // enough ahead to cover a disk read at thousands of images per second.
  constexpr uint64_t kPrefetchAhead = 64;
  uint64_t prefetched = next;
  auto source = [&](tbb::flow_control& fc) -> Item* {
    if (next >= end || stop.load()) {
      fc.stop();
      return nullptr;
    }
    for (; prefetched < std::min(end, next + kPrefetchAhead); ++prefetched) {
      const InputFile& ahead = inputs.files[order[prefetched]];
      if (ahead.record < 0) PrefetchFile(ahead.path);
    }
    auto* item = new Item;
    item->position = next;
    item->input = &inputs.files[order[next++]];
    return item;
  };
  auto process = [&](Item* item) {
    if (!stop.load()) decode.Process(item, &scratches.local());
    return item;
  };
  // Placing and committing in order, the writes between them on any thread: the copy
  // into the page cache, most of a write's time, is then no longer one thread's work.
  auto place = [&](Item* item) {
    if (!stop.load()) write->Place(item);
    return item;
  };
  auto write_out = [&](Item* item) {
    if (!stop.load()) write->Write(item);
    return item;
  };
  auto commit = [&](Item* item) {
    std::unique_ptr<Item> owned(item);
    if (stop.load()) return;
    Status s = write->Commit(*item);
    if (!s.ok()) {
      failure = s;
      stop = true;
    }
  };
  // An arena of this call's own: the rest of the process's TBB use keeps its settings. TBB
  // shares one pool of workers per process, at most the core count (or the application's
  // tbb::global_control limit), so `threads` beyond that buys no more concurrency; the
  // output is the same for any count.
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_pipeline(
        PipelineTokens(o, threads),
        tbb::make_filter<void, Item*>(tbb::filter_mode::serial_in_order, source) &
            tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel, process) &
            tbb::make_filter<Item*, Item*>(tbb::filter_mode::serial_in_order, place) &
            tbb::make_filter<Item*, Item*>(tbb::filter_mode::parallel, write_out) &
            tbb::make_filter<Item*, void>(tbb::filter_mode::serial_in_order, commit));
  });
  return failure;
}

// ---- 5. Publish -------------------------------------------------------------------------

StatusOr<Manifest> Publish(const std::string& src, const ScanResult& scan, const ConvertOptions& o,
                           const ConvertSummary& summary, ShardWriter* writer, RunState* state) {
  std::string tsv = "path\treason\n";
  for (const ConvertReject& r : state->rejects) {
    tsv += r.path + "\t" + EscapeBytes(r.reason) + "\n";
  }
  SHARDPACK_RETURN_IF_ERROR(
      io::WriteFileAtomically(io::Env::Posix(), io::JoinPath(scan.dst, "rejects.tsv"), tsv));
  writer->SetRejectsFile({"rejects.tsv", tsv.size(), Xxh3Hex(tsv.data(), tsv.size())});
  auto options = nlohmann::ordered_json::parse(
      OptionsJson(src, o, scan.tfrecord_source, summary.inputs, summary.written, summary.rejected));
  // What resume compares a finished dataset with: the inputs and options it was made of.
  options["fingerprint"] = scan.inputs_fingerprint;
  if (scan.partitioned) {
    // What Merge needs to check the parts against each other and join them.
    options["part"] = {{"index", o.part_index},
                       {"count", o.part_count},
                       {"first_input", scan.range.begin},
                       {"end_input", scan.range.end},
                       {"total_inputs", scan.inputs.files.size()},
                       {"inputs_fingerprint", scan.inputs_fingerprint}};
  }
  SHARDPACK_RETURN_IF_ERROR(writer->SetOptionsJson(options.dump()));
  state->position = scan.range.end;
  return writer->Finish();
}

}  // namespace convert

namespace {

// Convert into a local directory (or its part directory).
StatusOr<ConvertSummary> ConvertLocal(const std::string& src, const std::string& target,
                                      const ConvertOptions& o) {
  const auto start = Clock::now();
  SHARDPACK_ASSIGN_OR_RETURN(convert::ScanResult scan, convert::Scan(src, target, o));
  ConvertSummary summary;
  summary.hidden_ignored = scan.inputs.hidden_ignored;
  summary.inputs = (scan.range.end - scan.range.begin) + scan.rejects.size();
  summary.stages.scan = SecondsSince(start);

  auto t0 = Clock::now();
  convert::RunState state{scan.range.begin, scan.rejects};
  SHARDPACK_ASSIGN_OR_RETURN(convert::Output output, convert::Output::Open(src, scan, o, &state));
  if (output.complete()) return *output.complete();
  summary.resumed_from = output.first() - scan.range.begin;

  const std::vector<size_t> order = convert::WriteOrder(scan.inputs.files.size(), o);
  const convert::DecodeStage decode(o);
  convert::WriteStage write(o, output.writer(), &state, summary.resumed_from,
                            scan.range.end - scan.range.begin, start);
  summary.stages.plan = SecondsSince(t0);
  t0 = Clock::now();
  SHARDPACK_RETURN_IF_ERROR(
      convert::RunPipeline(scan.inputs, order, output.first(), scan.range.end, decode, &write, o));
  const double pipeline = SecondsSince(t0);
  summary.stages = {.scan = summary.stages.scan,
                    .plan = summary.stages.plan,
                    .pipeline = pipeline,
                    .threads = convert::PipelineThreads(o),
                    .read = write.stages().read,
                    .decode = write.stages().decode,
                    .resize = write.stages().resize,
                    .encode = write.stages().encode,
                    .write = write.stages().write};
  summary.bytes_in = write.bytes_in();
  summary.written = output.writer()->samples();
  if (const WriteMethod used = output.writer()->write_method_used(); used != WriteMethod::kAuto) {
    summary.write_method = WriteMethodName(used);
  }
  summary.rejects = state.rejects;
  // An empty dataset is no result: a typo in SRC or options that reject every image must
  // not exit 0 (nor, with overwrite, leave an empty dataset where a good one was). A part
  // may be empty; Merge refuses an empty whole.
  if (summary.written == 0 && !scan.partitioned) {
    output.Abandon();
    return NoSamplesError(src, summary.rejects);
  }
  summary.rejected = summary.rejects.size();
  t0 = Clock::now();
  SHARDPACK_ASSIGN_OR_RETURN(summary.manifest,
                             convert::Publish(src, scan, o, summary, output.writer(), &state));
  output.Committed();
  summary.stages.publish = SecondsSince(t0);
  summary.seconds = SecondsSince(start);
  return summary;
}

// The manifest.json of the dataset at `url` (normalized); nullopt when the prefix has
// none. A GET, not a HEAD: an error answer then has a body naming S3's code
// (SignatureDoesNotMatch, NoSuchBucket), and bad credentials are found before anything is
// converted.
StatusOr<std::optional<std::string>> PublishedManifest(const std::string& url,
                                                       const RemoteOptions& options) {
  SHARDPACK_ASSIGN_OR_RETURN(auto client, remote::HttpClient::Create(options));
  auto text = client->Get(url + "/" + std::string(format::kManifestName), kMaxManifestBytes);
  if (text.ok()) return std::optional<std::string>(std::move(text).value());
  const bool missing_key = text.status().code() == StatusCode::kNotFound &&
                           text.status().message().find("NoSuchBucket") == std::string::npos;
  if (missing_key) return std::optional<std::string>();
  return text.status();
}

// In a staging directory: the manifest of the dataset an overwrite replaces (see
// ConvertToS3).
constexpr char kReplacedManifestName[] = ".shardpack-replaced-manifest.json";

// After an overwrite: deletes the objects the replaced manifest (`old_text`) listed that
// the new dataset does not. Returns how many. A replaced manifest that does not parse
// (another version, damaged) names nothing to delete.
StatusOr<uint64_t> DeleteReplacedObjects(const std::string& url, const std::string& old_text,
                                         const Manifest& now, const RemoteOptions& options) {
  auto old = ParseManifest(old_text, url + "/" + std::string(format::kManifestName));
  if (!old.ok()) return 0;
  std::set<std::string> kept;
  for (const FileEntry* f : ListedFiles(now)) kept.insert(f->file);
  uint64_t deleted = 0;
  for (const FileEntry* f : ListedFiles(*old)) {
    // A manifest listing "manifest.json" (edited by hand, or hostile) must not take the new
    // one with it.
    if (kept.count(f->file) != 0 || f->file == format::kManifestName) continue;
    SHARDPACK_RETURN_IF_ERROR(remote::DeleteObject(url + "/" + f->file, options));
    ++deleted;
  }
  return deleted;
}

// DST s3://...: convert into the staging directory, then publish it there.
StatusOr<ConvertSummary> ConvertToS3(const std::string& src, const std::string& target,
                                     const ConvertOptions& o) {
  const auto start = Clock::now();
  SHARDPACK_ASSIGN_OR_RETURN(std::string url, remote::NormalizeDatasetUrl(target));
  if (o.part_count > 1) {
    return InvalidArgumentError(target +
                                ": a partitioned conversion (part, --mpi) cannot write to "
                                "s3://: convert and merge into a local directory, then upload "
                                "it (e.g. aws s3 sync DIR " +
                                url + ")");
  }
  std::string staging = o.staging;
  if (staging.empty()) {
    SHARDPACK_ASSIGN_OR_RETURN(std::string cache, remote::ResolveCacheDir(o.remote));
    staging = io::JoinPath(io::JoinPath(cache, "staging"), Xxh3Hex(url.data(), url.size()));
  }
  SHARDPACK_RETURN_IF_ERROR(io::CheckPathScheme(staging, io::PathKind::kLocal));
  SHARDPACK_ASSIGN_OR_RETURN(std::optional<std::string> replaced, PublishedManifest(url, o.remote));
  const bool published = replaced.has_value();
  if (published && !o.overwrite) {
    return Status(StatusCode::kAlreadyExists,
                  url + " holds a dataset (manifest.json): overwrite replaces it");
  }
  io::Env* env = io::Env::Posix();
  const bool kept = env->FileExists(staging);
  // The manifest an overwrite deleted before its upload failed: kept in the staging
  // directory, so that this run deletes the objects it listed. Read before converting
  // (an overwrite converts the staging directory anew).
  const std::string replaced_path = io::JoinPath(staging, kReplacedManifestName);
  if (!replaced && env->FileExists(replaced_path)) {
    SHARDPACK_ASSIGN_OR_RETURN(std::string text, env->ReadFile(replaced_path, kMaxManifestBytes));
    replaced = std::move(text);
  }
  // The staging directory is this run's own: an interrupted conversion in it goes on, a
  // complete one is taken as it is (and checked to be of these inputs and options).
  // overwrite converts it anew.
  ConvertOptions local = o;
  local.resume = !o.overwrite;
  local.overwrite = o.overwrite;
  auto converted = ConvertLocal(src, staging, local);
  if (!converted.ok()) {
    if (!kept) return converted.status();
    return Status(converted.status().code(),
                  converted.status().message() + " (" + staging +
                      " is the staging directory an earlier convert to " + url +
                      " left; remove it to start over)");
  }
  ConvertSummary summary = std::move(converted).value();
  summary.staging = staging;
  const auto t0 = Clock::now();
  {
    SHARDPACK_ASSIGN_OR_RETURN(auto lock, io::DirLock::Acquire(staging, "shardpack convert"));
    if (replaced) {
      SHARDPACK_RETURN_IF_ERROR(io::WriteFileAtomically(env, replaced_path, *replaced));
    }
    if (published) {
      // Readers must not take the objects about to be replaced for the old dataset.
      SHARDPACK_RETURN_IF_ERROR(
          remote::DeleteObject(url + "/" + std::string(format::kManifestName), o.remote));
    }
    auto uploaded = remote::UploadDataset(staging, url, o.remote);
    if (!uploaded.ok()) {
      return Status(uploaded.status().code(),
                    uploaded.status().message() + " (nothing was published: " + url +
                        " has no manifest.json; the converted dataset is kept in " + staging +
                        ", and the same command again uploads what is missing)");
    }
    summary.uploaded_files = uploaded->files;
    summary.uploaded_bytes = uploaded->bytes;
    if (replaced) {
      SHARDPACK_ASSIGN_OR_RETURN(Manifest now, ReadManifest(staging));
      auto deleted = DeleteReplacedObjects(url, *replaced, now, o.remote);
      if (!deleted.ok()) {
        return Status(deleted.status().code(), deleted.status().message() +
                                                   " (the new dataset is published at " + url +
                                                   "; objects of the one it replaced are left)");
      }
      summary.deleted_objects = *deleted;
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(staging, ec);  // best effort: the dataset is published
  summary.already_complete = false;
  summary.stages.publish += SecondsSince(t0);
  summary.seconds = SecondsSince(start);
  return summary;
}

}  // namespace

StatusOr<ConvertSummary> Convert(const std::string& src, const std::string& target,
                                 const ConvertOptions& o) {
  if (remote::IsS3Url(target)) return ConvertToS3(src, target, o);
  return ConvertLocal(src, target, o);
}

}  // namespace shardpack
