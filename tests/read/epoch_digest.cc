// Reads epochs of a dataset with the loader and prints what they delivered, for the
// out-of-core test (tests/read/out_of_core_test.sh): the XXH3 digest of every batch's
// indices, labels and pixels in order, the batch count, the I/O path the loader took,
// and the process's peak RSS.
//   epoch_digest DIR [--io auto|mapped|readahead] [--batch-size N] [--epochs E]
//                [--io-buffer BYTES] [--shuffle global|block]
//                [--transform none|center_crop|random_resized_crop|random_crop]
//                [--output HxW] [--flip 0|1] [--dtype uint8|float32|float16]
// (The transform flags also let two builds of the loader be compared batch for batch.)
// Output, one line: "digest <hex> batches <n> peak_rss_kb <kb> io <LoaderStats::io>".
#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "shardpack/loader.h"
#include "util/hash.h"

int main(int argc, char** argv) {
  using namespace shardpack;
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: epoch_digest DIR [--io P] [--batch-size N] [--epochs E] "
                 "[--io-buffer B] [--shuffle S]\n");
    return 2;
  }
  LoaderOptions o;
  o.batch_size = 32;
  o.num_threads = 2;
  int epochs = 1;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--io") {
      o.io = value == "mapped"      ? IoPath::kMapped
             : value == "readahead" ? IoPath::kReadAhead
                                    : IoPath::kAuto;
    } else if (flag == "--batch-size") {
      o.batch_size = std::stoi(value);
    } else if (flag == "--epochs") {
      epochs = std::stoi(value);
    } else if (flag == "--io-buffer") {
      o.io_buffer_bytes = std::stoull(value);
    } else if (flag == "--shuffle") {
      o.shuffle = value == "block" ? ShuffleMode::kBlock : ShuffleMode::kGlobal;
    } else if (flag == "--transform") {
      o.transform = value == "center_crop"           ? Transform::kCenterCrop
                    : value == "random_resized_crop" ? Transform::kRandomResizedCrop
                    : value == "random_crop"         ? Transform::kRandomCrop
                                                     : Transform::kNone;
    } else if (flag == "--output") {
      o.output_height = std::stoi(value.substr(0, value.find('x')));
      o.output_width = std::stoi(value.substr(value.find('x') + 1));
    } else if (flag == "--flip") {
      o.random_flip = value == "1";
    } else if (flag == "--dtype") {
      o.output_type = value == "float32"   ? OutputType::kFloat32
                      : value == "float16" ? OutputType::kFloat16
                                           : OutputType::kUint8;
    } else {
      std::fprintf(stderr, "epoch_digest: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  auto ds = Dataset::Open(argv[1]);
  if (!ds.ok()) {
    std::fprintf(stderr, "epoch_digest: %s\n", ds.status().ToString().c_str());
    return 1;
  }
  auto loader = Loader::Create(std::shared_ptr<const Dataset>(std::move(ds).value()), o);
  if (!loader.ok()) {
    std::fprintf(stderr, "epoch_digest: %s\n", loader.status().ToString().c_str());
    return 1;
  }
  std::string digests;
  uint64_t batches = 0;
  for (int e = 0; e < epochs; ++e) {
    if (e > 0 && !(*loader)->StartEpoch(static_cast<uint64_t>(e)).ok()) return 1;
    for (;;) {
      auto b = (*loader)->Next();
      if (!b.ok()) {
        if (b.status().code() == StatusCode::kOutOfRange) break;
        std::fprintf(stderr, "epoch_digest: %s\n", b.status().ToString().c_str());
        return 1;
      }
      std::string bytes(reinterpret_cast<const char*>(b->indices().data()),
                        b->indices().size_bytes());
      bytes.append(reinterpret_cast<const char*>(b->labels().data()), b->labels().size_bytes());
      bytes.append(static_cast<const char*>(b->host_data()), b->host_bytes());
      digests += Xxh3Hex(bytes.data(), bytes.size());
      ++batches;
    }
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("digest %s batches %llu peak_rss_kb %ld io %s\n",
              Xxh3Hex(digests.data(), digests.size()).c_str(),
              static_cast<unsigned long long>(batches), usage.ru_maxrss,
              (*loader)->stats().io.c_str());
  return 0;
}
