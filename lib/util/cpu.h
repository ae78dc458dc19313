// The x86-64 instruction set extensions the CPU has and the operating system has enabled,
// read once with cpuid and xgetbv: what the kernels in util/ and image/ dispatch on.
//
// Not __builtin_cpu_supports: the compiler runtime that answers it in the wheel's build (Zig's
// compiler-rt, docs/WHEELS.md) answers false for every feature, which silently put the
// portable kernels on every CPU (resize 3.7 times slower). This reads the CPU itself, the
// same way in every build; CpuTest compares it with GCC's builtins.
#ifndef SHARDPACK_UTIL_CPU_H_
#define SHARDPACK_UTIL_CPU_H_

namespace shardpack::cpu {

struct Features {
  bool sse42 = false;
  bool pclmul = false;
  bool avx2 = false;     // with the AVX state enabled by the OS (XCR0)
  bool avx512f = false;  // the AVX-512 ones with the opmask and ZMM state enabled too
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512vbmi = false;
  bool vpclmulqdq = false;  // with AVX enabled (its 256-bit form)
};

// This CPU's features; all false on other architectures.
const Features& Get();

}  // namespace shardpack::cpu

#endif  // SHARDPACK_UTIL_CPU_H_
