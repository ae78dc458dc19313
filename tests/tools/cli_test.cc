// The shardpack binary's exit codes and output, run as a user would run it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include "image/resize_kernels.h"
#include "image_fixtures.h"
#include "io/dir_lock.h"
#include "io/mapped_write.h"
#include "shardpack/shard_writer.h"
#include "test_util.h"
#include "tools/cli_run.h"

namespace shardpack {
namespace {

using testing::CliRun;
using testing::RunCli;

TEST(CliTest, VerifyExitsZeroOnACleanDatasetOneOnFaultsTwoOnNoDataset) {
  testing::TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 5});
  CliRun ok = RunCli("verify " + dir.path());
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find(": OK: "), std::string::npos) << ok.out;

  std::string bytes = testing::ReadFileOrDie(dir.Join(m.shards[0].data.file));
  bytes[bytes.size() - 1] ^= 1;  // the last record's data checksum
  testing::WriteFileOrDie(dir.Join(m.shards[0].data.file), bytes);
  CliRun bad = RunCli("verify " + dir.path());
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("shardpack verify: " + m.shards[0].data.file + ": record 3 at offset"),
            std::string::npos)
      << bad.out;
  CliRun json = RunCli("verify --json " + dir.path());
  EXPECT_EQ(json.code, 1);
  EXPECT_NE(json.out.find("\"ok\": false"), std::string::npos) << json.out;

  testing::TempDir empty;
  CliRun none = RunCli("verify " + empty.path());
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("is not a shardpack dataset"), std::string::npos);
  EXPECT_EQ(RunCli("verify").code, 2);
  EXPECT_EQ(RunCli("frobnicate").code, 2);
}

TEST(CliTest, InfoDescribesTheDataset) {
  testing::TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 7, .num_classes = 2});
  CliRun r = RunCli("info " + dir.path());
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("samples      7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("class1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4x5, 3 channels"), std::string::npos) << r.out;
  CliRun j = RunCli("info --json " + dir.path());
  EXPECT_EQ(j.code, 0);
  EXPECT_NE(j.out.find("\"num_samples\": 7"), std::string::npos) << j.out;
}

TEST(CliTest, ConvertStatsSaysWhereTheTimeWent) {
  testing::TempDir src;
  std::filesystem::create_directories(src.Join("c"));
  testing::WriteFileOrDie(src.Join("c/a.png"),
                          testing::EncodePng(testing::Pattern(20, 30, 3, 1), 20, 30, 3));
  testing::TempDir out;
  CliRun r = RunCli("convert --quiet --stats --threads 1 --size 8x8 " + src.path() + " " +
                    out.path() + " 2>/dev/null");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("where the time went (1 threads"), std::string::npos) << r.out;
  for (const char* stage :
       {"scan", "plan", "read", "decode", "resize", "encode", "write", "idle", "publish"}) {
    EXPECT_NE(r.out.find(std::string("\n    ") + stage + " "), std::string::npos)
        << stage << ": " << r.out;
  }
  testing::TempDir json_out;
  CliRun j = RunCli("convert --quiet --json --threads 1 --size 8x8 " + src.path() + " " +
                    json_out.path() + " 2>/dev/null");
  EXPECT_EQ(j.code, 0) << j.out;
  auto parsed = nlohmann::json::parse(j.out);
  ASSERT_TRUE(parsed.contains("stages")) << j.out;
  EXPECT_EQ(parsed["stages"]["threads"], 1);
  EXPECT_GT(parsed["stages"]["decode"].get<double>(), 0.0) << j.out;
  EXPECT_GT(parsed["stages"]["write"].get<double>(), 0.0) << j.out;
}

