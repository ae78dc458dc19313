// cuda::NormalizeAsync: the kernel twin of read::HostNormalizer.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/cuda.h"
#include "cuda/cuda_internal.h"

namespace shardpack::cuda {
namespace {

// NormalizeParams as plain arrays: std::array's accessors are host functions.
struct Coefficients {
  float scale[3];
  float bias[3];
};

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
__global__ void NormalizeKernel(const uint8_t* __restrict__ in, int64_t pixels, int n,
                                Coefficients k, T* __restrict__ out) {
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

template <typename T, int C>
cudaError_t Launch(const uint8_t* in, int64_t pixels, int n, Coefficients k, void* out,
                   cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks_x = std::min<int64_t>((pixels + kThreads - 1) / kThreads, 4096);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(std::min(n, 65535)));
  T* typed_out = static_cast<T*>(out);
  void* args[] = {&in, &pixels, &n, &k, &typed_out};
  // cudaLaunchKernel returns the launch's own error, where <<<>>> would leave it in the
  // thread's last error, which an earlier unrelated call may have set.
  return cudaLaunchKernel(NormalizeKernel<T, C>, grid, dim3(kThreads), args, 0, stream);
}

}  // namespace

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
  cudaStream_t cuda_stream = static_cast<cudaStream_t>(stream);
  SHARDPACK_RETURN_IF_ERROR(UseDeviceOf(cuda_stream).WithPrefix(what));
  Coefficients k;
  for (int ch = 0; ch < 3; ++ch) {
    k.scale[ch] = p.scale[ch];
    k.bias[ch] = p.bias[ch];
  }
  const int64_t pixels = static_cast<int64_t>(h) * w;
  cudaError_t error;
  if (type == NormalizeType::kFloat16) {
    error = c == 1 ? Launch<uint16_t, 1>(device_nhwc, pixels, n, k, device_out, cuda_stream)
                   : Launch<uint16_t, 3>(device_nhwc, pixels, n, k, device_out, cuda_stream);
  } else {
    error = c == 1 ? Launch<float, 1>(device_nhwc, pixels, n, k, device_out, cuda_stream)
                   : Launch<float, 3>(device_nhwc, pixels, n, k, device_out, cuda_stream);
  }
  return CudaStatus(error, "cudaLaunchKernel").WithPrefix(what);
}

}  // namespace shardpack::cuda
