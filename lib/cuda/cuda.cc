// The CUDA layer over the CUDA runtime (builds with the toolkit; cuda_none.cc otherwise).
#include "cuda/cuda.h"

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "cuda/cuda_internal.h"

namespace shardpack::cuda {
namespace {

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }
cudaEvent_t AsEvent(void* event) { return static_cast<cudaEvent_t>(event); }

std::string DeviceName(int device) { return "CUDA device " + std::to_string(device); }

StatusCode CodeOf(cudaError_t error) {
  switch (error) {
    // This machine cannot run the work: callers fall back to the host.
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorInsufficientDriver:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorNoDevice:
    case cudaErrorInvalidDevice:
    case cudaErrorDeviceNotLicensed:
    case cudaErrorDeviceUninitialized:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidPtx:
    case cudaErrorJitCompilerNotFound:
    case cudaErrorUnsupportedPtxVersion:
    case cudaErrorJitCompilationDisabled:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
      return StatusCode::kUnavailable;
    case cudaErrorMemoryAllocation:
      return StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidConfiguration:
      return StatusCode::kInvalidArgument;
    case cudaErrorNotReady:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

Status Copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, void* stream,
            std::string_view what) {
  if (bytes == 0) return Status::Ok();
  if (dst == nullptr || src == nullptr) {
    return InvalidArgumentError(std::string(what) + ": null pointer");
  }
  return CudaStatus(cudaMemcpyAsync(dst, src, bytes, kind, AsStream(stream)), "cudaMemcpyAsync")
      .WithPrefix(std::string(what) + " of " + std::to_string(bytes) + " bytes");
}

}  // namespace

Status CudaStatus(cudaError_t error, std::string_view call) {
  if (error == cudaSuccess) return Status::Ok();
  // The errors that mean "this machine has no GPU to offer" say so first, in words; the
  // CUDA name follows for searching.
  const char* no_device = nullptr;
  switch (error) {
    case cudaErrorNoDevice:
      no_device = "no CUDA device: none is visible to this process (CUDA_VISIBLE_DEVICES?)";
      break;
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorSystemDriverMismatch:
      no_device =
          "no CUDA device: no NVIDIA driver is loaded, or it is older than this build's CUDA "
          "runtime";
      break;
    case cudaErrorInitializationError:
    case cudaErrorSystemNotReady:
      no_device = "no CUDA device: the CUDA driver could not be initialised";
      break;
    default:
      break;
  }
  std::string message = no_device != nullptr ? std::string(no_device) + " (" : "";
  message += call;
  message += ": ";
  message += cudaGetErrorName(error);
  message += ": ";
  message += cudaGetErrorString(error);
  if (no_device != nullptr) message += ")";
  return Status(CodeOf(error), std::move(message));
}

Status UseDeviceOf(cudaStream_t stream) {
  int device = 0;
  SHARDPACK_RETURN_IF_ERROR(
      CudaStatus(cudaStreamGetDevice(stream, &device), "cudaStreamGetDevice"));
  int current = 0;
  SHARDPACK_RETURN_IF_ERROR(CudaStatus(cudaGetDevice(&current), "cudaGetDevice"));
  if (current == device) return Status::Ok();
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice").WithPrefix(DeviceName(device));
}

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    // No driver or no device: an answer, not an error, so it must not linger as the
    // thread's last error for code that checks cudaGetLastError() after its own launches.
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

Status CheckDevice(int device) {
  // Attributes are read without creating a context, so checking leaves no trace.
  int major = 0;
  int minor = 0;
  Status status =
      CudaStatus(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
                 "cudaDeviceGetAttribute");
  if (status.ok()) {
    status = CudaStatus(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
                        "cudaDeviceGetAttribute");
  }
  int mode = 0;
  if (status.ok()) {
    status = CudaStatus(cudaDeviceGetAttribute(&mode, cudaDevAttrComputeMode, device),
                        "cudaDeviceGetAttribute");
  }
  if (!status.ok()) {
    (void)cudaGetLastError();
    return status.WithPrefix(DeviceName(device));
  }
  if (mode == cudaComputeModeProhibited) {
    return UnavailableError(DeviceName(device) + ": compute mode is prohibited");
  }
  // SHARDPACK_CUDA_MIN_ARCH is the lowest of CMAKE_CUDA_ARCHITECTURES (cuda.cmake), e.g. 75;
  // an older device has no code for the kernels.
  if (major * 10 + minor < SHARDPACK_CUDA_MIN_ARCH) {
    return UnavailableError(DeviceName(device) + ": compute capability " + std::to_string(major) +
                            "." + std::to_string(minor) + ", this build needs " +
                            std::to_string(SHARDPACK_CUDA_MIN_ARCH / 10) + "." +
                            std::to_string(SHARDPACK_CUDA_MIN_ARCH % 10) + " or newer");
  }
  return Status::Ok();
}

Status SetDevice(int device) {
  return CudaStatus(cudaSetDevice(device), "cudaSetDevice").WithPrefix(DeviceName(device));
}

// ---- Stream ----

StatusOr<Stream> Stream::Create(int device) {
  SHARDPACK_RETURN_IF_ERROR(SetDevice(device));
  cudaStream_t stream = nullptr;
  SHARDPACK_RETURN_IF_ERROR(CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                       "cudaStreamCreateWithFlags")
                                .WithPrefix(DeviceName(device)));
  return Stream(device, stream);
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(std::exchange(other.device_, -1)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Stream old(std::move(*this));
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

// The stream is released once its queued work is done; a failure here (a runtime already
// unloaded at exit) has nothing left to release.
Stream::~Stream() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(AsStream(stream_));
}

// ---- Event ----

namespace {

StatusOr<void*> CreateEvent(int device, unsigned flags) {
  SHARDPACK_RETURN_IF_ERROR(SetDevice(device));
  cudaEvent_t event = nullptr;
  SHARDPACK_RETURN_IF_ERROR(
      CudaStatus(cudaEventCreateWithFlags(&event, flags), "cudaEventCreateWithFlags")
          .WithPrefix(DeviceName(device)));
  return static_cast<void*>(event);
}

}  // namespace

StatusOr<Event> Event::Create(int device) {
  SHARDPACK_ASSIGN_OR_RETURN(void* event, CreateEvent(device, cudaEventDisableTiming));
  return Event(device, event);
}

StatusOr<Event> Event::CreateTimed(int device) {
  SHARDPACK_ASSIGN_OR_RETURN(void* event, CreateEvent(device, cudaEventDefault));
  return Event(device, event);
}

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)), device_(std::exchange(other.device_, -1)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::move(*this));
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