TEST(CliTest, ConvertTakesTheFilterNamesOfTheManifestAndRefusesOthers) {
  testing::TempDir src;
  std::filesystem::create_directories(src.Join("c"));
  testing::WriteFileOrDie(src.Join("c/a.png"),
                          testing::EncodePng(testing::Pattern(20, 30, 3, 1), 20, 30, 3));
  for (const char* filter : {"lanczos3", "lanczos", "area"}) {
    testing::TempDir out;
    CliRun r = RunCli("convert --quiet --size 8x8 --filter " + std::string(filter) + " " +
                      src.path() + " " + out.path());
    EXPECT_EQ(r.code, 0) << filter << ": " << r.out;
    const std::string manifest = testing::ReadFileOrDie(out.Join("manifest.json"));
    const std::string written = std::string(filter) == "area" ? "area" : "lanczos3";
    EXPECT_NE(manifest.find("\"filter\": \"" + written + "\""), std::string::npos) << manifest;
  }
  testing::TempDir out;
  CliRun bad = RunCli("convert --size 8x8 --filter nearest " + src.path() + " " + out.path());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("unknown resize filter \"nearest\""), std::string::npos) << bad.out;
  CliRun fit = RunCli("convert --size 8x8 --fit fill " + src.path() + " " + out.path());
  EXPECT_EQ(fit.code, 2) << fit.out;
  EXPECT_NE(fit.out.find("unknown fit mode \"fill\""), std::string::npos) << fit.out;
  EXPECT_FALSE(std::filesystem::exists(out.Join("manifest.json")));
}

// SHARDPACK_RESIZE_KERNELS caps the resize's vector kernels: every level this CPU has
// gives the same shards; a level it lacks, or a word that is none, stops the conversion
// before anything is written, naming the variable (not one reject per image).
TEST(CliTest, ConvertGivesTheSameBytesWithEveryResizeKernelAndRefusesAnUnknownOne) {
  testing::TempDir src;
  std::filesystem::create_directories(src.Join("c"));
  for (int i = 0; i < 3; ++i) {
    testing::WriteFileOrDie(src.Join("c/" + std::to_string(i) + ".png"),
                            testing::EncodePng(testing::Pattern(90 + i, 70, 3, i), 90 + i, 70, 3));
  }
  std::vector<std::string> levels = {"portable"};
  if (image::internal::HaveAvx2()) levels.push_back("avx2");
  if (image::internal::HaveAvx512Vnni()) levels.push_back("avx512");
  std::string first;
  for (const std::string& level : levels) {
    testing::TempDir out;
    CliRun r = RunCli("convert --quiet --size 64x48 " + src.path() + " " + out.path(), "",
                      "SHARDPACK_RESIZE_KERNELS=" + level);
    ASSERT_EQ(r.code, 0) << level << ": " << r.out;
    std::string shards;
    for (const auto& e : std::filesystem::directory_iterator(out.path())) {
      if (e.path().extension() == ".tfrecord") shards += testing::ReadFileOrDie(e.path().string());
    }
    ASSERT_FALSE(shards.empty()) << level;
    if (first.empty()) first = shards;
    EXPECT_TRUE(shards == first) << level << " wrote other bytes than " << levels[0];
  }
  std::vector<std::pair<std::string, std::string>> refused = {
      {"avx3", "SHARDPACK_RESIZE_KERNELS: \"avx3\" is none of portable, avx2, avx512"}};
  if (!image::internal::HaveAvx512Vnni()) {
    refused.push_back({"avx512", "SHARDPACK_RESIZE_KERNELS: this CPU (or build) lacks AVX-512"});
  }
  for (const auto& [value, message] : refused) {
    testing::TempDir out;
    CliRun r = RunCli("convert --size 64x48 " + src.path() + " " + out.path(), "",
                      "SHARDPACK_RESIZE_KERNELS=" + value);
    EXPECT_EQ(r.code, 2) << value << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(out.Join("manifest.json"))) << value;
  }
}

