// Everything the loader decides before it allocates: whether its options and a saved
// state can be used, how many workers, which I/O path and how much to read ahead, and
// whether the memory it will take fits (loader.h, "Memory"). The loader (loader.cc) then
// builds what these plans say; nothing here allocates more than a few strings.
//
// Errors: InvalidArgument "loader: <option> ..." for an option out of its range or a state
// saved for another configuration; ResourceExhausted "loader: the ring needs ..." /
// "loader: its memory needs ..." for memory the budget does not hold.
#ifndef SHARDPACK_READ_LOADER_OPTIONS_H_
#define SHARDPACK_READ_LOADER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "read/io_choice.h"
#include "read/read_ahead.h"
#include "read/ring.h"
#include "read/sampler.h"
#include "shardpack/dataset.h"
#include "shardpack/loader.h"
#include "shardpack/status.h"

namespace shardpack::read {

// The bounds loader.h states for each numeric option (batch_size, prefetch, num_threads,
// io_depth, world_size and rank, block_size and block_window, device).
Status CheckLoaderOptions(const LoaderOptions& options);

// A state to resume from: saved for this configuration (seed, sample count, rank layout,
// batch size, shuffle, and from version 2 the tail, a block shuffle's block size, window
// and the shards' record counts), its next batch within the epoch.
Status CheckResumeState(const LoaderState& state, const LoaderOptions& options,
                        const Manifest& manifest, const OrderSpec& spec);

// num_threads, or for 0 the machine's hardware threads, 1..8.
int WorkerThreads(const LoaderOptions& options);

// How the loader reads: the mapped path, with read_ahead_batches hinted ahead (0: none),
// or the read-ahead path with its units and buffers.
struct IoPlan {
  bool read_ahead = false;
  std::string why;            // "forced", or ChooseIo's words
  IoChoice fit;               // whether the dataset fits the page cache
  uint64_t stored_bytes = 0;  // the shards' bytes
  // The mapped path: batches hinted (or populated) ahead of the one being filled.
  uint64_t read_ahead_batches = 0;
  // The read-ahead path: the most samples of a unit, and units read ahead.
  uint64_t unit_cap = 0;
  uint64_t read_slots = 0;
  ReadAheadOptions read_ahead_options;
};
IoPlan PlanIo(const LoaderOptions& options, const Manifest& manifest);

// What the loader allocates, by the terms of loader.h's "Memory".
struct LoaderMemory {
  uint64_t ring = 0;        // the slots' buffers
  uint64_t workers = 0;     // the workers' scratch
  uint64_t read_ahead = 0;  // the read-ahead path's buffers
  uint64_t rest = 0;        // the batches' and the epoch's indices
  uint64_t total() const;
};

// The loader's memory for this dataset, ring shape, worker count and I/O plan.
// `scratch_bytes`: one worker's (SampleStep::ScratchBytes).
LoaderMemory MemoryOf(const Dataset& dataset, const LoaderOptions& options, const SlotShape& shape,
                      int threads, uint64_t scratch_bytes, const IoPlan& io);

// OK when `memory` fits LoaderOptions::max_memory_bytes, or, where it is 0, the process's
// budget (io::MemoryBudget); ResourceExhausted naming the terms and what to lower.
Status CheckLoaderMemory(const LoaderMemory& memory, const LoaderOptions& options,
                         const SlotShape& shape, int threads, const ImageSpec& image);

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_LOADER_OPTIONS_H_
