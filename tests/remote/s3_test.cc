// The pure parts of s3:// datasets: the credentials chain and its files, the request URL,
// the error code of an S3 error body, and that s3:// URLs are taken as datasets. The
// requests themselves (signing, retries, errors from a real server) are tested against
// moto's S3 server in tests/interop/test_s3.py.
#include "remote/s3.h"

#include <gtest/gtest.h>

#include <map>

#include "io/mem_env.h"
#include "remote/shard_cache.h"
#include "shardpack/remote.h"

namespace shardpack::remote {
namespace {

constexpr char kSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kToken[] = "FwoGZXIvYXdzEXAMPLETOKEN";

class S3ConfigTest : public ::testing::Test {
 protected:
  StatusOr<S3Config> Resolve() {
    return ResolveS3Config(
        [this](const char* name) {
          auto it = vars_.find(name);
          return it == vars_.end() ? std::string() : it->second;
        },
        &env_);
  }

  std::map<std::string, std::string> vars_ = {{"HOME", "/home/u"}};
  io::MemEnv env_;
};

TEST_F(S3ConfigTest, NothingConfiguredIsAnonymousInUsEast1OnAws) {
  auto c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->credentials.has_value());
  EXPECT_EQ(c->credentials_source, "");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->endpoint, "");
  EXPECT_EQ(c->addressing, S3Addressing::kAuto);
}

TEST_F(S3ConfigTest, EnvironmentKeysWinOverTheCredentialsFile) {
  env_.SetFileContents("/home/u/.aws/credentials",
                       "[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = x\n");
  vars_["AWS_ACCESS_KEY_ID"] = "AKIAENV";
  vars_["AWS_SECRET_ACCESS_KEY"] = kSecret;
  vars_["AWS_SESSION_TOKEN"] = kToken;
  auto c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->credentials.has_value());
  EXPECT_EQ(c->credentials->access_key_id, "AKIAENV");
  EXPECT_EQ(c->credentials->secret_access_key, kSecret);
  EXPECT_EQ(c->credentials->session_token, kToken);
  EXPECT_EQ(c->credentials_source, "AWS_ACCESS_KEY_ID");
}

TEST_F(S3ConfigTest, OnlyOneKeyVariableIsAnErrorNamingTheOtherWithoutTheSecret) {
  vars_["AWS_SECRET_ACCESS_KEY"] = kSecret;
  auto c = Resolve();
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("AWS_ACCESS_KEY_ID is not"), std::string::npos)
      << c.status().message();
  EXPECT_EQ(c.status().message().find(kSecret), std::string::npos);
}

TEST_F(S3ConfigTest, ProfileFromTheCredentialsFileAndRegionFromTheConfigFile) {
  env_.SetFileContents("/etc/aws/creds",
                       "# comment\r\n[default]\naws_access_key_id=DEF\naws_secret_access_key=d\n"
                       "[train]\r\n  AWS_Access_Key_Id = AKIATRAIN \r\naws_secret_access_key = " +
                           std::string(kSecret) + "\naws_session_token=" + kToken + "\n");
  env_.SetFileContents("/home/u/.aws/config",
                       "[default]\nregion = us-west-2\n[profile train]\nregion = eu-central-1\n");
  vars_["AWS_SHARED_CREDENTIALS_FILE"] = "/etc/aws/creds";
  vars_["AWS_PROFILE"] = "train";
  auto c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->credentials.has_value());
  EXPECT_EQ(c->credentials->access_key_id, "AKIATRAIN");
  EXPECT_EQ(c->credentials->secret_access_key, kSecret);
  EXPECT_EQ(c->credentials->session_token, kToken);
  EXPECT_EQ(c->credentials_source, "profile train in /etc/aws/creds");
  EXPECT_EQ(c->region, "eu-central-1");

  vars_.erase("AWS_PROFILE");
  c = Resolve();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->credentials->access_key_id, "DEF");
  EXPECT_EQ(c->region, "us-west-2");
}

TEST_F(S3ConfigTest, RegionVariablesWinInOrder) {
  env_.SetFileContents("/home/u/.aws/config", "[default]\nregion = us-west-2\n");
  vars_["AWS_DEFAULT_REGION"] = "ap-south-1";
  EXPECT_EQ(Resolve()->region, "ap-south-1");
  vars_["AWS_REGION"] = "eu-west-3";
  EXPECT_EQ(Resolve()->region, "eu-west-3");
  vars_["AWS_REGION"] = "eu west";
  auto bad = Resolve();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("AWS_REGION: \"eu west\" is not a region"),
            std::string::npos)
      << bad.status().message();
}

TEST_F(S3ConfigTest, AProfileThatNoFileHasIsAnErrorNamingBothFiles) {
  vars_["AWS_PROFILE"] = "nope";
  auto c = Resolve();
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message(),
            "AWS_PROFILE=nope: no such profile in /home/u/.aws/credentials or "
            "/home/u/.aws/config");
}

