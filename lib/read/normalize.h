// Normalisation of a batch on the host: uint8 NHWC pixels -> float32 or float16 NCHW,
//
//   out[n][c][y][x] = fmaf(in[n][y][x][c], scale[c], bias[c])
//
// with one rounding (a fused multiply-add), then rounded to nearest even for float16. This
// is the reference for the CUDA kernel (cuda::NormalizeAsync), which does the same
// arithmetic (__fmaf_rn, __float2half_rn) on the same NormalizeParams: for finite scale and
// bias the two give identical bits. Non-finite parameters (a std of 0) give inf or NaN on
// both, but the NaN bit patterns may differ.
//
//   NormalizeParams p = MakeNormalizeParams(options.mean, options.std);
//   HostNormalizer normalizer(p, NormalizeType::kFloat16);   // once: builds the tables
//   normalizer.Run(batch, n, h, w, 3, out);                  // per image or batch
//
// Thread-safety: the functions are pure; a HostNormalizer is immutable after construction,
// and concurrent Runs on disjoint outputs are safe.
#ifndef SHARDPACK_READ_NORMALIZE_H_
#define SHARDPACK_READ_NORMALIZE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/normalize_params.h"
#include "shardpack/status.h"

namespace shardpack::read {

// The types live with the kernel that shares them (cuda/ comes before read/).
using cuda::NormalizeParams;
using cuda::NormalizeType;

// Bytes of one output element: 4 for kFloat32, 2 for kFloat16.
size_t NormalizeTypeSize(NormalizeType type);

// InvalidArgument unless mean and stddev are in torchvision's 0..1 units: every mean in
// [0, 1], every stddev in (0, 1] (finite). The message names the channel and the value,
// and says what to do with 0..255 values (divide by 255).
Status CheckNormalizeStatistics(const std::array<float, 3>& mean,
                                const std::array<float, 3>& stddev);

// torchvision's convention, mean and stddev in 0..1 units:
//   scale[c] = 1.0f / (255.0f * stddev[c]),  bias[c] = -mean[c] / stddev[c],
// each computed in float. Compute them once, here, and hand the same values to the host and
// the device code, so both round alike.
NormalizeParams MakeNormalizeParams(const std::array<float, 3>& mean,
                                    const std::array<float, 3>& stddev);

// IEEE binary32 -> binary16 bits, rounded to nearest, ties to even: subnormal results are
// kept (2^-24 -> 0x0001, 2^-25 -> 0x0000), magnitudes of 65520 and up become inf (0x7C00),
// the sign of zero is kept (-0.0 -> 0x8000), and a NaN stays a quiet NaN of the same sign
// (the top 9 bits of its payload are kept; 0x7FC00000 -> 0x7E00).
uint16_t FloatToHalf(float value);

// The inverse, exact (every binary16 value is a binary32 value); NaN payloads are kept.
float HalfToFloat(uint16_t bits);

// Normalises images of h x w x c uint8 (c is 1 or 3) into c x h x w elements of its type,
// with its tables (256 entries per channel, built with the reference arithmetic above)
// built once, in the constructor. Immutable after construction: Run may be called from
// many threads at once.
class HostNormalizer {
 public:
  HostNormalizer(const NormalizeParams& p, NormalizeType type);

  NormalizeType type() const { return type_; }
  // Normalises n images, contiguous NHWC at `in_nhwc`, into n x c x h x w elements,
  // contiguous NCHW at `out_nchw` (which must hold n * c * h * w * NormalizeTypeSize(type())
  // bytes, suitably aligned for the type, and must not overlap the input). n, h or w of 0
  // writes nothing.
  void Run(const uint8_t* in_nhwc, int n, int h, int w, int c, void* out_nchw) const;

  // HostNormalizers constructed in this process so far: tables are built only then (for
  // tests that hold the loader to one set of tables per loader).
  static uint64_t Constructed();

 private:
  NormalizeType type_;
  // The output element of each channel and input value; only the array of type_ is used.
  std::array<std::array<float, 256>, 3> float32_;
  std::array<std::array<uint16_t, 256>, 3> float16_;
};

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_NORMALIZE_H_
