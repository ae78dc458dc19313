// The CUDA layer over the CUDA driver API (driver.h: libcuda.so.1, loaded at run time) and
// the kernels' fatbin (kernels.cu); cuda_none.cc where the toolkit was not found.
//
// Contexts. Every device is used through its primary context, the one the CUDA runtime
// uses, so streams, events and memory are shared with the runtime's users in the process
// (PyTorch, JAX, CuPy) both ways. "The current device" is the calling thread's current
// context, as cudaSetDevice makes it; calls that need a context but name no device (pinned
// memory, the legacy default stream) take the current one, else device 0's, as the runtime
// does.
#include "cuda/cuda.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/driver.h"
#include "cuda/kernels.h"

namespace shardpack::cuda {
namespace {

using driver::Api;
using driver::Check;

CUstream AsStream(void* stream) { return static_cast<CUstream>(stream); }
CUevent AsEvent(void* event) { return static_cast<CUevent>(event); }
CUdeviceptr AsDevicePointer(const void* pointer) { return reinterpret_cast<CUdeviceptr>(pointer); }

std::string DeviceName(int device) { return "CUDA device " + std::to_string(device); }

// The loaded driver, for destructors: they run only on objects made through it.
const Api& Loaded() { return *driver::Load().value(); }

// Device `device`'s primary context, retained on first use and kept for the process's life
// (as the CUDA runtime keeps it).
StatusOr<CUcontext> PrimaryContext(const Api& cu, int device) {
  // Never destroyed: a Stream or buffer may be released after static destructors ran.
  static auto& mutex = *new std::mutex;
  static auto& contexts = *new std::map<int, CUcontext>;
  std::lock_guard lock(mutex);
  if (const auto it = contexts.find(device); it != contexts.end()) return it->second;
  CUdevice handle = 0;
  SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuDeviceGet(&handle, device), "cuDeviceGet"));
  CUcontext context = nullptr;
  SHARDPACK_RETURN_IF_ERROR(
      Check(cu, cu.cuDevicePrimaryCtxRetain(&context, handle), "cuDevicePrimaryCtxRetain"));
  contexts.emplace(device, context);
  return context;
}

Status MakeCurrent(const Api& cu, CUcontext context) {
  CUcontext current = nullptr;
  SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuCtxGetCurrent(&current), "cuCtxGetCurrent"));
  if (current == context) return Status::Ok();
  return Check(cu, cu.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

Status UseDevice(const Api& cu, int device) {
  SHARDPACK_ASSIGN_OR_RETURN(CUcontext context, PrimaryContext(cu, device));
  return MakeCurrent(cu, context);
}

bool IsDefaultStream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

// The context of `stream`. The default streams (nullptr or CU_STREAM_LEGACY: the legacy
// one; CU_STREAM_PER_THREAD) belong to whichever context is current: the thread's, else
// device 0's (as the CUDA runtime starts it).
StatusOr<CUcontext> ContextOf(const Api& cu, CUstream stream) {
  CUcontext context = nullptr;
  if (!IsDefaultStream(stream)) {
    SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuStreamGetCtx(stream, &context), "cuStreamGetCtx"));
    return context;
  }
  SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuCtxGetCurrent(&context), "cuCtxGetCurrent"));
  if (context != nullptr) return context;
  StatusOr<CUcontext> device_zero = PrimaryContext(cu, 0);
  if (!device_zero.ok()) return device_zero.status().WithPrefix(DeviceName(0));
  return device_zero;
}

// Makes a context current for a call on an object of it (a stream, an event, memory), and
// the caller's own current context current again after: such calls leave the caller's
// current device as they found it, as the CUDA runtime's do. Where the thread had none,
// the context stays current (the runtime, too, leaves the context it started current).
class ContextScope {
 public:
  static StatusOr<ContextScope> Enter(const Api& cu, StatusOr<CUcontext> context) {
    if (!context.ok()) return context.status();
    CUcontext previous = nullptr;
    SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuCtxGetCurrent(&previous), "cuCtxGetCurrent"));
    if (previous != *context) {
      SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuCtxSetCurrent(*context), "cuCtxSetCurrent"));
    }
    return ContextScope(&cu, previous, *context);
  }
  ContextScope(ContextScope&& other) noexcept
      : cu_(std::exchange(other.cu_, nullptr)),
        previous_(other.previous_),
        entered_(other.entered_) {}
  ContextScope& operator=(ContextScope&&) = delete;
  ~ContextScope() {
    if (cu_ != nullptr && previous_ != nullptr && previous_ != entered_) {
      (void)cu_->cuCtxSetCurrent(previous_);
    }
  }

 private:
  ContextScope(const Api* cu, CUcontext previous, CUcontext entered)
      : cu_(cu), previous_(previous), entered_(entered) {}
  const Api* cu_;
  CUcontext previous_;
  CUcontext entered_;
};

