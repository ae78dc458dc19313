#include "remote/http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <mutex>
#include <system_error>
#include <thread>

#include "remote/aws_credentials.h"
#include "remote/shard_cache.h"

namespace shardpack::remote {

namespace {

// The system's CA certificates, for a libcurl that knows none of its own: the wheel's is
// built without a CA path (docs/WHEELS.md) because the distributions it runs on keep the
// bundle in different places. Empty where libcurl has a default, or no bundle is found.
const std::string& SystemCaBundle() {
  static const std::string bundle = [] {
    const curl_version_info_data* info = curl_version_info(CURLVERSION_NOW);
    if (info->cainfo != nullptr || info->capath != nullptr) return std::string();
    for (const char* path : {
             "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu, Arch
             "/etc/pki/tls/certs/ca-bundle.crt",                   // RHEL, Rocky, Fedora
             "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL's source of it
             "/etc/ssl/ca-bundle.pem",                             // openSUSE
             "/etc/ssl/cert.pem",                                  // Alpine
         }) {
      if (access(path, R_OK) == 0) return std::string(path);
    }
    return std::string();
  }();
  return bundle;
}

// No request is sent more often than this, whatever progress its attempts make: a server
// that hands out a few bytes per connection must not keep a reader busy forever.
constexpr int kMaxAttemptsPerRequest = 100;
constexpr int kMaxBackoffMs = 10000;
// "Stalled" means below this rate for RemoteOptions::stall_timeout_s.
constexpr long kStallBytesPerSecond = 1024;
constexpr long kMaxRedirects = 5;

// curl_global_init is not thread-safe in every libcurl build; it runs once per process and
// is never undone (curl_global_cleanup would race with clients in other threads).
Status GlobalInit() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) {
    return InternalError(std::string("curl_global_init: ") + curl_easy_strerror(rc));
  }
  return Status::Ok();
}

// Errors a retry can cure: the network or an overloaded server, not the request.
bool Transient(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:  // also a connection cut inside the headers
      return true;
    default:
      return false;
  }
}

bool TransientHttp(long status) { return status == 408 || status == 429 || status >= 500; }

// The most bytes of an S3 error body kept to read its <Code>.
constexpr size_t kMaxErrorBodyBytes = 64 << 10;

bool IsAnyOf(std::string_view code, std::initializer_list<std::string_view> codes) {
  return std::find(codes.begin(), codes.end(), code) != codes.end();
}

std::string RangeText(uint64_t begin, uint64_t end) {
  return "bytes " + std::to_string(begin) + "-" + std::to_string(end - 1);
}

// "bytes B-E/T" (T may be "*"). Returns false when the header does not parse.
bool ParseContentRange(std::string_view v, uint64_t* b, uint64_t* e, int64_t* total) {
  unsigned long long bb, ee, tt;
  char star;
  std::string s(v);
  int n = 0;
  if (std::sscanf(s.c_str(), "bytes %llu-%llu/%llu%n", &bb, &ee, &tt, &n) == 3) {
    *total = static_cast<int64_t>(tt);
  } else if (std::sscanf(s.c_str(), "bytes %llu-%llu/%c%n", &bb, &ee, &star, &n) == 3 &&
             star == '*') {
    *total = -1;
  } else {
    return false;
  }
  *b = bb;
  *e = ee;
  return ee >= bb;
}

// A request's header lines (CURLOPT_HTTPHEADER): libcurl reads them until the transfer
// ends, and they are freed after it.
class HeaderList {
 public:
  // Appends a header line; false when out of memory.
  bool Add(const std::string& line) {
    curl_slist* list = curl_slist_append(list_.get(), line.c_str());
    if (list == nullptr) return false;
    list_.release();  // now part of `list`
    list_.reset(list);
    return true;
  }
  curl_slist* get() const { return list_.get(); }

 private:
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> list_{nullptr, &curl_slist_free_all};
};

// The CA certificates a request is checked against. `chosen`: by the options or the
// environment, which a verification error names; otherwise the system's, if libcurl knows
// none (empty path: libcurl's own).
struct CaBundle {
  std::string path;
  bool chosen = false;
};

