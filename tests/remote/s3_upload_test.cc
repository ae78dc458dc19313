// The pure parts of writing to S3: part planning, the multipart requests' URLs and bodies,
// reading UploadId and errors from S3's XML answers, and the upload sizes from options and
// the environment. The uploads themselves (signing, order, multipart, failures midway) are
// tested against moto's S3 server in tests/interop/test_s3.py.
#include "remote/s3_upload.h"

#include <gtest/gtest.h>

#include <map>

namespace shardpack::remote {
namespace {

GetEnvFn Vars(std::map<std::string, std::string> vars) {
  return [vars](const char* name) {
    auto it = vars.find(name);
    return it == vars.end() ? std::string() : it->second;
  };
}

TEST(PlanPartsTest, FullPartsThenAShorterLastOne) {
  const auto parts = PlanParts(23, 10);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].offset, 0u);
  EXPECT_EQ(parts[0].size, 10u);
  EXPECT_EQ(parts[1].offset, 10u);
  EXPECT_EQ(parts[2].offset, 20u);
  EXPECT_EQ(parts[2].size, 3u);
}

TEST(PlanPartsTest, AnExactMultipleHasNoEmptyLastPart) {
  const auto parts = PlanParts(20, 10);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].size, 10u);
}

TEST(PlanPartsTest, AnEmptyFileIsOneEmptyPart) {
  const auto parts = PlanParts(0, 10);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].size, 0u);
}

TEST(PlanPartsTest, PartsGrowToStayWithinS3sLimitOfTenThousand) {
  const uint64_t file = 10 * kMaxParts + 7;
  const auto parts = PlanParts(file, 1);
  EXPECT_LE(parts.size(), kMaxParts);
  uint64_t total = 0;
  for (const auto& p : parts) {
    EXPECT_EQ(p.offset, total);
    total += p.size;
  }
  EXPECT_EQ(total, file);
}

TEST(XmlElementTextTest, ReadsTheUploadIdOfCreateMultipartUpload) {
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<InitiateMultipartUploadResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>VXBsb2FkIElE&amp;x</UploadId></InitiateMultipartUploadResult>";
  EXPECT_EQ(XmlElementText(body, "UploadId"), "VXBsb2FkIElE&x");
  EXPECT_EQ(XmlElementText(body, "Missing"), "");
  EXPECT_EQ(XmlElementText("<UploadId>unterminated", "UploadId"), "");
}

TEST(XmlElementTextTest, AnErrorInA200AnswerOfCompleteMultipartUploadIsFound) {
  const std::string body =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\n<Error><Code>InternalError</Code>"
      "<Message>We encountered an internal error. Please try again.</Message></Error>";
  EXPECT_NE(body.find("<Error>"), std::string::npos);
  EXPECT_EQ(S3ErrorCode(body), "InternalError");
  EXPECT_EQ(XmlElementText(body, "Message"), "We encountered an internal error. Please try again.");
}

TEST(CompleteMultipartXmlTest, ListsPartsInOrderWithTheirQuotedETags) {
  EXPECT_EQ(CompleteMultipartXml({"\"a1\"", "\"b2\""}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"a1\"</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>\"b2\"</ETag></Part>"
            "</CompleteMultipartUpload>");
}

TEST(MultipartQueryTest, CreatePartAndCompleteQueries) {
  EXPECT_EQ(MultipartQuery("", 0), "uploads=");
  EXPECT_EQ(MultipartQuery("a/b+c", 3), "partNumber=3&uploadId=a%2Fb%2Bc");
  EXPECT_EQ(MultipartQuery("id", 0), "uploadId=id");
}

TEST(ResolveUploadSizesTest, DefaultsAre100MiBAnd64MiB) {
  auto sizes = ResolveUploadSizes(RemoteOptions(), Vars({}));
  ASSERT_TRUE(sizes.ok()) << sizes.status().message();
  EXPECT_EQ(sizes->multipart_threshold, 100ull << 20);
  EXPECT_EQ(sizes->part_bytes, 64ull << 20);
}

TEST(ResolveUploadSizesTest, TheEnvironmentLowersBothAndOptionsWin) {
  auto env = Vars({{"SHARDPACK_S3_MULTIPART_BYTES", "6M"}, {"SHARDPACK_S3_PART_BYTES", "5M"}});
  auto sizes = ResolveUploadSizes(RemoteOptions(), env);
  ASSERT_TRUE(sizes.ok()) << sizes.status().message();
  EXPECT_EQ(sizes->multipart_threshold, 6ull << 20);
  EXPECT_EQ(sizes->part_bytes, 5ull << 20);
  RemoteOptions o;
  o.part_bytes = 7ull << 20;
  EXPECT_EQ(ResolveUploadSizes(o, env)->part_bytes, 7ull << 20);
}

TEST(ResolveUploadSizesTest, ABadValueNamesTheVariable) {
  auto sizes = ResolveUploadSizes(RemoteOptions(), Vars({{"SHARDPACK_S3_PART_BYTES", "lots"}}));
  EXPECT_EQ(sizes.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(sizes.status().message().find("SHARDPACK_S3_PART_BYTES"), std::string::npos)
      << sizes.status().message();
  auto zero = ResolveUploadSizes(RemoteOptions(), Vars({{"SHARDPACK_S3_MULTIPART_BYTES", "0"}}));
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardpack::remote
