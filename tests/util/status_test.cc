#include "shardpack/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace shardpack {
namespace {

// ErrnoError names the error as glibc's strerrorname_np does (2.32 and newer), from a table
// of its own, so that the wheel built for glibc 2.28 says the same (docs/WHEELS.md).
TEST(StatusTest, ErrnoErrorNamesTheErrorLikeGlibc) {
  for (int err : {EPERM, ENOENT, EACCES, EEXIST, ENOSPC, EROFS, ELOOP, ENAMETOOLONG, EDQUOT,
                  ECONNREFUSED, ETIMEDOUT, EOPNOTSUPP, EHWPOISON}) {
    Status s = ErrnoError("open x", err);
    std::string expected =
        std::string("open x: ") + std::strerror(err) + " (" + strerrorname_np(err) + ")";
    EXPECT_EQ(s.message(), expected);
  }
  // The aliases read as glibc reads them.
  EXPECT_NE(ErrnoError("x", EWOULDBLOCK).message().find("(EAGAIN)"), std::string::npos);
  EXPECT_NE(ErrnoError("x", ENOTSUP).message().find("(EOPNOTSUPP)"), std::string::npos);
}

TEST(StatusTest, ErrnoErrorOfAnUnknownValueHasNoName) {
  Status s = ErrnoError("read y", 4000);
  EXPECT_EQ(s.message(), std::string("read y: ") + std::strerror(4000));
  EXPECT_EQ(s.code(), StatusCode::kIOError);
}

TEST(StatusTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ErrnoError("open z", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoError("open z", EACCES).code(), StatusCode::kIOError);
}

}  // namespace
}  // namespace shardpack
