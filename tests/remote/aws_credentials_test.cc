// Credentials from credential_process, a container's endpoint (served by a real nginx)
// and the instance metadata service when it is absent or disabled; the JSON they answer
// and its expiration. The instance service answering with a role's credentials, and all
// of them signing requests that moto checks, are in tests/interop/test_s3.py.
#include "remote/aws_credentials.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>

#include "io/mem_env.h"
#include "remote/http_fixtures.h"
#include "test_util.h"

namespace shardpack::remote {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

constexpr char kExampleSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kExampleToken[] = "FwoGZXIvYXdzEXAMPLETOKEN";

std::string ProcessJson(const std::string& expiration) {
  return std::string(R"({"Version": 1, "AccessKeyId": "ASIAPROCESS", "SecretAccessKey": ")") +
         kExampleSecret + R"(", "SessionToken": ")" + kExampleToken + R"(", "Expiration": ")" +
         expiration + R"("})";
}

class OtherCredentialsTest : public ::testing::Test {
 protected:
  GetEnvFn GetEnv() {
    return [this](const char* name) {
      auto it = vars_.find(name);
      return it == vars_.end() ? std::string() : it->second;
    };
  }
  StatusOr<FoundCredentials> Find(const S3Config& config = {}) {
    return FindOtherCredentials(config, GetEnv(), io::Env::Posix());
  }
  // A profile whose credential_process is a shell script dir_/NAME printing `out` (and
  // counting its runs in dir_/runs); found through ResolveS3Config as a user would have it.
  // Each script is its own command: the process-wide cache keeps them apart.
  S3Config ProfileWithProcess(const std::string& name, const std::string& out, int exit_code = 0) {
    const std::string script = dir_.Join(name);
    testing::WriteFileOrDie(script, "echo run >> " + dir_.Join("runs") + "\nprintf '%s' '" + out +
                                        "'\nexit " + std::to_string(exit_code) + "\n");
    io::MemEnv files;
    files.SetFileContents(
        "/home/u/.aws/config",
        "[profile sso]\nregion = eu-west-1\ncredential_process = /bin/sh " + script + "\n");
    std::map<std::string, std::string> env = {{"HOME", "/home/u"}, {"AWS_PROFILE", "sso"}};
    auto config = ResolveS3Config(
        [&](const char* name) {
          auto it = env.find(name);
          return it == env.end() ? std::string() : it->second;
        },
        &files);
    EXPECT_TRUE(config.ok()) << config.status().ToString();
    return config.ok() ? *config : S3Config();
  }
  int Runs() const {
    const std::string runs = dir_.Join("runs");
    if (!fs::exists(runs)) return 0;
    const std::string text = testing::ReadFileOrDie(runs);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  TempDir dir_;
  // No instance service here: an unused loopback port answers at once.
  std::map<std::string, std::string> vars_ = {
      {"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:9"}};
};

TEST_F(OtherCredentialsTest, CredentialProcessOfTheProfileIsRunOnceForTheProcess) {
  S3Config config = ProfileWithProcess("creds.sh", ProcessJson("2999-01-01T00:00:00Z"));
  EXPECT_FALSE(config.credentials.has_value());
  EXPECT_EQ(config.credential_process_source, "profile sso in /home/u/.aws/config");
  EXPECT_EQ(config.region, "eu-west-1");
  auto found = Find(config);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->credentials.has_value());
  EXPECT_EQ(found->credentials->access_key_id, "ASIAPROCESS");
  EXPECT_EQ(found->credentials->secret_access_key, kExampleSecret);
  EXPECT_EQ(found->credentials->session_token, kExampleToken);
  EXPECT_EQ(found->source, "credential_process of profile sso in /home/u/.aws/config");
  EXPECT_EQ(found->expires, 32472144000);  // 2999-01-01
  ASSERT_TRUE(Find(config).ok());
  EXPECT_EQ(Runs(), 1);  // kept for the process
}

