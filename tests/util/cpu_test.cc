#include "util/cpu.h"

#include <gtest/gtest.h>

namespace shardpack {
namespace {

// cpu::Get reads cpuid and xgetbv itself (util/cpu.h says why). Under GCC, whose
// __builtin_cpu_supports also checks what the OS enabled, both must agree on every feature.
TEST(CpuTest, AgreesWithTheCompilersBuiltins) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  const cpu::Features& f = cpu::Get();
  EXPECT_EQ(f.sse42, __builtin_cpu_supports("sse4.2") != 0);
  EXPECT_EQ(f.pclmul, __builtin_cpu_supports("pclmul") != 0);
  EXPECT_EQ(f.avx2, __builtin_cpu_supports("avx2") != 0);
  EXPECT_EQ(f.avx512f, __builtin_cpu_supports("avx512f") != 0);
  EXPECT_EQ(f.avx512bw, __builtin_cpu_supports("avx512bw") != 0);
  EXPECT_EQ(f.avx512vl, __builtin_cpu_supports("avx512vl") != 0);
  EXPECT_EQ(f.avx512vnni, __builtin_cpu_supports("avx512vnni") != 0);
  EXPECT_EQ(f.avx512vbmi, __builtin_cpu_supports("avx512vbmi") != 0);
  EXPECT_EQ(f.vpclmulqdq, __builtin_cpu_supports("vpclmulqdq") != 0);
#else
  GTEST_SKIP() << "GCC's __builtin_cpu_supports on x86-64 is the reference";
#endif
}

// Every x86-64 CPU this project meets has SSE4.2 (2008 on); a detection that reads nothing
// (the failure util/cpu.h was written for) fails here on any compiler.
TEST(CpuTest, SeesSse42OnX86) {
#if defined(__x86_64__)
  EXPECT_TRUE(cpu::Get().sse42);
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

}  // namespace
}  // namespace shardpack