// A pending record still completes; the event is released after it.
Event::~Event() {
  if (event_ != nullptr) (void)cudaEventDestroy(AsEvent(event_));
}

Status Event::Record(void* stream) {
  if (event_ == nullptr) return FailedPreconditionError("cudaEventRecord: empty event");
  return CudaStatus(cudaEventRecord(AsEvent(event_), AsStream(stream)), "cudaEventRecord")
      .WithPrefix(DeviceName(device_));
}

Status Event::Synchronize() {
  if (event_ == nullptr) return FailedPreconditionError("cudaEventSynchronize: empty event");
  return CudaStatus(cudaEventSynchronize(AsEvent(event_)), "cudaEventSynchronize")
      .WithPrefix(DeviceName(device_));
}

StatusOr<bool> Event::Done() {
  if (event_ == nullptr) return FailedPreconditionError("cudaEventQuery: empty event");
  const cudaError_t error = cudaEventQuery(AsEvent(event_));
  if (error == cudaSuccess) return true;
  if (error == cudaErrorNotReady) return false;
  return CudaStatus(error, "cudaEventQuery").WithPrefix(DeviceName(device_));
}

StatusOr<float> ElapsedMs(const Event& start, const Event& end) {
  if (start.get() == nullptr || end.get() == nullptr) {
    return FailedPreconditionError("cudaEventElapsedTime: empty event");
  }
  float ms = 0;
  SHARDPACK_RETURN_IF_ERROR(
      CudaStatus(cudaEventElapsedTime(&ms, AsEvent(start.get()), AsEvent(end.get())),
                 "cudaEventElapsedTime")
          .WithPrefix(DeviceName(end.device())));
  return ms;
}

// ---- PinnedBuffer ----

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  const std::string what = "pinned buffer of " + std::to_string(bytes) + " bytes";
  if (bytes == 0) return InvalidArgumentError(what + ": size must be positive");
  void* data = nullptr;
  SHARDPACK_RETURN_IF_ERROR(
      CudaStatus(cudaHostAlloc(&data, bytes, cudaHostAllocPortable), "cudaHostAlloc")
          .WithPrefix(what));
  return PinnedBuffer(data, bytes);
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    PinnedBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

// ---- DeviceBuffer ----

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  const std::string what =
      DeviceName(device) + ": device buffer of " + std::to_string(bytes) + " bytes";
  if (bytes == 0) return InvalidArgumentError(what + ": size must be positive");
  SHARDPACK_RETURN_IF_ERROR(SetDevice(device));
  void* data = nullptr;
  SHARDPACK_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&data, bytes), "cudaMalloc").WithPrefix(what));
  return DeviceBuffer(device, data, bytes);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(std::exchange(other.device_, -1)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

// cudaFree finds the device from the pointer, whatever the current device is.
DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) (void)cudaFree(data_);
}

// ---- Copies and ordering ----

Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return Copy(dst, src, bytes, cudaMemcpyHostToDevice, stream, "copy to device");
}

Status CopyToHostAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return Copy(dst, src, bytes, cudaMemcpyDeviceToHost, stream, "copy to host");
}

Status StreamWaitEvent(void* stream, void* event) {
  if (event == nullptr) return InvalidArgumentError("cudaStreamWaitEvent: null event");
  return CudaStatus(cudaStreamWaitEvent(AsStream(stream), AsEvent(event), 0),
                    "cudaStreamWaitEvent");
}

Status StreamSynchronize(void* stream) {
  return CudaStatus(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize");
}

}  // namespace shardpack::cuda
