// Datasets in S3 (and S3-compatible stores: GCS's XML API with HMAC keys, MinIO, Ceph):
// what an s3://bucket/key URL means as an HTTP request. The pieces are pure, for tests:
// the credentials chain read from the environment and the AWS CLI's files, the request
// URL (virtual-host or path-style addressing), and the error code of an S3 error body.
// HttpClient (remote/http.h) signs the requests (AWS Signature Version 4, by libcurl).
//
// No function here puts a secret key or a session token into a message: errors name the
// variable or the file and profile, never their values.
//
// Thread-safety: all functions are pure or read files only; call them from any thread.
#ifndef SHARDPACK_REMOTE_S3_H_
#define SHARDPACK_REMOTE_S3_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "io/env.h"
#include "shardpack/status.h"

namespace shardpack::remote {

// True when `url` starts with s3:// (case-insensitive scheme).
bool IsS3Url(std::string_view url);

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" for long-term keys
};

enum class S3Addressing {
  kAuto,     // path-style when an endpoint URL is set or the bucket name has a '.'
  kPath,     // ENDPOINT/bucket/key
  kVirtual,  // https://bucket.HOST/key
};

// Where and how requests for s3:// URLs go. Resolved once per HttpClient.
struct S3Config {
  // nullopt: none were found, requests are sent unsigned (public buckets).
  std::optional<S3Credentials> credentials;
  // Where the credentials came from, for messages: "AWS_ACCESS_KEY_ID" or
  // "profile NAME in FILE" (remote/aws_credentials.h names the others); "" when anonymous.
  std::string credentials_source;
  // When the profile has no keys: its credential_process command ("" for none) and where
  // it was found, for remote/aws_credentials.h to run.
  std::string credential_process;
  std::string credential_process_source;
  // Seconds since the epoch when temporary credentials from those sources expire; 0 for
  // credentials that do not (HttpClient resolves the configuration again before then).
  int64_t credentials_expire = 0;
  std::string region = "us-east-1";
  // "scheme://host[:port][/path]" without a trailing '/'; "" means AWS
  // (https://s3.REGION.amazonaws.com).
  std::string endpoint;
  S3Addressing addressing = S3Addressing::kAuto;
};

// Looks up an environment variable; "" when it is unset.
using GetEnvFn = std::function<std::string(const char* name)>;
// The process's environment, as a GetEnvFn.
std::string ProcessEnv(const char* name);

// The standard chain, as the AWS CLI and SDKs read it:
//   credentials  AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN); else
//                profile AWS_PROFILE (default "default") in AWS_SHARED_CREDENTIALS_FILE
//                (default ~/.aws/credentials), section [NAME], keys aws_access_key_id,
//                aws_secret_access_key, aws_session_token (or the same keys in the config
//                file's profile section); else the profile's credential_process is noted
//                (run by remote/aws_credentials.h, as are the container's and the
//                instance's sources); else none (anonymous)
//   region       AWS_REGION, else AWS_DEFAULT_REGION, else `region` of the profile in
//                AWS_CONFIG_FILE (default ~/.aws/config; section [profile NAME], or
//                [default] for the default profile), else us-east-1
//   endpoint     AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS's
//   addressing   SHARDPACK_S3_ADDRESSING=path|virtual, else kAuto
// InvalidArgument naming the variable or file for: only one of the two key variables set,
// an AWS_PROFILE that neither file has, a region that is not [a-z0-9-], an endpoint that is
// not an http(s) URL, an unknown addressing. Files that do not exist are skipped; other
// read errors are returned naming the file.
StatusOr<S3Config> ResolveS3Config(const GetEnvFn& getenv, io::Env* env);
// The same with the process's environment and the POSIX file system, then, when it found
// no keys, the credential_process, container and instance sources
// (remote/aws_credentials.h).
StatusOr<S3Config> ResolveS3Config();

// Sections of an INI file (the AWS CLI's files): section -> key -> value. Keys are
// lower-cased; keys and values trimmed; lines starting with '#' or ';' are comments;
// keys before the first section are dropped; a repeated key keeps its last value.
using IniFile = std::map<std::string, std::map<std::string, std::string>>;
IniFile ParseIni(std::string_view text);

struct S3Object {
  std::string bucket;
  std::string key;  // as written in the URL (not percent-decoded); may be ""
};

// Splits s3://BUCKET/KEY. InvalidArgument naming the URL for a bucket name that is not
// 3 to 63 characters of lower-case letters, digits, '.' and '-' (the names S3 allows; it
// also keeps a bucket from changing the host of a virtual-host URL).
StatusOr<S3Object> ParseS3Url(std::string_view url);

// The HTTP(S) URL of an object, each '/'-separated segment of its key percent-encoded.
std::string S3HttpUrl(const S3Config& config, const S3Object& object);

// The <Code> of an S3 error body ("NoSuchKey"); "" when there is none or it is not a plain
// word (a body from something else than S3 must not put arbitrary text into messages).
std::string S3ErrorCode(std::string_view body);

// What an S3 error code means for a reader, in a few words ("the bucket does not exist");
// "" for codes without one.
std::string_view S3ErrorHint(std::string_view code);

}  // namespace shardpack::remote

#endif  // SHARDPACK_REMOTE_S3_H_
