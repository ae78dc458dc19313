// RankFromEnvironment: the launchers' variables, their precedence and their mistakes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "shardpack/loader.h"

namespace shardpack {
namespace {

// Clears every variable RankFromEnvironment reads, and restores them afterwards.
class RankEnvTest : public ::testing::Test {
 protected:
  static constexpr const char* kNames[] = {
      "RANK",     "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "PMI_RANK", "PMI_SIZE",   "SLURM_PROCID",         "SLURM_NTASKS"};
  void SetUp() override {
    for (const char* n : kNames) {
      const char* v = getenv(n);
      if (v != nullptr) saved_.emplace_back(n, v);
      unsetenv(n);
    }
  }
  void TearDown() override {
    for (const char* n : kNames) unsetenv(n);
    for (const auto& [n, v] : saved_) setenv(n.c_str(), v.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(RankEnvTest, NoLauncherIsRankZeroOfOne) {
  auto r = RankFromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 0);
  EXPECT_EQ(r->world_size, 1);
  EXPECT_EQ(r->source, "none");
}

TEST_F(RankEnvTest, EachLauncherIsReadAndTorchrunWinsOverTheOthers) {
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  auto r = RankFromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank, 5);
  EXPECT_EQ(r->world_size, 8);
  EXPECT_EQ(r->source, "slurm");
  setenv("PMI_RANK", "1", 1);
  setenv("PMI_SIZE", "2", 1);
  EXPECT_EQ(RankFromEnvironment()->source, "pmi");
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  EXPECT_EQ(RankFromEnvironment()->source, "openmpi");
  EXPECT_EQ(RankFromEnvironment()->rank, 2);
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "16", 1);
  r = RankFromEnvironment();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, "torchrun");
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 16);
}

TEST_F(RankEnvTest, HalfAPairOrBadValuesAreNamed) {
  setenv("RANK", "1", 1);
  auto r = RankFromEnvironment();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("WORLD_SIZE=(unset)"), std::string::npos);
  for (auto [rank, size] :
       {std::pair{"4", "4"}, {"-1", "4"}, {"x", "4"}, {"0", "0"}, {"1", "2x"}}) {
    setenv("RANK", rank, 1);
    setenv("WORLD_SIZE", size, 1);
    r = RankFromEnvironment();
    EXPECT_FALSE(r.ok()) << rank << " " << size;
    EXPECT_NE(r.status().message().find(std::string("RANK=") + rank), std::string::npos);
  }
}

}  // namespace
}  // namespace shardpack
