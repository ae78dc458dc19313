#include "remote/aws_credentials.h"

#include <sys/wait.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "remote/http.h"

namespace shardpack::remote {

namespace {

constexpr char kContainerHost[] = "http://169.254.170.2";
constexpr char kInstanceEndpoint[] = "http://169.254.169.254";
// A credentials answer is a few hundred bytes.
constexpr uint64_t kMaxAnswerBytes = 64 << 10;
// How long finding no credentials is kept: a slow answer of the instance's service must
// not make a long-lived process anonymous for good.
constexpr int64_t kNoneKeptSeconds = 60;

bool IsHttpUrl(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t start = 0;
  while (start < s.size() && (s[start] == ' ' || s[start] == '\t')) ++start;
  return s.substr(start);
}

// Runs `command` by /bin/sh and returns its standard output (at most kMaxAnswerBytes).
StatusOr<std::string> RunProcess(const std::string& command, const std::string& what) {
  FILE* p = ::popen(command.c_str(), "re");
  if (p == nullptr) return ErrnoError(what + ": cannot run credential_process", errno);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
    if (out.size() + n > kMaxAnswerBytes) {
      ::pclose(p);
      return InvalidArgumentError(what + ": credential_process wrote more than " +
                                  std::to_string(kMaxAnswerBytes) + " bytes");
    }
    out.append(buf, n);
  }
  const int status = ::pclose(p);
  if (status == -1) return ErrnoError(what + ": credential_process", errno);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return InvalidArgumentError(what + ": credential_process " +
                                (WIFEXITED(status)
                                     ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                     : "was killed by signal " + std::to_string(WTERMSIG(status))) +
                                " (its standard error is above)");
  }
  return out;
}

StatusOr<FoundCredentials> FromProcess(const S3Config& config) {
  const std::string what = "credential_process of " + config.credential_process_source;
  SHARDPACK_ASSIGN_OR_RETURN(std::string out, RunProcess(config.credential_process, what));
  SHARDPACK_ASSIGN_OR_RETURN(FoundCredentials found, ParseCredentialsJson(out, what));
  found.source = what;
  return found;
}

// A GET with headers to a credentials endpoint, over a client of its own.
StatusOr<std::string> Fetch(const std::string& method, const std::string& url,
                            std::vector<std::string> headers, int connect_timeout_s,
                            int max_retries) {
  RemoteOptions o;
  o.connect_timeout_s = connect_timeout_s;
  o.stall_timeout_s = 5;
  o.max_retries = max_retries;
  o.retry_backoff_ms = 100;
  SHARDPACK_ASSIGN_OR_RETURN(auto client, HttpClient::Create(o));
  HttpRequest r;
  r.method = method;
  r.headers = std::move(headers);
  r.direct = true;  // its tokens go to the endpoint alone: no proxy, no redirect
  r.max_response_bytes = kMaxAnswerBytes;
  SHARDPACK_ASSIGN_OR_RETURN(HttpResponse answer, client->Send(url, r));
  return std::move(answer.body);
}

StatusOr<std::optional<FoundCredentials>> FromContainer(const GetEnvFn& getenv, io::Env* env) {
  std::string url = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  std::string variable = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI";
  if (!url.empty()) {
    url = kContainerHost + url;
  } else {
    url = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    variable = "AWS_CONTAINER_CREDENTIALS_FULL_URI";
  }
  if (url.empty()) return std::optional<FoundCredentials>();
  if (!IsHttpUrl(url)) {
    return InvalidArgumentError(variable + ": \"" + url + "\" is not an http:// or https:// URL");
  }
  std::vector<std::string> headers;
  if (std::string file = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"); !file.empty()) {
    auto token = env->ReadFile(file, kMaxAnswerBytes);
    if (!token.ok()) return token.status().WithPrefix("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    headers.push_back("Authorization: " + Trimmed(*token));
  } else if (std::string token = getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"); !token.empty()) {
    headers.push_back("Authorization: " + token);
  }
  const std::string what = "the container's credentials (" + variable + ")";
  auto body = Fetch("GET", url, std::move(headers), 2, 3);
  if (!body.ok()) return body.status().WithPrefix(what);
  SHARDPACK_ASSIGN_OR_RETURN(FoundCredentials found, ParseCredentialsJson(*body, what));
  found.source = what;
  return std::optional<FoundCredentials>(std::move(found));
}

StatusOr<std::optional<FoundCredentials>> FromInstance(const GetEnvFn& getenv) {
  std::string lower = getenv("AWS_EC2_METADATA_DISABLED");
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "true") return std::optional<FoundCredentials>();
  std::string endpoint = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (endpoint.empty()) endpoint = kInstanceEndpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (!IsHttpUrl(endpoint)) {
    return InvalidArgumentError("AWS_EC2_METADATA_SERVICE_ENDPOINT: \"" + endpoint +
                                "\" is not an http:// or https:// URL");
  }
  // Off EC2 nothing answers: no credentials, no error.
  auto token = Fetch("PUT", endpoint + "/latest/api/token",
                     {"X-aws-ec2-metadata-token-ttl-seconds: 21600"}, 1, 0);
  if (!token.ok()) return std::optional<FoundCredentials>();
  const std::string header = "X-aws-ec2-metadata-token: " + Trimmed(*token);
  const std::string base = endpoint + "/latest/meta-data/iam/security-credentials/";
  auto roles = Fetch("GET", base, {header}, 1, 1);
  if (!roles.ok()) return std::optional<FoundCredentials>();  // an instance without a role
  std::string role = Trimmed(*roles);
  role = role.substr(0, role.find('\n'));
  if (role.empty()) return std::optional<FoundCredentials>();
  const std::string what = "the instance metadata service (role " + role + ")";
  auto body = Fetch("GET", base + EscapePathSegment(role), {header}, 1, 1);
  if (!body.ok()) return body.status().WithPrefix(what);
  SHARDPACK_ASSIGN_OR_RETURN(FoundCredentials found, ParseCredentialsJson(*body, what));
  found.source = what;
  return std::optional<FoundCredentials>(std::move(found));
}

}  // namespace

