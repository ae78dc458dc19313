#include "remote/s3.h"

#include <strings.h>

#include <cstdlib>
#include <memory>

#include "remote/aws_credentials.h"
#include "remote/http.h"

namespace shardpack::remote {

namespace {

// The AWS CLI's files are small; anything larger is not one.
constexpr uint64_t kMaxAwsFileBytes = 1 << 20;
// S3's codes are short CamelCase words.
constexpr size_t kMaxCodeLength = 64;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// The INI file at `path`, or nullopt when there is none.
StatusOr<std::optional<IniFile>> ReadIni(io::Env* env, const std::string& path) {
  auto text = env->ReadFile(path, kMaxAwsFileBytes);
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) return std::optional<IniFile>();
    return text.status();
  }
  return std::optional<IniFile>(ParseIni(*text));
}

const std::map<std::string, std::string>* Section(const std::optional<IniFile>& ini,
                                                  const std::string& name) {
  if (!ini) return nullptr;
  auto it = ini->find(name);
  return it == ini->end() ? nullptr : &it->second;
}

std::string Value(const std::map<std::string, std::string>* section, const std::string& key) {
  if (section == nullptr) return "";
  auto it = section->find(key);
  return it == section->end() ? "" : it->second;
}

// Credentials from a profile section; nullopt without both keys.
std::optional<S3Credentials> FromSection(const std::map<std::string, std::string>* section) {
  S3Credentials c;
  c.access_key_id = Value(section, "aws_access_key_id");
  c.secret_access_key = Value(section, "aws_secret_access_key");
  c.session_token = Value(section, "aws_session_token");
  if (c.access_key_id.empty() || c.secret_access_key.empty()) return std::nullopt;
  return c;
}

bool ValidRegion(std::string_view r) {
  if (r.empty() || r.size() > 64) return false;
  for (char c : r) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

std::string EscapeKey(std::string_view key) {
  std::string out;
  size_t start = 0;
  while (true) {
    const size_t slash = key.find('/', start);
    out += EscapePathSegment(key.substr(start, slash - start));
    if (slash == std::string_view::npos) break;
    out += '/';
    start = slash + 1;
  }
  return out;
}

}  // namespace

bool IsS3Url(std::string_view url) {
  return url.size() > 5 && ::strncasecmp(url.data(), "s3://", 5) == 0;
}

IniFile ParseIni(std::string_view text) {
  IniFile out;
  std::string section;
  bool in_section = false;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = Trim(text.substr(0, eol));
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      const size_t close = line.find(']');
      if (close == std::string_view::npos) continue;
      section = std::string(Trim(line.substr(1, close - 1)));
      in_section = true;
      out[section];
      continue;
    }
    const size_t eq = line.find('=');
    if (!in_section || eq == std::string_view::npos) continue;
    out[section][Lower(Trim(line.substr(0, eq)))] = std::string(Trim(line.substr(eq + 1)));
  }
  return out;
}

