#include "io/env.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <utility>
#include <vector>

#include "io/dir_lock.h"
#include "io/mem_env.h"
#include "test_util.h"

namespace shardpack::io {
namespace {

using shardpack::testing::TempDir;

TEST(PosixEnvTest, WriteFileAtomicallyPublishesWholeFileAndLeavesNoTemporary) {
  TempDir dir;
  Env* env = Env::Posix();
  const std::string path = dir.Join("manifest.json");
  ASSERT_TRUE(WriteFileAtomically(env, path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(env, path, "second version").ok());
  auto text = env->ReadFile(path, 1 << 20);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second version");
  auto names = env->ListDir(dir.path());
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"manifest.json"});
}

// Appends of every size the writers make (small entries, records buffered or written
// around the buffer, pieces larger than it), over many writeback chunks: the file holds
// exactly the bytes appended, before and after Sync.
TEST(PosixEnvTest, AWritableFileHoldsExactlyWhatWasAppended) {
  TempDir dir;
  Env* env = Env::Posix();
  auto file = env->NewWritableFile(dir.Join("f"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::string expected;
  uint32_t state = 1;
  const size_t sizes[] = {13, 196'928, 7, 65'536, 1, 3 << 20, 1'000, 131'072};
  while (expected.size() < (40u << 20)) {
    for (size_t n : sizes) {
      std::string piece(n, '\0');
      for (char& c : piece) c = static_cast<char>((state = state * 1664525u + 1013904223u) >> 24);
      ASSERT_OK((*file)->Append(piece));
      expected += piece;
    }
    if (expected.size() > (20u << 20) && expected.size() < (25u << 20)) ASSERT_OK((*file)->Sync());
  }
  EXPECT_EQ((*file)->Size(), expected.size());
  ASSERT_OK((*file)->Sync());
  ASSERT_OK((*file)->Close());
  auto text = env->ReadFile(dir.Join("f"), 64u << 20);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_TRUE(*text == expected);
}

TEST(PosixEnvTest, MapFileSeesTheBytesAndMissingFileIsNotFound) {
  TempDir dir;
  Env* env = Env::Posix();
  shardpack::testing::WriteFileOrDie(dir.Join("f"), "abc");
  auto m = env->MapFile(dir.Join("f"), AccessPattern::kSequential);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*m)->data()), (*m)->size()), "abc");
  auto missing = env->MapFile(dir.Join("nope"), AccessPattern::kRandom);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(PosixEnvTest, ReadFileRefusesFilesAboveTheLimit) {
  TempDir dir;
  shardpack::testing::WriteFileOrDie(dir.Join("big"), std::string(100, 'x'));
  auto r = Env::Posix()->ReadFile(dir.Join("big"), 99);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

// Every step of the atomic publish can fail; each failure is reported with its errno
// name, the destination is untouched and no temporary is left behind.
TEST(PosixEnvTest, MapFileAndReadFileRefuseAFifoOrADirectoryWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  Env* env = Env::Posix();
  auto read = env->ReadFile(fifo, 1 << 20);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(read.status().message(), fifo + ": not a regular file but a FIFO");
  auto mapped = env->MapFile(fifo, AccessPattern::kSequential);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.status().message(), fifo + ": not a regular file but a FIFO");
  read = env->ReadFile(dir.path(), 1 << 20);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message(), dir.path() + ": not a regular file but a directory");
}