// The kernel `name` (one of kernels.h's constants) of the fatbin in the current context;
// the module is loaded into each context once, on its first launch there. The caches are
// keyed by the context's ID, which a reset of the context (cudaDeviceReset elsewhere in the
// process, which unloads modules) changes.
StatusOr<CUfunction> Kernel(const Api& cu, const char* name) {
  CUcontext context = nullptr;
  SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuCtxGetCurrent(&context), "cuCtxGetCurrent"));
  unsigned long long id = 0;
  SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuCtxGetId(context, &id), "cuCtxGetId"));
  static auto& mutex = *new std::mutex;
  static auto& modules = *new std::map<unsigned long long, CUmodule>;
  static auto& functions = *new std::map<std::pair<unsigned long long, const char*>, CUfunction>;
  std::lock_guard lock(mutex);
  const auto key = std::make_pair(id, name);
  if (const auto it = functions.find(key); it != functions.end()) return it->second;
  auto module = modules.find(id);
  if (module == modules.end()) {
    CUmodule loaded = nullptr;
    SHARDPACK_RETURN_IF_ERROR(
        Check(cu, cu.cuModuleLoadData(&loaded, kKernelsFatbin), "cuModuleLoadData")
            .WithPrefix("the kernels (built for compute capability " +
                        std::to_string(SHARDPACK_CUDA_MIN_ARCH / 10) + "." +
                        std::to_string(SHARDPACK_CUDA_MIN_ARCH % 10) + " and newer with CUDA " +
                        driver::VersionName(CUDA_VERSION) + "; this driver: CUDA " +
                        driver::VersionName(cu.version) + ")"));
    module = modules.emplace(id, loaded).first;
  }
  CUfunction function = nullptr;
  SHARDPACK_RETURN_IF_ERROR(
      Check(cu, cu.cuModuleGetFunction(&function, module->second, name), "cuModuleGetFunction")
          .WithPrefix(name));
  functions.emplace(key, function);
  return function;
}

Status Launch(const Api& cu, const char* name, unsigned grid_x, unsigned grid_y, unsigned block_x,
              CUstream stream, void** args) {
  SHARDPACK_ASSIGN_OR_RETURN(CUcontext context, ContextOf(cu, stream));
  SHARDPACK_RETURN_IF_ERROR(MakeCurrent(cu, context));
  SHARDPACK_ASSIGN_OR_RETURN(CUfunction function, Kernel(cu, name));
  return Check(
      cu, cu.cuLaunchKernel(function, grid_x, grid_y, 1, block_x, 1, 1, 0, stream, args, nullptr),
      "cuLaunchKernel");
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount() {
  const StatusOr<const Api*> cu = driver::Load();
  if (!cu.ok()) return 0;
  int count = 0;
  if ((*cu)->cuDeviceGetCount(&count) != CUDA_SUCCESS) return 0;
  return count;
}

Status CheckDevice(int device) {
  const auto check = [device]() -> Status {
    SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
    // Attributes are read without creating a context, so checking leaves no trace.
    CUdevice handle = 0;
    SHARDPACK_RETURN_IF_ERROR(Check(*cu, cu->cuDeviceGet(&handle, device), "cuDeviceGet"));
    int major = 0;
    int minor = 0;
    int mode = 0;
    for (auto [attribute, value] : {std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &major},
                                    std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &minor},
                                    std::pair{CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, &mode}}) {
      SHARDPACK_RETURN_IF_ERROR(
          Check(*cu, cu->cuDeviceGetAttribute(value, attribute, handle), "cuDeviceGetAttribute"));
    }
    if (mode == CU_COMPUTEMODE_PROHIBITED) return UnavailableError("compute mode is prohibited");
    // The kernels are built with this CUDA's compiler: a driver of an older major version
    // cannot load them (as the CUDA runtime of that version would refuse it).
    if (cu->version / 1000 < CUDA_VERSION / 1000) {
      return UnavailableError(
          "the NVIDIA driver supports CUDA " + driver::VersionName(cu->version) +
          "; this build's kernels need CUDA " + std::to_string(CUDA_VERSION / 1000) +
          ".0 or newer (update the driver)");
    }
    // SHARDPACK_CUDA_MIN_ARCH is the lowest of SHARDPACK_CUDA_ARCHITECTURES (cuda.cmake),
    // e.g. 75; an older device has no code for the kernels.
    if (major * 10 + minor < SHARDPACK_CUDA_MIN_ARCH) {
      return UnavailableError("compute capability " + std::to_string(major) + "." +
                              std::to_string(minor) + ", this build needs " +
                              std::to_string(SHARDPACK_CUDA_MIN_ARCH / 10) + "." +
                              std::to_string(SHARDPACK_CUDA_MIN_ARCH % 10) + " or newer");
    }
    return Status::Ok();
  };
  return check().WithPrefix(DeviceName(device));
}

