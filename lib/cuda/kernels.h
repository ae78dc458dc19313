// What the CUDA layer's kernels (kernels.cu, built into a fatbin that the library carries)
// take, shared by the kernels and the code in cuda.cc that launches them through the driver
// (cuLaunchKernel): the entry points' names and their argument structs. Plain C++: nvcc
// compiles it for the device, the project's compiler for the host.
#ifndef SHARDPACK_CUDA_KERNELS_H_
#define SHARDPACK_CUDA_KERNELS_H_

#include <cstddef>

namespace shardpack::cuda {

// The entry points (extern "C": unmangled), one per output type and channel count.
//   normalize: (const uint8_t* in, int64_t pixels, int n, NormalizeCoefficients k, T* out)
//   spin:      (uint64_t nanoseconds)
inline constexpr const char* kNormalizeF32C1 = "shardpack_normalize_f32_c1";
inline constexpr const char* kNormalizeF32C3 = "shardpack_normalize_f32_c3";
inline constexpr const char* kNormalizeF16C1 = "shardpack_normalize_f16_c1";
inline constexpr const char* kNormalizeF16C3 = "shardpack_normalize_f16_c3";
inline constexpr const char* kSpin = "shardpack_spin";

// NormalizeParams (normalize_params.h) as plain arrays, passed by value to the kernel.
struct NormalizeCoefficients {
  float scale[3];
  float bias[3];
};

// The fatbin of kernels.cu for the architectures of SHARDPACK_CUDA_ARCHITECTURES (real code
// for each, PTX for the last where asked), generated at build time (cuda.cmake).
extern const unsigned char kKernelsFatbin[];
extern const size_t kKernelsFatbinSize;

}  // namespace shardpack::cuda

#endif  // SHARDPACK_CUDA_KERNELS_H_