// A symlink or a hard link at the name a writer creates (planted by whoever else can write
// in the directory) is replaced by a new file, never written through: the file it leads
// to, outside the directory, keeps its bytes. For every way a file is created for writing.
TEST(PosixEnvTest, ANewFileReplacesALinkAtItsNameInsteadOfWritingThroughIt) {
  TempDir dir, outside;
  const std::string target = outside.Join("target");
  shardpack::testing::WriteFileOrDie(target, "outside");
  Env* env = Env::Posix();
  using Create = std::function<Status(const std::string&)>;
  const std::vector<std::pair<std::string, Create>> creators = {
      {"NewWritableFile",
       [env](const std::string& p) {
         auto f = env->NewWritableFile(p);
         if (!f.ok()) return f.status();
         SHARDPACK_RETURN_IF_ERROR((*f)->Append("new"));
         return (*f)->Close();
       }},
      {"NewMappedWritableFile",
       [env](const std::string& p) {
         auto f = env->NewMappedWritableFile(p);
         if (!f.ok()) return f.status();
         const std::string_view piece = "new";
         SHARDPACK_RETURN_IF_ERROR((*f)->WriteAt(0, {&piece, 1}));
         return (*f)->Close();
       }},
      {"WriteFileAtomically's temporary",
       [env](const std::string& p) { return WriteFileAtomically(env, p + ".final", "new"); }},
      {"CreateNewFile",
       [](const std::string& p) -> Status {
         auto fd = CreateNewFile(p, O_WRONLY);
         if (!fd.ok()) return fd.status();
         const bool wrote = ::write(*fd, "new", 3) == 3;
         ::close(*fd);
         return wrote ? Status::Ok() : IOError(p + ": write");
       }},
  };
  for (const auto& [what, create] : creators) {
    for (const bool hard : {false, true}) {
      const std::string name = what.starts_with("WriteFile") ? "x.final.tmp" : "x";
      const std::string path = dir.Join(name);
      ASSERT_EQ(
          hard ? ::link(target.c_str(), path.c_str()) : ::symlink(target.c_str(), path.c_str()), 0);
      Status s = create(dir.Join("x"));
      ASSERT_TRUE(s.ok()) << what << ": " << s.ToString();
      EXPECT_EQ(shardpack::testing::ReadFileOrDie(target), "outside") << what;
      const std::string written = what.starts_with("WriteFile") ? dir.Join("x.final") : path;
      struct stat st {};
      ASSERT_EQ(::lstat(written.c_str(), &st), 0) << what;
      EXPECT_TRUE(S_ISREG(st.st_mode)) << what;
      EXPECT_EQ(st.st_nlink, 1u) << what;
      EXPECT_EQ(shardpack::testing::ReadFileOrDie(written), "new") << what;
      ::unlink(written.c_str());
      ::unlink(path.c_str());
    }
  }
  // Something that is not a link or a file in the way is an error naming it.
  ASSERT_EQ(::mkdir(dir.Join("d").c_str(), 0755), 0);
  auto fd = CreateNewFile(dir.Join("d"), O_WRONLY);
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find(dir.Join("d") + ": removing what is at the name"),
            std::string::npos)
      << fd.status().message();
}

TEST(MemEnvTest, EveryFailingStepOfAnAtomicWriteIsReportedAndLeavesTheOldFile) {
  for (FaultOp op :
       {FaultOp::kAppend, FaultOp::kSync, FaultOp::kClose, FaultOp::kRename, FaultOp::kSyncDir}) {
    for (int err : {ENOSPC, EIO}) {
      MemEnv env;
      ASSERT_TRUE(env.CreateDirs("/d").ok());
      env.SetFileContents("/d/m.json", "old");
      env.InjectFault(op, 1, err);
      Status s = WriteFileAtomically(&env, "/d/m.json", "new");
      ASSERT_FALSE(s.ok()) << static_cast<int>(op);
      EXPECT_EQ(s.code(), StatusCode::kIOError);
      EXPECT_NE(s.message().find(err == ENOSPC ? "ENOSPC" : "EIO"), std::string::npos)
          << s.message();
      EXPECT_FALSE(env.FileExists("/d/m.json.tmp"));
      // A failed directory fsync comes after the rename: the new bytes are in place but
      // the caller is told they may not be durable.
      EXPECT_EQ(env.FileContents("/d/m.json"), op == FaultOp::kSyncDir ? "new" : "old");
    }
  }
}

TEST(MemEnvTest, InjectedFaultFiresOnTheNthCallOnly) {
  MemEnv env;
  auto f = env.NewWritableFile("/x");
  ASSERT_TRUE(f.ok());
  env.InjectFault(FaultOp::kAppend, 2, EIO);
  EXPECT_TRUE((*f)->Append("a").ok());
  EXPECT_FALSE((*f)->Append("b").ok());
  EXPECT_TRUE((*f)->Append("c").ok());
  EXPECT_EQ(env.FileContents("/x"), "ac");
}

TEST(DirLockTest, OneHolderAtATimeAndAStaleFileIsTakenOver) {
  TempDir dir;
  const std::string sub = dir.Join("made/by/the/lock");
  auto first = DirLock::Acquire(sub, "first");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = DirLock::Acquire(sub, "second");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(sub + ": locked by first (pid " +
                                           std::to_string(::getpid()) + ")"),
            std::string::npos)
      << second.status().message();
  first->reset();
  EXPECT_FALSE(Env::Posix()->FileExists(JoinPath(sub, kLockFileName)));
  // A file left by a killed holder is not locked: the next one takes it.
  shardpack::testing::WriteFileOrDie(JoinPath(sub, kLockFileName), "gone (pid 1)\n");
  auto third = DirLock::Acquire(sub, "third");
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(shardpack::testing::ReadFileOrDie(JoinPath(sub, kLockFileName)),
            "third (pid " + std::to_string(::getpid()) + ")\n");
}

