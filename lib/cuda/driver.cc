// The CUDA driver API from libcuda.so.1, loaded once (driver.h).
#include "cuda/driver.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace shardpack::cuda::driver {
namespace {

#define SHARDPACK_CUDA_STRING(x) #x
// The name after cuda.h's own macros (cuMemAlloc -> "cuMemAlloc_v2").
#define SHARDPACK_CUDA_SYMBOL(x) SHARDPACK_CUDA_STRING(x)

// Functions whose current name came with a later driver than the one before it, with the
// same prototype: a driver that lacks the new name is served by the old one.
// cuEventElapsedTime_v2 arrived with CUDA 12.8.
const char* OlderName(std::string_view symbol) {
  if (symbol == "cuEventElapsedTime_v2") return "cuEventElapsedTime";
  return nullptr;
}

// Names for the codes a driver that cannot initialise returns, where cuGetErrorName cannot
// answer either (the toolkit's stub answers every call with CUDA_ERROR_STUB_LIBRARY).
const char* KnownName(CUresult result) {
  switch (result) {
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_SYSTEM_NOT_READY:
      return "CUDA_ERROR_SYSTEM_NOT_READY";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    default:
      return nullptr;
  }
}

StatusOr<const Api*> LoadOnce() {
  // RTLD_NOW: every symbol now, not at a first call deep in a loader thread. The driver is
  // never unloaded: CUDA objects may outlive any owner here, up to the process's exit.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return UnavailableError(std::string("no CUDA device: no NVIDIA driver is installed (dlopen: ") +
                            (why != nullptr ? why : "libcuda.so.1 not found") + ")");
  }
  static Api api;
  std::string missing;
  const auto find = [&](const char* symbol, auto*& function) {
    void* address = dlsym(library, symbol);
    if (address == nullptr && OlderName(symbol) != nullptr) {
      address = dlsym(library, OlderName(symbol));
    }
    if (address == nullptr) {
      missing += missing.empty() ? "" : ", ";
      missing += symbol;
    }
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
  };
#define SHARDPACK_CUDA_DRIVER_FIND(name) find(SHARDPACK_CUDA_SYMBOL(name), api.name);
  SHARDPACK_CUDA_DRIVER_FUNCTIONS(SHARDPACK_CUDA_DRIVER_FIND)
#undef SHARDPACK_CUDA_DRIVER_FIND
  if (api.cuDriverGetVersion != nullptr) (void)api.cuDriverGetVersion(&api.version);
  if (!missing.empty()) {
    return UnavailableError("no CUDA device: the NVIDIA driver's libcuda.so.1 (CUDA " +
                            VersionName(api.version) + ") lacks " + missing +
                            ", which this build calls: the driver is too old (this build "
                            "was made with CUDA " +
                            VersionName(CUDA_VERSION) + ")");
  }
  SHARDPACK_RETURN_IF_ERROR(Check(api, api.cuInit(0), "cuInit"));
  return &api;
}

StatusCode CodeOf(CUresult result) {
  switch (result) {
    // This machine cannot run the work: callers fall back to the host.
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return StatusCode::kUnavailable;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return StatusCode::kResourceExhausted;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
      return StatusCode::kInvalidArgument;
    case CUDA_ERROR_NOT_READY:
      return StatusCode::kFailedPrecondition;
    default:
      return StatusCode::kInternal;
  }
}

}  // namespace

std::string VersionName(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

StatusOr<const Api*> Load() {
  static const StatusOr<const Api*>* const loaded = new StatusOr<const Api*>(LoadOnce());
  return *loaded;
}

Status Check(const Api& api, CUresult result, std::string_view call) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  // The errors that mean "this machine has no GPU to offer" say so first, in words; the
  // CUDA name follows for searching.
  const char* no_device = nullptr;
  switch (result) {
    case CUDA_ERROR_NO_DEVICE:
      no_device = "no CUDA device: none is visible to this process (CUDA_VISIBLE_DEVICES?)";
      break;
    case CUDA_ERROR_STUB_LIBRARY:
      no_device =
          "no CUDA device: the libcuda.so.1 found is the CUDA toolkit's stub, not an NVIDIA "
          "driver";
      break;
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      no_device =
          "no CUDA device: the NVIDIA driver's library and its kernel module differ in version";
      break;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
      no_device = "no CUDA device: the CUDA driver could not be initialised";
      break;
    default:
      break;
  }
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = KnownName(result);
  }
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string message = no_device != nullptr ? std::string(no_device) + " (" : "";
  message += call;
  message += ": ";
  message += name != nullptr ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text != nullptr) {
    message += ": ";
    message += text;
  }
  if (no_device != nullptr) message += ")";
  return Status(CodeOf(result), std::move(message));
}

}  // namespace shardpack::cuda::driver