Status SetDevice(int device) {
  const auto set = [device]() -> Status {
    SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
    return UseDevice(*cu, device);
  };
  return set().WithPrefix(DeviceName(device));
}

// ---- Stream ----

StatusOr<Stream> Stream::Create(int device) {
  SHARDPACK_RETURN_IF_ERROR(SetDevice(device));
  const Api& cu = Loaded();
  CUstream stream = nullptr;
  SHARDPACK_RETURN_IF_ERROR(
      Check(cu, cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate")
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

// The stream is released once its queued work is done; a failure here (a driver already
// shut down at exit) has nothing left to release. Destructors, like every call, run in
// their object's device's context, as the CUDA runtime would make current.
Stream::~Stream() {
  if (stream_ == nullptr) return;
  const Api& cu = Loaded();
  auto scope = ContextScope::Enter(cu, PrimaryContext(cu, device_));
  if (scope.ok()) (void)cu.cuStreamDestroy(AsStream(stream_));
}

// ---- Event ----

namespace {

StatusOr<void*> CreateEvent(int device, unsigned flags) {
  SHARDPACK_RETURN_IF_ERROR(SetDevice(device));
  const Api& cu = Loaded();
  CUevent event = nullptr;
  SHARDPACK_RETURN_IF_ERROR(
      Check(cu, cu.cuEventCreate(&event, flags), "cuEventCreate").WithPrefix(DeviceName(device)));
  return static_cast<void*>(event);
}

}  // namespace

StatusOr<Event> Event::Create(int device) {
  SHARDPACK_ASSIGN_OR_RETURN(void* event, CreateEvent(device, CU_EVENT_DISABLE_TIMING));
  return Event(device, event);
}

StatusOr<Event> Event::CreateTimed(int device) {
  SHARDPACK_ASSIGN_OR_RETURN(void* event, CreateEvent(device, CU_EVENT_DEFAULT));
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
  if (event_ == nullptr) return;
  const Api& cu = Loaded();
  auto scope = ContextScope::Enter(cu, PrimaryContext(cu, device_));
  if (scope.ok()) (void)cu.cuEventDestroy(AsEvent(event_));
}

Status Event::Record(void* stream) {
  if (event_ == nullptr) return FailedPreconditionError("cuEventRecord: empty event");
  const Api& cu = Loaded();
  SHARDPACK_ASSIGN_OR_RETURN(CUcontext context, ContextOf(cu, AsStream(stream)));
  // A default stream is the current context's (as cudaEventRecord takes the current
  // device's): it must be the event's device's.
  if (IsDefaultStream(AsStream(stream))) {
    SHARDPACK_ASSIGN_OR_RETURN(CUcontext own, PrimaryContext(cu, device_));
    if (context != own) {
      return InvalidArgumentError(DeviceName(device_) +
                                  ": cuEventRecord: the default stream given is another "
                                  "device's (the calling thread's current device)");
    }
  }
  SHARDPACK_ASSIGN_OR_RETURN(auto scope, ContextScope::Enter(cu, context));
  return Check(cu, cu.cuEventRecord(AsEvent(event_), AsStream(stream)), "cuEventRecord")
      .WithPrefix(DeviceName(device_));
}

Status Event::Synchronize() {
  if (event_ == nullptr) return FailedPreconditionError("cuEventSynchronize: empty event");
  const Api& cu = Loaded();
  SHARDPACK_ASSIGN_OR_RETURN(auto scope, ContextScope::Enter(cu, PrimaryContext(cu, device_)));
  return Check(cu, cu.cuEventSynchronize(AsEvent(event_)), "cuEventSynchronize")
      .WithPrefix(DeviceName(device_));
}

StatusOr<bool> Event::Done() {
  if (event_ == nullptr) return FailedPreconditionError("cuEventQuery: empty event");
  const Api& cu = Loaded();
  SHARDPACK_ASSIGN_OR_RETURN(auto scope, ContextScope::Enter(cu, PrimaryContext(cu, device_)));
  const CUresult result = cu.cuEventQuery(AsEvent(event_));
  if (result == CUDA_SUCCESS) return true;
  if (result == CUDA_ERROR_NOT_READY) return false;
  return Check(cu, result, "cuEventQuery").WithPrefix(DeviceName(device_));
}

StatusOr<float> ElapsedMs(const Event& start, const Event& end) {
  if (start.get() == nullptr || end.get() == nullptr) {
    return FailedPreconditionError("cuEventElapsedTime: empty event");
  }
  const Api& cu = Loaded();
  SHARDPACK_ASSIGN_OR_RETURN(auto scope, ContextScope::Enter(cu, PrimaryContext(cu, end.device())));
  float ms = 0;
  SHARDPACK_RETURN_IF_ERROR(
      Check(cu, cu.cuEventElapsedTime(&ms, AsEvent(start.get()), AsEvent(end.get())),
            "cuEventElapsedTime")
          .WithPrefix(DeviceName(end.device())));
  return ms;
}

// ---- PinnedBuffer ----

StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  const std::string what = "pinned buffer of " + std::to_string(bytes) + " bytes";
  const auto allocate = [bytes]() -> StatusOr<void*> {
    if (bytes == 0) return InvalidArgumentError("size must be positive");
    SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
    SHARDPACK_ASSIGN_OR_RETURN(auto scope, ContextScope::Enter(*cu, ContextOf(*cu, nullptr)));
    void* data = nullptr;
    SHARDPACK_RETURN_IF_ERROR(
        Check(*cu, cu->cuMemHostAlloc(&data, bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc"));
    return data;
  };
  StatusOr<void*> data = allocate();
  if (!data.ok()) return data.status().WithPrefix(what);
  return PinnedBuffer(*data, bytes);
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

// cuMemFreeHost needs a current context, any (the memory is portable).
PinnedBuffer::~PinnedBuffer() {
  if (data_ == nullptr) return;
  const Api& cu = Loaded();
  auto scope = ContextScope::Enter(cu, ContextOf(cu, nullptr));
  if (scope.ok()) (void)cu.cuMemFreeHost(data_);
}

// ---- DeviceBuffer ----

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(int device, size_t bytes) {
  const std::string what =
      DeviceName(device) + ": device buffer of " + std::to_string(bytes) + " bytes";
  if (bytes == 0) return InvalidArgumentError(what + ": size must be positive");
  SHARDPACK_RETURN_IF_ERROR(SetDevice(device));
  const Api& cu = Loaded();
  CUdeviceptr data = 0;
  SHARDPACK_RETURN_IF_ERROR(Check(cu, cu.cuMemAlloc(&data, bytes), "cuMemAlloc").WithPrefix(what));
  return DeviceBuffer(device, reinterpret_cast<void*>(data), bytes);
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

// Freed in its device's context (cuMemFree waits for the device to be idle first).
DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  const Api& cu = Loaded();
  auto scope = ContextScope::Enter(cu, PrimaryContext(cu, device_));
  if (scope.ok()) (void)cu.cuMemFree(AsDevicePointer(data_));
}

// ---- Copies and ordering ----

namespace {

Status Copy(void* dst, const void* src, size_t bytes, bool to_device, void* stream,
            std::string_view what) {
  if (bytes == 0) return Status::Ok();
  const std::string prefix = std::string(what) + " of " + std::to_string(bytes) + " bytes";
  if (dst == nullptr || src == nullptr) return InvalidArgumentError(prefix + ": null pointer");
  const auto copy = [&]() -> Status {
    SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
    SHARDPACK_ASSIGN_OR_RETURN(auto scope,
                               ContextScope::Enter(*cu, ContextOf(*cu, AsStream(stream))));
    if (to_device) {
      return Check(*cu, cu->cuMemcpyHtoDAsync(AsDevicePointer(dst), src, bytes, AsStream(stream)),
                   "cuMemcpyHtoDAsync");
    }
    return Check(*cu, cu->cuMemcpyDtoHAsync(dst, AsDevicePointer(src), bytes, AsStream(stream)),
                 "cuMemcpyDtoHAsync");
  };
  return copy().WithPrefix(prefix);
}

}  // namespace

Status CopyToDeviceAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return Copy(dst, src, bytes, /*to_device=*/true, stream, "copy to device");
}

Status CopyToHostAsync(void* dst, const void* src, size_t bytes, void* stream) {
  return Copy(dst, src, bytes, /*to_device=*/false, stream, "copy to host");
}

Status StreamWaitEvent(void* stream, void* event) {
  if (event == nullptr) return InvalidArgumentError("cuStreamWaitEvent: null event");
  SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
  SHARDPACK_ASSIGN_OR_RETURN(auto scope,
                             ContextScope::Enter(*cu, ContextOf(*cu, AsStream(stream))));
  return Check(*cu, cu->cuStreamWaitEvent(AsStream(stream), AsEvent(event), 0),
               "cuStreamWaitEvent");
}

Status StreamSynchronize(void* stream) {
  SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
  SHARDPACK_ASSIGN_OR_RETURN(auto scope,
                             ContextScope::Enter(*cu, ContextOf(*cu, AsStream(stream))));
  return Check(*cu, cu->cuStreamSynchronize(AsStream(stream)), "cuStreamSynchronize");
}

// ---- Kernels ----

Status NormalizeAsync(const uint8_t* device_nhwc, int n, int h, int w, int c,
                      const NormalizeParams& p, NormalizeType type, void* device_out,
                      void* stream) {
  const std::string what = "normalize " + std::to_string(n) + "x" + std::to_string(h) + "x" +
                           std::to_string(w) + "x" + std::to_string(c);
  if (c != 1 && c != 3) return InvalidArgumentError(what + ": channels must be 1 or 3");
  if (n < 0 || h < 0 || w < 0) return InvalidArgumentError(what + ": negative size");
  if (n == 0 || h == 0 || w == 0) return Status::Ok();
  if (device_nhwc == nullptr || device_out == nullptr) {
    return InvalidArgumentError(what + ": null pointer");
  }
  const auto launch = [&]() -> Status {
    SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
    NormalizeCoefficients k;
    for (int ch = 0; ch < 3; ++ch) {
      k.scale[ch] = p.scale[ch];
      k.bias[ch] = p.bias[ch];
    }
    int64_t pixels = static_cast<int64_t>(h) * w;
    const uint8_t* in = device_nhwc;
    void* out = device_out;
    void* args[] = {&in, &pixels, &n, &k, &out};
    const char* name = type == NormalizeType::kFloat16
                           ? (c == 1 ? kNormalizeF16C1 : kNormalizeF16C3)
                           : (c == 1 ? kNormalizeF32C1 : kNormalizeF32C3);
    constexpr int64_t kThreads = 256;
    const int64_t blocks_x = std::min<int64_t>((pixels + kThreads - 1) / kThreads, 4096);
    return Launch(*cu, name, static_cast<unsigned>(blocks_x),
                  static_cast<unsigned>(std::min(n, 65535)), kThreads, AsStream(stream), args);
  };
  return launch().WithPrefix(what);
}

Status SpinAsync(void* stream, uint64_t nanoseconds) {
  const auto launch = [&]() -> Status {
    SHARDPACK_ASSIGN_OR_RETURN(const Api* cu, driver::Load());
    void* args[] = {&nanoseconds};
    return Launch(*cu, kSpin, 1, 1, 1, AsStream(stream), args);
  };
  return launch().WithPrefix("spin " + std::to_string(nanoseconds) + " ns");
}

}  // namespace shardpack::cuda