// A link planted at the lock file's name would have the holder's text written into the file
// it leads to: it is replaced by a lock file of the directory's own.
TEST(DirLockTest, ALinkAtTheLockFilesNameIsReplacedNotWrittenThrough) {
  TempDir dir, outside;
  const std::string target = outside.Join("target");
  const std::string lock_path = JoinPath(dir.path(), kLockFileName);
  for (const bool hard : {false, true}) {
    shardpack::testing::WriteFileOrDie(target, "outside");
    ASSERT_EQ(hard ? ::link(target.c_str(), lock_path.c_str())
                   : ::symlink(target.c_str(), lock_path.c_str()),
              0);
    auto lock = DirLock::Acquire(dir.path(), "convert");
    ASSERT_TRUE(lock.ok()) << lock.status().ToString();
    EXPECT_EQ(shardpack::testing::ReadFileOrDie(target), "outside");
    struct stat st {};
    ASSERT_EQ(::lstat(lock_path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode) && st.st_nlink == 1);
    lock->reset();
    EXPECT_EQ(shardpack::testing::ReadFileOrDie(target), "outside");
  }
}

TEST(CheckPathSchemeTest, TakesLocalPathsAndUrlsWhereAllowedAndNamesEveryOtherScheme) {
  for (const char* local : {"data/ds", "/abs/ds", "./s3://bucket/ds", "s3:/one-slash",
                            "ds:", "1s3://digit-first", "", "a b://space-in-scheme"}) {
    EXPECT_TRUE(CheckPathScheme(local, PathKind::kLocal).ok()) << local;
    EXPECT_TRUE(CheckPathScheme(local, PathKind::kDataset).ok()) << local;
  }
  for (const char* url : {"http://host/ds", "HTTPS://host/ds", "s3://bucket/ds", "S3://b/x"}) {
    EXPECT_TRUE(CheckPathScheme(url, PathKind::kDataset).ok()) << url;
  }

  Status http = CheckPathScheme("https://host/ds", PathKind::kLocal);
  EXPECT_EQ(http.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(http.message().find("https://host/ds: a URL cannot be written or scanned here"),
            std::string::npos)
      << http.message();
  for (const char* url : {"GS://bucket/ds", "hdfs://nn/ds", "az+blob.x-1://c/ds"}) {
    for (PathKind kind : {PathKind::kLocal, PathKind::kDataset}) {
      Status s = CheckPathScheme(url, kind);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << url;
      EXPECT_EQ(s.message().rfind(std::string(url) + ": shardpack does not support the ", 0), 0u)
          << s.message();
      EXPECT_NE(s.message().find("(a local directory of this name: ./" + std::string(url) + ")"),
                std::string::npos)
          << s.message();
    }
  }
  EXPECT_NE(CheckPathScheme("GS://b/x", PathKind::kLocal).message().find("the gs:// scheme here"),
            std::string::npos);
  // A file:// URL's fix is its own path.
  for (PathKind kind : {PathKind::kLocal, PathKind::kDataset}) {
    Status file = CheckPathScheme("file:///tmp/ds", kind);
    EXPECT_EQ(file.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(file.message().find("the file:// scheme"), std::string::npos) << file.message();
    EXPECT_NE(file.message().find("(a local path is written without file://: /tmp/ds)"),
              std::string::npos)
        << file.message();
  }
  EXPECT_NE(CheckPathScheme("gs://b/x", PathKind::kDataset)
                .message()
                .find("a dataset is a local directory or an http:// or https:// URL, or "
                      "s3://bucket/prefix"),
            std::string::npos);
}

TEST(CheckPathSchemeTest, S3WhereOnlyALocalPathIsTakenSaysWhereS3IsTaken) {
  Status s = CheckPathScheme("s3://bucket/ds", PathKind::kLocal);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.message().rfind("s3://bucket/ds: shardpack does not support the s3:// scheme here", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find("this path must be a local file or directory"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("convert writes its DST to one"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("(a local directory of this name: ./s3://bucket/ds)"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace shardpack::io
