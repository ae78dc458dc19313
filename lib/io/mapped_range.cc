#include "io/mapped_range.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shardpack::io {
namespace internal {

// One registered range. The handler reads it with plain atomic loads (no locks, no
// allocation: it may run on any thread at any instruction).
struct RangeSlot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};  // 0: free
  std::atomic<uintptr_t> end{0};
  std::atomic<int> prot{0};
  std::atomic<uint32_t> faults{0};
};

}  // namespace internal

namespace {

using internal::RangeSlot;

// The table: a list of fixed chunks that only grows (a chunk is never freed, so the
// handler may walk it at any time). The first chunk is static; each further one holds as
// many slots again, for datasets with thousands of mapped shards.
struct Chunk {
  static constexpr size_t kSlots = 1024;
  RangeSlot slots[kSlots];
  std::atomic<Chunk*> next{nullptr};
};

Chunk g_first;
struct sigaction g_previous;
std::atomic<bool> g_installed{false};
// Set before main (static initialisation): the handler reads it without any guard.
const uintptr_t g_page_size = [] {
  const long size = ::sysconf(_SC_PAGESIZE);
  return size > 0 ? static_cast<uintptr_t>(size) : uintptr_t{4096};
}();

RangeSlot* FindSlot(uintptr_t addr) {
  for (Chunk* c = &g_first; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
    for (RangeSlot& s : c->slots) {
      const uintptr_t begin = s.begin.load(std::memory_order_acquire);
      if (begin != 0 && addr >= begin && addr < s.end.load(std::memory_order_relaxed)) return &s;
    }
  }
  return nullptr;
}

void PassOn(int sig, siginfo_t* info, void* context) {
  // Not ours: the handler that was there before, or the default action (the faulting
  // instruction runs again and the signal kills the process as it would have).
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  sigaction(SIGBUS, &g_previous, nullptr);
  // A fault runs its instruction again, now under the default action; a SIGBUS sent with
  // kill or raise would be lost, so it is sent again (blocked until this handler returns).
  if (info != nullptr && info->si_code <= 0) raise(sig);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  // BUS_ADRERR: a page of a file mapping past the file's end (the other codes are
  // alignment and hardware memory errors, which are not ours to absorb).
  if (info != nullptr && info->si_code == BUS_ADRERR) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    RangeSlot* slot = FindSlot(addr);
    if (slot != nullptr) {
      // Marked before the page is replaced: a reader that sees the zeros sees the mark.
      slot->faults.fetch_add(1, std::memory_order_seq_cst);
      const int saved_errno = errno;
      void* page = reinterpret_cast<void*>(addr & ~(g_page_size - 1));
      // The raw system call, not libc's (or a sanitizer's interposed) mmap: nothing but
      // the kernel runs inside the handler. ThreadSanitizer's mmap would also record the
      // page as written by this thread and report the reads of other threads racing it.
      void* zeros = reinterpret_cast<void*>(
          ::syscall(SYS_mmap, page, g_page_size, slot->prot.load(std::memory_order_relaxed),
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
      errno = saved_errno;
      if (zeros != MAP_FAILED) return;  // the read runs again, on the zeros
    }
  }
  PassOn(sig, info, context);
}

// Installing takes no lock and waits on nothing: verify forks a child to read a damaged
// LMDB file while other threads register ranges, and a lock or once-flag held by one of
// them at the fork would stay held in the child forever (a child may only rely on state
// that no other thread can leave half-changed). Two threads racing here both install the
// same handler; only the first keeps the previous one to pass signals on to.
void InstallHandler() {
  if (g_installed.load(std::memory_order_acquire)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  struct sigaction previous;
  sigaction(SIGBUS, &action, &previous);
  if (previous.sa_sigaction != OnSigbus || (previous.sa_flags & SA_SIGINFO) == 0) {
    g_previous = previous;
  }
  g_installed.store(true, std::memory_order_release);
}

// Lock-free for the same reason: a full chunk gets a successor by compare-and-swap; the
// loser of a race frees its own.
RangeSlot* ClaimSlot() {
  for (Chunk* c = &g_first;;) {
    for (RangeSlot& s : c->slots) {
      bool expected = false;
      if (!s.used.load(std::memory_order_relaxed) &&
          s.used.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
        return &s;
      }
    }
    Chunk* next = c->next.load(std::memory_order_acquire);
    if (next == nullptr) {
      auto* fresh = new Chunk;  // never freed once linked: the handler may be walking the list
      if (c->next.compare_exchange_strong(next, fresh, std::memory_order_acq_rel)) {
        next = fresh;
      } else {
        delete fresh;  // `next` now holds the chunk another thread linked
      }
    }
    c = next;
  }
}

}  // namespace

MappedRange::MappedRange(const void* base, size_t size, int prot) {
  if (base == nullptr || size == 0) return;
  InstallHandler();
  slot_ = ClaimSlot();
  slot_->faults.store(0, std::memory_order_relaxed);
  slot_->prot.store(prot, std::memory_order_relaxed);
  const auto begin = reinterpret_cast<uintptr_t>(base);
  slot_->end.store(begin + size, std::memory_order_relaxed);
  slot_->begin.store(begin, std::memory_order_release);
}

MappedRange::~MappedRange() {
  if (slot_ == nullptr) return;
  slot_->begin.store(0, std::memory_order_release);
  slot_->end.store(0, std::memory_order_relaxed);
  slot_->used.store(false, std::memory_order_release);
}

namespace {

// `advice` for the pages under [p, p + n) (madvise wants a page-aligned start). A hint:
// its failure changes nothing but speed.
void AdvisePages(const void* p, size_t n, int advice) {
  if (p == nullptr || n == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(p) / g_page_size * g_page_size;
  const auto end = reinterpret_cast<uintptr_t>(p) + n;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, advice);
}

}  // namespace

void WillNeedPages(const void* p, size_t n) {
  // One hint reads at most the larger of the device's read-ahead window and its largest
  // request (force_page_cache_ra): 128 KiB and 1,280 KiB by default. So hints of 128 KiB;
  // the block layer merges adjacent ones again.
  constexpr size_t kHint = 128 << 10;
  const auto* bytes = static_cast<const uint8_t*>(p);
  for (size_t done = 0; done < n; done += kHint) {
    AdvisePages(bytes + done, std::min(kHint, n - done), MADV_WILLNEED);
  }
}

void PopulatePages(const void* p, size_t n) { AdvisePages(p, n, MADV_POPULATE_READ); }

void PopulatePagesForWriting(void* p, size_t n) { AdvisePages(p, n, MADV_POPULATE_WRITE); }

void PreferHugePages(const void* p, size_t n) { AdvisePages(p, n, MADV_HUGEPAGE); }

bool PopulateAndHugePagesWork() {
  static const bool works = [] {
    void* page =
        ::mmap(nullptr, g_page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return false;
    const bool ok = ::madvise(page, g_page_size, MADV_HUGEPAGE) == 0 &&
                    ::madvise(page, g_page_size, MADV_POPULATE_READ) == 0;
    ::munmap(page, g_page_size);
    return ok;
  }();
  return works;
}

void PrefaultWrite(void* p, size_t n) {
  if (p == nullptr || n == 0) return;
  const auto begin = (reinterpret_cast<uintptr_t>(p) + g_page_size - 1) / g_page_size * g_page_size;
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) / g_page_size * g_page_size;
  if (end > begin &&
      ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) {
    return;
  }
  auto* bytes = static_cast<volatile uint8_t*>(p);
  for (size_t i = 0; i < n; i += g_page_size) bytes[i] = bytes[i];
}

bool PageResident(const void* p) {
  if (p == nullptr) return true;
  const auto page = reinterpret_cast<uintptr_t>(p) / g_page_size * g_page_size;
  unsigned char in_core = 0;
  if (::mincore(reinterpret_cast<void*>(page), 1, &in_core) != 0) return true;
  return (in_core & 1) != 0;
}

StatusOr<Mapping> MappingAt(const void* inside) {
  const auto addr = reinterpret_cast<uintptr_t>(inside);
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return ErrnoError("/proc/self/maps: open", errno);
  char line[512];
  Mapping found;
  while (std::fgets(line, sizeof(line), maps) != nullptr) {
    // "begin-end perms offset dev inode path": the addresses are hexadecimal.
    char* end_of_begin = nullptr;
    const uintptr_t begin = std::strtoull(line, &end_of_begin, 16);
    if (end_of_begin == nullptr || *end_of_begin != '-') continue;
    const uintptr_t end = std::strtoull(end_of_begin + 1, nullptr, 16);
    if (addr >= begin && addr < end) {
      found = {reinterpret_cast<const void*>(begin), static_cast<size_t>(end - begin)};
      break;
    }
    // A line longer than the buffer (a long path) continues in the next read.
    while (std::strchr(line, '\n') == nullptr && std::fgets(line, sizeof(line), maps) != nullptr) {
    }
  }
  std::fclose(maps);
  if (found.begin == nullptr) return NotFoundError("/proc/self/maps: no mapping holds the address");
  return found;
}

bool MappedRange::faulted() const {
  return slot_ != nullptr && slot_->faults.load(std::memory_order_seq_cst) != 0;
}

}  // namespace shardpack::io
