#include "util/cpu.h"

#if defined(__x86_64__)
#include <cpuid.h>

#include <cstdint>
#endif

namespace shardpack::cpu {

namespace {

#if defined(__x86_64__)
bool Bit(uint32_t word, int bit) { return ((word >> bit) & 1u) != 0; }

// XCR0: which register states the OS saves across context switches.
uint64_t EnabledStates() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

Features Detect() {
  Features f;
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return f;
  const uint32_t max_leaf = eax;
  __get_cpuid(1, &eax, &ebx, &ecx, &edx);
  f.sse42 = Bit(ecx, 20);
  f.pclmul = Bit(ecx, 1);
  const bool osxsave = Bit(ecx, 27), avx = Bit(ecx, 28);
  const uint64_t xcr0 = osxsave ? EnabledStates() : 0;
  const bool avx_state = avx && (xcr0 & 0x6) == 0x6;             // SSE and AVX (YMM) state
  const bool avx512_state = avx_state && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM0-15 high, ZMM16-31
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = avx_state && Bit(ebx, 5);
  f.vpclmulqdq = avx_state && Bit(ecx, 10);
  f.avx512f = avx512_state && Bit(ebx, 16);
  f.avx512bw = avx512_state && Bit(ebx, 30);
  f.avx512vl = avx512_state && Bit(ebx, 31);
  f.avx512vbmi = avx512_state && Bit(ecx, 1);
  f.avx512vnni = avx512_state && Bit(ecx, 11);
  return f;
}
#else
Features Detect() { return Features{}; }
#endif

}  // namespace

const Features& Get() {
  static const Features features = Detect();
  return features;
}

}  // namespace shardpack::cpu