CaBundle ChooseCaBundle(const std::string& configured, bool s3) {
  CaBundle ca{configured, false};
  if (ca.path.empty() && s3) ca.path = ProcessEnv("AWS_CA_BUNDLE");
  if (ca.path.empty()) ca.path = ProcessEnv("CURL_CA_BUNDLE");
  ca.chosen = !ca.path.empty();
  if (!ca.chosen) ca.path = SystemCaBundle();
  return ca;
}

// An older libcurl at run time than at build time refuses options it does not know.
Status LibcurlLacks(const char* option, const char* needed) {
  return InternalError("libcurl " + std::string(curl_version_info(CURLVERSION_NOW)->version) +
                       " lacks " + option + " (" + needed + " or newer needed)");
}

}  // namespace

// When a download must be done: `base_s` seconds plus one per `rate` bytes of it, from
// its first attempt. A whole file's bytes are the caller's bound until the server names
// its length.
struct HttpClient::Deadline {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  int base_s = 0;
  uint64_t rate = 1;   // bytes per second
  uint64_t bytes = 0;  // of the download

  double seconds() const {
    return base_s + static_cast<double>(bytes) / static_cast<double>(std::max<uint64_t>(rate, 1));
  }
  std::chrono::steady_clock::time_point at() const {
    return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds()));
  }
  bool passed() const { return std::chrono::steady_clock::now() >= at(); }
  // "its deadline of 64 s (60 s + 1048576 bytes at 262144 bytes/s)", and how to give more.
  std::string Text() const {
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.0f", seconds());
    return std::string("its deadline of ") + secs + " s (" + std::to_string(base_s) + " s + " +
           std::to_string(bytes) + " bytes at " + std::to_string(rate) +
           " bytes/s; a slow link asks for less: SHARDPACK_MIN_RATE, or --min-rate)";
  }
};

// What one HTTP request asks for and what its callbacks saw.
struct HttpClient::Transfer {
  // Request. ranged: [begin, end) of a `file_size`-byte file; otherwise a whole GET bounded
  // by max_bytes.
  bool ranged = false;
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t file_size = 0;
  uint64_t max_bytes = 0;
  const Sink* sink = nullptr;
  std::string* body = nullptr;
  // Send: the request (any 2xx answer is taken).
  const HttpRequest* send = nullptr;
  // Downloads: when the whole download must be done; a whole file's is cut to its
  // Content-Length once known.
  Deadline* deadline = nullptr;
  bool deadline_passed = false;
  // Response.
  CURL* curl = nullptr;
  std::string content_range;  // of the last header block (redirects send several)
  std::string etag;
  bool checked = false;      // status and headers checked at the first body byte
  uint64_t received = 0;     // body bytes handed on by this request
  Status error;              // why a callback aborted the transfer
  bool sink_failed = false;  // `error` is the sink's own
  // S3 requests: an answer >= 300 is not failed by libcurl (CURLOPT_FAILONERROR would
  // drop its body); its status is kept here and its body, which names the error, below.
  bool s3 = false;
  long error_status = 0;
  std::string error_body;

