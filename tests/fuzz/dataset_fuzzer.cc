// A whole dataset directory (manifest.json, shards, .idx files; the container of
// dataset_input.h) through what a user of a dataset from someone else runs: `verify`
// (VerifyDataset, and VerifyTfrecordFiles of the shards), the manifest as `info` reads it,
// Dataset::Open with Get and GetPixels of its samples, and a Loader epoch, once failing on
// a damaged sample and once skipping it. Its mutator (dataset_mutator.cc) knows the
// structure of every file and recomputes the checksums after a mutation, so that manifest
// values, index lines, TFRecord framing, Example fields and LMDB pages all reach the code
// behind the checksums.
//
// Invariants besides "no crash, no sanitizer report":
//   - every error is a Status with a code other than OK and Internal and a non-empty
//     message, and every fault verify lists has a message;
//   - a pristine input (a seed as the writer made it) verifies without a fault, and the
//     fix-ups leave it byte for byte as it is;
//   - when verify finds no fault, the readers read every sample without error: Dataset::Open,
//     Get, GetPixels, and the Loader's epoch, failing or skipping, delivers every sample
//     (a dataset that verify passes and a reader refuses is a lie of one of them). The
//     Caffe schema, which the readers refuse by design (NotSupported), is the exception.
//     And they read what verify checked: each sample's label is one of the manifest's
//     classes, its channels, shape and encoding the manifest's; GetPixels agrees with Get,
//     and the loader delivers each sample with the label Get read and, where it delivers
//     samples as stored (fixed-size datasets), the pixels GetPixels read, on the mapped
//     and the read-ahead path alike;
//   - nothing is written: the dataset directory holds the same files with the same bytes
//     afterwards, and its parent (private to this process) nothing else.
//
// Files are written to a directory of this process's own under /dev/shm (or
// $SHARDPACK_FUZZ_TMPDIR, or the temporary directory), emptied before each input and
// removed at exit; directories left by fuzzers that died are removed at start.
//
// The loader runs with LoaderOptions::max_memory_bytes of 256 MiB: the options, not the
// manifest's claims, bound what it allocates, and a ring over that is refused
// (ResourceExhausted) before any of it is allocated, intact dataset or not.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dataset_input.h"
#include "fuzz_check.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "shardpack/manifest.h"
#include "shardpack/verify.h"
#include "util/hash.h"

namespace {

namespace fs = std::filesystem;
using namespace shardpack;
using shardpack::fuzz::DatasetInput;

constexpr uint64_t kLoaderMemoryBytes = 256ull << 20;
// GetPixels' buffer, allocated here.
constexpr uint64_t kMaxPixelBuffer = 16ull << 20;
// Samples read where verify finds no fault (all of them, up to this), else a few.
constexpr uint64_t kMaxSamplesRead = 256;

void CheckError(const Status& s) {
  FUZZ_CHECK(!s.ok());
  FUZZ_CHECK(s.code() != StatusCode::kInternal);
  FUZZ_CHECK(!s.message().empty());
}

// ---- The private directory ----

struct Workspace {
  std::string root;  // private to this process
  std::string dir;   // root/dataset: the dataset's files
};

std::string* g_root = nullptr;

void RemoveWorkspace() {
  if (g_root == nullptr) return;
  std::error_code ec;
  fs::remove_all(*g_root, ec);
}

// Removes what fuzzers that are gone left in `base` (killed by a crash or a timeout: no
// atexit ran), recognised by the pid in the name.
void RemoveLeftovers(const std::string& base) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(base, ec)) {
    const std::string name = e.path().filename().string();
    constexpr std::string_view kPrefix = "shardpack-dataset-fuzz-";
    if (!name.starts_with(kPrefix)) continue;
    const long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
    if (pid <= 0 || pid == getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) {
      continue;
    }
    std::error_code ignored;
    fs::remove_all(e.path(), ignored);
  }
}

