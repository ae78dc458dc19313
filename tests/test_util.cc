#include "test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "image/encoder.h"
#include "util/hash.h"

namespace shardpack::testing {

TempDir::TempDir() : TempDir(std::filesystem::temp_directory_path().string()) {}

TempDir::TempDir(const std::string& parent) {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name =
      info != nullptr ? std::string(info->test_suite_name()) + "." + info->name() : "shardpack";
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  path_ = (std::filesystem::path(parent) / ("shardpack-test-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(counter++) + "-" + name))
              .string();
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::vector<uint8_t> TestPixels(uint64_t i, int height, int width, int channels) {
  std::vector<uint8_t> px(static_cast<size_t>(height) * width * channels);
  uint64_t x = 0x9e3779b97f4a7c15ull * (i + 1);
  for (auto& p : px) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p = static_cast<uint8_t>((x * 0x2545f4914f6cdd1dull) >> 56);
  }
  return px;
}

std::string TestEncodedImage(ImageEncoding encoding, const std::vector<uint8_t>& pixels, int height,
                             int width, int channels) {
  auto file = encoding == ImageEncoding::kPng
                  ? image::EncodePng(pixels.data(), height, width, channels)
                  : image::EncodeJpeg(pixels.data(), height, width, channels, {.quality = 90});
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? *file : std::string();
}

Manifest WriteTestDataset(const std::string& dir, const TestDatasetSpec& spec) {
  ShardWriterOptions o;
  o.backend = spec.backend;
  o.max_shard_records = spec.max_shard_records;
  o.max_shard_bytes = spec.max_shard_bytes;
  o.lmdb_initial_map_bytes = spec.lmdb_initial_map_bytes;
  for (int c = 0; c < spec.num_classes; ++c) o.class_names.push_back("class" + std::to_string(c));
  o.image.channels = spec.channels;
  o.image.encoding = spec.encoding;
  if (spec.variable_size) {
    o.image.max_side = std::max(spec.height + 2, spec.width + 1);
  } else {
    o.image.height = spec.height;
    o.image.width = spec.width;
  }
  o.seed = 42;
  o.options_json = R"({"source":"test"})";
  auto writer = ShardWriter::Create(dir, o);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  if (!writer.ok()) return {};
  for (uint64_t i = 0; i < spec.samples; ++i) {
    int h = spec.variable_size ? spec.height + static_cast<int>(i % 3) : spec.height;
    int w = spec.variable_size ? spec.width + static_cast<int>(i % 2) : spec.width;
    std::vector<uint8_t> px = TestPixels(i, h, w, spec.channels);
    std::string filename = "img" + std::to_string(i) + ".jpg";
    // A mixed dataset: odd samples raw, even ones JPEG.
    const bool raw = spec.encoding == ImageEncoding::kRaw ||
                     (spec.encoding == ImageEncoding::kMixed && i % 2 == 1);
    const std::string file =
        raw ? std::string() : TestEncodedImage(spec.encoding, px, h, w, spec.channels);
    Status s =
        (*writer)->Add({.pixels = px,
                        .encoded = {reinterpret_cast<const uint8_t*>(file.data()), file.size()},
                        .height = h,
                        .width = w,
                        .channels = spec.channels,
                        .label = static_cast<int64_t>(i % spec.num_classes),
                        .filename = filename});
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  auto m = (*writer)->Finish();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Manifest{};
}

std::string RejectList(const ConvertSummary& summary) {
  std::string out;
  for (const auto& r : summary.rejects) out += r.path + ": " + r.reason + "\n";
  return out;
}

std::shared_ptr<const Dataset> OpenDatasetOrDie(const std::string& dir, io::Env* env) {
  DatasetOptions options;
  options.env = env;
  auto ds = Dataset::Open(dir, options);
  EXPECT_TRUE(ds.ok()) << dir << ": " << ds.status().ToString();
  return ds.ok() ? std::shared_ptr<const Dataset>(std::move(ds).value()) : nullptr;
}

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void EvictFromPageCache(const std::string& path, uint64_t offset, uint64_t length) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::fsync(fd), 0) << path;
  ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
  ::close(fd);
}

void WriteFileOrDie(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good()) << path;
}

void WriteFileMakingDirs(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  WriteFileOrDie(path, data);
}

Manifest ResealDataset(const std::string& dir) {
  auto m = ReadManifest(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  for (const FileEntry* listed : ListedFiles(*m)) {
    auto* f = const_cast<FileEntry*>(listed);
    const std::string bytes = ReadFileOrDie(dir + "/" + f->file);
    f->bytes = bytes.size();
    f->xxh3_128 = Xxh3Hex(bytes.data(), bytes.size());
  }
  WriteFileOrDie(dir + "/manifest.json", SerializeManifest(*m));
  return *m;
}

}  // namespace shardpack::testing