  // For S3: notes an error status before any body byte is taken as data.
  void NoteErrorStatus() {
    if (!s3) return;
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300) error_status = status;
  }

  static size_t OnHeader(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    std::string_view line(data, size * n);
    if (line.rfind("HTTP/", 0) == 0) {  // a new response
      t->content_range.clear();
      t->etag.clear();
    }
    HeaderValue(line, "content-range:", &t->content_range);
    HeaderValue(line, "etag:", &t->etag);
    return size * n;
  }

  // Sets *value to the value of header line `line` when its name is `name` ("etag:").
  static void HeaderValue(std::string_view line, std::string_view name, std::string* value) {
    if (line.size() <= name.size()) return;
    std::string lower(line.substr(0, name.size()));
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower != name) return;
    std::string_view v = line.substr(name.size());
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' ')) {
      v.remove_suffix(1);
    }
    *value = std::string(v);
  }

  static size_t OnBody(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<Transfer*>(self);
    const size_t bytes = size * n;
    if (!t->checked) {
      t->NoteErrorStatus();
      if (t->error_status == 0) t->error = t->CheckHeaders();
      t->checked = true;
    }
    if (t->error_status != 0) {
      t->error_body.append(data, std::min(bytes, kMaxErrorBodyBytes - t->error_body.size()));
      return bytes;
    }
    if (!t->error.ok()) return 0;
    const uint64_t limit = t->ranged ? t->end - t->begin : t->max_bytes;
    if (bytes > limit - t->received) {
      t->error = t->ranged ? CorruptionError("the server sent more than the " +
                                             std::to_string(limit) + " bytes asked for")
                           : ResourceExhaustedError("larger than the limit of " +
                                                    std::to_string(limit) + " bytes");
      return 0;
    }
    Status s = t->ranged ? (*t->sink)(reinterpret_cast<const uint8_t*>(data), bytes)
                         : (t->body->append(data, bytes), Status::Ok());
    if (!s.ok()) {
      t->error = s;
      t->sink_failed = true;
      return 0;
    }
    t->received += bytes;
    return bytes;
  }

  // libcurl's progress callback: about once a second, and as bytes arrive. Aborts the
  // transfer once the download's deadline has passed.
  static int OnProgress(void* self, curl_off_t download_total, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(self);
    if (t->deadline == nullptr) return 0;
    if (!t->ranged && download_total > 0 &&
        static_cast<uint64_t>(download_total) < t->deadline->bytes) {
      t->deadline->bytes = static_cast<uint64_t>(download_total);
    }
    if (!t->deadline->passed()) return 0;
    t->deadline_passed = true;
    return 1;
  }

  // The status line and headers against the request, at the first body byte.
  Status CheckHeaders();

  // Setting up the request on `curl`, which keeps pointers into what they are given
  // (`headers`, `sigv4`, `range`) until the transfer ends. Authentication and header
  // lines: InternalError when libcurl lacks SigV4 or memory runs out.
  Status SetHeaders(const Target& target, HeaderList* headers, std::string* sigv4);
  // The callbacks, the timeouts and the download's deadline.
  void SetCallbacks(const RemoteOptions& options);
  // The method, the body sent, the range or the size limit.
  void SetMethod(std::string* range);
  bool SendsBody() const {
    return send != nullptr && (send->method == "PUT" || send->method == "POST");
  }
  // What curl_easy_perform's `rc` and the callbacks' findings mean for the request.
  Outcome Result(CURLcode rc, const std::string& error_message, bool anonymous,
                 const CaBundle& ca) const;
};

Status HttpClient::Transfer::CheckHeaders() {
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_off_t length = -1;
  curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
  if (send != nullptr) {
    if (status < 200 || status > 299) {
      return IOError("HTTP " + std::to_string(status) + ", expected 2xx");
    }
    return Status::Ok();  // a HEAD's Content-Length is the object's, not a body's
  }
  if (!ranged) {
    if (status != 200) return IOError("HTTP " + std::to_string(status) + ", expected 200");
    if (length >= 0 && static_cast<uint64_t>(length) > max_bytes) {
      return ResourceExhaustedError("Content-Length " + std::to_string(length) +
                                    " is above the limit of " + std::to_string(max_bytes) +
                                    " bytes");
    }
    return Status::Ok();
  }
  if (status == 200) {
    // Whole-file answers are fine for a whole-file request; anything else means the
    // server ignores ranges and would send bytes we did not ask for.
    if (begin != 0 || end != file_size) {
      return CorruptionError("HTTP 200 for a range request: the server does not serve ranges");
    }
    if (length >= 0 && static_cast<uint64_t>(length) != file_size) {
      return CorruptionError("the server's file is " + std::to_string(length) +
                             " bytes, the manifest says " + std::to_string(file_size));
    }
    return Status::Ok();
  }
  if (status != 206) return IOError("HTTP " + std::to_string(status) + ", expected 206");
  uint64_t b, e;
  int64_t total;
  if (!ParseContentRange(content_range, &b, &e, &total)) {
    return CorruptionError("HTTP 206 with Content-Range \"" + content_range +
                           "\", expected \"bytes " + std::to_string(begin) + "-" +
                           std::to_string(end - 1) + "/" + std::to_string(file_size) + "\"");
  }
  if (total >= 0 && static_cast<uint64_t>(total) != file_size) {
    return CorruptionError("the server's file is " + std::to_string(total) +
                           " bytes, the manifest says " + std::to_string(file_size));
  }
  if (b != begin || e != end - 1) {
    return CorruptionError("HTTP 206 with Content-Range \"" + content_range + "\" for " +
                           RangeText(begin, end));
  }
  return Status::Ok();
}