namespace {

// The AWS CLI's files of a profile, read where the environment says or under ~/.aws/.
struct AwsProfile {
  std::string explicit_name;                  // AWS_PROFILE
  std::string name;                           // "default" without it
  std::string credentials_path, config_path;  // empty: no home and no variable
  std::optional<IniFile> credentials_file, config_file;
  const std::map<std::string, std::string>* credentials_section = nullptr;
  const std::map<std::string, std::string>* config_section = nullptr;
};

StatusOr<std::unique_ptr<AwsProfile>> ReadAwsProfile(const GetEnvFn& getenv, io::Env* env) {
  // On the heap: the sections point into the files.
  auto p = std::make_unique<AwsProfile>();
  const std::string home = getenv("HOME");
  auto aws_file = [&](const char* variable, const char* name) {
    std::string path = getenv(variable);
    if (path.empty() && !home.empty()) path = io::JoinPath(home, std::string(".aws/") + name);
    return path;
  };
  p->explicit_name = getenv("AWS_PROFILE");
  p->name = p->explicit_name.empty() ? "default" : p->explicit_name;
  p->credentials_path = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  p->config_path = aws_file("AWS_CONFIG_FILE", "config");
  if (!p->credentials_path.empty()) {
    SHARDPACK_ASSIGN_OR_RETURN(p->credentials_file, ReadIni(env, p->credentials_path));
  }
  if (!p->config_path.empty()) {
    SHARDPACK_ASSIGN_OR_RETURN(p->config_file, ReadIni(env, p->config_path));
  }
  p->credentials_section = Section(p->credentials_file, p->name);
  p->config_section =
      Section(p->config_file, p->name == "default" ? "default" : "profile " + p->name);
  return p;
}

// Keys from the environment, else the profile's keys (credentials file, then config file),
// else its credential_process (config file, then credentials file); none is no error,
// except a profile asked for by name that neither file has.
Status ResolveCredentials(const GetEnvFn& getenv, const AwsProfile& p, S3Config* config) {
  const std::string key_id = getenv("AWS_ACCESS_KEY_ID");
  const std::string secret = getenv("AWS_SECRET_ACCESS_KEY");
  if (!key_id.empty() || !secret.empty()) {
    if (key_id.empty() || secret.empty()) {
      return InvalidArgumentError(
          std::string(key_id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID") +
          " is set but " + (key_id.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
          " is not: set both, or neither to use a profile");
    }
    config->credentials = S3Credentials{key_id, secret, getenv("AWS_SESSION_TOKEN")};
    config->credentials_source = "AWS_ACCESS_KEY_ID";
  } else if (auto c = FromSection(p.credentials_section)) {
    config->credentials = std::move(c);
    config->credentials_source = "profile " + p.name + " in " + p.credentials_path;
  } else if (auto c2 = FromSection(p.config_section)) {
    config->credentials = std::move(c2);
    config->credentials_source = "profile " + p.name + " in " + p.config_path;
  } else if (std::string cp = Value(p.config_section, "credential_process"); !cp.empty()) {
    config->credential_process = cp;
    config->credential_process_source = "profile " + p.name + " in " + p.config_path;
  } else if (std::string cp2 = Value(p.credentials_section, "credential_process"); !cp2.empty()) {
    config->credential_process = cp2;
    config->credential_process_source = "profile " + p.name + " in " + p.credentials_path;
  } else if (!p.explicit_name.empty() && p.credentials_section == nullptr &&
             p.config_section == nullptr) {
    return InvalidArgumentError(
        "AWS_PROFILE=" + p.name + ": no such profile in " +
        (p.credentials_path.empty() ? "(no credentials file)" : p.credentials_path) + " or " +
        (p.config_path.empty() ? "(no config file)" : p.config_path));
  }
  return Status::Ok();
}

// AWS_REGION, else AWS_DEFAULT_REGION, else the profile's; none leaves the default.
Status ResolveRegion(const GetEnvFn& getenv, const AwsProfile& p, S3Config* config) {
  std::string region = getenv("AWS_REGION");
  const char* region_from = "AWS_REGION";
  if (region.empty()) {
    region = getenv("AWS_DEFAULT_REGION");
    region_from = "AWS_DEFAULT_REGION";
  }
  if (region.empty()) {
    region = Value(p.config_section, "region");
    region_from = "the region of the profile";
  }
  if (region.empty()) return Status::Ok();
  if (!ValidRegion(region)) {
    return InvalidArgumentError(std::string(region_from) + ": \"" + region +
                                "\" is not a region (lower-case letters, digits and '-')");
  }
  config->region = region;
  return Status::Ok();
}

// AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, without trailing slashes.
Status ResolveEndpoint(const GetEnvFn& getenv, S3Config* config) {
  std::string endpoint = getenv("AWS_ENDPOINT_URL_S3");
  const char* endpoint_from = "AWS_ENDPOINT_URL_S3";
  if (endpoint.empty()) {
    endpoint = getenv("AWS_ENDPOINT_URL");
    endpoint_from = "AWS_ENDPOINT_URL";
  }
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  if (endpoint.empty()) return Status::Ok();
  const std::string lower = Lower(endpoint);
  const bool http = lower.rfind("http://", 0) == 0 || lower.rfind("https://", 0) == 0;
  if (!http || endpoint.find_first_of("?#") != std::string::npos ||
      endpoint.find("://") + 3 == endpoint.size()) {
    return InvalidArgumentError(std::string(endpoint_from) + ": \"" + endpoint +
                                "\" is not an http:// or https:// URL without a query");
  }
  config->endpoint = endpoint;
  return Status::Ok();
}

Status ResolveAddressing(const GetEnvFn& getenv, S3Config* config) {
  const std::string addressing = Lower(getenv("SHARDPACK_S3_ADDRESSING"));
  if (addressing == "path") {
    config->addressing = S3Addressing::kPath;
  } else if (addressing == "virtual") {
    config->addressing = S3Addressing::kVirtual;
  } else if (!addressing.empty()) {
    return InvalidArgumentError("SHARDPACK_S3_ADDRESSING: \"" + addressing +
                                "\": expected path or virtual");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<S3Config> ResolveS3Config(const GetEnvFn& getenv, io::Env* env) {
  S3Config config;
  SHARDPACK_ASSIGN_OR_RETURN(std::unique_ptr<AwsProfile> profile, ReadAwsProfile(getenv, env));
  SHARDPACK_RETURN_IF_ERROR(ResolveCredentials(getenv, *profile, &config));
  SHARDPACK_RETURN_IF_ERROR(ResolveRegion(getenv, *profile, &config));
  SHARDPACK_RETURN_IF_ERROR(ResolveEndpoint(getenv, &config));
  SHARDPACK_RETURN_IF_ERROR(ResolveAddressing(getenv, &config));
  return config;
}

std::string ProcessEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

StatusOr<S3Config> ResolveS3Config() {
  SHARDPACK_ASSIGN_OR_RETURN(S3Config config, ResolveS3Config(ProcessEnv, io::Env::Posix()));
  if (!config.credentials) {
    SHARDPACK_ASSIGN_OR_RETURN(FoundCredentials found,
                               FindOtherCredentials(config, ProcessEnv, io::Env::Posix()));
    config.credentials = std::move(found.credentials);
    config.credentials_source = std::move(found.source);
    config.credentials_expire = found.credentials ? found.expires : 0;
  }
  return config;
}

StatusOr<S3Object> ParseS3Url(std::string_view url) {
  if (!IsS3Url(url)) return InvalidArgumentError(std::string(url) + ": not an s3:// URL");
  std::string_view rest = url.substr(5);
  const size_t slash = rest.find('/');
  S3Object o;
  o.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) o.key = std::string(rest.substr(slash + 1));
  bool valid = o.bucket.size() >= 3 && o.bucket.size() <= 63;
  for (char c : o.bucket) {
    valid = valid && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-');
  }
  if (!valid) {
    return InvalidArgumentError(std::string(url) + ": \"" + o.bucket +
                                "\" is not a bucket name (3 to 63 lower-case letters, digits, "
                                "'.' and '-')");
  }
  return o;
}

std::string S3HttpUrl(const S3Config& config, const S3Object& object) {
  const bool path_style =
      config.addressing == S3Addressing::kPath ||
      (config.addressing == S3Addressing::kAuto &&
       (!config.endpoint.empty() || object.bucket.find('.') != std::string::npos));
  const std::string endpoint =
      config.endpoint.empty() ? "https://s3." + config.region + ".amazonaws.com" : config.endpoint;
  const std::string key = EscapeKey(object.key);
  if (path_style) return endpoint + "/" + object.bucket + "/" + key;
  const size_t host = endpoint.find("://") + 3;
  return endpoint.substr(0, host) + object.bucket + "." + endpoint.substr(host) + "/" + key;
}

std::string S3ErrorCode(std::string_view body) {
  const size_t open = body.find("<Code>");
  if (open == std::string_view::npos) return "";
  const size_t begin = open + 6;
  const size_t end = body.find("</Code>", begin);
  if (end == std::string_view::npos || end == begin || end - begin > kMaxCodeLength) return "";
  std::string_view code = body.substr(begin, end - begin);
  for (char c : code) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_')) {
      return "";
    }
  }
  return std::string(code);
}

std::string_view S3ErrorHint(std::string_view code) {
  static const std::map<std::string_view, std::string_view> kHints = {
      {"AccessDenied", "these credentials may not read this object"},
      {"AllAccessDisabled", "all access to this object has been disabled"},
      {"AuthorizationHeaderMalformed", "the region is wrong: set AWS_REGION to the bucket's"},
      {"ExpiredToken", "the session token has expired"},
      {"InvalidAccessKeyId", "the server knows no such access key id"},
      {"InvalidBucketName", "not a valid bucket name"},
      {"InvalidToken", "the session token is not valid"},
      {"NoSuchBucket", "the bucket does not exist"},
      {"NoSuchKey", "no object has this key"},
      {"PermanentRedirect", "the bucket is in another region: set AWS_REGION to the bucket's"},
      {"RequestTimeTooSkewed", "this machine's clock is too far from the server's"},
      {"SignatureDoesNotMatch", "the secret key does not match the access key"},
      {"SlowDown", "the server asks for fewer requests"},
  };
  auto it = kHints.find(code);
  return it == kHints.end() ? std::string_view() : it->second;
}

}  // namespace shardpack::remote