// --write-method: every method gives the same shards (the bytes of a pwrite), in /dev/shm
// (tmpfs) as well as in the test's temporary directory, and the CLI refuses a word that is
// none of them before anything is written.
TEST(CliTest, ConvertGivesTheSameBytesWithEveryWriteMethodAndRefusesAnUnknownOne) {
  testing::TempDir src;
  std::filesystem::create_directories(src.Join("c"));
  for (int i = 0; i < 5; ++i) {
    testing::WriteFileOrDie(src.Join("c/" + std::to_string(i) + ".png"),
                            testing::EncodePng(testing::Pattern(60 + i, 70, 3, i), 60 + i, 70, 3));
  }
  std::vector<std::string> roots = {std::filesystem::temp_directory_path().string()};
  if (std::filesystem::is_directory("/dev/shm")) roots.push_back("/dev/shm");
  std::string first;
  for (const std::string& root : roots) {
    for (const char* method : {"write", "map", "auto"}) {
      testing::TempDir out(root);
      CliRun r = RunCli("convert --json --size 64x48 --shard-records 2 --write-method " +
                        std::string(method) + " " + src.path() + " " + out.path());
      ASSERT_EQ(r.code, 0) << method << " in " << out.path() << ": " << r.out;
      // --json says how the shards were written: auto's choice, or the method asked for.
      const std::string used = std::string(method) == "auto"
                                   ? (io::MappedWritesPreferred(out.path()) ? "map" : "write")
                                   : method;
      EXPECT_NE(r.out.find("\"write_method\": \"" + used + "\""), std::string::npos) << r.out;
      std::string shards;
      for (int n = 0; n < 3; ++n) {
        shards += testing::ReadFileOrDie(
            out.Join("shard-0000" + std::to_string(n) + "-of-00003.tfrecord"));
      }
      if (first.empty()) first = shards;
      EXPECT_TRUE(shards == first) << method << " in " << out.path() << " wrote other bytes";
    }
  }
  testing::TempDir out;
  CliRun bad = RunCli("convert --size 64x48 --write-method mmap " + src.path() + " " + out.path());
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_NE(bad.out.find("--write-method: mmap not in {auto,write,map}"), std::string::npos)
      << bad.out;
  EXPECT_FALSE(std::filesystem::exists(out.Join("manifest.json")));
}

TEST(CliTest, PreviewWritesAPngAndExitsOneOnACorruptSample) {
  testing::TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 5});
  const std::string png = dir.Join("grid.png");
  CliRun ok = RunCli("preview " + dir.path() + " -o " + png + " --thumb 32 --columns 4");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("wrote " + png + ": 5 samples, 160x104"), std::string::npos) << ok.out;
  EXPECT_EQ(testing::ReadFileOrDie(png).substr(1, 3), "PNG");
  EXPECT_FALSE(std::filesystem::exists(png + ".tmp"));
  CliRun rows = RunCli("preview " + dir.path() + " -o " + png + " --per-class --thumb 32");
  EXPECT_EQ(rows.code, 0) << rows.out;

  std::string bytes = testing::ReadFileOrDie(dir.Join(m.shards[0].data.file));
  bytes[bytes.size() - 1] ^= 1;  // the last record's data checksum
  testing::WriteFileOrDie(dir.Join(m.shards[0].data.file), bytes);
  CliRun bad = RunCli("preview " + dir.path() + " -o " + png);
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("shardpack preview: " + m.shards[0].data.file + ": record 3 at offset"),
            std::string::npos)
      << bad.out;

  testing::TempDir empty;
  EXPECT_EQ(RunCli("preview " + empty.path() + " -o " + png).code, 2);
  EXPECT_EQ(RunCli("preview " + dir.path()).code, 2);  // no -o
  EXPECT_EQ(RunCli("preview " + dir.path() + " -o " + png + " --per-class --columns 3").code, 2);
}

TEST(CliTest, AFifoInPlaceOfTheManifestOrAShardIsNamedByEveryCommandWithoutBlocking) {
  testing::TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.samples = 6, .max_shard_records = 3});
  const std::string shard = dir.Join(m.shards[1].data.file);
  std::filesystem::remove(shard);
  ASSERT_EQ(::mkfifo(shard.c_str(), 0644), 0);
  const std::string why = m.shards[1].data.file + ": not a regular file but a FIFO";
  CliRun verify = RunCli("verify " + dir.path());
  EXPECT_EQ(verify.code, 1) << verify.out;
  EXPECT_NE(verify.out.find(why), std::string::npos) << verify.out;
  // A FIFO in place of a shard makes the dataset unreadable (docs/CLI.md: exit 2): info,
  // which reads no shard, still checks that each listed file is one.
  for (const std::string& command :
       {"preview -o " + dir.Join("p.png"), std::string("bench"), std::string("info")}) {
    CliRun r = RunCli(command + " " + dir.path());
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.out.find(why), std::string::npos) << command << ": " << r.out;
  }

  testing::TempDir fifo;
  ASSERT_EQ(::mkfifo(fifo.Join("manifest.json").c_str(), 0644), 0);
  for (const std::string& command : {std::string("verify"), std::string("info"),
                                     "preview -o " + dir.Join("p.png"), std::string("bench")}) {
    CliRun r = RunCli(command + " " + fifo.path());
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.out.find("manifest.json: not a regular file but a FIFO"), std::string::npos)
        << command << ": " << r.out;
  }
}