struct HttpClient::Outcome {
  Status status;
  bool transient = false;
};

struct HttpClient::Target {
  std::string url;               // http(s)
  const S3Config* s3 = nullptr;  // for an s3:// URL
};

namespace {

struct ErrorOutcome {
  Status status;
  bool transient;
};

// The error for an HTTP error status, with S3's error `code` when the body had one.
ErrorOutcome HttpError(long status, const std::string& code, bool ranged, uint64_t file_size,
                       bool anonymous) {
  std::string what = "HTTP " + std::to_string(status);
  if (!code.empty()) {
    what += " " + code;
    std::string hint(S3ErrorHint(code));
    if (anonymous && IsAnyOf(code, {"AccessDenied", "AllAccessDisabled"})) {
      hint =
          "no credentials were found, so the request was anonymous: set AWS_ACCESS_KEY_ID "
          "and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE";
    }
    if (!hint.empty()) what += " (" + hint + ")";
    if (IsAnyOf(code, {"NoSuchKey", "NoSuchBucket"})) return {NotFoundError(what), false};
    if (IsAnyOf(code, {"AccessDenied", "AllAccessDisabled", "SignatureDoesNotMatch",
                       "InvalidAccessKeyId", "ExpiredToken", "InvalidToken"})) {
      return {PermissionDeniedError(what), false};
    }
    if (IsAnyOf(code, {"AuthorizationHeaderMalformed", "PermanentRedirect", "RequestTimeTooSkewed",
                       "InvalidBucketName"})) {
      return {InvalidArgumentError(what), false};
    }
    if (IsAnyOf(code, {"SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable"})) {
      return {IOError(what), true};
    }
  } else if (status == 404 || status == 410) {
    return {NotFoundError(what + " (not found)"), false};
  }
  // Any other refusal (S3's AccountProblem, InvalidObjectState, a plain server's 403).
  if (status == 401 || status == 403) {
    if (code.empty()) what += status == 401 ? " (unauthorized)" : " (forbidden)";
    return {PermissionDeniedError(what), false};
  }
  if (status == 416 && ranged) {
    return {CorruptionError(what +
                            " (range not satisfiable): the server's file is shorter "
                            "than the manifest's " +
                            std::to_string(file_size) + " bytes"),
            false};
  }
  if (status == 404 || status == 410) return {NotFoundError(what), false};
  return {IOError(what), TransientHttp(status)};
}

}  // namespace

StatusOr<HttpClient::Target> HttpClient::Resolve(const std::string& url) {
  if (!IsS3Url(url)) return Target{url, nullptr};
  // Temporary credentials are fetched again before they expire (a long upload, say).
  if (s3_ != nullptr && s3_->credentials_expire != 0 &&
      std::time(nullptr) > s3_->credentials_expire - kCredentialsRefreshSeconds) {
    s3_.reset();
  }
  if (s3_ == nullptr) {
    SHARDPACK_ASSIGN_OR_RETURN(S3Config config, ResolveS3Config());
    s3_ = std::make_unique<S3Config>(std::move(config));
  }
  SHARDPACK_ASSIGN_OR_RETURN(S3Object object, ParseS3Url(url));
  return Target{S3HttpUrl(*s3_, object), s3_.get()};
}

StatusOr<uint64_t> ResolveMinBytesPerSecond(const RemoteOptions& options) {
  if (options.min_bytes_per_second > 0) return options.min_bytes_per_second;
  const std::string v = ProcessEnv("SHARDPACK_MIN_RATE");
  if (v.empty()) return kDefaultMinBytesPerSecond;
  auto rate = ParseByteSize(v);
  if (!rate.ok() || *rate == 0) {
    return InvalidArgumentError("SHARDPACK_MIN_RATE: \"" + v +
                                "\" is not a rate (bytes per second above 0, or a number "
                                "with K, M or G: 64K)");
  }
  return rate;
}

StatusOr<std::unique_ptr<HttpClient>> HttpClient::Create(const RemoteOptions& options) {
  SHARDPACK_RETURN_IF_ERROR(GlobalInit());
  SHARDPACK_ASSIGN_OR_RETURN(const uint64_t rate, ResolveMinBytesPerSecond(options));
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return InternalError("curl_easy_init failed");
  auto client = std::unique_ptr<HttpClient>(new HttpClient(options, curl));
  client->min_bytes_per_second_ = rate;
  return client;
}

