// The CUDA driver API (cuda.h), loaded at run time from the NVIDIA driver's own library,
// libcuda.so.1. The CUDA layer (cuda.cc) calls the driver through this table rather than
// linking the CUDA runtime: a program or wheel built with the toolkit starts anywhere, needs
// no libcudart of any version beside it, and shares the devices' primary contexts (the
// ones the CUDA runtime, and so PyTorch, JAX or CuPy, use) with whatever else the process
// runs. Only cuda.cc and this file's .cc include it: it names CUDA types.
//
//   SHARDPACK_ASSIGN_OR_RETURN(const driver::Api* cu, driver::Load());
//   CUdevice device;
//   SHARDPACK_RETURN_IF_ERROR(driver::Check(*cu, cu->cuDeviceGet(&device, 0), "cuDeviceGet"));
//
// The members carry the names cuda.h gives the functions, so that a call reads as it does
// in NVIDIA's documentation; cuda.h maps some to their current versions (cuMemAlloc is
// cuMemAlloc_v2), and the table holds those, found by the same names in the library.
#ifndef SHARDPACK_CUDA_DRIVER_H_
#define SHARDPACK_CUDA_DRIVER_H_

#include <cuda.h>

// The table holds the entry points of the legacy default stream; with per-thread default
// streams cuda.h would rename them (_ptsz) and nullptr would mean another stream.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "lib/cuda is built for the legacy default stream (no --default-stream per-thread)"
#endif

#include <string>
#include <string_view>

#include "shardpack/status.h"

namespace shardpack::cuda::driver {

// Every driver function the CUDA layer calls.
#define SHARDPACK_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                                \
  X(cuDriverGetVersion)                    \
  X(cuGetErrorName)                        \
  X(cuGetErrorString)                      \
  X(cuDeviceGetCount)                      \
  X(cuDeviceGet)                           \
  X(cuDeviceGetAttribute)                  \
  X(cuDevicePrimaryCtxRetain)              \
  X(cuCtxGetCurrent)                       \
  X(cuCtxSetCurrent)                       \
  X(cuCtxGetId)                            \
  X(cuStreamCreate)                        \
  X(cuStreamDestroy)                       \
  X(cuStreamGetCtx)                        \
  X(cuStreamSynchronize)                   \
  X(cuStreamWaitEvent)                     \
  X(cuEventCreate)                         \
  X(cuEventDestroy)                        \
  X(cuEventRecord)                         \
  X(cuEventSynchronize)                    \
  X(cuEventQuery)                          \
  X(cuEventElapsedTime)                    \
  X(cuMemHostAlloc)                        \
  X(cuMemFreeHost)                         \
  X(cuMemAlloc)                            \
  X(cuMemFree)                             \
  X(cuMemcpyHtoDAsync)                     \
  X(cuMemcpyDtoHAsync)                     \
  X(cuModuleLoadData)                      \
  X(cuModuleGetFunction)                   \
  X(cuLaunchKernel)

struct Api {
#define SHARDPACK_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  SHARDPACK_CUDA_DRIVER_FUNCTIONS(SHARDPACK_CUDA_DRIVER_MEMBER)
#undef SHARDPACK_CUDA_DRIVER_MEMBER
  int version = 0;  // cuDriverGetVersion: 1000 * major + 10 * minor, e.g. 13000
};

// The driver, loaded and initialised (cuInit) on the first call; later calls return the
// same table, or the same error. Unavailable, with a message that begins "no CUDA device: ",
// where libcuda.so.1 is not found (no NVIDIA driver installed), lacks a function of the
// table (a driver too old: the message names it and the driver's CUDA version), or cuInit
// fails (no device visible, the toolkit's stub library, a driver not loaded). Thread-safe.
StatusOr<const Api*> Load();

// A CUDA version as the driver and cuda.h number it (1000 * major + 10 * minor), as text:
// 13000 -> "13.0".
std::string VersionName(int version);

// OK for CUDA_SUCCESS; otherwise "<call>: <error name>: <error text>", e.g. "cuMemAlloc:
// CUDA_ERROR_OUT_OF_MEMORY: out of memory", with the code cuda/cuda.h gives that kind of
// error (Unavailable, ResourceExhausted, InvalidArgument, Internal; FailedPrecondition for
// CUDA_ERROR_NOT_READY). The errors that mean "no GPU to offer" begin "no CUDA device: ".
Status Check(const Api& api, CUresult result, std::string_view call);

}  // namespace shardpack::cuda::driver

#endif  // SHARDPACK_CUDA_DRIVER_H_