TEST_F(S3ConfigTest, EndpointS3VariableWinsAndMustBeAnHttpUrl) {
  vars_["AWS_ENDPOINT_URL"] = "http://general:9000/";
  EXPECT_EQ(Resolve()->endpoint, "http://general:9000");
  vars_["AWS_ENDPOINT_URL_S3"] = "https://storage.googleapis.com";
  EXPECT_EQ(Resolve()->endpoint, "https://storage.googleapis.com");
  vars_["AWS_ENDPOINT_URL_S3"] = "minio:9000";
  auto bad = Resolve();
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("AWS_ENDPOINT_URL_S3: \"minio:9000\""), std::string::npos)
      << bad.status().message();
}

TEST_F(S3ConfigTest, AddressingOverrideIsPathOrVirtual) {
  vars_["SHARDPACK_S3_ADDRESSING"] = "Path";
  EXPECT_EQ(Resolve()->addressing, S3Addressing::kPath);
  vars_["SHARDPACK_S3_ADDRESSING"] = "virtual";
  EXPECT_EQ(Resolve()->addressing, S3Addressing::kVirtual);
  vars_["SHARDPACK_S3_ADDRESSING"] = "dns";
  EXPECT_EQ(Resolve().status().code(), StatusCode::kInvalidArgument);
}

TEST(IniTest, SectionsKeysCommentsAndLastValueWins) {
  IniFile ini = ParseIni(
      "orphan = dropped\n[a]\nk = 1\n; comment\n#comment\nK=2\n[ profile b ]\nx = y = z\n"
      "no equals sign\n[broken\n");
  ASSERT_EQ(ini.size(), 2u);
  EXPECT_EQ(ini["a"].at("k"), "2");
  EXPECT_EQ(ini["profile b"].at("x"), "y = z");
  EXPECT_EQ(ini["profile b"].size(), 1u);
}

TEST(S3UrlTest, BucketAndKeyAreSplitAndBadBucketNamesRefused) {
  auto o = ParseS3Url("s3://my-bucket/ds/v1");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->bucket, "my-bucket");
  EXPECT_EQ(o->key, "ds/v1");
  EXPECT_EQ(ParseS3Url("S3://abc")->key, "");
  for (const char* bad : {"s3://ab/ds", "s3://Upper/ds", "s3://evil.com:1@x/ds", "s3:///ds"}) {
    auto r = ParseS3Url(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("is not a bucket name"), std::string::npos)
        << r.status().message();
  }
}

TEST(S3UrlTest, AwsIsVirtualHostAnEndpointIsPathStyleAndKeysAreEncodedPerSegment) {
  S3Config aws;
  aws.region = "eu-west-1";
  const S3Object o{"bkt", "my ds/shard+1.tfrecord"};
  EXPECT_EQ(S3HttpUrl(aws, o), "https://bkt.s3.eu-west-1.amazonaws.com/my%20ds/shard%2B1.tfrecord");
  // A dotted bucket would not match the wildcard certificate: path-style.
  EXPECT_EQ(S3HttpUrl(aws, {"a.b.c", "k"}), "https://s3.eu-west-1.amazonaws.com/a.b.c/k");
  aws.addressing = S3Addressing::kPath;
  EXPECT_EQ(S3HttpUrl(aws, {"bkt", "k"}), "https://s3.eu-west-1.amazonaws.com/bkt/k");

  S3Config minio;
  minio.endpoint = "http://127.0.0.1:9000";
  EXPECT_EQ(S3HttpUrl(minio, {"bkt", "ds/manifest.json"}),
            "http://127.0.0.1:9000/bkt/ds/manifest.json");
  minio.addressing = S3Addressing::kVirtual;
  EXPECT_EQ(S3HttpUrl(minio, {"bkt", "ds/manifest.json"}),
            "http://bkt.127.0.0.1:9000/ds/manifest.json");
}

TEST(S3ErrorTest, CodeIsReadFromTheXmlBodyOnlyWhenItIsAPlainWord) {
  EXPECT_EQ(S3ErrorCode("<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The "
                        "specified key does not exist.</Message></Error>"),
            "NoSuchKey");
  EXPECT_EQ(S3ErrorCode("<Error><Code>Signature Does Not Match</Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<Error><Code></Code></Error>"), "");
  EXPECT_EQ(S3ErrorCode("<html>502 Bad Gateway</html>"), "");
  EXPECT_EQ(S3ErrorCode("<Code>Unterminated"), "");
  EXPECT_EQ(S3ErrorHint("SignatureDoesNotMatch"), "the secret key does not match the access key");
  EXPECT_EQ(S3ErrorHint("SomethingNew"), "");
}

TEST(S3UrlTest, S3UrlsAreRemoteDatasetsNormalizedLikeHttpOnes) {
  EXPECT_TRUE(IsRemotePath("s3://bucket/ds"));
  EXPECT_TRUE(IsRemotePath("S3://bucket/ds"));
  EXPECT_FALSE(IsRemotePath("s3:/bucket/ds"));
  EXPECT_EQ(*NormalizeDatasetUrl("s3://bucket/ds//"), "s3://bucket/ds");
  // A key may hold '?' and '#': it is encoded, not taken as a query.
  EXPECT_EQ(*NormalizeDatasetUrl("s3://bucket/a?b#c"), "s3://bucket/a?b#c");
  EXPECT_EQ(NormalizeDatasetUrl("s3://B/ds").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardpack::remote