TEST_F(OtherCredentialsTest, CredentialsAboutToExpireAreFetchedAgain) {
  const auto soon = std::chrono::system_clock::now() + std::chrono::minutes(2);
  const std::time_t t = std::chrono::system_clock::to_time_t(soon);
  char iso[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  S3Config config = ProfileWithProcess("expiring.sh", ProcessJson(iso));
  ASSERT_TRUE(Find(config).ok());
  ASSERT_TRUE(Find(config).ok());
  EXPECT_EQ(Runs(), 2);  // within 5 minutes of their expiration: not kept
}

TEST_F(OtherCredentialsTest, AFailingOrMalformedProcessIsNamedWithoutItsOutput) {
  S3Config failing = ProfileWithProcess("failing.sh", ProcessJson("2999-01-01T00:00:00Z"), 3);
  auto r = Find(failing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(
                "credential_process of profile sso in /home/u/.aws/config: credential_process "
                "exited with status 3"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(r.status().message().find(kExampleSecret), std::string::npos);

  S3Config no_secret = ProfileWithProcess("partial.sh", R"({"Version": 1, "AccessKeyId": "A"})");
  auto m = Find(no_secret);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(": no \"SecretAccessKey\" string"), std::string::npos)
      << m.status().message();
}

TEST(CredentialsJsonTest, FieldsVersionAndExpirationAreChecked) {
  auto container =
      ParseCredentialsJson(std::string(R"({"AccessKeyId": "ASIAC", "SecretAccessKey": ")") +
                               kExampleSecret + R"(", "Token": ")" + kExampleToken +
                               R"(", "Expiration": "2026-11-26T14:03:00.123+01:00"})",
                           "x");
  ASSERT_TRUE(container.ok()) << container.status().ToString();
  EXPECT_EQ(container->credentials->session_token, kExampleToken);
  EXPECT_EQ(container->expires, 1795701780 - 3600);  // 2026-11-26T14:03:00Z minus the offset
  EXPECT_EQ(*ParseIso8601("2026-11-26T14:03:00Z"), 1795701780);
  for (const char* bad : {"", "2026-11-26", "2026-11-26T14:03:00Q", "tomorrow"}) {
    EXPECT_FALSE(ParseIso8601(bad).ok()) << bad;
  }
  for (const char* json : {"[]", "not json", R"({"Version": 2, "AccessKeyId": "A",
                           "SecretAccessKey": "S"})",
                           R"({"AccessKeyId": "A", "SecretAccessKey": "S", "Expiration": "x"})"}) {
    auto r = ParseCredentialsJson(json, "the source");
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message().rfind("the source: ", 0), 0u) << r.status().message();
  }
}

TEST_F(OtherCredentialsTest, AContainerEndpointIsAskedWithItsToken) {
  if (!fs::exists(testing::kNginx)) GTEST_SKIP() << testing::kNginx << " is missing";
  TempDir root, work;
  testing::WriteFileOrDie(root.Join("v2-credentials"),
                          std::string(R"({"AccessKeyId": "ASIACONTAINER", "SecretAccessKey": ")") +
                              kExampleSecret + R"(", "Token": ")" + kExampleToken +
                              R"(", "Expiration": "2999-01-01T00:00:00Z"})");
  // nginx answers only a request carrying the token.
  testing::NginxServer server(
      root.path(), work.path(), "", "",
      "    if ($http_authorization != \"container-token\") { return 403; }\n");
  ASSERT_EQ(server.error(), "");
  vars_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = server.Url("v2-credentials");
  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "container-token";
  auto found = Find();
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->credentials.has_value());
  EXPECT_EQ(found->credentials->access_key_id, "ASIACONTAINER");
  EXPECT_EQ(found->source, "the container's credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI)");

  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "another-token";
  auto refused = Find();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("HTTP 403 (forbidden)"), std::string::npos)
      << refused.status().message();
  EXPECT_EQ(refused.status().message().find("another-token"), std::string::npos);
  vars_["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "container-token";

  vars_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = server.Url("no-such-endpoint");
  auto missing = Find();
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(
                "the container's credentials (AWS_CONTAINER_CREDENTIALS_FULL_URI): "),
            std::string::npos)
      << missing.status().message();
  EXPECT_EQ(missing.status().message().find("container-token"), std::string::npos);

  vars_["AWS_CONTAINER_CREDENTIALS_FULL_URI"] = "s3://bucket/creds";
  EXPECT_EQ(Find().status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OtherCredentialsTest, NoInstanceServiceOrADisabledOneMeansAnonymous) {
  // A listener in the service's place that relays to a closed port: asked, it counts a
  // connection that ends with no answer, as off EC2.
  testing::DroppingProxy nothing(9, 0, 0);
  vars_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = nothing.Url("");
  auto none = Find();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->credentials.has_value());
  EXPECT_EQ(none->source, "");
  EXPECT_EQ(nothing.connections(), 1);  // one attempt
  ASSERT_TRUE(Find().ok());
  EXPECT_EQ(nothing.connections(), 1);  // and not again in this process

  testing::DroppingProxy unasked(9, 0, 0);
  vars_["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = unasked.Url("");
  vars_["AWS_EC2_METADATA_DISABLED"] = "TRUE";
  auto disabled = Find();
  ASSERT_TRUE(disabled.ok());
  EXPECT_FALSE(disabled->credentials.has_value());
  EXPECT_EQ(unasked.connections(), 0);
}

}  // namespace
}  // namespace shardpack::remote
