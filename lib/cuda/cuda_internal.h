// Helpers shared by the files of lib/cuda that are built with the toolkit. This header
// names CUDA types; the rest of the library includes cuda/cuda.h only.
#ifndef SHARDPACK_CUDA_CUDA_INTERNAL_H_
#define SHARDPACK_CUDA_CUDA_INTERNAL_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "shardpack/status.h"

namespace shardpack::cuda {

// OK for cudaSuccess; otherwise "<call>: <error name>: <error text>", e.g.
// "cudaMemcpyAsync: cudaErrorInvalidValue: invalid argument", with the code cuda/cuda.h
// gives that kind of error (Unavailable, ResourceExhausted, InvalidArgument, Internal;
// FailedPrecondition for cudaErrorNotReady).
Status CudaStatus(cudaError_t error, std::string_view call);

// Makes the device of `stream` (nullptr: the legacy default stream, whose device is the
// current one) the calling thread's current device, as a kernel launch on it needs.
Status UseDeviceOf(cudaStream_t stream);

}  // namespace shardpack::cuda

#endif  // SHARDPACK_CUDA_CUDA_INTERNAL_H_