const Workspace& Space() {
  static const Workspace* space = [] {
    std::string base;
    if (const char* t = std::getenv("SHARDPACK_FUZZ_TMPDIR")) base = t;
    if (base.empty() && ::access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    if (base.empty()) base = fs::temp_directory_path().string();
    RemoveLeftovers(base);
    std::string pattern = base + "/shardpack-dataset-fuzz-" + std::to_string(getpid()) + "-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror(("dataset_fuzzer: mkdtemp " + pattern).c_str());
      std::abort();
    }
    auto* w = new Workspace{pattern, pattern + "/dataset"};
    g_root = &w->root;
    std::atexit(RemoveWorkspace);
    return w;
  }();
  return *space;
}

// Empties the dataset directory (recreating it: a reader must not have replaced it).
void Reset(const Workspace& w) {
  std::error_code ec;
  fs::remove_all(w.dir, ec);
  FUZZ_CHECK(!ec);
  FUZZ_CHECK(fs::create_directory(w.dir, ec) && !ec);
}

void WriteFile(const std::string& path, const std::string& data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FUZZ_CHECK(fd >= 0);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    FUZZ_CHECK(n > 0);
    done += static_cast<size_t>(n);
  }
  FUZZ_CHECK(::close(fd) == 0);
}

// Every entry of `dir` and below: its type, size and the XXH3 of its bytes.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path& p = it->path();
    std::string what;
    if (it->is_symlink(ec)) {
      what = "link";
    } else if (it->is_regular_file(ec)) {
      std::string bytes;
      if (FILE* f = std::fopen(p.c_str(), "rb")) {
        char buf[65536];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, n);
        std::fclose(f);
      }
      what = "file " + std::to_string(bytes.size()) + " " + Xxh3Hex(bytes.data(), bytes.size());
    } else if (it->is_directory(ec)) {
      what = "dir";
    } else {
      what = "other";
    }
    out[p.lexically_relative(dir).string()] = what;
  }
  return out;
}

// ---- What the readers are asked ----

// VerifyDataset; whether it found the dataset intact.
bool Verify(const std::string& dir) {
  VerifyOptions o;
  o.num_threads = 1;
  o.decode_encoded = true;
  o.max_faults_per_file = 64;
  uint64_t reported = 0;
  o.on_fault = [&](const VerifyFault& f) {
    FUZZ_CHECK(!f.message.empty());
    FUZZ_CHECK(!f.file.empty());
    ++reported;
  };
  auto report = VerifyDataset(dir, o);
  if (!report.ok()) {
    CheckError(report.status());
    return false;
  }
  FUZZ_CHECK(report->faults.size() <= report->fault_count);
  FUZZ_CHECK(reported <= report->faults.size());
  for (const VerifyFault& f : report->faults) {
    FUZZ_CHECK(!f.message.empty());
    FUZZ_CHECK(!FormatFault(f).empty());
  }
  return report->ok();
}

void VerifyShardsAlone(const std::string& dir) {
  VerifyOptions o;
  o.num_threads = 1;
  o.max_faults_per_file = 64;
  auto report = VerifyTfrecordFiles(dir, o);
  if (!report.ok()) {
    CheckError(report.status());
    return;
  }
  for (const VerifyFault& f : report->faults) FUZZ_CHECK(!f.message.empty());
}

// The manifest as `shardpack info` shows it; whether it is of the Caffe schema.
bool Describe(const std::string& dir) {
  auto m = ReadManifest(dir);
  if (!m.ok()) {
    CheckError(m.status());
    return false;
  }
  for (const FileEntry* f : ListedFiles(*m)) FUZZ_CHECK(f != nullptr);
  (void)ShardLayoutDigest(*m);
  (void)SerializeManifest(*m);
  return m->lmdb_schema == LmdbSchema::kCaffe;
}

void CheckView(const SampleView& v) {
  FUZZ_CHECK(v.height >= 1 && v.width >= 1 && (v.channels == 1 || v.channels == 3));
  const uint64_t bytes = static_cast<uint64_t>(v.height) * static_cast<uint64_t>(v.width) *
                         static_cast<uint64_t>(v.channels);
  if (v.encoding == ImageEncoding::kRaw) {
    FUZZ_CHECK(v.pixels.size() == bytes && v.encoded.empty());
  } else {
    FUZZ_CHECK(!v.encoded.empty() && v.pixels.empty());
  }
}

// What Dataset::Get and GetPixels read of a sample of a dataset verify passed, for the
// loader's batches to be compared with.
struct Sample {
  int64_t label = 0;
  std::vector<uint8_t> pixels;
};

