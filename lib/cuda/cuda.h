// The CUDA layer: devices, streams, events, pinned and device memory, and the kernels the
// loader runs. No CUDA type appears here, so every file can include it: a cudaStream_t or
// cudaEvent_t travels as void* (nullptr: the legacy default stream).
//
//   if (cuda::DeviceCount() == 0) ...                                 // host path
//   SHARDPACK_ASSIGN_OR_RETURN(auto stream, cuda::Stream::Create(0));
//   SHARDPACK_ASSIGN_OR_RETURN(auto pinned, cuda::PinnedBuffer::Allocate(bytes));
//   SHARDPACK_ASSIGN_OR_RETURN(auto input, cuda::DeviceBuffer::Allocate(0, bytes));
//   SHARDPACK_RETURN_IF_ERROR(cuda::CopyToDeviceAsync(input.data(), pinned.data(), bytes,
//                                                     stream.get()));
//   SHARDPACK_RETURN_IF_ERROR(cuda::NormalizeAsync(...));
//
// Builds. Where the toolkit was found at configure time (SHARDPACK_WITH_CUDA=ON, the
// default) this calls the CUDA driver, libcuda.so.1, loaded at run time (driver.h), and
// launches kernels compiled into the library: binaries start on machines without a driver
// and need no CUDA runtime of any version. Otherwise BuiltWithCuda() is false, DeviceCount()
// is 0 and every fallible call returns Unavailable "... built without CUDA".
//
// Errors. CUDA errors are translated where they occur, named: "CUDA device 0: no CUDA
// device: no NVIDIA driver is installed (libcuda.so.1 not found: ...)", "cuMemAlloc:
// CUDA_ERROR_OUT_OF_MEMORY: out of memory". The codes:
//   Unavailable        no driver or device, a device that cannot run this build's kernels,
//                      or a build without CUDA: the caller falls back to the host.
//   ResourceExhausted  out of device or pinned memory.
//   InvalidArgument    a bad size, stream, event or pointer (a bug in the caller).
//   Internal           anything else: a failed kernel, a lost device. After a fault in a
//                      kernel the device's context is unusable; later calls fail too.
//
// Current device. Every device is used through its primary context, the CUDA runtime's
// (so PyTorch's and this layer's streams, events and memory mix freely). Calls that take a
// device (Stream::Create, Event::Create, DeviceBuffer::Allocate, SetDevice) make it the
// calling thread's current device, as cudaSetDevice does; NormalizeAsync and SpinAsync
// switch to their stream's device. The other calls (copies, waits, events, destructors) run
// in their object's device's context and then make the caller's current device current
// again; on a thread that had none, they leave theirs (device 0's for the default streams
// and pinned memory), as the CUDA runtime does.
//
// Thread-safety: the functions are thread-safe; an object (Stream, Event, buffer) is used
// by one thread at a time, or only through its const methods.
#ifndef SHARDPACK_CUDA_CUDA_H_
#define SHARDPACK_CUDA_CUDA_H_

#include <cstddef>
#include <cstdint>

#include "cuda/normalize_params.h"
#include "shardpack/status.h"

namespace shardpack::cuda {

// Whether this build has the CUDA layer (the toolkit was found when it was configured).
bool BuiltWithCuda();

// CUDA devices present: 0 without a driver (or one too old for the runtime), without a
// device, or in a build without CUDA. Never fails.
int DeviceCount();

// OK when `device` exists and can run this build's kernels (its compute capability is at
// least the lowest one compiled for). Unavailable otherwise, with the CUDA error or the
// capability mismatch. Does not change the current device.
Status CheckDevice(int device);

// Makes `device` the calling thread's current device (cudaSetDevice). Unavailable when it
// cannot be used.
Status SetDevice(int device);

// A non-blocking stream (cudaStreamNonBlocking: no implicit synchronisation with the
// legacy default stream) on one device. Move-only; destroying it releases the stream once
// its queued work is done, without waiting.
class Stream {
 public:
  static StatusOr<Stream> Create(int device);

  Stream() = default;  // empty: get() is nullptr
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  ~Stream();

  void* get() const { return stream_; }  // cudaStream_t
  int device() const { return device_; }