HttpClient::HttpClient(const RemoteOptions& options, void* curl) : options_(options), curl_(curl) {}

HttpClient::~HttpClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

Status HttpClient::Transfer::SetHeaders(const Target& target, HeaderList* headers,
                                        std::string* sigv4) {
  const Status out_of_memory = InternalError("curl_slist_append: out of memory");
  const bool direct = send != nullptr && send->direct;
  if (direct) curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  if (target.s3 == nullptr) {
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, direct ? 0L : 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, kMaxRedirects);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
  } else if (const auto& c = target.s3->credentials) {
    *sigv4 = "aws:amz:" + target.s3->region + ":s3";
    if (curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4->c_str()) != CURLE_OK) {
      return LibcurlLacks("CURLOPT_AWS_SIGV4", "7.75");
    }
    curl_easy_setopt(curl, CURLOPT_USERNAME, c->access_key_id.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, c->secret_access_key.c_str());
    // S3 refuses a SigV4 request without it. The payload is not hashed into the
    // signature (that would read every uploaded byte once more); uploads are checked by
    // their size after the fact (remote/s3_upload.h).
    if (!headers->Add("x-amz-content-sha256: UNSIGNED-PAYLOAD") ||
        (!c->session_token.empty() && !headers->Add("x-amz-security-token: " + c->session_token))) {
      return out_of_memory;
    }
  }
  // Without it libcurl sends a form's type, which is no object's.
  if (SendsBody() && !headers->Add("Content-Type: application/octet-stream")) {
    return out_of_memory;
  }
  if (send != nullptr) {
    for (const std::string& line : send->headers) {
      if (!headers->Add(line)) return out_of_memory;
    }
  }
  if (headers->get() != nullptr) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers->get());
  return Status::Ok();
}

void HttpClient::Transfer::SetCallbacks(const RemoteOptions& options) {
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "shardpack/" SHARDPACK_VERSION);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(options.connect_timeout_s));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, kStallBytesPerSecond);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.stall_timeout_s));
  curl_easy_setopt(curl, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, &Transfer::OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, this);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &Transfer::OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, this);
  if (deadline != nullptr) {
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, &Transfer::OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    // A backstop for the phases that report no progress; the callback cuts sooner once a
    // file's length is known.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline->at() - std::chrono::steady_clock::now());
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::max<int64_t>(left.count(), 1)));
  }
}

void HttpClient::Transfer::SetMethod(std::string* range) {
  if (send != nullptr) {
    const HttpRequest& r = *send;
    if (r.method == "HEAD") {
      // No size limit: a HEAD's Content-Length is the object's.
      curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    } else {
      curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r.method.c_str());
      if (SendsBody()) {
        // Sent from the caller's memory, not copied ("" rather than a null pointer, which
        // would make libcurl read the body from stdin).
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, r.body.empty() ? "" : r.body.data());
      }
      curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE,
                       static_cast<curl_off_t>(r.max_response_bytes));
    }
  } else if (ranged) {
    *range = std::to_string(begin) + "-" + std::to_string(end - 1);
    curl_easy_setopt(curl, CURLOPT_RANGE, range->c_str());
  } else {
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(max_bytes));
  }
}

HttpClient::Outcome HttpClient::Transfer::Result(CURLcode rc, const std::string& error_message,
                                                 bool anonymous, const CaBundle& ca) const {
  if (deadline != nullptr && rc != CURLE_OK && !sink_failed &&
      (deadline_passed || deadline->passed())) {
    return {IOError("not downloaded within " + deadline->Text()), false};
  }
  if (error_status != 0) {
    // Even when the connection dropped inside the error body: the status is known.
    ErrorOutcome e = HttpError(error_status, S3ErrorCode(error_body), ranged, file_size, anonymous);
    return {e.status, e.transient};
  }
  if (!error.ok()) return {error, false};
  if (rc == CURLE_HTTP_RETURNED_ERROR) {
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    ErrorOutcome e = HttpError(status, "", ranged, file_size, anonymous);
    return {e.status, e.transient};
  }
  if (rc == CURLE_FILESIZE_EXCEEDED) {
    return {
        ResourceExhaustedError("larger than the limit of " + std::to_string(max_bytes) + " bytes"),
        false};
  }
  if (rc != CURLE_OK) {
    std::string what = !error_message.empty() ? error_message : curl_easy_strerror(rc);
    if (rc == CURLE_PEER_FAILED_VERIFICATION) {
      what += ca.chosen ? " (checked against " + ca.path + ")"
                        : " (a server signed by a private CA: set CURL_CA_BUNDLE, or "
                          "AWS_CA_BUNDLE for s3://, to its certificate file)";
    }
    return {IOError(what + " (curl error " + std::to_string(static_cast<int>(rc)) + ")"),
            Transient(rc)};
  }
  if (ranged && received != end - begin) {
    return {IOError("short body: " + std::to_string(received) + " of " +
                    std::to_string(end - begin) + " bytes"),
            true};
  }
  return {Status::Ok(), false};
}

