// Datasets over HTTP, against a real nginx on loopback: reading, verifying, checksums on
// download, resuming after dropped connections, the cache's bound and its reuse.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "remote/http.h"
#include "remote/http_fixtures.h"
#include "remote/shard_cache.h"
#include "shardpack/dataset.h"
#include "shardpack/remote.h"
#include "shardpack/verify.h"
#include "test_util.h"

namespace shardpack {
namespace {

namespace fs = std::filesystem;
using testing::NginxServer;
using testing::TempDir;

// Published files in a cache directory (what a reader can map), by name.
std::set<std::string> CachedFiles(const std::string& cache_dir) {
  std::set<std::string> out;
  if (!fs::exists(cache_dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(cache_dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name.rfind("shard-", 0) == 0) out.insert(name);
  }
  return out;
}

uint64_t CachedBytes(const std::string& cache_dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache_dir)) {
    if (e.is_regular_file() && e.path().filename().string().rfind("shard-", 0) == 0) {
      n += e.file_size();
    }
  }
  return n;
}

uint64_t DatasetBytes(const Manifest& m) {
  uint64_t n = 0;
  for (const ShardEntry& s : m.shards) n += s.data.bytes + (s.index ? s.index->bytes : 0);
  return n;
}

class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(testing::kNginx)) {
      GTEST_SKIP() << testing::kNginx << " is missing (Debian: apt-get install nginx-light)";
    }
    server_ = std::make_unique<NginxServer>(root_.path(), work_.path());
    ASSERT_EQ(server_->error(), "");
    options_.remote.cache_dir = cache_.Join("cache");
    options_.remote.retry_backoff_ms = 1;  // fast retries: the tests count them, not time
    options_.remote.chunk_bytes = 4096;    // several ranges per shard
  }

  // Writes a dataset under the server's root as `name`.
  Manifest Serve(const std::string& name, testing::TestDatasetSpec spec = {}) {
    return testing::WriteTestDataset(root_.Join(name), spec);
  }
  std::string Local(const std::string& name) const { return root_.Join(name); }
  std::string cache_dir() const { return options_.remote.cache_dir; }

  static testing::TestDatasetSpec Spec(Backend backend = Backend::kTfrecord) {
    return {.backend = backend, .samples = 12, .height = 32, .width = 24, .max_shard_records = 4};
  }

  TempDir root_, work_, cache_;
  std::unique_ptr<NginxServer> server_;
  DatasetOptions options_;
};

void ExpectSameSamples(const Dataset& a, const Dataset& b) {
  ASSERT_EQ(a.size(), b.size());
  for (uint64_t i = 0; i < a.size(); ++i) {
    SampleView x, y;
    ASSERT_OK(a.Get(i, &x));
    ASSERT_OK(b.Get(i, &y));
    EXPECT_EQ(x.label, y.label) << i;
    EXPECT_EQ(x.filename, y.filename) << i;
    EXPECT_EQ(x.height, y.height) << i;
    ASSERT_EQ(x.pixels.size(), y.pixels.size()) << i;
    EXPECT_TRUE(std::equal(x.pixels.begin(), x.pixels.end(), y.pixels.begin())) << i;
  }
}

TEST_F(RemoteTest, EverySampleReadOverHttpEqualsTheLocalDatasetForBothBackends) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    const std::string name = backend == Backend::kLmdb ? "lmdb" : "tfrecord";
    Serve(name, Spec(backend));
    auto remote = Dataset::Open(server_->Url(name) + "/", options_);
    ASSERT_TRUE(remote.ok()) << remote.status().ToString();
    auto local = Dataset::Open(Local(name));
    ASSERT_TRUE(local.ok());
    EXPECT_EQ((*remote)->dir(), server_->Url(name) + "/");
    ExpectSameSamples(**local, **remote);
    EXPECT_EQ(SerializeManifest((*remote)->manifest()), SerializeManifest((*local)->manifest()));
  }
}

