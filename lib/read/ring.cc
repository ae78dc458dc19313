#include "read/ring.h"

#include <algorithm>
#include <cstring>

#include "io/mapped_range.h"

namespace shardpack::read {
namespace {

constexpr uint64_t kPageSize = 4096;

cuda::NormalizeType NormalizeTypeOf(OutputType t) {
  return t == OutputType::kFloat16 ? cuda::NormalizeType::kFloat16 : cuda::NormalizeType::kFloat32;
}

Status AllocateDeviceSide(const SlotShape& shape, size_t batch_bytes, RingSlot& slot) {
  SHARDPACK_ASSIGN_OR_RETURN(slot.pinned, cuda::PinnedBuffer::Allocate(batch_bytes));
  slot.host = static_cast<uint8_t*>(slot.pinned.data());
  SHARDPACK_ASSIGN_OR_RETURN(slot.device_in,
                             cuda::DeviceBuffer::Allocate(shape.device, batch_bytes));
  if (shape.normalize()) {
    SHARDPACK_ASSIGN_OR_RETURN(
        slot.device_out, cuda::DeviceBuffer::Allocate(
                             shape.device, batch_bytes * OutputElementBytes(shape.output_type)));
  }
  SHARDPACK_ASSIGN_OR_RETURN(slot.stream, cuda::Stream::Create(shape.device));
  SHARDPACK_ASSIGN_OR_RETURN(slot.copied, cuda::Event::Create(shape.device));
  SHARDPACK_ASSIGN_OR_RETURN(slot.consumer_done, cuda::Event::Create(shape.device));
  return Status::Ok();
}

// Moves the samples not marked bad to the front, in order.
void DropSkipped(const SlotShape& shape, RingSlot& slot) {
  const size_t in_bytes = shape.sample_bytes;
  const size_t out_bytes = shape.out_sample_bytes();
  int kept = 0;
  int kept_valid = 0;
  for (int i = 0; i < slot.size; ++i) {
    if (slot.bad[i]) continue;
    if (kept != i) {
      std::memmove(slot.host + static_cast<size_t>(kept) * in_bytes,
                   slot.host + static_cast<size_t>(i) * in_bytes, in_bytes);
      if (shape.host_normalizes()) {
        std::memmove(slot.host_out_memory.get() + static_cast<size_t>(kept) * out_bytes,
                     slot.host_out_memory.get() + static_cast<size_t>(i) * out_bytes, out_bytes);
      }
      slot.indices[kept] = slot.indices[i];
      slot.labels[kept] = slot.labels[i];
    }
    if (i < slot.valid) ++kept_valid;
    ++kept;
  }
  slot.size = kept;
  slot.valid = kept_valid;
  slot.indices.resize(kept);
  slot.labels.resize(kept);
}

// The batch's device work, queued on the slot's stream after the consumer's release.
Status QueueDeviceCopy(const SlotShape& shape, RingSlot& slot) {
  void* stream = slot.stream.get();
  if (slot.consumer_event_pending) {
    SHARDPACK_RETURN_IF_ERROR(cuda::StreamWaitEvent(stream, slot.consumer_done.get()));
    slot.consumer_event_pending = false;
  }
  const size_t bytes = static_cast<size_t>(slot.size) * shape.sample_bytes;
  SHARDPACK_RETURN_IF_ERROR(
      cuda::CopyToDeviceAsync(slot.device_in.data(), slot.host, bytes, stream));
  if (shape.normalize()) {
    SHARDPACK_RETURN_IF_ERROR(
        cuda::NormalizeAsync(static_cast<const uint8_t*>(slot.device_in.data()), slot.size,
                             shape.height, shape.width, shape.channels, shape.norm,
                             NormalizeTypeOf(shape.output_type), slot.device_out.data(), stream));
  }
  SHARDPACK_RETURN_IF_ERROR(slot.copied.Record(stream));
  slot.copy_pending = true;
  return Status::Ok();
}

}  // namespace

uint64_t AlignedBytes(uint64_t bytes) {
  if (bytes >= UINT64_MAX - kPageSize) return UINT64_MAX;
  return (std::max<uint64_t>(bytes, 1) + kPageSize - 1) / kPageSize * kPageSize;
}

StatusOr<AlignedBuffer> AllocateAligned(size_t bytes) {
  const size_t rounded = AlignedBytes(bytes);
  void* p = std::aligned_alloc(kPageSize, rounded);
  if (p == nullptr) {
    return ResourceExhaustedError("loader: cannot allocate " + std::to_string(bytes) +
                                  " bytes for a batch slot");
  }
  io::PrefaultWrite(p, rounded);
  return AlignedBuffer(static_cast<uint8_t*>(p));
}

size_t OutputElementBytes(OutputType type) {
  switch (type) {
    case OutputType::kUint8:
      return 1;
    case OutputType::kFloat32:
      return 4;
    case OutputType::kFloat16:
      return 2;
  }
  return 1;
}

Status RingSlot::Allocate(const SlotShape& shape) {
  const size_t batch_bytes = static_cast<size_t>(shape.batch_size) * shape.sample_bytes;
  if (shape.gpu()) {
    SHARDPACK_RETURN_IF_ERROR(AllocateDeviceSide(shape, batch_bytes, *this));
  } else {
    SHARDPACK_ASSIGN_OR_RETURN(host_memory, AllocateAligned(batch_bytes));
    host = host_memory.get();
    if (shape.normalize()) {
      SHARDPACK_ASSIGN_OR_RETURN(
          host_out_memory, AllocateAligned(batch_bytes * OutputElementBytes(shape.output_type)));
    }
  }
  indices.reserve(static_cast<size_t>(shape.batch_size));
  labels.reserve(static_cast<size_t>(shape.batch_size));
  bad.reserve(static_cast<size_t>(shape.batch_size));
  return Status::Ok();
}

Status PublishSlot(const SlotShape& shape, RingSlot& slot) {
  if (std::find(slot.bad.begin(), slot.bad.end(), 1) != slot.bad.end()) DropSkipped(shape, slot);
  if (!shape.gpu() || slot.size == 0) return Status::Ok();
  return QueueDeviceCopy(shape, slot);
}

}  // namespace shardpack::read
