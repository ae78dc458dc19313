// A small HTTP(S) client over libcurl for fetching datasets: a bounded GET of a small file
// (the manifest) and a ranged GET that hands each byte of [begin, end) to a sink exactly
// once, in order, resuming after a dropped connection from the last byte received; and,
// for writing to S3 (remote/s3_upload.h), a request that sends a body (PUT, POST, DELETE,
// HEAD).
//
// A URL may also be s3://bucket/key: it is sent to the object's HTTP(S) URL (remote/s3.h;
// configuration from the environment, read at the first s3:// request), signed with AWS
// Signature Version 4 by libcurl (CURLOPT_AWS_SIGV4) when credentials were found, unsigned
// otherwise. Messages still name the s3:// URL, and the S3 error code of the body
// ("HTTP 403 SignatureDoesNotMatch (the secret key does not match the access key)").
// Redirects are not followed for S3 (credentials must not go to another host).
//
// Errors name the URL, the byte range and the HTTP status or the curl error:
//   NotFound           HTTP 404 or 410; S3's NoSuchKey and NoSuchBucket
//   PermissionDenied   HTTP 401 or 403; S3 refused the credentials or what they allow
//                      (AccessDenied, AllAccessDisabled, SignatureDoesNotMatch,
//                      InvalidAccessKeyId, ExpiredToken, InvalidToken)
//   InvalidArgument    S3 refused the request's form (AuthorizationHeaderMalformed: a
//                      wrong region, PermanentRedirect, RequestTimeTooSkewed,
//                      InvalidBucketName), or the S3 configuration is unusable
//                      (remote/s3.h)
//   IOError            network failures (after the retries), other HTTP errors, a
//                      download past its deadline (RemoteOptions::deadline_s)
//   Corruption         the server's answer contradicts the manifest (file size,
//                      Content-Range) or the protocol (200 for a partial range)
//   ResourceExhausted  a body larger than the caller's bound
//   whatever the sink returns, unchanged
//
// Thread-safety: an HttpClient is used by one thread at a time (it owns one curl handle,
// reused so that the connection is kept alive); any number of clients may run at once.
#ifndef SHARDPACK_REMOTE_HTTP_H_
#define SHARDPACK_REMOTE_HTTP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "remote/s3.h"
#include "shardpack/remote.h"
#include "shardpack/status.h"

namespace shardpack::remote {

// Receives body bytes; a non-OK Status aborts the transfer and is returned as is.
using Sink = std::function<Status(const uint8_t* data, size_t n)>;

// A request that sends or changes an object (writing to S3): PUT, POST, DELETE or HEAD;
// or a GET with headers (a credentials endpoint, remote/aws_credentials.h).
struct HttpRequest {
  std::string method = "PUT";
  // More header lines, "Name: value", sent as they are and never put into a message.
  std::vector<std::string> headers;
  // No proxy and no redirect: a credentials endpoint's tokens go to it alone.
  bool direct = false;
  // Appended to the request URL after a '?', as is (already percent-encoded): an s3://
  // URL cannot carry a query itself, its key is encoded whole. "" for none.
  std::string query;
  // Sent as is, as application/octet-stream (PUT and POST only); not copied: it must
  // outlive the call. Sent again in whole by each retry.
  std::string_view body;
  // The most bytes of a response body kept (default 1 MiB); longer is ResourceExhausted.
  uint64_t max_response_bytes = 1 << 20;
};

struct HttpResponse {
  long status = 0;              // a 2xx
  std::string body;             // "" for HEAD
  std::string etag;             // the ETag header, quotes kept; "" when there is none
  int64_t content_length = -1;  // the Content-Length header; -1 when there is none
};

// RemoteOptions::min_bytes_per_second when it is 0: $SHARDPACK_MIN_RATE (bytes per second,
// or with K/M/G/T), else this.
inline constexpr uint64_t kDefaultMinBytesPerSecond = 256 << 10;

// The rate that download deadlines are made of (RemoteOptions::min_bytes_per_second after
// the environment default); InvalidArgument naming SHARDPACK_MIN_RATE when it holds no
// positive rate.
StatusOr<uint64_t> ResolveMinBytesPerSecond(const RemoteOptions& options);

class HttpClient {
 public:
  // Uses the timeouts, deadlines and retry policy of `options`; InvalidArgument for a
  // $SHARDPACK_MIN_RATE that is no rate.
  static StatusOr<std::unique_ptr<HttpClient>> Create(const RemoteOptions& options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // The whole body of `url` (HTTP 200), refused once it passes `max_bytes`. Within its
  // deadline (RemoteOptions::deadline_s), of max_bytes until the Content-Length is known.
  StatusOr<std::string> Get(const std::string& url, uint64_t max_bytes);

  // Bytes [begin, end) of `url`, a file the caller knows to be `file_size` bytes long:
  // every answer must be a 206 whose Content-Range matches the request and that size, or
  // a 200 of exactly `file_size` bytes when the range is the whole file. A dropped
  // connection or a short body is resumed from the first byte not yet received
  // ("Range: bytes=N-(end-1)"), with the retry policy of RemoteOptions, all within the
  // range's deadline (RemoteOptions::deadline_s). begin < end.
  Status GetRange(const std::string& url, uint64_t begin, uint64_t end, uint64_t file_size,
                  const Sink& sink);

  // Sends `request` to `url` and returns the 2xx answer. Retried like Get (the whole body
  // sent again) after a dropped connection, a timeout, an HTTP 5xx/408/429 or S3's
  // SlowDown; errors as Get's (an S3 error status names its code). An S3 answer of 200
  // whose body is an <Error> is the caller's to read (CompleteMultipartUpload).
  StatusOr<HttpResponse> Send(const std::string& url, const HttpRequest& request);

  // HTTP requests sent so far, retries included.
  uint64_t requests() const { return requests_; }

 private:
  struct Transfer;
  struct Outcome;
  explicit HttpClient(const RemoteOptions& options, void* curl);
  struct Target;
  // Where a request for `url` goes: itself, or an s3:// URL's HTTP(S) URL and signing.
  StatusOr<Target> Resolve(const std::string& url);
  struct Deadline;
  Outcome Perform(const Target& target, Transfer* t);
  // Sleeps before the next attempt; false, without sleeping, when the next attempt would
  // start past `deadline`.
  bool Backoff(int* wait_ms, const Deadline* deadline) const;

  RemoteOptions options_;
  uint64_t min_bytes_per_second_ = kDefaultMinBytesPerSecond;
  void* curl_;  // CURL*; kept out of the header so that libcurl's stays private
  // Resolved at the first s3:// request.
  std::unique_ptr<S3Config> s3_;
  uint64_t requests_ = 0;
};

// Runs `work` once on each of `n` clients at once, a thread per client (on the calling
// thread when n is 1), and returns when all have returned; the clients `clients` lacks
// are created first (with `options`). What the work items are, and how a failure stops
// the others, is the caller's (remote/shard_cache.cc, remote/s3_upload.cc).
Status RunOverConnections(std::vector<std::unique_ptr<HttpClient>>* clients, size_t n,
                          const RemoteOptions& options,
                          const std::function<void(HttpClient*)>& work);

// `name` with every byte outside RFC 3986's unreserved set percent-encoded, for appending
// a manifest's file name to a dataset URL.
std::string EscapePathSegment(std::string_view name);

}  // namespace shardpack::remote

#endif  // SHARDPACK_REMOTE_HTTP_H_