TEST_F(RemoteTest, SecondOpenUsesTheCacheAndFetchesOnlyTheManifest) {
  Manifest m = Serve("ds", Spec());
  auto first = remote::FetchDataset(server_->Url("ds"), options_.remote);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((*first)->bytes_downloaded(), DatasetBytes(m));
  first->reset();
  const size_t shard_requests = server_->CountRequests(".tfrecord");
  EXPECT_GE(shard_requests, m.shards.size());

  auto second = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(server_->CountRequests(".tfrecord"), shard_requests);
  EXPECT_EQ(server_->CountRequests("manifest.json"), 2u);
  auto third = remote::FetchDataset(server_->Url("ds"), options_.remote);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ((*third)->bytes_downloaded(), 0u);
  EXPECT_EQ((*third)->requests(), 1u);  // the manifest
}

TEST_F(RemoteTest, FilesAreFetchedInRangesOfTheChunkSize) {
  Manifest m = Serve("ds", Spec());
  ASSERT_GT(m.shards[0].data.bytes, 2 * options_.remote.chunk_bytes);
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  const std::string first = m.shards[0].data.file;
  std::vector<std::string> ranges;
  for (const std::string& line : server_->AccessLog()) {
    if (line.find("/" + first + " ") != std::string::npos) ranges.push_back(line);
  }
  // Each range once (the log is in the order they ended: connections fetch them at once).
  std::vector<std::string> expected;
  for (uint64_t begin = 0; begin < m.shards[0].data.bytes; begin += 4096) {
    const uint64_t end = std::min<uint64_t>(begin + 4096, m.shards[0].data.bytes);
    expected.push_back("GET /ds/" + first + " bytes=" + std::to_string(begin) + "-" +
                       std::to_string(end - 1) + " 206 " + std::to_string(end - begin));
  }
  std::sort(ranges.begin(), ranges.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ranges, expected);
}

TEST_F(RemoteTest, VerifyOverHttpPassesAnIntactDatasetForBothBackends) {
  for (Backend backend : {Backend::kTfrecord, Backend::kLmdb}) {
    const std::string name = backend == Backend::kLmdb ? "lmdb" : "tfrecord";
    Manifest m = Serve(name, Spec(backend));
    VerifyOptions vo;
    vo.remote = options_.remote;
    auto r = VerifyDataset(server_->Url(name), vo);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->ok()) << (r->faults.empty() ? "" : FormatFault(r->faults[0]));
    EXPECT_EQ(r->records, 12u);
    EXPECT_EQ(r->files, 1 + m.shards.size() * (backend == Backend::kLmdb ? 1 : 2));
  }
}

TEST_F(RemoteTest, CorruptFileOnTheServerIsACorruptionNamingItAndBothChecksumsCachingNothing) {
  Manifest m = Serve("ds", Spec());
  const std::string path = Local("ds") + "/" + m.shards[1].data.file;
  std::string bytes = testing::ReadFileOrDie(path);
  bytes[bytes.size() / 2] ^= 0x20;  // same size, other bytes
  testing::WriteFileOrDie(path, bytes);

  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kCorruption);
  const std::string msg = ds.status().message();
  EXPECT_NE(msg.find(server_->Url("ds/" + m.shards[1].data.file) + ": xxh3_128 checksum "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("the manifest says " + m.shards[1].data.xxh3_128), std::string::npos) << msg;
  EXPECT_EQ(CachedFiles(cache_dir()).count(m.shards[1].data.file + "." + m.shards[1].data.xxh3_128),
            0u);
  for (const std::string& f : CachedFiles(cache_dir())) {
    EXPECT_EQ(f.find(".partial"), std::string::npos) << f;
    EXPECT_EQ(f.find(".bad"), std::string::npos) << f;
  }
}

