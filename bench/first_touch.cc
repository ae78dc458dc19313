// How fast this machine gives a process new memory: maps SIZE_MIB of anonymous memory,
// writes one byte per 4 KiB page (the first touch: the kernel's page fault and zeroing,
// and on a virtual machine whatever the host does to back the page), then writes all of
// it again (memset, memory already there), unmaps it, waits PAUSE seconds and starts
// over, ROUNDS times. On a virtual machine whose kernel reports free pages to the host
// (virtio-balloon free page reporting, /sys/module/page_reporting), memory freed more
// than a few seconds before is given back and its first touch costs a host fault per
// page: docs/LOADER.md, "The first epoch from the page cache".
// Usage: first_touch SIZE_MIB [huge: 0|1] [PAUSE seconds] [ROUNDS]
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: first_touch SIZE_MIB [huge: 0|1] [PAUSE seconds] [ROUNDS]\n");
    return 2;
  }
  const size_t bytes = std::strtoull(argv[1], nullptr, 10) << 20;
  const bool huge = argc > 2 && std::atoi(argv[2]) != 0;
  const int pause = argc > 3 ? std::atoi(argv[3]) : 0;
  const int rounds = argc > 4 ? std::atoi(argv[4]) : 3;
  using Clock = std::chrono::steady_clock;
  auto gbps = [bytes](Clock::duration d) {
    return static_cast<double>(bytes) / std::chrono::duration<double>(d).count() / 1e9;
  };
  for (int r = 0; r < rounds; ++r) {
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      std::perror("first_touch: mmap");
      return 1;
    }
    auto* p = static_cast<volatile char*>(m);
    madvise(m, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    const auto t0 = Clock::now();
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    const auto t1 = Clock::now();
    std::memset(m, 2, bytes);
    const auto t2 = Clock::now();
    std::printf("round %d: first touch %.2f GB/s, memset after it %.2f GB/s\n", r + 1,
                gbps(t1 - t0), gbps(t2 - t1));
    munmap(m, bytes);
    if (pause > 0 && r + 1 < rounds) sleep(static_cast<unsigned>(pause));
  }
  return 0;
}
