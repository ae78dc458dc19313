// A program outside the project that uses the installed package: find_package(shardpack)
// and shardpack::shardpack, with only the public headers.
#include <shardpack/dataset.h>
#include <shardpack/verify.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto report = shardpack::VerifyDataset(argv[1]);
  if (!report.ok() || !report->ok()) return 1;
  auto ds = shardpack::Dataset::Open(argv[1]);
  if (!ds.ok()) return 1;
  shardpack::SampleView s;
  if (!(*ds)->Get((*ds)->size() - 1, &s).ok()) return 1;
  std::printf("consumer: shardpack %s read %llu samples, last is %dx%dx%d\n",
              std::string(shardpack::Version()).c_str(),
              static_cast<unsigned long long>((*ds)->size()), s.height, s.width, s.channels);
  return 0;
}