TEST_F(RemoteTest, VerifyOfACorruptServerFileNamesTheDamagedRecordAndKeepsNothing) {
  Manifest m = Serve("ds", Spec());
  auto local = Dataset::Open(Local("ds"));
  ASSERT_TRUE(local.ok());
  auto loc = (*local)->Locate(6);  // shard 1, record 2
  ASSERT_TRUE(loc.ok());
  local->reset();
  const std::string path = Local("ds") + "/" + m.shards[1].data.file;
  std::string bytes = testing::ReadFileOrDie(path);
  bytes[loc->offset + 200] ^= 0x01;
  testing::WriteFileOrDie(path, bytes);

  VerifyOptions vo;
  vo.remote = options_.remote;
  auto r = VerifyDataset(server_->Url("ds"), vo);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok());
  bool named_record = false, named_checksum = false;
  for (const VerifyFault& f : r->faults) {
    EXPECT_EQ(f.file, m.shards[1].data.file) << FormatFault(f);
    if (f.record == 2 && f.offset == static_cast<int64_t>(loc->offset)) named_record = true;
    if (f.message.find("xxh3_128 checksum") != std::string::npos) named_checksum = true;
  }
  EXPECT_TRUE(named_record);
  EXPECT_TRUE(named_checksum);
  for (const std::string& f : CachedFiles(cache_dir())) {
    EXPECT_EQ(f.find(".bad"), std::string::npos) << "left behind: " << f;
  }
}

TEST_F(RemoteTest, FileOfAnotherSizeOnTheServerIsACorruptionNamingBothSizes) {
  Manifest m = Serve("ds", Spec());
  const std::string path = Local("ds") + "/" + m.shards[2].index->file;
  testing::WriteFileOrDie(path, testing::ReadFileOrDie(path) + "0 1\n");
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kCorruption);
  EXPECT_NE(ds.status().message().find(m.shards[2].index->file), std::string::npos);
  EXPECT_NE(ds.status().message().find(
                "the server's file is " + std::to_string(m.shards[2].index->bytes + 4) +
                " bytes, the manifest says " + std::to_string(m.shards[2].index->bytes)),
            std::string::npos)
      << ds.status().message();

  // verify lists it as a fault of that file and checks the rest.
  VerifyOptions vo;
  vo.remote = options_.remote;
  auto r = VerifyDataset(server_->Url("ds"), vo);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->fault_count, 1u);
  EXPECT_EQ(r->faults[0].file, m.shards[2].index->file);
  EXPECT_EQ(r->records, 12u);
}

TEST_F(RemoteTest, MissingManifestOrShardIsNotFoundNamingTheUrl) {
  auto none = Dataset::Open(server_->Url("nothing"), options_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(server_->Url("nothing/manifest.json") + ": HTTP 404"),
            std::string::npos)
      << none.status().message();

  Manifest m = Serve("ds", Spec());
  fs::remove(Local("ds") + "/" + m.shards[0].data.file);
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kNotFound);
  // The range named is whichever of the file's ranges was refused first.
  EXPECT_TRUE(std::regex_search(
      ds.status().message(),
      std::regex(server_->Url("ds/" + m.shards[0].data.file) + R"(: bytes \d+-\d+: HTTP 404)")))
      << ds.status().message();
}

