// A preload library (LD_PRELOAD) that measures the peak of a program's live heap: the most
// bytes malloc'd and not yet freed at any moment, each block counted at its usable size,
// whatever thread allocated it. At exit the peak is written, in decimal, to the file named
// by $SHARDPACK_HEAP_PEAK_FILE.
//
// Unlike the resident set, this counts what the program holds, not what the allocator
// keeps after free (glibc's per-thread arenas, its mmap threshold that rises as blocks are
// freed) nor file pages mapped, so it depends on the program's own allocations only: other
// processes on the machine cannot move it. It replaces malloc, free, calloc, realloc and the
// aligned allocations, forwarding to glibc's (__libc_*); operator new and delete reach them
// through libstdc++, libpng and libjpeg directly.
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
void* __libc_malloc(size_t);
void __libc_free(void*);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}

namespace {

std::atomic<int64_t> live{0};
std::atomic<int64_t> peak{0};

void Allocated(void* p) {
  if (p == nullptr) return;
  const int64_t now =
      live.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed) +
      static_cast<int64_t>(malloc_usable_size(p));
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void Freeing(void* p) {
  if (p != nullptr) {
    live.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  }
}

__attribute__((destructor)) void WritePeak() {
  const char* path = std::getenv("SHARDPACK_HEAP_PEAK_FILE");
  if (path == nullptr) return;
  char text[32];
  const int n = std::snprintf(text, sizeof text, "%lld\n",
                              static_cast<long long>(peak.load(std::memory_order_relaxed)));
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  (void)!::write(fd, text, static_cast<size_t>(n));
  ::close(fd);
}

}  // namespace

extern "C" {

void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  Allocated(p);
  return p;
}

void free(void* p) {
  Freeing(p);
  __libc_free(p);
}

void* calloc(size_t count, size_t n) {
  void* p = __libc_calloc(count, n);
  Allocated(p);
  return p;
}

void* realloc(void* old, size_t n) {
  const int64_t before = old != nullptr ? static_cast<int64_t>(malloc_usable_size(old)) : 0;
  void* p = __libc_realloc(old, n);
  if (p == nullptr) {
    // `old` is untouched, unless n was 0: then it was freed.
    if (old != nullptr && n == 0) live.fetch_sub(before, std::memory_order_relaxed);
    return nullptr;
  }
  live.fetch_sub(before, std::memory_order_relaxed);
  Allocated(p);
  return p;
}

void* memalign(size_t alignment, size_t n) {
  void* p = __libc_memalign(alignment, n);
  Allocated(p);
  return p;
}

void* aligned_alloc(size_t alignment, size_t n) { return memalign(alignment, n); }

int posix_memalign(void** out, size_t alignment, size_t n) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = memalign(alignment, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(size_t n) { return memalign(static_cast<size_t>(::sysconf(_SC_PAGESIZE)), n); }

}  // extern "C"
