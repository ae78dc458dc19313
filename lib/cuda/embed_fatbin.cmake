# Writes OUTPUT, a C++ file that defines shardpack::cuda::kKernelsFatbin (kernels.h) as the
# bytes of INPUT, the kernels' fatbin. cmake -DINPUT=... -DOUTPUT=... -P embed_fatbin.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," array "${hex}")
# Sixteen bytes a line.
string(REGEX REPLACE "((0x..,){16})" "\\1\n" array "${array}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by lib/cuda/embed_fatbin.cmake.\n"
  "#include \"cuda/kernels.h\"\n\n"
  "namespace shardpack::cuda {\n\n"
  "// cuModuleLoadData reads the fatbin's header in place: aligned as nvcc aligns it.\n"
  "alignas(64) extern const unsigned char kKernelsFatbin[] = {\n${array}\n};\n"
  "extern const size_t kKernelsFatbinSize = ${bytes};\n\n"
  "}  // namespace shardpack::cuda\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