StatusOr<int64_t> ParseIso8601(std::string_view text) {
  const std::string s(text);
  struct tm tm = {};
  const char* rest = ::strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return InvalidArgumentError("\"" + s + "\" is not an ISO 8601 time");
  if (*rest == '.') {
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  int64_t offset = 0;
  if (*rest == 'Z') {
    ++rest;
  } else if ((*rest == '+' || *rest == '-') && std::strlen(rest) == 6 && rest[3] == ':') {
    const int hours = std::atoi(std::string(rest + 1, 2).c_str());
    const int minutes = std::atoi(rest + 4);
    offset = (*rest == '+' ? 1 : -1) * (hours * 3600 + minutes * 60);
    rest += 6;
  }
  if (*rest != '\0') return InvalidArgumentError("\"" + s + "\" is not an ISO 8601 time");
  return static_cast<int64_t>(::timegm(&tm)) - offset;
}

StatusOr<FoundCredentials> ParseCredentialsJson(std::string_view json, const std::string& what) {
  auto doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return InvalidArgumentError(what + ": the answer is not a JSON object");
  }
  auto text = [&](const char* key) -> std::string {
    auto it = doc.find(key);
    return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
  };
  if (auto v = doc.find("Version"); v != doc.end() && !(v->is_number_integer() && *v == 1)) {
    return InvalidArgumentError(what + ": \"Version\" must be 1");
  }
  FoundCredentials found;
  S3Credentials c;
  c.access_key_id = text("AccessKeyId");
  c.secret_access_key = text("SecretAccessKey");
  c.session_token = !text("SessionToken").empty() ? text("SessionToken") : text("Token");
  for (const auto& [field, value] :
       {std::pair<const char*, const std::string*>{"AccessKeyId", &c.access_key_id},
        {"SecretAccessKey", &c.secret_access_key}}) {
    if (value->empty()) return InvalidArgumentError(what + ": no \"" + field + "\" string");
  }
  if (std::string expiration = text("Expiration"); !expiration.empty()) {
    auto t = ParseIso8601(expiration);
    if (!t.ok()) return t.status().WithPrefix(what + ": \"Expiration\"");
    found.expires = *t;
  }
  found.credentials = std::move(c);
  return found;
}

StatusOr<FoundCredentials> FindOtherCredentials(const S3Config& config, const GetEnvFn& getenv,
                                                io::Env* env) {
  // One lookup per configuration for the process, kept until near its expiration.
  static std::mutex mu;
  static std::map<std::string, FoundCredentials> cache;
  const std::string key = config.credential_process + '\n' + config.credential_process_source +
                          '\n' + getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") + '\n' +
                          getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI") + '\n' +
                          getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN") + '\n' +
                          getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") + '\n' +
                          getenv("AWS_EC2_METADATA_DISABLED") + '\n' +
                          getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  std::lock_guard<std::mutex> lock(mu);
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  if (auto it = cache.find(key); it != cache.end()) {
    if (it->second.expires == 0 || it->second.expires - kCredentialsRefreshSeconds > now) {
      return it->second;
    }
    cache.erase(it);
  }
  FoundCredentials found;
  if (!config.credential_process.empty()) {
    SHARDPACK_ASSIGN_OR_RETURN(found, FromProcess(config));
  } else {
    SHARDPACK_ASSIGN_OR_RETURN(std::optional<FoundCredentials> container,
                               FromContainer(getenv, env));
    if (container) {
      found = std::move(*container);
    } else {
      SHARDPACK_ASSIGN_OR_RETURN(std::optional<FoundCredentials> instance, FromInstance(getenv));
      if (instance) found = std::move(*instance);
    }
  }
  FoundCredentials kept = found;
  if (!kept.credentials) kept.expires = now + kCredentialsRefreshSeconds + kNoneKeptSeconds;
  cache[key] = std::move(kept);
  return found;
}

}  // namespace shardpack::remote
