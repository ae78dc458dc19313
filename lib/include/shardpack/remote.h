// Datasets over HTTP(S): a dataset path may be an http:// or https:// URL of a directory
// served by any web server that answers range requests (nginx, Apache, S3, GCS). The
// manifest is fetched, then every shard (and .idx file) is downloaded with range requests
// into a bounded local cache directory, checked against the manifest's size and XXH3-128,
// and published there atomically; the dataset is then read from the cache exactly as a
// local one (memory-mapped). docs/REMOTE.md describes the cache and the failure behaviour.
//
// A dataset path may also be s3://bucket/prefix (AWS S3, or any S3-compatible store at
// AWS_ENDPOINT_URL): requests are signed with AWS Signature Version 4 using the standard
// credentials chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN, else
// AWS_PROFILE in ~/.aws/credentials or its credential_process, else a container's or the
// EC2 instance's role), or sent unsigned when none is found (public buckets). Files move
// over RemoteOptions::connections connections at once. The cache keys such a dataset by its s3://
// URL; messages name s3://bucket/key and S3's error code; no secret appears in any message or file.
// docs/REMOTE.md, "S3". Convert writes to s3://bucket/prefix through a local staging directory, the
// manifest uploaded last (shardpack/convert.h; docs/REMOTE.md, "Writing to S3").
//
//   DatasetOptions o;
//   o.remote.cache_bytes = 200ull << 30;   // or SHARDPACK_CACHE_BYTES=200G
//   auto ds = Dataset::Open("http://data.example/imagenet-256", o);
//
// Thread-safety: every function here may be called from any thread; processes (and
// threads) sharing a cache directory coordinate through file locks.
#ifndef SHARDPACK_REMOTE_H_
#define SHARDPACK_REMOTE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "shardpack/manifest.h"
#include "shardpack/status.h"

namespace shardpack {

struct RemoteOptions {
  // The cache directory. Empty (the default): $SHARDPACK_CACHE_DIR, else
  // $XDG_CACHE_HOME/shardpack, else $HOME/.cache/shardpack. Created when missing.
  std::string cache_dir;
  // The most bytes the cache may hold, all datasets together. 0 (the default):
  // $SHARDPACK_CACHE_BYTES (bytes, or with a K/M/G/T suffix, powers of 1024), else 64 GiB.
  // A dataset larger than the bound is a ResourceExhausted error naming both numbers.
  uint64_t cache_bytes = 0;
  // Bytes asked for per range request (default 16 MiB).
  uint64_t chunk_bytes = 16ull << 20;
  // Retries of a request after a dropped connection, a short body, a timeout or an HTTP
  // 5xx/408/429, each resuming from the last byte received. A retry that received bytes
  // before failing does not count against the limit (a flaky link makes progress), but no
  // request is tried more than 100 times. Default 5.
  int max_retries = 5;
  // Wait before the first retry, doubled after each failure up to 10 s. Default 200 ms.
  int retry_backoff_ms = 200;
  // Seconds allowed to connect (default 15).
  int connect_timeout_s = 15;
  // A transfer moving less than 1 KiB/s for this many seconds is abandoned (and retried).
  // Default 30.
  int stall_timeout_s = 30;
  // Every download ends within its deadline or fails: an IOError naming the URL, the
  // deadline and the bytes received. A download (a range of a shard, the manifest) has,
  // over all its attempts, deadline_s seconds plus one second per min_bytes_per_second
  // bytes of it: the range's length; for a whole file, its Content-Length once the server
  // has sent one, the caller's bound until then (256 MiB for a manifest). The stall limit
  // alone lets a server that trickles just over 1 KiB/s keep a reader for days.
  // deadline_s: default 60. min_bytes_per_second: 0 (the default) is
  // $SHARDPACK_MIN_RATE (bytes per second, or with K/M/G/T: "64K"), else 256 KiB/s:
  // a 16 MiB range then has 124 s, a 1 MB manifest 64 s; 16 connections at that rate
  // need 32 Mbit/s. A slower link asks for less (1 makes the deadline practically none).
  int deadline_s = 60;
  uint64_t min_bytes_per_second = 0;

  // A file of PEM certificates that HTTPS servers must be signed by, instead of the
  // system's store. "" (the default): $AWS_CA_BUNDLE for s3:// requests, else
  // $CURL_CA_BUNDLE, else the system's (a private CA's MinIO, a proxy that re-signs).
  std::string ca_bundle;
  // Transfers at once, each over its own connection: ranges of chunk_bytes downloaded
  // (from one file or several), files uploaded. 0 (the default): $SHARDPACK_CONNECTIONS,
  // else 16 (docs/REMOTE.md has the measurement). 1 to 256.
  int connections = 0;

  // Writing to S3 (convert's DST s3://bucket/prefix). A file larger than
  // multipart_threshold_bytes is sent as a multipart upload of part_bytes parts (the last
  // shorter). 0 (the defaults): $SHARDPACK_S3_MULTIPART_BYTES, else 100 MiB; and
  // $SHARDPACK_S3_PART_BYTES, else 64 MiB (bytes, or with a K/M/G/T suffix). S3 refuses
  // parts below 5 MiB but the last; a file that would take more than 10000 parts is cut
  // into larger ones.
  uint64_t multipart_threshold_bytes = 0;
  uint64_t part_bytes = 0;
};

// True when `path` starts with http://, https:// or s3:// (case-insensitive scheme).
bool IsRemotePath(std::string_view path);

// Fetches and checks URL/manifest.json (at most 256 MiB) without downloading any shard:
// what `shardpack info URL` shows. Errors name the URL: NotFound for an HTTP 404 (S3:
// NoSuchKey, NoSuchBucket), PermissionDenied for an HTTP 401/403 (S3 refusing the
// credentials: AccessDenied, SignatureDoesNotMatch, ...), InvalidArgument for an unusable
// S3 configuration or a request S3 refuses by its form (a wrong region), IOError for a network
// failure after the retries, Corruption for a bad manifest.
StatusOr<Manifest> FetchManifest(const std::string& url, const RemoteOptions& options = {});

// The manifest of the dataset at `path`: FetchManifest for an http(s):// or s3:// URL,
// ReadManifest for a local directory; a path with any other URL scheme (gs://, hdfs://,
// ...) is an InvalidArgument error naming it.
StatusOr<Manifest> LoadManifest(const std::string& path, const RemoteOptions& options = {});

}  // namespace shardpack

#endif  // SHARDPACK_REMOTE_H_