TEST_F(RemoteTest, ConnectionDroppedMidShardIsResumedFromTheLastByte) {
  Manifest m = Serve("ds", Spec());
  // The first connection carries the manifest, then the first shard's first range; it is
  // cut about 1000 bytes into that range's body: the client must ask for the rest only.
  // One connection: the files in the manifest's order.
  options_.remote.connections = 1;
  const uint64_t manifest_bytes = fs::file_size(Local("ds") + "/manifest.json");
  testing::DroppingProxy proxy(server_->port(), 1, manifest_bytes + 1500);
  auto ds = Dataset::Open(proxy.Url("ds"), options_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_EQ(proxy.dropped(), 1);
  auto local = Dataset::Open(Local("ds"));
  ASSERT_TRUE(local.ok());
  ExpectSameSamples(**local, **ds);
  // The manifest was the first request; the cut fell in the first shard's first range.
  const std::string first = m.shards[0].data.file;
  std::vector<std::string> requests;
  for (const std::string& line : server_->AccessLog()) {
    if (line.find("/" + first + " ") != std::string::npos) requests.push_back(line);
  }
  ASSERT_GE(requests.size(), 2u);
  EXPECT_NE(requests[0].find(" bytes=0-4095 "), std::string::npos) << requests[0];
  EXPECT_EQ(requests[1].find(" bytes=0-"), std::string::npos) << requests[1];
  EXPECT_NE(requests[1].find("-4095 206"), std::string::npos) << requests[1];
}

TEST_F(RemoteTest, FilesAreDownloadedOverAsManyConnectionsAsAsked) {
  Manifest m = Serve("ds", Spec());  // 3 shards: 6 files
  auto local = Dataset::Open(Local("ds"));
  ASSERT_TRUE(local.ok());
  for (int connections : {1, 4, 8}) {
    SCOPED_TRACE(connections);
    TempDir cache;
    options_.remote.cache_dir = cache.path();
    options_.remote.connections = connections;
    testing::DroppingProxy proxy(server_->port(), 0, 0);  // counts, drops none
    auto ds = Dataset::Open(proxy.Url("ds"), options_);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
    ExpectSameSamples(**local, **ds);
    // Each connection is one client's, kept alive across its ranges; the first also
    // fetched the manifest. No more than asked or than there are ranges; how many are
    // used depends on how fast the first threads take the files (test_s3.py holds every
    // request to see them all at work).
    size_t ranges = 0;  // of 4096 bytes: the unit a connection takes
    for (const ShardEntry& s : m.shards) {
      ranges += (s.data.bytes + 4095) / 4096 + (s.index->bytes + 4095) / 4096;
    }
    EXPECT_LE(proxy.connections(), std::min<int>(connections, ranges));
    if (connections == 1) {
      EXPECT_EQ(proxy.connections(), 1);
    }
  }
}

TEST_F(RemoteTest, AFileFailingStopsTheOtherDownloadsLeavingNothingHalfWritten) {
  testing::TestDatasetSpec spec = Spec();
  spec.max_shard_records = 1;  // 12 shards: 24 files
  Manifest m = Serve("ds", spec);
  options_.remote.connections = 4;
  const std::string moved = work_.Join("kept");
  fs::rename(Local("ds") + "/" + m.shards[5].data.file, moved);
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kNotFound);
  EXPECT_NE(ds.status().message().find(server_->Url("ds/" + m.shards[5].data.file) + ": bytes 0-" +
                                       std::to_string(m.shards[5].data.bytes - 1) + ": HTTP 404"),
            std::string::npos)
      << ds.status().message();
  // No partial download and no reservation stay; what was published is whole.
  for (const auto& e : fs::recursive_directory_iterator(cache_dir())) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".partial"), std::string::npos) << name;
    EXPECT_NE(name, ".reserved");
  }
  const std::set<std::string> first = CachedFiles(cache_dir());
  EXPECT_LT(first.size(), 2 * m.shards.size());
  EXPECT_EQ(first.count(m.shards[5].data.file + "." + m.shards[5].data.xxh3_128), 0u);
  // With the file back, a second open fetches only what the cache lacks.
  fs::rename(moved, Local("ds") + "/" + m.shards[5].data.file);
  auto again = remote::FetchDataset(server_->Url("ds"), options_.remote);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  uint64_t lacking = 0;
  for (const ShardEntry& s : m.shards) {
    for (const FileEntry* f : {&s.data, &*s.index}) {
      if (first.count(f->file + "." + f->xxh3_128) == 0) lacking += f->bytes;
    }
  }
  EXPECT_EQ((*again)->bytes_downloaded(), lacking);
  auto local = Dataset::Open(Local("ds"));
  ASSERT_TRUE(local.ok());
  auto read = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ExpectSameSamples(**local, **read);
}