TEST(CliTest, ATruncatedLmdbShardIsAFaultNamingItInVerifyPreviewAndBench) {
  testing::TempDir dir;
  Manifest m = testing::WriteTestDataset(dir.path(), {.backend = Backend::kLmdb,
                                                      .samples = 12,
                                                      .height = 40,
                                                      .width = 40,
                                                      .max_shard_records = 6});
  const std::string shard = dir.Join(m.shards[1].data.file);
  const std::string bytes = testing::ReadFileOrDie(shard);
  testing::WriteFileOrDie(shard, bytes.substr(0, bytes.size() / 2));
  CliRun verify = RunCli("verify " + dir.path());
  EXPECT_EQ(verify.code, 1) << verify.out;
  EXPECT_NE(verify.out.find(m.shards[1].data.file), std::string::npos) << verify.out;
  for (const std::string& command : {"preview -o " + dir.Join("p.png"), std::string("bench")}) {
    CliRun r = RunCli(command + " " + dir.path());
    EXPECT_EQ(r.code, 1) << command << ": " << r.out;
    EXPECT_NE(r.out.find(m.shards[1].data.file + ": the file is " +
                         std::to_string(bytes.size() / 2) + " bytes"),
              std::string::npos)
        << command << ": " << r.out;
    EXPECT_NE(r.out.find("it is truncated"), std::string::npos) << command << ": " << r.out;
  }
}

TEST(CliTest, NumbersAreParsedStrictlyAndTheErrorStatesValueAndRange) {
  testing::TempDir src, dir;
  std::filesystem::create_directory(src.Join("a"));
  testing::WriteFileOrDie(src.Join("a/x.jpg"),
                          testing::EncodeJpeg(testing::Pattern(8, 8, 3, 1), 8, 8, 3));
  const std::string convert = "convert " + src.path() + " " + dir.Join("out") + " ";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"--size 8x8 --seed -1",
       "--seed: -1 is negative; expected an integer from 0 to "
       "18446744073709551615"},
      {"--size 8x8 --shard-size -1", "--shard-size: -1 is negative"},
      {"--size 8x8 --shard-size 1.5", "--shard-size: \"1.5\" is not a whole number"},
      {"--size 8x8 --max-rejects 1e3", "--max-rejects: \"1e3\" is not a whole number"},
      {"--max-side 70000",
       "--max-side: 70000 is out of range; expected an integer from 1 to "
       "65500"},
      {"--size 4294967297x1",
       "--size 4294967297x1: expected WIDTHxHEIGHT, two integers from 1 "
       "to 65500"},
      {"--size 64x64x3", "--size 64x64x3: expected WIDTHxHEIGHT"},
      {"--size 8x8 --background 0xffff",
       "--background 0xffff: expected RRGGBB, six "
       "hexadecimal digits"},
      {"--size 8x8 --part +1/2", "--part +1/2: expected I/N"},
      {"--size 8x8 --threads 2.0", "--threads: \"2.0\" is not a whole number"},
      {"--size 8x8 --encoding png --png-compression 10",
       "--png-compression: 10 is out of range; expected an integer from 0 to 9"},
  };
  for (const auto& [args, message] : refused) {
    CliRun r = RunCli(convert + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << ": " << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.Join("out")));
  CliRun ok = RunCli(convert + "--size 8x8 --seed 18446744073709551615 --quiet");
  EXPECT_EQ(ok.code, 0) << ok.out;
  CliRun png = RunCli("convert " + src.path() + " " + dir.Join("png") +
                      " --size 8x8 --encoding png --png-compression 1 --quiet");
  EXPECT_EQ(png.code, 0) << png.out;
  EXPECT_NE(testing::ReadFileOrDie(dir.Join("png/manifest.json")).find("\"png_compression\": 1"),
            std::string::npos);

  CliRun batch = RunCli("bench " + dir.Join("out") + " --batch-size 2.5");
  EXPECT_EQ(batch.code, 2);
  EXPECT_NE(batch.out.find("--batch-size: \"2.5\" is not a whole number; expected an integer "
                           "from 1 to 2147483647"),
            std::string::npos)
      << batch.out;
  CliRun zero = RunCli("bench " + dir.Join("out") + " --batch-size 0");
  EXPECT_NE(zero.out.find("--batch-size: 0 is out of range; expected an integer from 1"),
            std::string::npos)
      << zero.out;
}

