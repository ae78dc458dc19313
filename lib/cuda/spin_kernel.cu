// cuda::SpinAsync: a kernel that occupies its stream for a set time, as stand-in compute.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/cuda.h"
#include "cuda/cuda_internal.h"

namespace shardpack::cuda {
namespace {

__device__ uint64_t GlobalTimerNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

// The global timer counts nanoseconds (updated about every microsecond) on every device;
// clock64() would count cycles of a clock that changes with the load.
__global__ void SpinKernel(uint64_t nanoseconds) {
  const uint64_t start = GlobalTimerNs();
  while (GlobalTimerNs() - start < nanoseconds) __nanosleep(500);
}

}  // namespace

Status SpinAsync(void* stream, uint64_t nanoseconds) {
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  SHARDPACK_RETURN_IF_ERROR(UseDeviceOf(cuda_stream).WithPrefix("spin"));
  void* args[] = {&nanoseconds};
  return CudaStatus(cudaLaunchKernel(reinterpret_cast<const void*>(&SpinKernel), dim3(1), dim3(1),
                                     args, 0, cuda_stream),
                    "cudaLaunchKernel")
      .WithPrefix("spin " + std::to_string(nanoseconds) + " ns");
}

}  // namespace shardpack::cuda
