// Built with -mavx2 (lib/CMakeLists.txt); called only when the CPU has AVX2.
#define XXH_VECTOR XXH_AVX2
#define SHARDPACK_XXH3_NS avx2
#include "util/xxh3_ops.inc"
