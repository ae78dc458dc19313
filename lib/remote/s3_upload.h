// Publishing a local dataset directory at s3://bucket/prefix (convert's DST): every file
// its manifest lists is uploaded first, manifest.json last, so a reader (which opens the
// manifest first) never finds a dataset half published. A file above the multipart
// threshold goes up as a multipart upload (CreateMultipartUpload, UploadPart,
// CompleteMultipartUpload; AbortMultipartUpload when a part fails); the others in one PUT.
// Files, and the parts of multipart uploads, go up RemoteOptions::connections at a time,
// each over its own connection (the last part of a file to end completes its upload); the
// first failure stops the others, and every multipart upload left unfinished is aborted.
// Every request is signed like a read (remote/http.h) and retried the same way.
//
// Integrity: requests carry x-amz-content-sha256 UNSIGNED-PAYLOAD, and S3-compatible
// servers do not all check Content-MD5 or x-amz-checksum-* (moto ignores both), so each
// object is checked after its upload by a HEAD: its Content-Length must be the file's
// size. The bytes themselves are the manifest's to check: `shardpack verify s3://...`
// downloads every file and compares its XXH3-128.
//
// Resuming: a directory that was published in part records each object it uploaded and
// checked in DIR/.shardpack-upload ("<xxh3-128> <name>" lines). Publishing it again skips
// those whose object still has the file's size (HEAD) and sends the rest.
//
// Errors name s3://bucket/key and S3's code ("HTTP 403 SignatureDoesNotMatch ..."), never
// a secret.
//
// Thread-safety: the functions may run on any threads at once, on different directories.
#ifndef SHARDPACK_REMOTE_S3_UPLOAD_H_
#define SHARDPACK_REMOTE_S3_UPLOAD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "remote/s3.h"
#include "shardpack/remote.h"
#include "shardpack/status.h"

namespace shardpack::remote {

// S3's limits on a multipart upload.
inline constexpr uint64_t kMinPartBytes = 5ull << 20;  // every part but the last
inline constexpr uint64_t kMaxParts = 10000;
// RemoteOptions defaults.
inline constexpr uint64_t kDefaultMultipartThresholdBytes = 100ull << 20;
inline constexpr uint64_t kDefaultPartBytes = 64ull << 20;

// The name of the upload record in a published directory.
inline constexpr std::string_view kUploadRecordName = ".shardpack-upload";

// The multipart threshold and part size that `options` mean, after the environment
// defaults (RemoteOptions). InvalidArgument naming the variable for a value that does not
// parse or is 0.
struct UploadSizes {
  uint64_t multipart_threshold = kDefaultMultipartThresholdBytes;
  uint64_t part_bytes = kDefaultPartBytes;
};
StatusOr<UploadSizes> ResolveUploadSizes(const RemoteOptions& options, const GetEnvFn& getenv);

struct PartRange {
  uint64_t offset = 0;
  uint64_t size = 0;
};
// The parts of a `file_bytes`-byte file: `part_bytes` each (at least 1) but the last,
// grown evenly when that would make more than kMaxParts. One part for an empty file.
std::vector<PartRange> PlanParts(uint64_t file_bytes, uint64_t part_bytes);

// The text of the first <name>...</name> element of an XML body ("UploadId"); "" when
// there is none. S3's answers are flat enough for this; entities are decoded (&amp; etc.).
std::string XmlElementText(std::string_view body, std::string_view name);

// The CompleteMultipartUpload body listing parts 1..N with their ETags (as the server
// gave them, quotes kept).
std::string CompleteMultipartXml(const std::vector<std::string>& etags);

// The query of a multipart request (HttpRequest::query): "uploads=" (create, no ID), or
// "partNumber=N&uploadId=ID" (upload part; N 0: "uploadId=ID", complete and abort). The
// ID is percent-encoded.
std::string MultipartQuery(std::string_view upload_id, int part_number);

struct UploadSummary {
  uint64_t files = 0;    // objects written, manifest.json included
  uint64_t bytes = 0;    // bytes sent in them
  uint64_t skipped = 0;  // files a previous run had uploaded (see "Resuming")
};

// Publishes the dataset in local directory `dir` (manifest.json and the files it lists) at
// the s3:// URL `url`, manifest last; then removes DIR/.shardpack-upload. Errors name the
// s3:// object: those of HttpClient::Send, Corruption for an object whose size after the
// upload differs from the file's, IOError for a CompleteMultipartUpload answered with an
// <Error>. On error the manifest has not been uploaded.
StatusOr<UploadSummary> UploadDataset(const std::string& dir, const std::string& url,
                                      const RemoteOptions& options);

// Whether the object at the s3:// URL exists (HEAD): false for HTTP 404.
StatusOr<bool> ObjectExists(const std::string& url, const RemoteOptions& options);
// Deletes the object at the s3:// URL (S3 answers 204 also when there was none).
Status DeleteObject(const std::string& url, const RemoteOptions& options);

}  // namespace shardpack::remote

#endif  // SHARDPACK_REMOTE_S3_UPLOAD_H_