// A sample of a dataset verify passed is what verify checked: a label of the class list,
// the manifest's channels, shape and encoding.
void CheckAgainstManifest(const SampleView& v, const Manifest& m) {
  FUZZ_CHECK(v.label >= 0 && static_cast<uint64_t>(v.label) < m.classes.size());
  FUZZ_CHECK(v.channels == m.image.channels);
  if (m.image.fixed()) {
    FUZZ_CHECK(v.height == m.image.height && v.width == m.image.width);
  } else if (m.image.max_side > 0) {
    FUZZ_CHECK(v.height <= m.image.max_side && v.width <= m.image.max_side);
  }
  if (m.image.encoding == ImageEncoding::kMixed) {
    FUZZ_CHECK(v.encoding == ImageEncoding::kRaw || v.encoding == ImageEncoding::kJpeg);
  } else {
    FUZZ_CHECK(v.encoding == m.image.encoding);
  }
}

// Reads samples through the Dataset: all of them (up to kMaxSamplesRead) when verify found
// the dataset intact, which must all read, else a few. Returns what it read of an intact
// dataset's samples, by index.
std::map<uint64_t, Sample> ReadSamples(const Dataset& ds, bool intact, bool unchecked) {
  std::map<uint64_t, Sample> read;
  const uint64_t n = ds.size();
  std::vector<uint64_t> indices;
  if (intact) {
    for (uint64_t i = 0; i < std::min(n, kMaxSamplesRead); ++i) indices.push_back(i);
  } else {
    for (uint64_t i = 0; i < std::min<uint64_t>(n, 4); ++i) indices.push_back(i);
    if (n > 4) indices.push_back(n - 1);
  }
  indices.push_back(n);  // past the end: OutOfRange
  for (uint64_t i : indices) {
    SampleView v;
    Status s = ds.Get(i, &v);
    if (i >= n) {
      FUZZ_CHECK(s.code() == StatusCode::kOutOfRange && !s.message().empty());
      continue;
    }
    if (!s.ok()) {
      CheckError(s);
      FUZZ_CHECK(!intact);
    } else {
      CheckView(v);
      if (intact) CheckAgainstManifest(v, ds.manifest());
      const uint64_t bytes = static_cast<uint64_t>(v.height) * static_cast<uint64_t>(v.width) *
                             static_cast<uint64_t>(v.channels);
      if (bytes <= kMaxPixelBuffer) {
        std::vector<uint8_t> dst(bytes);
        SampleView p;
        Status g = ds.GetPixels(i, dst, &p);
        if (!g.ok()) {
          CheckError(g);
          FUZZ_CHECK(!intact);
        } else {
          FUZZ_CHECK(p.pixels.data() == dst.data() && p.pixels.size() == bytes);
          FUZZ_CHECK(p.label == v.label && p.height == v.height && p.width == v.width &&
                     p.channels == v.channels);
          if (intact) read[i] = {v.label, std::move(dst)};
        }
      }
    }
    auto where = ds.Locate(i);
    FUZZ_CHECK(where.ok() && where->shard < ds.manifest().shards.size());
    Status intact_status = ds.CheckIntact(i);
    if (!intact_status.ok()) CheckError(intact_status);
    if (unchecked) {
      SampleView u;
      Status su = ds.Get(i, &u, /*verify_crc=*/false);
      if (su.ok()) {
        CheckView(u);
      } else {
        CheckError(su);
      }
    }
  }
  return read;
}

