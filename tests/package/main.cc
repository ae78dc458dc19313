// A program outside the project that uses the installed package: find_package(shardpack)
// and shardpack::shardpack, with only the public headers (all of them, together).
#include <shardpack/convert.h>
#include <shardpack/dataset.h>
#include <shardpack/loader.h>
#include <shardpack/manifest.h>
#include <shardpack/resize_filter.h>
#include <shardpack/shard_writer.h>
#include <shardpack/status.h>
#include <shardpack/verify.h>

#include <cstdio>
#include <memory>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto report = shardpack::VerifyDataset(argv[1]);
  if (!report.ok() || !report->ok()) return 1;
  auto opened = shardpack::Dataset::Open(argv[1]);
  if (!opened.ok()) return 1;
  std::shared_ptr<const shardpack::Dataset> ds(std::move(opened).value());
  shardpack::SampleView s;
  if (!ds->Get(ds->size() - 1, &s).ok()) return 1;
  // One epoch through the loader on the host.
  shardpack::LoaderOptions o;
  o.batch_size = 4;
  auto loader = shardpack::Loader::Create(ds, o);
  if (!loader.ok()) return 1;
  uint64_t samples = 0;
  while (true) {
    auto batch = (*loader)->Next();
    if (!batch.ok()) {
      if (batch.status().code() != shardpack::StatusCode::kOutOfRange) return 1;
      break;
    }
    samples += static_cast<uint64_t>(batch->size());
  }
  if (samples != ds->size()) return 1;
  std::printf("consumer: shardpack %s read %llu samples, last is %dx%dx%d; loader: %llu\n",
              std::string(shardpack::Version()).c_str(),
              static_cast<unsigned long long>(ds->size()), s.height, s.width, s.channels,
              static_cast<unsigned long long>(samples));
  return 0;
}