TEST_F(RemoteTest, HttpsIsReadWithTheCaBundleAskedForAndRefusedWithoutIt) {
  TempDir tls, work;
  const std::string why = testing::MakeSelfSignedCertificate(tls.path());
  if (!why.empty()) GTEST_SKIP() << why;
  Serve("ds", Spec());
  NginxServer https(root_.path(), work.path(), tls.Join("cert.pem"), tls.Join("key.pem"));
  ASSERT_EQ(https.error(), "");
  ASSERT_EQ(https.Url("ds").rfind("https://", 0), 0u);
  // The system's store does not know this certificate: refused at once, naming what to set.
  ::unsetenv("CURL_CA_BUNDLE");
  auto refused = Dataset::Open(https.Url("ds"), options_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kIOError);
  EXPECT_NE(refused.status().message().find(https.Url("ds/manifest.json") + ": "),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("set CURL_CA_BUNDLE"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("attempts"), std::string::npos);  // not retried
  // With the certificate as the bundle: every sample equals the local dataset's.
  options_.remote.ca_bundle = tls.Join("cert.pem");
  auto ds = Dataset::Open(https.Url("ds"), options_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto local = Dataset::Open(Local("ds"));
  ASSERT_TRUE(local.ok());
  ExpectSameSamples(**local, **ds);
  // The same from the environment, as curl reads it.
  options_.remote.ca_bundle.clear();
  options_.remote.cache_dir = work.Join("cache2");
  ::setenv("CURL_CA_BUNDLE", tls.Join("cert.pem").c_str(), 1);
  auto from_env = Dataset::Open(https.Url("ds"), options_);
  ::unsetenv("CURL_CA_BUNDLE");
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
}

TEST_F(RemoteTest, OverOneConnectionNothingIsFetchedAfterAFailure) {
  testing::TestDatasetSpec spec = Spec();
  spec.max_shard_records = 1;  // 12 shards: 24 files, the first of them missing
  Manifest m = Serve("ds", spec);
  fs::remove(Local("ds") + "/" + m.shards[0].data.file);
  options_.remote.connections = 1;
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kNotFound);
  // The manifest, the missing file's first range, then the stop: no other file is asked.
  EXPECT_EQ(server_->CountRequests(".tfrecord"), 1u);
  EXPECT_EQ(server_->CountRequests(".idx"), 0u);
  EXPECT_TRUE(CachedFiles(cache_dir()).empty());
}

TEST_F(RemoteTest, ServerThatAlwaysDropsIsAnIOErrorAfterTheBoundedRetries) {
  Manifest m = Serve("ds", Spec());
  ASSERT_TRUE(FetchManifest(server_->Url("ds"), options_.remote).ok());
  // Every connection is cut before the answer starts: no byte of a body ever arrives.
  testing::DroppingProxy proxy(server_->port(), -1, 0);
  options_.remote.max_retries = 3;
  auto ds = Dataset::Open(proxy.Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kIOError);
  EXPECT_NE(ds.status().message().find(proxy.Url("ds/manifest.json") + " (4 attempts)"),
            std::string::npos)
      << ds.status().message();
  EXPECT_EQ(proxy.connections(), 4);

  // The same for a shard: the manifest comes through, every shard connection is cut.
  testing::DroppingProxy shards(server_->port(), -1, 0);
  TempDir other;
  RemoteOptions ro = options_.remote;
  ro.cache_dir = other.path();
  auto client = remote::HttpClient::Create(ro);
  ASSERT_TRUE(client.ok());
  Status s =
      (*client)->GetRange(shards.Url("ds/" + m.shards[0].data.file), 0, 100, m.shards[0].data.bytes,
                          [](const uint8_t*, size_t) { return Status::Ok(); });
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(shards.Url("ds/" + m.shards[0].data.file) +
                             ": bytes 0-99: gave up after 4 attempts, 0 of 100 bytes received"),
            std::string::npos)
      << s.message();
  EXPECT_EQ((*client)->requests(), 4u);
}

TEST_F(RemoteTest, DatasetLargerThanTheCacheIsResourceExhaustedNamingBothNumbers) {
  Manifest m = Serve("ds", Spec());
  options_.remote.cache_bytes = DatasetBytes(m) - 1;
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(
      ds.status().message().find("the dataset is " + std::to_string(DatasetBytes(m)) + " bytes"),
      std::string::npos)
      << ds.status().message();
  EXPECT_NE(ds.status().message().find("cache bound of " + std::to_string(DatasetBytes(m) - 1) +
                                       " bytes"),
            std::string::npos)
      << ds.status().message();
  EXPECT_EQ(server_->CountRequests(".tfrecord"), 0u);
}