TEST(CliTest, BenchAndPreviewRefuseWhatCannotWorkInsteadOfTryingIt) {
  testing::TempDir dir;
  testing::WriteTestDataset(dir.path(), {.samples = 5});
  CliRun big = RunCli("bench " + dir.path() + " --batch-size 2147483647");
  EXPECT_EQ(big.code, 2) << big.out;
  EXPECT_NE(big.out.find("more than half of this machine's"), std::string::npos) << big.out;
  CliRun larger = RunCli("bench " + dir.path() + " --batch-size 6");
  EXPECT_EQ(larger.code, 2) << larger.out;
  EXPECT_NE(larger.out.find("--batch-size 6 is larger than the dataset (5 samples)"),
            std::string::npos)
      << larger.out;
  const std::string manifest = testing::ReadFileOrDie(dir.Join("manifest.json"));
  CliRun over = RunCli("preview " + dir.path() + " -o " + dir.Join("manifest.json"));
  EXPECT_EQ(over.code, 2) << over.out;
  EXPECT_NE(over.out.find("this is the dataset's own file manifest.json"), std::string::npos)
      << over.out;
  EXPECT_EQ(testing::ReadFileOrDie(dir.Join("manifest.json")), manifest);
}

TEST(CliTest, AUrlSchemeThatIsNotServedIsRefusedByEveryCommandAndNothingIsWritten) {
  testing::TempDir src;
  std::filesystem::create_directories(src.Join("c"));
  testing::WriteFileOrDie(src.Join("c/a.png"),
                          testing::EncodePng(testing::Pattern(20, 30, 3, 1), 20, 30, 3));
  testing::TempDir cwd;
  const std::string size = " --size 8x8 --quiet ";
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"convert --part 0/2" + size + src.path() + " s3://bucket/ds", "cannot write to s3://"},
      {"convert" + size + src.path() + " GS://bucket/ds", "the gs:// scheme here"},
      {"convert" + size + src.path() + " https://host/ds", "a URL cannot be written"},
      {"convert" + size + "s3://bucket/images out", "the s3:// scheme here"},
      {"verify gs://bucket/ds", "the gs:// scheme: a dataset is a local directory or an http"},
      {"verify --tfrecord gs://bucket/files", "the gs:// scheme here"},
      {"info hdfs://nn/ds", "the hdfs:// scheme"},
      {"bench gs://bucket/ds", "the gs:// scheme"},
      {"preview az://c/ds -o sheet.png", "the az:// scheme"},
      {"adopt file:///data/tfrecords", "the file:// scheme here"},
      {"merge s3://bucket/ds", "this path must be a local file or directory"},
  };
  for (const auto& [args, expected] : runs) {
    CliRun r = RunCli(args, cwd.path());
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << args << ": " << r.out;
  }
  // Nothing was written: no directory named "s3:" (or any other) in the working directory.
  EXPECT_TRUE(std::filesystem::is_empty(cwd.path()));

  // The same name as a local path is taken as one.
  CliRun local = RunCli("convert" + size + src.path() + " ./s3://bucket/ds", cwd.path());
  EXPECT_EQ(local.code, 0) << local.out;
  EXPECT_TRUE(std::filesystem::exists(cwd.Join("s3:/bucket/ds/manifest.json")));
}