HttpClient::Outcome HttpClient::Perform(const Target& target, Transfer* t) {
  CURL* curl = static_cast<CURL*>(curl_);
  t->curl = curl;
  t->s3 = target.s3 != nullptr;
  // Options are set anew for every request: curl_easy_reset keeps the connection cache.
  curl_easy_reset(curl);
  char error_text[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_URL, target.url.c_str());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: threads
  // A redirect must not lead to file:// or any other scheme. An older libcurl at run time
  // than at build time would refuse these options: then nothing is fetched.
  if (curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
      curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK) {
    return {LibcurlLacks("CURLOPT_PROTOCOLS_STR", "7.85"), false};
  }
  const CaBundle ca = ChooseCaBundle(options_.ca_bundle, target.s3 != nullptr);
  if (!ca.path.empty()) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca.path.c_str());
    curl_easy_setopt(curl, CURLOPT_CAPATH, nullptr);  // the bundle only, not also the system's
  }
  HeaderList headers;
  std::string sigv4;
  if (Status s = t->SetHeaders(target, &headers, &sigv4); !s.ok()) return {s, false};
  t->SetCallbacks(options_);
  std::string range;
  t->SetMethod(&range);
  ++requests_;
  const CURLcode rc = curl_easy_perform(curl);
  // The buffer lives on this stack frame: libcurl must not keep the pointer past it.
  const std::string error_message = error_text;
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  if (!t->checked && rc == CURLE_OK) {
    // An empty body never reaches OnBody; its headers are checked here.
    t->NoteErrorStatus();
    if (t->error_status == 0) t->error = t->CheckHeaders();
  }
  const bool anonymous = target.s3 != nullptr && !target.s3->credentials;
  return t->Result(rc, error_message, anonymous, ca);
}

bool HttpClient::Backoff(int* wait_ms, const Deadline* deadline) const {
  *wait_ms = std::clamp(*wait_ms, 1, kMaxBackoffMs);  // before sleeping and doubling
  const auto wake = std::chrono::steady_clock::now() + std::chrono::milliseconds(*wait_ms);
  if (deadline != nullptr && wake >= deadline->at()) return false;
  std::this_thread::sleep_until(wake);
  *wait_ms = std::min(kMaxBackoffMs, *wait_ms * 2);
  return true;
}

StatusOr<std::string> HttpClient::Get(const std::string& url, uint64_t max_bytes) {
  auto target = Resolve(url);
  if (!target.ok()) return target.status().WithPrefix(url);
  Deadline deadline{
      .base_s = options_.deadline_s, .rate = min_bytes_per_second_, .bytes = max_bytes};
  int wait_ms = options_.retry_backoff_ms;
  for (int attempt = 1;; ++attempt) {
    std::string body;
    Transfer t;
    t.max_bytes = max_bytes;
    t.body = &body;
    t.deadline = &deadline;
    Outcome o = Perform(*target, &t);
    if (o.status.ok()) return body;
    const std::string tries = attempt > 1 ? " (" + std::to_string(attempt) + " attempts)" : "";
    // A small file is fetched again from its start: there is nothing worth resuming.
    if (!o.transient || attempt > options_.max_retries || attempt >= kMaxAttemptsPerRequest) {
      return o.status.WithPrefix(url + tries);
    }
    if (!Backoff(&wait_ms, &deadline)) {
      return IOError(url + tries + ": not downloaded within " + deadline.Text() +
                     ": the last attempt failed: " + o.status.message());
    }
  }
}

