// The CUDA layer of a build without the toolkit (SHARDPACK_WITH_CUDA=OFF, or no nvcc at
// configure time): no device, and every call that needs one reports Unavailable.
#include <string>
#include <string_view>
#include <utility>

#include "cuda/cuda.h"

namespace shardpack::cuda {
namespace {

Status NoCuda(std::string_view what) {
  return UnavailableError(std::string(what) + ": shardpack was built without CUDA");
}

}  // namespace

bool BuiltWithCuda() { return false; }
int DeviceCount() { return 0; }
Status CheckDevice(int device) { return NoCuda("CUDA device " + std::to_string(device)); }
Status SetDevice(int device) { return NoCuda("CUDA device " + std::to_string(device)); }

StatusOr<Stream> Stream::Create(int device) {
  return NoCuda("CUDA device " + std::to_string(device) + ": stream");
}
Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(std::exchange(other.device_, -1)) {}
Stream& Stream::operator=(Stream&& other) noexcept {
  stream_ = std::exchange(other.stream_, nullptr);
  device_ = std::exchange(other.device_, -1);
  return *this;
}
Stream::~Stream() = default;

StatusOr<Event> Event::Create(int device) {
  return NoCuda("CUDA device " + std::to_string(device) + ": event");
}
StatusOr<Event> Event::CreateTimed(int device) { return Create(device); }
Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}
Event& Event::operator=(Event&& other) noexcept {
  event_ = std::exchange(other.event_, nullptr);
  device_ = std::exchange(other.device_, -1);
  return *this;
}
Event::~Event() = default;
Status Event::Record(void* stream) { return NoCuda("cudaEventRecord"); }
Status Event::Synchronize() { return NoCuda("cudaEventSynchronize"); }
StatusOr<bool> Event::Done() { return NoCuda("cudaEventQuery"); }

StatusOr<float> ElapsedMs(const Event& start, const Event& end) {
  return NoCuda("cudaEventElapsedTime");
}

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  return NoCuda("pinned buffer of " + std::to_string(bytes) + " bytes");
}
PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}
PinnedBuffer::~PinnedBuffer() = default;

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  return NoCuda("CUDA device " + std::to_string(device) + ": device buffer of " +
                std::to_string(bytes) + " bytes");
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, -1)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  device_ = std::exchange(other.device_, -1);
  return *this;
}
DeviceBuffer::~DeviceBuffer() = default;

Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return NoCuda("copy to device");
}
Status CopyToHostAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return NoCuda("copy to host");
}
Status StreamWaitEvent(void* stream, void* event) { return NoCuda("cudaStreamWaitEvent"); }
Status StreamSynchronize(void* stream) { return NoCuda("cudaStreamSynchronize"); }

Status NormalizeAsync(const uint8_t* device_nhwc, int n, int h, int w, int c,
                      const NormalizeParams& p, NormalizeType type, void* device_out,
                      void* stream) {
  return NoCuda("normalize");
}

Status SpinAsync(void* stream, uint64_t nanoseconds) { return NoCuda("spin"); }

}  // namespace shardpack::cuda
