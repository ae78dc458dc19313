#include "tools/mpi_session.h"

#ifdef SHARDPACK_WITH_MPI
#include <mpi.h>
#endif

namespace shardpack::cli {

#ifdef SHARDPACK_WITH_MPI

StatusOr<std::unique_ptr<MpiSession>> MpiSession::Start() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized && MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
    return UnavailableError("MPI_Init failed");
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<MpiSession>(new MpiSession(rank, size));
}

MpiSession::~MpiSession() { MPI_Finalize(); }

int MpiSession::CountFailed(bool ok) {
  int mine = ok ? 0 : 1, failed = 0;
  MPI_Allreduce(&mine, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return failed;
}

int MpiSession::FromRoot(int value) {
  MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return value;
}

#else  // !SHARDPACK_WITH_MPI

StatusOr<std::unique_ptr<MpiSession>> MpiSession::Start() {
  return UnavailableError(
      "this shardpack was built without MPI (install libopenmpi-dev and rebuild); without "
      "MPI, run the parts with --part I/N and join them with shardpack merge");
}

MpiSession::~MpiSession() = default;
int MpiSession::CountFailed(bool ok) { return ok ? 0 : 1; }
int MpiSession::FromRoot(int value) { return value; }

#endif

}  // namespace shardpack::cli
