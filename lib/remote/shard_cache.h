// The local cache of remote datasets: every file a remote manifest lists is downloaded
// once, checked (exact size, XXH3-128), fsync'd and published under a name that carries
// its checksum, so a published file is by construction the file the manifest describes.
// The cache is bounded in bytes; the least recently used files of datasets no process is
// reading are evicted to make room. docs/REMOTE.md has the whole design.
//
// Layout of the cache directory:
//   .lock                         flock'd (exclusive) to reserve room, evict and publish
//   <key>/                        one per dataset URL: 32 hex digits of XXH3-128(URL)
//                                 (an s3:// URL as written: never the credentials)
//     url                         the dataset's URL, for people
//     .use                        flock'd shared by every process reading the dataset;
//                                 the evictor needs it exclusively to touch its files
//     .fetch                      flock'd exclusively while a process downloads into <key>/
//     .reserved                   sparse; its size: bytes the live download still brings
//     <file>.<xxh3>               a published file (mtime: its last use, for LRU)
//     <file>.<xxh3>.partial       being downloaded
//     <file>.<xxh3>.bad           kept for `verify` to read: its checksum failed
//
// Processes and threads sharing a cache coordinate through these flock(2) locks only (no
// daemon); a process that dies leaves temporaries that the next one to reserve room
// removes, once their lock is free.
#ifndef SHARDPACK_REMOTE_SHARD_CACHE_H_
#define SHARDPACK_REMOTE_SHARD_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "shardpack/manifest.h"
#include "shardpack/remote.h"
#include "shardpack/status.h"

namespace shardpack::remote {

// Default of RemoteOptions::cache_bytes when neither it nor $SHARDPACK_CACHE_BYTES is set.
inline constexpr uint64_t kDefaultCacheBytes = 64ull << 30;

// A remote dataset present in the cache, ready to be read like a local one. While it
// lives, no process evicts its files. Destroying it removes the `.bad` files it kept.
class CachedDataset {
 public:
  ~CachedDataset();
  CachedDataset(const CachedDataset&) = delete;
  CachedDataset& operator=(const CachedDataset&) = delete;

  const std::string& url() const { return url_; }  // without a trailing '/'
  const Manifest& manifest() const { return manifest_; }
  uint64_t manifest_bytes() const { return manifest_bytes_; }
  // The local path of a file the manifest lists; "" for a file that could not be fetched
  // (FetchMode::kVerify only: see failures()).
  std::string PathOf(const std::string& name) const;
  // "<url>/<name>", for messages.
  std::string UrlOf(const std::string& name) const;
  // FetchMode::kVerify: files not fetched (404, wrong size) or failing their checksum,
  // name -> why.
  const std::map<std::string, Status>& failures() const { return failures_; }
  // Bytes downloaded and HTTP requests sent by this fetch (0 when all was cached).
  uint64_t bytes_downloaded() const { return bytes_downloaded_; }
  uint64_t requests() const { return requests_; }

 private:
  friend class Fetcher;
  CachedDataset() = default;
  std::string url_;
  Manifest manifest_;
  uint64_t manifest_bytes_ = 0;
  std::map<std::string, std::string> paths_;
  std::vector<std::string> bad_files_;
  std::map<std::string, Status> failures_;
  uint64_t bytes_downloaded_ = 0;
  uint64_t requests_ = 0;
  int use_fd_ = -1;  // holds .use shared
};

enum class FetchMode {
  // Download what the cache lacks; any file failing its checks fails the fetch.
  kRead,
  // For verify: download every file again, cached or not (the point is to prove what
  // the server holds now); keep a file failing its checksum as <file>.<xxh3>.bad for the
  // caller to read, and list files the server lacks (or has at another size) in
  // failures() instead of failing the fetch.
  kVerify,
};

// Fetches URL/manifest.json, then the files it lists (see FetchMode) in ranges of
// chunk_bytes, up to RemoteOptions::connections ranges at once, each over its own
// connection, written at their offsets; a file is hashed once whole. The first failure
// stops the others, and no file of theirs is published. A file whose size
// or XXH3-128 does not match the manifest is a Corruption error naming its URL and both
// checksums (or sizes), and nothing of it is published in the cache. ResourceExhausted
// when the dataset alone is larger than the bound, or when datasets in use by other
// processes leave no room for it.
StatusOr<std::unique_ptr<CachedDataset>> FetchDataset(const std::string& url,
                                                      const RemoteOptions& options,
                                                      FetchMode mode = FetchMode::kRead);

// The cache directory and bound that `options` mean, after the environment defaults.
StatusOr<std::string> ResolveCacheDir(const RemoteOptions& options);
StatusOr<uint64_t> ResolveCacheBytes(const RemoteOptions& options);
// RemoteOptions::connections after the environment default: 1 to kMaxConnections;
// InvalidArgument naming SHARDPACK_CONNECTIONS (or the option) for anything else.
inline constexpr int kDefaultConnections = 16;
inline constexpr int kMaxConnections = 256;
StatusOr<int> ResolveConnections(const RemoteOptions& options);

// "1048576", "64G", "500MiB", "2t": bytes, with K/M/G/T meaning powers of 1024.
StatusOr<uint64_t> ParseByteSize(std::string_view text);

// The URL without trailing slashes; InvalidArgument for an http(s) URL with a query or
// fragment (the dataset's files are found by appending "/<name>") and for an s3:// URL
// whose bucket name S3 would not take.
StatusOr<std::string> NormalizeDatasetUrl(std::string_view url);

}  // namespace shardpack::remote

#endif  // SHARDPACK_REMOTE_SHARD_CACHE_H_
