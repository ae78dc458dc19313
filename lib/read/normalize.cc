#include "read/normalize.h"

#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdio>

namespace shardpack::read {
namespace {

// An input is one of 256 byte values, so each channel's results form a 256-entry table
// built with the reference arithmetic (std::fmaf, FloatToHalf), and the pixel loop is a
// lookup. Every output bit is then the reference's by construction, at memory speed on any
// CPU: std::fmaf is a library call where the build targets no FMA instruction, and a
// float16 conversion in the loop would cost more than the lookup.
template <typename T>
using Table = std::array<T, 256>;

void FillTable(float scale, float bias, Table<float>& table) {
  for (int v = 0; v < 256; ++v) table[v] = std::fmaf(static_cast<float>(v), scale, bias);
}

void FillTable(float scale, float bias, Table<uint16_t>& table) {
  for (int v = 0; v < 256; ++v) {
    table[v] = FloatToHalf(std::fmaf(static_cast<float>(v), scale, bias));
  }
}

// Writing the C planes of an image in one pass over its interleaved pixels keeps every
// read and write sequential (about 1.5x faster than a pass per plane).
template <typename T>
void Run1(const uint8_t* in, size_t pixels, const Table<T>& t0, T* out) {
  for (size_t i = 0; i < pixels; ++i) out[i] = t0[in[i]];
}

template <typename T>
void Run3(const uint8_t* in, size_t pixels, const Table<T>& t0, const Table<T>& t1,
          const Table<T>& t2, T* out) {
  T* __restrict out0 = out;
  T* __restrict out1 = out + pixels;
  T* __restrict out2 = out + 2 * pixels;
  for (size_t i = 0; i < pixels; ++i) {
    out0[i] = t0[in[3 * i]];
    out1[i] = t1[in[3 * i + 1]];
    out2[i] = t2[in[3 * i + 2]];
  }
}

template <typename T>
void RunTables(const uint8_t* in_nhwc, int n, int h, int w, int c,
               const std::array<Table<T>, 3>& tables, void* out_nchw) {
  assert(c == 1 || c == 3);
  assert(n >= 0 && h >= 0 && w >= 0);
  if (n <= 0 || h <= 0 || w <= 0) return;
  const size_t pixels = static_cast<size_t>(h) * static_cast<size_t>(w);
  const size_t image = pixels * static_cast<size_t>(c);
  T* out = static_cast<T*>(out_nchw);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    if (c == 1) {
      Run1(in_nhwc + i * image, pixels, tables[0], out + i * image);
    } else {
      Run3(in_nhwc + i * image, pixels, tables[0], tables[1], tables[2], out + i * image);
    }
  }
}

std::atomic<uint64_t> g_constructed{0};

}  // namespace

size_t NormalizeTypeSize(NormalizeType type) {
  return type == NormalizeType::kFloat16 ? sizeof(uint16_t) : sizeof(float);
}

Status CheckNormalizeStatistics(const std::array<float, 3>& mean,
                                const std::array<float, 3>& stddev) {
  for (int c = 0; c < 3; ++c) {
    char value[64];
    const bool mean_ok = std::isfinite(mean[c]) && mean[c] >= 0.0f && mean[c] <= 1.0f;
    const bool std_ok = std::isfinite(stddev[c]) && stddev[c] > 0.0f && stddev[c] <= 1.0f;
    if (mean_ok && std_ok) continue;
    const bool is_mean = !mean_ok;
    std::snprintf(value, sizeof value, "%g", is_mean ? mean[c] : stddev[c]);
    const bool large = (is_mean ? mean[c] : stddev[c]) > 1.0f;
    return InvalidArgumentError(
        std::string("normalisation: ") + (is_mean ? "mean" : "std") + "[" + std::to_string(c) +
        "] is " + value + "; expected " +
        (is_mean ? "a value in [0, 1]" : "a value in (0, 1] (above 0: it divides)") +
        ", in 0..1 pixel units as torchvision's (ImageNet: mean 0.485, 0.456, 0.406, std "
        "0.229, 0.224, 0.225)" +
        (large ? "; values in 0..255 units must be divided by 255" : ""));
  }
  return Status::Ok();
}

NormalizeParams MakeNormalizeParams(const std::array<float, 3>& mean,
                                    const std::array<float, 3>& stddev) {
  NormalizeParams p;
  for (int c = 0; c < 3; ++c) {
    p.scale[c] = 1.0f / (255.0f * stddev[c]);
    p.bias[c] = -mean[c] / stddev[c];
  }
  return p;
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {
    if (abs == 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u);
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  }
  // 65520 (0x477FF000) lies half-way between 65504, the largest half, and 65536; the tie
  // goes to the even neighbour, which is inf.
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (abs < 0x38800000u) {
    // Below 2^-14: a subnormal half, in units of 2^-24. Up to 2^-25 included (a tie between
    // 0 and 2^-24, and 0 is even) the result is zero.
    if (abs <= 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exponent = abs >> 23;  // 102..112
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // value = mantissa / 2^shift units; 14..24
    uint32_t result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  // Normal: rebias the exponent (127 -> 15) and round off the 13 low mantissa bits; a carry
  // out of the mantissa rightly bumps the exponent.
  uint32_t result = (abs - 0x38000000u) >> 13;
  const uint32_t rest = abs & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

float HalfToFloat(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1Fu;
  const uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign != 0 ? -magnitude : magnitude;
}

HostNormalizer::HostNormalizer(const NormalizeParams& p, NormalizeType type)
    : type_(type), float32_{}, float16_{} {
  g_constructed.fetch_add(1, std::memory_order_relaxed);
  for (int ch = 0; ch < 3; ++ch) {
    if (type == NormalizeType::kFloat16) {
      FillTable(p.scale[ch], p.bias[ch], float16_[ch]);
    } else {
      FillTable(p.scale[ch], p.bias[ch], float32_[ch]);
    }
  }
}

uint64_t HostNormalizer::Constructed() { return g_constructed.load(std::memory_order_relaxed); }

void HostNormalizer::Run(const uint8_t* in_nhwc, int n, int h, int w, int c, void* out_nchw) const {
  if (type_ == NormalizeType::kFloat16) {
    RunTables(in_nhwc, n, h, w, c, float16_, out_nchw);
  } else {
    RunTables(in_nhwc, n, h, w, c, float32_, out_nchw);
  }
}

}  // namespace shardpack::read