Status HttpClient::GetRange(const std::string& url, uint64_t begin, uint64_t end,
                            uint64_t file_size, const Sink& sink) {
  auto target = Resolve(url);
  if (!target.ok()) return target.status().WithPrefix(url);
  uint64_t next = begin;
  Deadline deadline{
      .base_s = options_.deadline_s, .rate = min_bytes_per_second_, .bytes = end - begin};
  int wait_ms = options_.retry_backoff_ms;
  int failures = 0;  // in a row, without a byte received
  for (int attempt = 1;; ++attempt) {
    Transfer t;
    t.ranged = true;
    t.begin = next;
    t.end = end;
    t.file_size = file_size;
    t.sink = &sink;
    t.deadline = &deadline;
    Outcome o = Perform(*target, &t);
    next += t.received;
    if (o.status.ok()) return Status::Ok();
    const std::string where = url + ": " + RangeText(begin, end);
    const std::string received =
        std::to_string(next - begin) + " of " + std::to_string(end - begin) +
        " bytes received in " + std::to_string(attempt) + (attempt == 1 ? " attempt" : " attempts");
    if (t.sink_failed) return o.status;  // the sink's error says what it is about
    if (t.deadline_passed) return IOError(where + ": " + o.status.message() + "; " + received);
    if (!o.transient) return o.status.WithPrefix(where);
    failures = t.received > 0 ? 0 : failures + 1;
    if (failures > options_.max_retries || attempt >= kMaxAttemptsPerRequest) {
      return IOError(where + ": gave up after " + std::to_string(attempt) + " attempts, " +
                     std::to_string(next - begin) + " of " + std::to_string(end - begin) +
                     " bytes received: " + o.status.message());
    }
    if (t.received > 0) wait_ms = options_.retry_backoff_ms;
    if (!Backoff(&wait_ms, &deadline)) {
      return IOError(where + ": not downloaded within " + deadline.Text() + "; " + received +
                     ", the last failing with: " + o.status.message());
    }
  }
}

StatusOr<HttpResponse> HttpClient::Send(const std::string& url, const HttpRequest& request) {
  auto target = Resolve(url);
  if (!target.ok()) return target.status().WithPrefix(url);
  if (!request.query.empty()) target->url += "?" + request.query;
  int wait_ms = options_.retry_backoff_ms;
  for (int attempt = 1;; ++attempt) {
    HttpResponse response;
    Transfer t;
    t.send = &request;
    t.max_bytes = request.max_response_bytes;
    t.body = &response.body;
    Outcome o = Perform(*target, &t);
    if (o.status.ok()) {
      CURL* curl = static_cast<CURL*>(curl_);
      curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
      curl_off_t length = -1;
      curl_easy_getinfo(curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
      response.content_length = length;
      response.etag = t.etag;
      return response;
    }
    if (!o.transient || attempt > options_.max_retries || attempt >= kMaxAttemptsPerRequest) {
      std::string tries = attempt > 1 ? " (" + std::to_string(attempt) + " attempts)" : "";
      return o.status.WithPrefix(url + tries);
    }
    (void)Backoff(&wait_ms, nullptr);
  }
}

Status RunOverConnections(std::vector<std::unique_ptr<HttpClient>>* clients, size_t n,
                          const RemoteOptions& options,
                          const std::function<void(HttpClient*)>& work) {
  n = std::max<size_t>(n, 1);
  while (clients->size() < n) {
    SHARDPACK_ASSIGN_OR_RETURN(auto client, HttpClient::Create(options));
    clients->push_back(std::move(client));
  }
  if (n == 1) {
    work((*clients)[0].get());
    return Status::Ok();
  }
  std::vector<std::thread> threads;
  Status started;
  for (size_t t = 0; t < n; ++t) {
    try {
      threads.emplace_back(work, (*clients)[t].get());
    } catch (const std::system_error& e) {
      // Those started finish the work between them; fewer connections, not a failure.
      if (threads.empty()) {
        started = ResourceExhaustedError(std::string("no thread for a connection: ") + e.what());
      }
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  return started;
}

std::string EscapePathSegment(std::string_view name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : name) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace shardpack::remote
