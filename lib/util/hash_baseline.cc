#define SHARDPACK_XXH3_NS baseline
#include "util/xxh3_ops.inc"