// A loader epoch. For a dataset verify passed, every sample is delivered, with the label
// Get read, and (fixed-size datasets, delivered as stored) the pixels GetPixels read.
void RunLoader(const std::shared_ptr<const Dataset>& ds, bool intact,
               const std::map<uint64_t, Sample>& read, uint8_t flags, OnCorrupt on_corrupt) {
  const ImageSpec& im = ds->manifest().image;
  LoaderOptions o;
  o.batch_size = 2;
  o.prefetch = 1;
  o.num_threads = 1;
  o.seed = 1;
  o.shuffle = (flags & fuzz::kLoaderShuffle) ? ShuffleMode::kGlobal : ShuffleMode::kNone;
  o.io = (flags & fuzz::kLoaderReadAhead) ? IoPath::kReadAhead : IoPath::kMapped;
  o.io_queue = IoQueue::kPread;
  o.io_depth = 2;
  o.io_buffer_bytes = 1 << 20;
  o.huge_pages = HugePages::kOff;
  o.on_corrupt = on_corrupt;
  o.max_memory_bytes = kLoaderMemoryBytes;
  if (!im.fixed()) {
    o.transform = Transform::kCenterCrop;
    o.output_height = 4;
    o.output_width = 4;
  }
  auto loader = Loader::Create(ds, o);
  if (!loader.ok()) {
    CheckError(loader.status());
    // Over the memory the options give it: the user's limit, refused for any dataset.
    FUZZ_CHECK(!intact || loader.status().code() == StatusCode::kResourceExhausted);
    return;
  }
  const uint64_t n = ds->size();
  const uint64_t max_batches = intact ? n / 2 + 2 : 3;
  uint64_t samples = 0;
  for (uint64_t b = 0; b < max_batches; ++b) {
    auto batch = (*loader)->Next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) break;
      CheckError(batch.status());
      FUZZ_CHECK(!intact);
      break;
    }
    FUZZ_CHECK(batch->size() >= 0 && batch->size() <= o.batch_size);
    FUZZ_CHECK(batch->valid() <= batch->size());
    FUZZ_CHECK(batch->host_bytes() == static_cast<size_t>(batch->size()) * batch->height() *
                                          batch->width() * batch->channels());
    FUZZ_CHECK(batch->labels().size() == static_cast<size_t>(batch->size()));
    const size_t sample_bytes =
        static_cast<size_t>(batch->height()) * batch->width() * batch->channels();
    for (int k = 0; k < batch->size(); ++k) {
      const uint64_t i = batch->indices()[static_cast<size_t>(k)];
      FUZZ_CHECK(i < n);
      auto it = read.find(i);
      if (it == read.end()) continue;
      FUZZ_CHECK(batch->labels()[static_cast<size_t>(k)] == it->second.label);
      if (im.fixed()) {
        const auto* got = static_cast<const uint8_t*>(batch->host_data()) + k * sample_bytes;
        FUZZ_CHECK(it->second.pixels.size() == sample_bytes &&
                   std::equal(got, got + sample_bytes, it->second.pixels.begin()));
      }
    }
    samples += static_cast<uint64_t>(batch->size());
  }
  if (intact) {
    FUZZ_CHECK(samples == n);
    FUZZ_CHECK((*loader)->stats().skipped_corrupt == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const DatasetInput input = fuzz::Unpack(data, size);
  const bool pristine = (input.flags & fuzz::kPristine) != 0;
  if (pristine) {
    // The fix-ups leave a dataset as the writer made it unchanged.
    DatasetInput fixed = input;
    fuzz::FixUpOptions o;
    o.counts = true;
    fuzz::FixUp(&fixed, o);
    FUZZ_CHECK(fuzz::Pack(fixed) == fuzz::Pack(input));
  }

  const Workspace& w = Space();
  Reset(w);
  for (const fuzz::DatasetFile& f : input.files) {
    if (fuzz::IsPlainName(f.name)) WriteFile(w.dir + "/" + f.name, f.data);
  }
  const auto before = Snapshot(w.root);

  const bool intact = Verify(w.dir);
  if (pristine) FUZZ_CHECK(intact);
  VerifyShardsAlone(w.dir);
  const bool caffe = Describe(w.dir);

  DatasetOptions options;
  options.random_access = true;
  auto opened = Dataset::Open(w.dir, options);
  if (!opened.ok()) {
    CheckError(opened.status());
    FUZZ_CHECK(!intact || caffe);
  } else {
    std::shared_ptr<const Dataset> ds(std::move(opened).value());
    const auto read = ReadSamples(*ds, intact, (input.flags & fuzz::kUncheckedGet) != 0);
    RunLoader(ds, intact, read, input.flags, OnCorrupt::kFail);
    RunLoader(ds, intact, read, input.flags, OnCorrupt::kSkip);
  }

  FUZZ_CHECK(Snapshot(w.root) == before);
  return 0;
}