TEST_F(RemoteTest, LeastRecentlyUsedDatasetIsEvictedToMakeRoom) {
  Manifest a = Serve("a", Spec());
  Manifest b = Serve("b", Spec());
  Manifest c = Serve("c", Spec());
  const uint64_t one = DatasetBytes(a);
  ASSERT_EQ(DatasetBytes(b), one);
  options_.remote.cache_bytes = 2 * one + one / 2;  // room for two and a half
  for (const char* name : {"a", "b"}) {
    auto ds = Dataset::Open(server_->Url(name), options_);
    ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  }
  // a was used last: b is now the least recently used.
  ASSERT_TRUE(Dataset::Open(server_->Url("a"), options_).ok());
  auto ds = Dataset::Open(server_->Url("c"), options_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  EXPECT_LE(CachedBytes(cache_dir()), options_.remote.cache_bytes);
  const size_t a_requests = server_->CountRequests(".tfrecord");
  // a is still whole; b lost enough files for c to fit.
  auto again = remote::FetchDataset(server_->Url("a"), options_.remote);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->bytes_downloaded(), 0u);
  EXPECT_EQ(server_->CountRequests(".tfrecord"), a_requests);
  auto b_again = remote::FetchDataset(server_->Url("b"), options_.remote);
  ASSERT_FALSE(b_again.ok());  // b does not fit beside a and c, which are in use
  EXPECT_EQ(b_again.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b_again.status().message().find("other processes are reading"), std::string::npos)
      << b_again.status().message();
}

TEST_F(RemoteTest, StaleFilesOfAnOldVersionAreReplacedAndEvictedFirst) {
  Manifest old = Serve("ds", Spec());
  options_.remote.cache_bytes = DatasetBytes(old) * 3 / 2;
  ASSERT_TRUE(Dataset::Open(server_->Url("ds"), options_).ok());
  // The server's dataset is converted again with other pixels: new checksums.
  fs::remove_all(Local("ds"));
  testing::TestDatasetSpec spec = Spec();
  spec.num_classes = 2;
  Manifest now = Serve("ds", spec);
  ASSERT_NE(now.shards[0].data.xxh3_128, old.shards[0].data.xxh3_128);
  auto ds = Dataset::Open(server_->Url("ds"), options_);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto local = Dataset::Open(Local("ds"));
  ASSERT_TRUE(local.ok());
  ExpectSameSamples(**local, **ds);
  EXPECT_LE(CachedBytes(cache_dir()), options_.remote.cache_bytes);
}

TEST_F(RemoteTest, CachedFileOfTheWrongSizeIsFetchedAgain) {
  Manifest m = Serve("ds", Spec());
  ASSERT_TRUE(Dataset::Open(server_->Url("ds"), options_).ok());
  const std::string name = m.shards[1].data.file + "." + m.shards[1].data.xxh3_128;
  std::string cached;
  for (const auto& e : fs::recursive_directory_iterator(cache_dir())) {
    if (e.path().filename() == name) cached = e.path().string();
  }
  ASSERT_FALSE(cached.empty());
  fs::resize_file(cached, 100);
  auto again = remote::FetchDataset(server_->Url("ds"), options_.remote);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->bytes_downloaded(), m.shards[1].data.bytes);
  EXPECT_EQ(fs::file_size(cached), m.shards[1].data.bytes);
}

TEST_F(RemoteTest, ReadersOpeningTogetherDownloadEachFileOnce) {
  Manifest m = Serve("ds", Spec());
  options_.remote.chunk_bytes = 1 << 20;  // one request per file
  std::vector<std::thread> threads;
  std::array<Status, 4> results;
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      auto ds = Dataset::Open(server_->Url("ds"), options_);
      results[i] = ds.status();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_OK(s);
  EXPECT_EQ(server_->CountRequests(".tfrecord"), m.shards.size());
  EXPECT_EQ(server_->CountRequests(".idx"), m.shards.size());
}

