// Shared by the libFuzzer harnesses in tests/fuzz/: an invariant that must hold for every
// input. A broken one aborts, which libFuzzer (and the replay driver) report as a crash
// and keep the input.
#ifndef SHARDPACK_TESTS_FUZZ_FUZZ_CHECK_H_
#define SHARDPACK_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

#endif  // SHARDPACK_TESTS_FUZZ_FUZZ_CHECK_H_
