#include "format/tfrecord_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

namespace shardpack::format {
namespace {

using testing::TempDir;

std::vector<std::string> Names(const TfrecordFileSet& set) {
  std::vector<std::string> out;
  for (const auto& f : set.files) out.push_back(f.name);
  return out;
}

TEST(TfrecordFilesTest, DirectoryGivesItsFilesSortedWithoutIndexesAndHiddenOnes) {
  TempDir dir;
  for (const char* n : {"train-00001-of-00002", "train-00000-of-00002", "train-00000-of-00002.idx",
                        ".hidden", "rejects.tsv"}) {
    testing::WriteFileOrDie(dir.Join(n), "");
  }
  auto set = FindTfrecordFiles(dir.path());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(Names(*set),
            (std::vector<std::string>{"train-00000-of-00002", "train-00001-of-00002"}));
  EXPECT_EQ(set->hidden_ignored, 1u);
  EXPECT_EQ(set->files[0].path, dir.Join("train-00000-of-00002"));
  EXPECT_FALSE(set->from_manifest);
}

TEST(TfrecordFilesTest, SubDirectoryIsListedAsARejectNotRead) {
  TempDir dir;
  testing::WriteFileOrDie(dir.Join("a.tfrecord"), "");
  std::filesystem::create_directory(dir.Join("sub"));
  auto set = FindTfrecordFiles(dir.path());
  ASSERT_TRUE(set.ok());
  ASSERT_EQ(set->rejects.size(), 1u);
  EXPECT_EQ(set->rejects[0].first, "sub");
  EXPECT_NE(set->rejects[0].second.find("a directory"), std::string::npos);
}

TEST(TfrecordFilesTest, GlobPatternSelectsItsMatches) {
  TempDir dir;
  for (const char* n : {"train-0", "train-1", "validation-0"})
    testing::WriteFileOrDie(dir.Join(n), "");
  auto set = FindTfrecordFiles(dir.Join("train-*"));
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(Names(*set), (std::vector<std::string>{dir.Join("train-0"), dir.Join("train-1")}));
  EXPECT_EQ(set->dir, dir.path());
}

TEST(TfrecordFilesTest, PatternWithoutMatchIsNotFound) {
  TempDir dir;
  auto set = FindTfrecordFiles(dir.Join("train-*"));
  EXPECT_EQ(set.status().code(), StatusCode::kNotFound);
  EXPECT_NE(set.status().message().find("no file matches"), std::string::npos);
}

TEST(TfrecordFilesTest, MissingPathIsNotFound) {
  TempDir dir;
  EXPECT_EQ(FindTfrecordFiles(dir.Join("nothing")).status().code(), StatusCode::kNotFound);
}

TEST(TfrecordFilesTest, EmptyDirectoryIsInvalidArgument) {
  TempDir dir;
  EXPECT_EQ(FindTfrecordFiles(dir.path()).status().code(), StatusCode::kInvalidArgument);
}

TEST(TfrecordFilesTest, ShardpackDatasetGivesItsShardsInManifestOrder) {
  TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 10, .max_shard_records = 4});
  auto set = FindTfrecordFiles(dir.path());
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_TRUE(set->from_manifest);
  ASSERT_EQ(set->files.size(), m.shards.size());
  for (size_t i = 0; i < m.shards.size(); ++i) EXPECT_EQ(set->files[i].name, m.shards[i].data.file);
}

TEST(TfrecordFilesTest, LmdbDatasetIsInvalidArgument) {
  TempDir dir;
  testing::WriteTestDataset(dir.path(), {.backend = Backend::kLmdb, .samples = 3});
  auto set = FindTfrecordFiles(dir.path());
  EXPECT_EQ(set.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(set.status().message().find("lmdb shards"), std::string::npos);
}

TEST(TfrecordFilesTest, TensorFlowsNamesAreRecognised) {
  EXPECT_TRUE(LooksLikeTfrecordName("train-00000-of-01024"));
  EXPECT_TRUE(LooksLikeTfrecordName("validation-00127-of-00128"));
  EXPECT_TRUE(LooksLikeTfrecordName("data.tfrecord"));
  EXPECT_TRUE(LooksLikeTfrecordName("data.tfrecords"));
  EXPECT_TRUE(LooksLikeTfrecordName("x.tfr"));
  EXPECT_FALSE(LooksLikeTfrecordName("photo.jpg"));
  EXPECT_FALSE(LooksLikeTfrecordName("train-of-3"));
  EXPECT_FALSE(LooksLikeTfrecordName(".tfrecord"));
}

TEST(TfrecordFilesTest, IndexNameReplacesATfrecordSuffixOrAppends) {
  EXPECT_EQ(IndexNameFor("a.tfrecord"), "a.idx");
  EXPECT_EQ(IndexNameFor("a.tfrecords"), "a.idx");
  EXPECT_EQ(IndexNameFor("train-00000-of-00002"), "train-00000-of-00002.idx");
}

}  // namespace
}  // namespace shardpack::format