TEST_F(RemoteTest, CliVerifyAndInfoTakeAUrl) {
  Manifest m = Serve("ds", Spec());
  auto run = [](const std::string& args) {
    std::string out;
    FILE* p = ::popen((std::string(SHARDPACK_CLI) + " " + args + " 2>&1").c_str(), "r");
    std::array<char, 4096> buf;
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int status = ::pclose(p);
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, out);
  };
  const std::string cache = " --cache-dir " + cache_dir();
  auto [code, out] = run("verify " + server_->Url("ds") + cache);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(server_->Url("ds") + ": OK: "), std::string::npos) << out;
  auto [info_code, info] = run("info " + server_->Url("ds"));
  EXPECT_EQ(info_code, 0) << info;
  EXPECT_NE(info.find("samples      12"), std::string::npos) << info;

  const std::string path = Local("ds") + "/" + m.shards[0].data.file;
  std::string bytes = testing::ReadFileOrDie(path);
  bytes[bytes.size() - 1] ^= 1;  // the last record's data checksum
  testing::WriteFileOrDie(path, bytes);
  auto [bad_code, bad] = run("verify " + server_->Url("ds") + cache);
  EXPECT_EQ(bad_code, 1) << bad;
  EXPECT_NE(bad.find("shardpack verify: " + server_->Url("ds/" + m.shards[0].data.file) +
                     ": record 3 at offset"),
            std::string::npos)
      << bad;
  auto [none_code, none] = run("verify " + server_->Url("none") + cache);
  EXPECT_EQ(none_code, 2) << none;
  auto [usage_code, usage] = run("verify " + server_->Url("ds") + cache + " --cache-bytes 12Q");
  EXPECT_EQ(usage_code, 2) << usage;
}

