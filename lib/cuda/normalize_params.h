// What a normalisation computes, shared by the host reference (read/normalize.h) and the
// CUDA kernel (cuda::NormalizeAsync), so that both take the same coefficients and round
// alike:  out[n][c][y][x] = fmaf(in[n][y][x][c], scale[c], bias[c]).
#ifndef SHARDPACK_CUDA_NORMALIZE_PARAMS_H_
#define SHARDPACK_CUDA_NORMALIZE_PARAMS_H_

#include <array>

namespace shardpack::cuda {

enum class NormalizeType {
  kFloat32,  // IEEE binary32, native byte order
  kFloat16,  // IEEE binary16, stored as its uint16_t bit pattern, native byte order
};

// Per-channel coefficients of out = fmaf(in, scale[c], bias[c]); `in` is the uint8 value
// (0..255). Single-channel images use index 0 only.
struct NormalizeParams {
  std::array<float, 3> scale = {1.0f, 1.0f, 1.0f};
  std::array<float, 3> bias = {0.0f, 0.0f, 0.0f};
};

}  // namespace shardpack::cuda

#endif  // SHARDPACK_CUDA_NORMALIZE_PARAMS_H_
