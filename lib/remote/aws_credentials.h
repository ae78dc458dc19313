// Credentials for s3:// requests from the sources the AWS CLI and SDKs try after keys in
// the environment and in the profile's files (remote/s3.h), in their order:
//
//   1. credential_process of the profile: the command is run by /bin/sh; its standard
//      output must be the JSON {"Version": 1, "AccessKeyId", "SecretAccessKey",
//      "SessionToken" (optional), "Expiration" (optional, ISO 8601)}. Its standard error
//      goes to ours (it may ask the user something, as `aws sso login` helpers do).
//   2. A container's endpoint (ECS tasks, EKS Pod Identity):
//      AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on http://169.254.170.2), else
//      AWS_CONTAINER_CREDENTIALS_FULL_URI; with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE's
//      contents, else AWS_CONTAINER_AUTHORIZATION_TOKEN, as the Authorization header.
//      The answer: {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"}.
//   3. The instance's metadata service, IMDSv2 (EC2), unless AWS_EC2_METADATA_DISABLED is
//      "true": at AWS_EC2_METADATA_SERVICE_ENDPOINT, else http://169.254.169.254, a
//      session token (PUT /latest/api/token), the instance role's name (GET
//      /latest/meta-data/iam/security-credentials/), then its credentials (GET .../ROLE).
//      One attempt, 1 s to connect: off EC2 nothing answers, and the requests go
//      anonymous, as before.
//
// A source that is configured (1, 2) and fails is an error naming the profile or the
// variable and why (an exit status, an HTTP status, a missing field), never a secret or
// the command's output. The instance's service failing means there is none: no error.
//
// Found credentials are kept for the process (one command run, one metadata round trip,
// however many connections a download opens) until kCredentialsRefreshSeconds before their
// Expiration (an HttpClient holding them resolves them again then); finding none is kept
// for a minute.
//
// Thread-safety: may be called from any thread; calls wait for one another.
#ifndef SHARDPACK_REMOTE_AWS_CREDENTIALS_H_
#define SHARDPACK_REMOTE_AWS_CREDENTIALS_H_

#include <optional>
#include <string>
#include <string_view>

#include "io/env.h"
#include "remote/s3.h"
#include "shardpack/status.h"

namespace shardpack::remote {

inline constexpr int64_t kCredentialsRefreshSeconds = 5 * 60;

struct FoundCredentials {
  std::optional<S3Credentials> credentials;  // nullopt: none, requests go anonymous
  std::string source;  // for messages: "credential_process of profile P in FILE", ...
  // Seconds since the epoch after which they must not be used; 0 when they do not expire.
  int64_t expires = 0;
};

// Looks through sources 1 to 3 for a `config` whose static chain found no keys.
StatusOr<FoundCredentials> FindOtherCredentials(const S3Config& config, const GetEnvFn& getenv,
                                                io::Env* env);

// Parses the JSON of a credential_process ("SessionToken") or of a container or instance
// endpoint ("Token"): InvalidArgument naming `what` and the missing or malformed field.
StatusOr<FoundCredentials> ParseCredentialsJson(std::string_view json, const std::string& what);

// "2026-11-26T14:03:00Z" (or with a fractional second or a +HH:MM offset) as seconds
// since the epoch; InvalidArgument otherwise.
StatusOr<int64_t> ParseIso8601(std::string_view text);

}  // namespace shardpack::remote

#endif  // SHARDPACK_REMOTE_AWS_CREDENTIALS_H_
