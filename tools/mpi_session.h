// MPI for `convert --mpi`: the few collective steps a partitioned conversion needs, so
// that the rest of the CLI never sees MPI. The MPI library is loaded at run time, the one
// of the MPI whose launcher started the process: Open MPI's libmpi.so.40, or a library of
// the MPICH ABI (libmpi.so.12 or libmpich.so.12: MPICH, Intel MPI, MVAPICH, Cray MPICH).
// So no build needs MPI, and one binary (the wheel's) runs under either launcher.
//
//   auto mpi = MpiSession::Start();                 // StatusOr; MPI_Init
//   ... part mpi->rank() of mpi->size() ...
//   if ((*mpi)->CountFailed(mine_ok) == 0 && (*mpi)->rank() == 0) merge ...;
//   int code = (*mpi)->FromRoot(code);              // every rank exits alike
//
// Which library: SHARDPACK_MPI_LIBRARY (a path or soname) when set; else the launcher's
// environment decides the order (OMPI_COMM_WORLD_SIZE: Open MPI first; PMI_SIZE or
// MPI_LOCALNRANKS: the MPICH ABI first), then each soname in turn. Where the launcher says
// how many ranks it started and the library's MPI_COMM_WORLD disagrees (an MPI other than
// the launcher's), Start() fails and says so, rather than converting everything N times.
//
// Thread-safety: one thread (MPI_THREAD_SINGLE is enough: only the main thread calls MPI).
#ifndef SHARDPACK_TOOLS_MPI_SESSION_H_
#define SHARDPACK_TOOLS_MPI_SESSION_H_

#include <memory>
#include <string>

#include "shardpack/status.h"

namespace shardpack::cli {

class MpiSession {
 public:
  // Loads an MPI library and initialises it (once per process). Unavailable when no MPI
  // library is found (the message names those looked for and the way without MPI), or
  // when it does not agree with the launcher.
  static StatusOr<std::unique_ptr<MpiSession>> Start();
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // The library in use and its ABI, e.g. "libmpi.so.40 (Open MPI)".
  const std::string& library() const { return library_; }
  // A barrier that also tells every rank whether all ranks passed `ok`; returns the number
  // of ranks that did not.
  int CountFailed(bool ok);
  // Rank 0's `value`, on every rank.
  int FromRoot(int value);

  // The loaded library's functions (mpi_session.cc).
  struct Api;

 private:
  MpiSession(const Api* api, int rank, int size, std::string library)
      : api_(api), rank_(rank), size_(size), library_(std::move(library)) {}
  const Api* api_;
  int rank_ = 0;
  int size_ = 1;
  std::string library_;
};

}  // namespace shardpack::cli

#endif  // SHARDPACK_TOOLS_MPI_SESSION_H_