TEST(CliTest, ASecondConvertIntoALockedDirectoryFailsAtOnceNamingTheHolder) {
  testing::TempDir src, dir;
  std::filesystem::create_directory(src.Join("a"));
  testing::WriteFileOrDie(src.Join("a/x.jpg"),
                          testing::EncodeJpeg(testing::Pattern(8, 8, 3, 1), 8, 8, 3));
  auto lock = io::DirLock::Acquire(dir.path(), "shardpack convert");
  ASSERT_TRUE(lock.ok());
  CliRun r = RunCli("convert " + src.path() + " " + dir.path() + " --size 8x8");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find(dir.path() + ": locked by shardpack convert (pid " +
                       std::to_string(::getpid()) + ")"),
            std::string::npos)
      << r.out;
  lock->reset();
  EXPECT_EQ(RunCli("convert " + src.path() + " " + dir.path() + " --size 8x8").code, 0);
  CliRun again = RunCli("convert " + src.path() + " " + dir.path() + " --size 8x8 --resume");
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find(dir.path() + ": already complete (the same inputs and options)"),
            std::string::npos)
      << again.out;
  CliRun changed = RunCli("convert " + src.path() + " " + dir.path() + " --size 9x9 --resume");
  EXPECT_EQ(changed.code, 2) << changed.out;
  EXPECT_NE(changed.out.find("other options (size: "), std::string::npos) << changed.out;
}

// A manifest that does not parse makes its dataset unreadable: every command that reads
// one exits 2 (docs/CLI.md), naming the file, whatever else it would have done with it.
TEST(CliTest, ACorruptManifestIsExitTwoNamingItFromEveryCommand) {
  testing::TempDir dir, src, out;
  testing::WriteTestDataset(dir.path(), {.samples = 4});
  for (int i = 0; i < 4; ++i) {
    testing::WriteFileMakingDirs(src.Join("c/img" + std::to_string(i) + ".png"),
                                 testing::EncodePng(testing::Pattern(8, 8, 3, i), 8, 8, 3));
  }
  const std::string convert = "convert --size 8x8 --quiet " + src.path() + " ";
  ASSERT_EQ(RunCli(convert + out.Join("resumed")).code, 0);
  const std::string merged = out.Join("merged");
  for (const char* part : {"0/2", "1/2"}) {
    ASSERT_EQ(RunCli(convert + merged + " --part " + part).code, 0);
  }
  const std::string garbage = "{\"format_version\": \"1.2\", \"shards\": [";
  for (const std::string& d : {dir.path(), out.Join("resumed"), PartDirectory(merged, 0, 2)}) {
    testing::WriteFileOrDie(d + "/manifest.json", garbage);
  }
  const std::string ds = " " + dir.path();
  const std::vector<std::string> commands = {
      "verify" + ds,
      "verify --json" + ds,
      "verify --tfrecord" + ds,
      "info" + ds,
      "info --json" + ds,
      "preview -o " + out.Join("p.png") + ds,
      "bench" + ds,
      "adopt" + ds,
      "convert --size 8x8 --input tfrecord" + ds + " " + out.Join("from-dataset"),
      convert + out.Join("resumed") + " --resume",
      "merge " + merged,
  };
  for (const std::string& command : commands) {
    CliRun r = RunCli(command);
    EXPECT_EQ(r.code, 2) << command << ": " << r.out;
    EXPECT_NE(r.out.find("manifest.json"), std::string::npos) << command << ": " << r.out;
  }
}

TEST(CliTest, AMinimumRateThatIsNoRateIsRefusedBeforeAnythingIsFetched) {
  for (const std::string command : {"info", "verify"}) {
    for (const std::string rate : {"0", "fast", "-1K"}) {
      CliRun r = RunCli(command + " http://127.0.0.1:9/ds --min-rate " + rate);
      EXPECT_EQ(r.code, 2) << command << " " << rate << ": " << r.out;
      EXPECT_NE(r.out.find("shardpack " + command + ": --min-rate: \"" + rate +
                           "\" is not a rate (bytes per second above 0"),
                std::string::npos)
          << r.out;
    }
  }
}

// The pieces of a hostile name: OSC 0 (sets the window title) ended by BEL, CSI (clears
// the screen), CSI as a C1 control in UTF-8, a carriage return that would overwrite the
// line, a right-to-left override, bytes that are not UTF-8; and the text each shows as.
constexpr char kOsc[] = "\x1b]0;pwned\x07";
constexpr char kCsi[] = "\x1b[2J";
constexpr char kC1[] =
    "\xc2\x9b"
    "31m";
