// Reads of memory-mapped shards that survive the files shrinking underneath them.
//
// A dataset is immutable by contract, but a shard truncated while it is mapped (another
// process rewriting the dataset, a network file system losing a file) turns every read of
// the pages past its new end into SIGBUS, which kills the process: a week-long training
// job would die without a word about which file. Worker threads run their reads of a
// sample through GuardedRead; a SIGBUS raised inside it unwinds to it (siglongjmp) and
// becomes an error the caller names by file, record and offset.
//
//   Status s = read::GuardedRead([&] { return FillSample(...); });
//   if (read::IsMappedReadFault(s)) ...   // IOError "... (SIGBUS)"
//
// What may run inside: code that reads mapped memory and whose frames hold nothing that
// must be destroyed or released when a fault skips them (no heap allocations, locks or
// resources acquired inside). An LMDB read transaction taken inside stays out of its
// reader's pool after a fault and is freed when the reader closes. The handler is
// installed once per process, with SA_NODEFER so that the jump leaves SIGBUS unblocked; a
// SIGBUS outside a guarded read goes to the handler that was there before (by default:
// the process dies as it would have).
//
// Thread-safety: GuardedRead may run on any number of threads at once; nesting is allowed
// (the innermost guard catches).
#ifndef SHARDPACK_READ_MAPPED_READ_GUARD_H_
#define SHARDPACK_READ_MAPPED_READ_GUARD_H_

#include <setjmp.h>

#include <utility>

#include "shardpack/status.h"

namespace shardpack::read {

namespace internal {
// The calling thread's innermost guard (nullptr outside GuardedRead).
sigjmp_buf*& CurrentGuard();
// Installs the SIGBUS handler (once per process).
void InstallSigbusHandler();
Status SigbusFault();
}  // namespace internal

// Runs `read` (returning Status); a SIGBUS raised by it returns IOError ending in
// "(SIGBUS)" instead. The caller adds where it was reading.
template <typename Read>
Status GuardedRead(Read&& read) {
  internal::InstallSigbusHandler();
  sigjmp_buf env;
  sigjmp_buf* const outer = internal::CurrentGuard();
  // No signal mask to save: the handler runs with SA_NODEFER, so SIGBUS stays unblocked.
  if (sigsetjmp(env, 0) != 0) {
    internal::CurrentGuard() = outer;
    return internal::SigbusFault();
  }
  internal::CurrentGuard() = &env;
  Status s = std::forward<Read>(read)();
  internal::CurrentGuard() = outer;
  return s;
}

// True for the status GuardedRead returns after a SIGBUS.
bool IsMappedReadFault(const Status& s);

}  // namespace shardpack::read

#endif  // SHARDPACK_READ_MAPPED_READ_GUARD_H_
