// Replays fuzz inputs through the harnesses without libFuzzer, for every ctest run (the
// regression half of SQLite's fuzzcheck): `fuzz_replay HARNESS PATH...` runs each file
// under each PATH (a file or a directory, walked recursively; a missing one is skipped)
// through HARNESS once. A crash or a broken invariant aborts the program with the input
// named on stderr. The harness sources are compiled into this program with
// LLVMFuzzerTestOneInput renamed to <harness>_fuzzer_one_input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" {
int record_fuzzer_one_input(const uint8_t* data, size_t size);
int example_fuzzer_one_input(const uint8_t* data, size_t size);
int manifest_fuzzer_one_input(const uint8_t* data, size_t size);
int index_fuzzer_one_input(const uint8_t* data, size_t size);
int lmdb_fuzzer_one_input(const uint8_t* data, size_t size);
int jpeg_fuzzer_one_input(const uint8_t* data, size_t size);
int png_fuzzer_one_input(const uint8_t* data, size_t size);
int dataset_fuzzer_one_input(const uint8_t* data, size_t size);
}

namespace {

struct Harness {
  const char* name;
  int (*run)(const uint8_t*, size_t);
};
constexpr Harness kHarnesses[] = {
    {"record", record_fuzzer_one_input},     {"example", example_fuzzer_one_input},
    {"manifest", manifest_fuzzer_one_input}, {"index", index_fuzzer_one_input},
    {"lmdb", lmdb_fuzzer_one_input},         {"jpeg", jpeg_fuzzer_one_input},
    {"png", png_fuzzer_one_input},           {"dataset", dataset_fuzzer_one_input},
};

}  // namespace

int main(int argc, char** argv) {
  const Harness* harness = nullptr;
  for (const Harness& h : kHarnesses) {
    if (argc >= 2 && std::strcmp(argv[1], h.name) == 0) harness = &h;
  }
  if (harness == nullptr) {
    std::fprintf(
        stderr, "usage: fuzz_replay record|example|manifest|index|lmdb|jpeg|png|dataset PATH...\n");
    return 2;
  }
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_regular_file(p)) files.push_back(p);
    if (!fs::is_directory(p)) continue;
    for (const auto& e : fs::recursive_directory_iterator(p)) {
      // Dot files (.gitkeep) are not inputs.
      if (e.is_regular_file() && e.path().filename().string().front() != '.') {
        files.push_back(e.path());
      }
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), {}};
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "fuzz_replay: cannot read %s\n", f.c_str());
      return 1;
    }
    std::fprintf(stderr, "fuzz_replay %s: %s (%zu bytes)\n", harness->name, f.c_str(),
                 bytes.size());
    harness->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz_replay %s: %zu inputs, no crash\n", harness->name, files.size());
  return 0;
}