constexpr char kCr[] = "\rFAKE";
constexpr char kBidi[] = "\xe2\x80\xae";
constexpr char kNotUtf8[] = "\xff\xfe";
const std::vector<std::pair<std::string, std::string>> kShownAs = {
    {kOsc, "\\x1b]0;pwned\\x07"}, {kCsi, "\\x1b[2J"},         {kC1, "\\xc2\\x9b31m"},
    {kCr, "\\x0dFAKE"},           {kBidi, "\\xe2\\x80\\xae"}, {kNotUtf8, "\\xff\\xfe"}};

// Every byte of `out` is one a terminal shows: newlines, printable ASCII, and UTF-8 of
// printable characters; no other C0 control, no DEL, no C1 control, no bidirectional
// control, nothing that is not UTF-8. Checked here byte by byte, not with the CLI's own
// escaping function.
void ExpectTerminalSafe(const std::string& out, const std::string& what) {
  for (size_t i = 0; i < out.size();) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(out[i + k]); };
    const unsigned char c = b(0);
    if (c < 0x80) {
      ASSERT_TRUE(c == '\n' || (c >= 0x20 && c != 0x7f))
          << what << ": byte 0x" << std::hex << int(c) << " at " << std::dec << i << " in\n"
          << out;
      ++i;
      continue;
    }
    const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    ASSERT_TRUE(n > 0 && i + n <= out.size()) << what << ": not UTF-8 at " << i << " in\n" << out;
    uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
    for (size_t k = 1; k < n; ++k) {
      ASSERT_EQ(b(k) & 0xc0, 0x80) << what << ": not UTF-8 at " << i << " in\n" << out;
      cp = (cp << 6) | (b(k) & 0x3f);
    }
    ASSERT_FALSE(cp <= 0x9f) << what << ": C1 control U+" << std::hex << cp << " in\n" << out;
    ASSERT_FALSE(cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
                 (cp >= 0x2066 && cp <= 0x2069))
        << what << ": bidirectional control U+" << std::hex << cp << " in\n"
        << out;
    i += n;
  }
}

