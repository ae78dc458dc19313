// Fixtures shared by the tests: temporary directories and small generated datasets.
#ifndef SHARDPACK_TESTS_TEST_UTIL_H_
#define SHARDPACK_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "shardpack/convert.h"
#include "shardpack/dataset.h"
#include "shardpack/manifest.h"
#include "shardpack/shard_writer.h"
#include "shardpack/status.h"

namespace shardpack::testing {

// A fresh directory under the test temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();  // under the system's temporary directory
  explicit TempDir(const std::string& parent);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Pixels of sample `i`: a deterministic pattern that differs per sample and per byte.
std::vector<uint8_t> TestPixels(uint64_t i, int height, int width, int channels);

struct TestDatasetSpec {
  Backend backend = Backend::kTfrecord;
  uint64_t samples = 10;
  int height = 4;
  int width = 5;
  int channels = 3;
  bool variable_size = false;  // sample i is (height + i % 3) x (width + i % 2)
  int num_classes = 3;         // label of sample i is i % num_classes
  uint64_t max_shard_records = 4;
  uint64_t max_shard_bytes = 64ull << 20;
  uint64_t lmdb_initial_map_bytes = 1ull << 20;
  // jpeg or png: each sample's TestPixels stored encoded (JPEG at quality 90, 4:2:0).
  // mixed: even samples as JPEG, odd ones raw.
  ImageEncoding encoding = ImageEncoding::kRaw;
};

// TestPixels(i, ...) as the file a dataset of `encoding` stores for sample i (mixed: the
// JPEG of an even sample).
std::string TestEncodedImage(ImageEncoding encoding, const std::vector<uint8_t>& pixels, int height,
                             int width, int channels);

// Writes a dataset with ShardWriter; fails the test on any error.
Manifest WriteTestDataset(const std::string& dir, const TestDatasetSpec& spec);

// Dataset::Open(dir), through `env` where one is given; fails the test and returns null when
// the dataset does not open.
std::shared_ptr<const Dataset> OpenDatasetOrDie(const std::string& dir, io::Env* env = nullptr);

// The conversion's rejects, one "path: reason" line each (for a failed expectation's message).
std::string RejectList(const ConvertSummary& summary);

std::string ReadFileOrDie(const std::string& path);
// Drops `path`'s pages from the page cache (those of [offset, offset + length); length 0:
// to the end), written back first (fsync, then POSIX_FADV_DONTNEED): a cold file for a
// test without root. Pages a process maps stay, and some file systems (tmpfs) keep every
// page: callers check (DatasetAccess::Resident) and skip.
void EvictFromPageCache(const std::string& path, uint64_t offset = 0, uint64_t length = 0);
void WriteFileOrDie(const std::string& path, const std::string& data);
// WriteFileOrDie, creating the directories above `path` first.
void WriteFileMakingDirs(const std::string& path, const std::string& data);
// Rewrites DIR/manifest.json with the present size and XXH3-128 of every file it lists, and
// its own checksum: what the author of a crafted dataset does, so that checksums no longer
// catch the damage. Returns the manifest written.
Manifest ResealDataset(const std::string& dir);

#define ASSERT_OK(expr)                    \
  do {                                     \
    ::shardpack::Status s_ = (expr);       \
    ASSERT_TRUE(s_.ok()) << s_.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                    \
  do {                                     \
    ::shardpack::Status s_ = (expr);       \
    EXPECT_TRUE(s_.ok()) << s_.ToString(); \
  } while (0)

}  // namespace shardpack::testing

#endif  // SHARDPACK_TESTS_TEST_UTIL_H_
