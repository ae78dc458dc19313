// A training loop's data side, as a C++ program writes it: open a dataset, iterate epochs
// through the Loader (on a GPU when one is given, else on the host), do a stand-in for the
// training step, and print throughput and how long the step waited for data.
//
//   train_loop out/quickstart/tfrecord --epochs 3 --batch-size 64            # host
//   train_loop data/imagenet --device 0 --size 224x224 --float16             # GPU
//
// The stand-in step sums one byte per sample on the host (or, on a GPU, only makes the
// consumer stream wait for the batch), so the figures show the loader, not a model.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

#include "shardpack/dataset.h"
#include "shardpack/loader.h"

int main(int argc, char** argv) {
  CLI::App app{"Iterate a shardpack dataset as a training loop does"};
  std::string dir, size;
  int epochs = 2, device = -1;
  bool float16 = false;
  shardpack::LoaderOptions o;
  o.batch_size = 64;
  app.add_option("DST", dir, "Dataset directory")->required();
  app.add_option("--epochs", epochs, "Epochs to run")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", o.batch_size, "Samples per batch")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.num_threads, "Worker threads (0: all cores)");
  app.add_option("--device", device, "CUDA device (-1: host)");
  app.add_option("--size", size,
                 "HEIGHTxWIDTH output: random-resized-crop + flip (needed for variable-size "
                 "datasets)");
  app.add_flag("--float16", float16, "Normalise to float16 NCHW (ImageNet mean/std)");
  CLI11_PARSE(app, argc, argv);

  auto opened = shardpack::Dataset::Open(dir);
  if (!opened.ok()) {
    std::fprintf(stderr, "train_loop: %s\n", opened.status().ToString().c_str());
    return 2;
  }
  std::shared_ptr<const shardpack::Dataset> ds(std::move(opened).value());
  o.device = device;
  o.seed = 2024;
  // Under torchrun, mpirun or srun each process reads its own part of every epoch
  // (docs/SCALE.md); alone, rank 0 of 1 reads everything.
  auto rank = shardpack::RankFromEnvironment();
  if (!rank.ok()) {
    std::fprintf(stderr, "train_loop: %s\n", rank.status().ToString().c_str());
    return 2;
  }
  o.rank = rank->rank;
  o.world_size = rank->world_size;
  if (!size.empty()) {
    if (std::sscanf(size.c_str(), "%dx%d", &o.output_height, &o.output_width) != 2) {
      std::fprintf(stderr, "train_loop: --size: expected HEIGHTxWIDTH, got %s\n", size.c_str());
      return 2;
    }
    o.transform = shardpack::Transform::kRandomResizedCrop;
    o.random_flip = true;
  }
  if (float16) o.output_type = shardpack::OutputType::kFloat16;

  auto created = shardpack::Loader::Create(ds, o);
  if (!created.ok()) {
    std::fprintf(stderr, "train_loop: %s\n", created.status().ToString().c_str());
    return 2;
  }
  std::unique_ptr<shardpack::Loader> loader = std::move(created).value();
  std::printf("%s: %llu samples, %llu batches of %d per epoch, on %s, rank %d of %d\n", dir.c_str(),
              static_cast<unsigned long long>(ds->size()),
              static_cast<unsigned long long>(loader->batches_per_epoch()), o.batch_size,
              device >= 0 ? "the GPU" : "the host", o.rank, o.world_size);

  uint64_t checksum = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    if (epoch > 0) {
      if (auto s = loader->StartEpoch(epoch); !s.ok()) return 1;
    }
    const auto t0 = std::chrono::steady_clock::now();
    uint64_t samples = 0;
    while (true) {
      auto batch = loader->Next();
      if (!batch.ok()) {
        if (batch.status().code() == shardpack::StatusCode::kOutOfRange) break;
        std::fprintf(stderr, "train_loop: %s\n", batch.status().ToString().c_str());
        return 1;
      }
      samples += static_cast<uint64_t>(batch->valid());
      if (device >= 0) {
        // A real step launches kernels on its stream after this wait; releasing the batch
        // (here, at the end of the scope) then reuses the slot only once they are done.
        if (auto s = batch->WaitOn(nullptr); !s.ok()) return 1;
      } else {
        const auto* bytes = static_cast<const uint8_t*>(batch->host_data());
        const size_t stride = batch->host_bytes() / batch->size();
        for (int i = 0; i < batch->size(); ++i) checksum += bytes[i * stride];
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("epoch %d: %llu samples in %.2f s, %.0f samples/s\n", epoch,
                static_cast<unsigned long long>(samples), s, samples / s);
  }
  std::printf("loader: %s\n", loader->stats().ToString().c_str());
  std::printf("resume point: %s\n", loader->state().ToString().c_str());
  std::printf("checksum %llu\n", static_cast<unsigned long long>(checksum));
  return 0;
}
