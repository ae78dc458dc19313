// The loader's ring of batch slots: what one slot holds, how its buffers are allocated
// once, and what happens to a batch once its samples are in place (skipped samples
// compacted away; on the GPU, the copy to the device and the normalisation queued on the
// slot's stream). The loader (loader.cc) owns the slots and decides which batch goes where
// and when; this file knows nothing of datasets, samples or the epoch's order.
//
// Thread-safety: a slot is used by one thread at a time (the worker that fills it or
// publishes it, or the consumer that holds it); the loader's lock hands it over.
#ifndef SHARDPACK_READ_RING_H_
#define SHARDPACK_READ_RING_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "cuda/cuda.h"
#include "shardpack/loader.h"
#include "shardpack/status.h"

namespace shardpack::read {

// Page-aligned host memory for the host path, allocated once per slot.
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

// What AllocateAligned takes for `bytes`: at least one page, rounded up to whole pages;
// UINT64_MAX where that would overflow (the memory check must see a huge need as huge).
uint64_t AlignedBytes(uint64_t bytes);

// `bytes` (at least one page) of page-aligned memory, backed now (a page fault per 4 KiB
// of the ring would otherwise fall in the first epoch). ResourceExhausted when the
// allocation fails.
StatusOr<AlignedBuffer> AllocateAligned(size_t bytes);

// Bytes of one output value: 1 (uint8), 2 (float16) or 4 (float32).
size_t OutputElementBytes(OutputType type);

// What every slot of a ring holds.
struct SlotShape {
  int batch_size = 0;
  size_t sample_bytes = 0;  // uint8 HWC bytes of one output sample
  int height = 0;           // the output sample's shape
  int width = 0;
  int channels = 0;
  OutputType output_type = OutputType::kUint8;
  int device = -1;  // -1: host memory; else pinned host memory, and this device's buffers
  cuda::NormalizeParams norm;  // with output_type not kUint8

  bool gpu() const { return device >= 0; }
  bool normalize() const { return output_type != OutputType::kUint8; }
  // The host normalises: its floats are a second host buffer.
  bool host_normalizes() const { return normalize() && !gpu(); }
  // Bytes of one sample's normalised output.
  size_t out_sample_bytes() const { return sample_bytes * OutputElementBytes(output_type); }
};

// One slot of the ring: its buffers (allocated once, by Allocate) and the batch it holds.
struct RingSlot {
  enum class State { kFree, kFilling, kReady, kHeld };

  // OK, or the failed allocation's error (the slot is then unusable).
  Status Allocate(const SlotShape& shape);

  // Buffers.
  uint8_t* host = nullptr;  // N x H x W x C uint8
  AlignedBuffer host_memory;
  cuda::PinnedBuffer pinned;
  AlignedBuffer host_out_memory;  // host path with normalisation: N x C x H x W values
  cuda::DeviceBuffer device_in;   // GPU: uint8 batch
  cuda::DeviceBuffer device_out;  // GPU with normalisation: values
  cuda::Stream stream;
  cuda::Event copied;         // recorded after the copy (and kernel) of each fill
  cuda::Event consumer_done;  // recorded on the consumer's stream at release
  bool copy_pending = false;
  bool consumer_event_pending = false;
  // The stream the consumer last passed to WaitOn for the batch held now.
  bool consumer_waited = false;
  void* consumer_stream = nullptr;

  // The batch it holds (guarded by the loader's mutex while kFilling).
  State state = State::kFree;
  uint64_t generation = 0;
  uint64_t epoch = 0;
  uint64_t index = 0;
  int size = 0;   // samples planned
  int valid = 0;  // of which not kPad fill
  std::vector<uint64_t> indices;
  std::vector<int64_t> labels;
  std::vector<uint8_t> bad;  // kSkip: sample i was left out
  int chunks_left = 0;
  Status status;  // the first error, by sample position
  int status_position = -1;
};

// The batch in `slot` is whole on the host: samples marked bad are compacted away (their
// pixels, normalised values, indices and labels; size and valid shrink), then, on the GPU,
// the device's work is queued on the slot's stream: wait for the consumer's release, copy
// the batch, normalise it, record `copied`. Errors are the CUDA layer's.
Status PublishSlot(const SlotShape& shape, RingSlot& slot);

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_RING_H_
