// The CUDA layer's kernels, compiled by nvcc into a fatbin (device code only) that the
// library embeds and loads with cuModuleLoadData (cuda.cc): the twin of read::HostNormalizer
// and the spin of cuda::SpinAsync. kernels.h names the entry points.
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels.h"

namespace shardpack::cuda {
namespace {

template <typename T>
__device__ T Convert(float value);
template <>
__device__ float Convert<float>(float value) {
  return value;
}
// cvt.rn.f16.f32: nearest even, subnormals kept, overflow to inf, as read::FloatToHalf.
template <>
__device__ uint16_t Convert<uint16_t>(float value) {
  return __half_as_ushort(__float2half_rn(value));
}

// One thread per pixel of an image, writing its C values into the C planes: a warp reads
// 32 * C consecutive bytes and writes 32 consecutive elements of each plane. blockIdx.y
// strides over the images.
template <typename T, int C>
__device__ void Normalize(const uint8_t* __restrict__ in, int64_t pixels, int n,
                          const NormalizeCoefficients& k, T* __restrict__ out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t image = blockIdx.y; image < n; image += gridDim.y) {
    const uint8_t* src = in + image * pixels * C;
    T* dst = out + image * pixels * C;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < pixels;
         i += stride) {
#pragma unroll
      for (int ch = 0; ch < C; ++ch) {
        // The same single rounding as std::fmaf on the host.
        dst[ch * pixels + i] =
            Convert<T>(__fmaf_rn(static_cast<float>(src[i * C + ch]), k.scale[ch], k.bias[ch]));
      }
    }
  }
}

__device__ uint64_t GlobalTimerNs() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

}  // namespace
}  // namespace shardpack::cuda

using shardpack::cuda::NormalizeCoefficients;

extern "C" __global__ void shardpack_normalize_f32_c1(const uint8_t* __restrict__ in,
                                                      int64_t pixels, int n,
                                                      NormalizeCoefficients k,
                                                      float* __restrict__ out) {
  shardpack::cuda::Normalize<float, 1>(in, pixels, n, k, out);
}

extern "C" __global__ void shardpack_normalize_f32_c3(const uint8_t* __restrict__ in,
                                                      int64_t pixels, int n,
                                                      NormalizeCoefficients k,
                                                      float* __restrict__ out) {
  shardpack::cuda::Normalize<float, 3>(in, pixels, n, k, out);
}

extern "C" __global__ void shardpack_normalize_f16_c1(const uint8_t* __restrict__ in,
                                                      int64_t pixels, int n,
                                                      NormalizeCoefficients k,
                                                      uint16_t* __restrict__ out) {
  shardpack::cuda::Normalize<uint16_t, 1>(in, pixels, n, k, out);
}

extern "C" __global__ void shardpack_normalize_f16_c3(const uint8_t* __restrict__ in,
                                                      int64_t pixels, int n,
                                                      NormalizeCoefficients k,
                                                      uint16_t* __restrict__ out) {
  shardpack::cuda::Normalize<uint16_t, 3>(in, pixels, n, k, out);
}

// Occupies its stream for `nanoseconds` of the global timer (nanoseconds, updated about
// every microsecond, on every device; clock64() would count cycles of a clock that changes
// with the load). One thread.
extern "C" __global__ void shardpack_spin(uint64_t nanoseconds) {
  const uint64_t start = shardpack::cuda::GlobalTimerNs();
  while (shardpack::cuda::GlobalTimerNs() - start < nanoseconds) __nanosleep(500);
}