 private:
  Stream(int device, void* stream) : stream_(stream), device_(device) {}
  void* stream_ = nullptr;
  int device_ = -1;
};

// A CUDA event on one device. Create() makes a synchronisation-only event
// (cudaEventDisableTiming, the cheap kind); CreateTimed() one that ElapsedMs() can measure.
// Move-only; destroying it releases the event (a pending record still completes).
class Event {
 public:
  static StatusOr<Event> Create(int device);
  static StatusOr<Event> CreateTimed(int device);

  Event() = default;  // empty: get() is nullptr
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  ~Event();

  // Captures the work queued on `stream` (of the event's device) so far.
  Status Record(void* stream);
  // Blocks the calling thread until the captured work is done (at once if never recorded).
  Status Synchronize();
  // Whether the captured work is done, without blocking (cudaEventQuery).
  StatusOr<bool> Done();

  void* get() const { return event_; }  // cudaEvent_t
  int device() const { return device_; }

 private:
  Event(int device, void* event) : event_(event), device_(device) {}
  void* event_ = nullptr;
  int device_ = -1;
};

// Milliseconds of GPU time from `start` to `end`, both made by CreateTimed() and recorded,
// `end` completed (Synchronize() it first); resolution about half a microsecond.
// FailedPrecondition while `end` is pending; InvalidArgument for an event without timing
// or never recorded.
StatusOr<float> ElapsedMs(const Event& start, const Event& end);

// Page-locked host memory (cudaHostAlloc, portable: usable with every device), which the
// copy engines read and write directly, so copies from it are truly asynchronous.
// Move-only; destroying it frees the memory, which must no longer be the source or target
// of a pending copy.
class PinnedBuffer {
 public:
  // `bytes` > 0, else InvalidArgument. ResourceExhausted when the OS cannot lock that much.
  static StatusOr<PinnedBuffer> Allocate(size_t bytes);

  PinnedBuffer() = default;  // empty: data() is nullptr, size() is 0
  PinnedBuffer(PinnedBuffer&& other) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  ~PinnedBuffer();

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  PinnedBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Device memory (cudaMalloc: aligned to at least 256 bytes) on one device. Move-only;
// destroying it frees the memory (cudaFree waits for the device to be idle first).
class DeviceBuffer {
 public:
  // `bytes` > 0, else InvalidArgument. ResourceExhausted when the device is out of memory.
  static StatusOr<DeviceBuffer> Allocate(int device, size_t bytes);

  DeviceBuffer() = default;  // empty: data() is nullptr, size() is 0
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  ~DeviceBuffer();

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  int device() const { return device_; }

 private:
  DeviceBuffer(int device, void* data, size_t size) : data_(data), size_(size), device_(device) {}
  void* data_ = nullptr;
  size_t size_ = 0;
  int device_ = -1;
};

// Queues a copy of `bytes` from host `src` to device `dst` on `stream`. Asynchronous with
// respect to the host only when `src` is pinned; `src` must stay valid until the stream
// has done the copy.
Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream);
// The other way: device `src` to host `dst` (pinned for asynchrony).
Status CopyToHostAsync(void* dst, const void* src, size_t bytes, void* stream);

// Makes the work queued on `stream` from now on wait for `event`'s captured work, without
// blocking the host; the event may belong to another device.
Status StreamWaitEvent(void* stream, void* event);
// Blocks the calling thread until the work queued on `stream` so far is done.
Status StreamSynchronize(void* stream);

// Queues the normalisation of read/normalize.h on `stream`: n images of h x w x c uint8 at
// `device_nhwc` (c is 1 or 3) -> n x c x h x w elements of `type` at `device_out`, both in
// the memory of the stream's device, not overlapping. The output bits equal
// read::HostNormalizer's for the same `p`. InvalidArgument for c other than 1 or 3 or a
// negative size; n, h or w of 0 queues nothing.
Status NormalizeAsync(const uint8_t* device_nhwc, int n, int h, int w, int c,
                      const NormalizeParams& p, NormalizeType type, void* device_out, void* stream);

// Queues a kernel (one thread) that occupies `stream` for about `nanoseconds` of GPU time
// (the GPU's global timer, microsecond resolution): stand-in compute for the benchmarks
// that measure how copies overlap with work.
Status SpinAsync(void* stream, uint64_t nanoseconds);

}  // namespace shardpack::cuda

#endif  // SHARDPACK_CUDA_CUDA_H_
