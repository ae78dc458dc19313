// MPI for `convert --mpi`: the few collective steps a partitioned conversion needs, so
// that the rest of the CLI never sees MPI. Built with MPI when CMake finds it (Open MPI
// from Debian: libopenmpi-dev); otherwise Start() says the build has none.
//
//   auto mpi = MpiSession::Start();                 // StatusOr; MPI_Init
//   ... part mpi->rank() of mpi->size() ...
//   if ((*mpi)->CountFailed(mine_ok) == 0 && (*mpi)->rank() == 0) merge ...;
//   int code = (*mpi)->FromRoot(code);              // every rank exits alike
//
// Thread-safety: one thread (MPI_THREAD_SINGLE is enough: only the main thread calls MPI).
#ifndef SHARDPACK_TOOLS_MPI_SESSION_H_
#define SHARDPACK_TOOLS_MPI_SESSION_H_

#include <memory>

#include "shardpack/status.h"

namespace shardpack::cli {

class MpiSession {
 public:
  // Initialises MPI (once per process). Unavailable when this build has no MPI.
  static StatusOr<std::unique_ptr<MpiSession>> Start();
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // A barrier that also tells every rank whether all ranks passed `ok`; returns the number
  // of ranks that did not.
  int CountFailed(bool ok);
  // Rank 0's `value`, on every rank.
  int FromRoot(int value);

 private:
  MpiSession(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace shardpack::cli

#endif  // SHARDPACK_TOOLS_MPI_SESSION_H_