// The CLI's stdout alone (its stderr dropped), for --json documents.
CliRun RunCliStdout(const std::string& args) {
  CliRun r{-1, ""};
  FILE* p = ::popen(
      ("timeout 60 " + std::string(SHARDPACK_CLI) + " " + args + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Runs `args` (its stdout alone when `stdout_only`), checks that its output is
// terminal-safe and shows each of `pieces` escaped.
CliRun RunShowing(const std::string& args, const std::vector<std::string>& pieces,
                  bool stdout_only = false) {
  CliRun r = stdout_only ? RunCliStdout(args) : RunCli(args);
  EXPECT_NE(r.code, -1) << args << ": did not exit normally: " << r.out;
  ExpectTerminalSafe(r.out, args);
  for (const auto& [raw, shown] : kShownAs) {
    if (std::find(pieces.begin(), pieces.end(), raw) == pieces.end()) continue;
    EXPECT_NE(r.out.find(shown), std::string::npos) << args << ": no " << shown << " in\n" << r.out;
  }
  return r;
}

// A shell word of `s` (single-quoted), for names with any byte.
std::string Quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Class names, shard file names, file names in folders and records: whatever a dataset or
// a folder holds reaches the terminal escaped, from every command, on stdout and stderr;
// --json stays valid JSON (printable ASCII, \u escapes) that reads back the same names.
TEST(CliTest, StringsFromADatasetReachTheTerminalEscapedFromEveryCommand) {
  const std::string hostile = std::string("c") + kOsc + kCsi + kC1 + kCr + kBidi;
  const std::vector<std::string> valid_pieces = {kOsc, kCsi, kC1, kCr, kBidi};
  testing::TempDir dir;
  {
    ShardWriterOptions o;
    o.max_shard_records = 2;
    o.class_names = {"plain", hostile};
    o.image.height = 4;
    o.image.width = 5;
    auto w = ShardWriter::Create(dir.path(), o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (uint64_t i = 0; i < 4; ++i) {
      const std::vector<uint8_t> px = testing::TestPixels(i, 4, 5, 3);
      ASSERT_OK((*w)->Add(
          {.pixels = px, .height = 4, .width = 5, .channels = 3, .label = int64_t(i % 2)}));
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  // The second shard and its index renamed, and the last record's checksum flipped.
  auto m = ReadManifest(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string shard = "shard-" + hostile + ".tfrecord", index = "shard-" + hostile + ".idx";
  std::filesystem::rename(dir.Join(m->shards[1].data.file), dir.Join(shard));
  std::filesystem::rename(dir.Join(m->shards[1].index->file), dir.Join(index));
  m->shards[1].data.file = shard;
  m->shards[1].index->file = index;
  testing::WriteFileOrDie(dir.Join("manifest.json"), SerializeManifest(*m));
  std::string bytes = testing::ReadFileOrDie(dir.Join(shard));
  bytes.back() ^= 1;
  testing::WriteFileOrDie(dir.Join(shard), bytes);

  const std::string ds = " " + dir.path();
  CliRun info = RunShowing("info" + ds, valid_pieces);
  EXPECT_EQ(info.code, 0) << info.out;
  CliRun verify = RunShowing("verify" + ds, valid_pieces);
  EXPECT_EQ(verify.code, 1) << verify.out;
  CliRun preview = RunShowing("preview" + ds + " -o " + dir.Join("p.png"), valid_pieces);
  EXPECT_EQ(preview.code, 1) << preview.out;
  CliRun bench = RunShowing("bench" + ds + " --batch-size 1 --epochs 1 --threads 1 --shuffle none",
                            valid_pieces);
  EXPECT_EQ(bench.code, 1) << bench.out;
  // Machines read --json, which names the same bytes.
  CliRun info_json = RunShowing("info --json" + ds, {}, true);
  ASSERT_EQ(info_json.code, 0) << info_json.out;
  auto j = nlohmann::json::parse(info_json.out);
  EXPECT_EQ(j["classes"][1]["name"], hostile);
  EXPECT_EQ(j["shards"][1]["file"], shard);
  CliRun verify_json = RunShowing("verify --json" + ds, {}, true);
  ASSERT_EQ(verify_json.code, 1) << verify_json.out;
  bool named = false;
  const auto report = nlohmann::json::parse(verify_json.out);
  for (const auto& f : report["faults"]) named |= f["file"] == shard;
  EXPECT_TRUE(named) << verify_json.out;

  // Names that are not UTF-8, from folders: TFRecord files (verify --tfrecord, adopt) and
  // images (convert's rejects and class names).
  const std::string file = std::string("part") + kOsc + kC1 + kNotUtf8 + kBidi + ".tfrecord";
  const std::vector<std::string> folder_pieces = {kOsc, kC1, kNotUtf8, kBidi};
  testing::TempDir files;
  testing::WriteFileOrDie(files.Join(file), "not a TFRecord file at all");
  EXPECT_EQ(RunShowing("verify --tfrecord " + files.path(), folder_pieces).code, 1);
  EXPECT_EQ(RunShowing("adopt " + files.path(), folder_pieces).code, 1);
  for (const std::string command : {"verify --tfrecord --json ", "adopt --json "}) {
    CliRun r = RunShowing(command + files.path(), {}, true);
    EXPECT_EQ(r.code, 1) << command << r.out;
    EXPECT_NO_THROW(nlohmann::json::parse(r.out)) << command << r.out;
  }
  testing::TempDir src, out;
  const std::string klass = std::string("k") + kOsc + kC1 + kNotUtf8 + kCr;
  testing::WriteFileMakingDirs(src.Join("a/good.png"),
                               testing::EncodePng(testing::Pattern(8, 8, 3, 1), 8, 8, 3));
  testing::WriteFileMakingDirs(src.Join(klass + "/img" + kCsi + kBidi + kNotUtf8 + ".png"),
                               "not an image");
  const std::string convert = "convert --size 8x8 " + Quoted(src.path()) + " ";
  CliRun converted = RunShowing(convert + out.Join("ds"), {kOsc, kC1, kNotUtf8, kCr, kCsi, kBidi});
  EXPECT_EQ(converted.code, 0) << converted.out;
  CliRun converted_json = RunShowing(convert + out.Join("json") + " --json", {}, true);
  EXPECT_EQ(converted_json.code, 0) << converted_json.out;
  EXPECT_NO_THROW(nlohmann::json::parse(converted_json.out)) << converted_json.out;
  EXPECT_EQ(RunShowing("info " + out.Join("ds"), {kOsc, kC1, kCr}).code, 0);
}

}  // namespace
}  // namespace shardpack