TEST(RemoteOptionsTest, ByteSizesTakeBinarySuffixes) {
  EXPECT_EQ(*remote::ParseByteSize("1048576"), 1048576u);
  EXPECT_EQ(*remote::ParseByteSize("64G"), 64ull << 30);
  EXPECT_EQ(*remote::ParseByteSize("500MiB"), 500ull << 20);
  EXPECT_EQ(*remote::ParseByteSize("2t"), 2ull << 40);
  EXPECT_EQ(*remote::ParseByteSize("3kb"), 3072u);
  for (const char* bad : {"", "G", "12Q", "-1", "1.5G", "99999999999999999999", "17000000T"}) {
    auto r = remote::ParseByteSize(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(RemoteOptionsTest, UrlsAreRecognisedAndNormalised) {
  EXPECT_TRUE(IsRemotePath("http://h/d"));
  EXPECT_TRUE(IsRemotePath("HTTPS://h/d"));
  EXPECT_FALSE(IsRemotePath("data/http://x"));
  EXPECT_FALSE(IsRemotePath("ftp://h/d"));
  EXPECT_FALSE(IsRemotePath("http://"));
  EXPECT_EQ(*remote::NormalizeDatasetUrl("http://h/d//"), "http://h/d");
  EXPECT_EQ(remote::NormalizeDatasetUrl("http://h/d?sig=1").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(remote::EscapePathSegment("shard-00001-of-00004.tfrecord"),
            "shard-00001-of-00004.tfrecord");
  EXPECT_EQ(remote::EscapePathSegment("a b?#%"), "a%20b%3F%23%25");
}

TEST(RemoteOptionsTest, CacheDefaultsComeFromTheEnvironment) {
  RemoteOptions o;
  o.cache_dir = "/explicit";
  o.cache_bytes = 5;
  EXPECT_EQ(*remote::ResolveCacheDir(o), "/explicit");
  EXPECT_EQ(*remote::ResolveCacheBytes(o), 5u);
  RemoteOptions d;
  ::setenv("SHARDPACK_CACHE_DIR", "/from-env", 1);
  ::setenv("SHARDPACK_CACHE_BYTES", "2G", 1);
  EXPECT_EQ(*remote::ResolveCacheDir(d), "/from-env");
  EXPECT_EQ(*remote::ResolveCacheBytes(d), 2ull << 30);
  ::setenv("SHARDPACK_CACHE_BYTES", "lots", 1);
  EXPECT_EQ(remote::ResolveCacheBytes(d).status().code(), StatusCode::kInvalidArgument);
  ::unsetenv("SHARDPACK_CACHE_DIR");
  ::unsetenv("SHARDPACK_CACHE_BYTES");
  EXPECT_EQ(*remote::ResolveCacheBytes(d), remote::kDefaultCacheBytes);
}

TEST(RemoteOptionsTest, ConnectionsComeFromTheOptionElseTheEnvironment) {
  RemoteOptions d;
  ::unsetenv("SHARDPACK_CONNECTIONS");
  EXPECT_EQ(*remote::ResolveConnections(d), remote::kDefaultConnections);
  ::setenv("SHARDPACK_CONNECTIONS", "32", 1);
  EXPECT_EQ(*remote::ResolveConnections(d), 32);
  RemoteOptions o;
  o.connections = 3;
  EXPECT_EQ(*remote::ResolveConnections(o), 3);
  for (const char* bad : {"0", "257", "-1", "four", "1e3", "99999999999"}) {
    ::setenv("SHARDPACK_CONNECTIONS", bad, 1);
    auto r = remote::ResolveConnections(d);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("SHARDPACK_CONNECTIONS"), std::string::npos);
    EXPECT_NE(r.status().message().find("1 to 256"), std::string::npos) << r.status().message();
  }
  ::unsetenv("SHARDPACK_CONNECTIONS");
  o.connections = -2;
  EXPECT_EQ(remote::ResolveConnections(o).status().code(), StatusCode::kInvalidArgument);
}

// A server that sends 4 KiB every 100 ms (40 KiB/s, never a stall: the stall limit is
// 1 KiB/s) of a 1 MiB body would take 26 s. Each download has a deadline instead: here
// 1 s + 1 MiB at 1 MiB/s, 2 s. The test takes those 2 s, not 26.
RemoteOptions TrickleOptions() {
  RemoteOptions o;
  o.deadline_s = 1;
  o.min_bytes_per_second = 1 << 20;
  o.retry_backoff_ms = 1;
  return o;
}

TEST(RemoteDeadlineTest, AManifestTrickledFasterThanTheStallLimitFailsAtItsDeadline) {
  testing::TricklingServer server(1 << 20, 4096, 100);
  auto m = FetchManifest(server.Url("ds"), TrickleOptions());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kIOError);
  EXPECT_NE(m.status().message().find(server.Url("ds/manifest.json") +
                                      ": not downloaded within its deadline of 2 s (1 s + "
                                      "1048576 bytes at 1048576 bytes/s"),
            std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("SHARDPACK_MIN_RATE"), std::string::npos);
  EXPECT_LT(server.sent(), 1u << 20);  // cut short, not received whole
  EXPECT_EQ(server.requests(), 1);     // a deadline passed is not retried
}

TEST(RemoteDeadlineTest, ARangeTrickledFasterThanTheStallLimitFailsAtItsDeadline) {
  testing::TricklingServer server(1 << 20, 4096, 100);
  auto client = remote::HttpClient::Create(TrickleOptions());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  uint64_t received = 0;
  Status s =
      (*client)->GetRange(server.Url("shard"), 0, 1 << 20, 1 << 20, [&](const uint8_t*, size_t n) {
        received += n;
        return Status::Ok();
      });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find(server.Url("shard") +
                             ": bytes 0-1048575: not downloaded within its deadline of 2 s"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(std::to_string(received) + " of 1048576 bytes received in 1 attempt"),
            std::string::npos)
      << s.message();
  EXPECT_LT(received, 1u << 20);
}

TEST(RemoteDeadlineTest, AMinimumRateThatIsNoRateIsRefusedNamingWhereItCameFrom) {
  const char* before = std::getenv("SHARDPACK_MIN_RATE");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("SHARDPACK_MIN_RATE", "fast", 1);
  auto client = remote::HttpClient::Create(RemoteOptions{});
  if (before != nullptr) {
    ::setenv("SHARDPACK_MIN_RATE", saved.c_str(), 1);
  } else {
    ::unsetenv("SHARDPACK_MIN_RATE");
  }
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(client.status().message().find("SHARDPACK_MIN_RATE: \"fast\" is not a rate"),
            std::string::npos)
      << client.status().message();
  RemoteOptions o;
  EXPECT_EQ(remote::ResolveMinBytesPerSecond(o).value(), remote::kDefaultMinBytesPerSecond);
  o.min_bytes_per_second = 1000;
  EXPECT_EQ(remote::ResolveMinBytesPerSecond(o).value(), 1000u);
}

}  // namespace
}  // namespace shardpack
