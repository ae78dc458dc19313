#include "tools/mpi_session.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace shardpack::cli {

// The MPI functions the session calls. MPI's handle types differ between the two ABIs:
// Open MPI's MPI_Comm, MPI_Datatype and MPI_Op are pointers to the library's predefined
// objects (&ompi_mpi_comm_world), the MPICH ABI's are ints with fixed values. Each call
// casts the function to the prototype of the library's ABI.
struct MpiSession::Api {
  bool open_mpi = false;
  int (*initialized)(int*) = nullptr;
  int (*init)(int*, char***) = nullptr;
  int (*finalize)() = nullptr;
  void* comm_rank = nullptr;
  void* comm_size = nullptr;
  void* allreduce = nullptr;
  void* bcast = nullptr;
  // Open MPI: the predefined objects' addresses.
  void* comm_world = nullptr;
  void* int_type = nullptr;
  void* sum = nullptr;
};

namespace {

constexpr int kSuccess = 0;  // MPI_SUCCESS in both ABIs
// The MPICH ABI's handles (mpi.h of MPICH 3 and 4, which Intel MPI, MVAPICH and Cray MPICH
// share): MPI_COMM_WORLD, MPI_INT, MPI_SUM.
constexpr int kMpichCommWorld = 0x44000000;
constexpr int kMpichInt = 0x4c000405;
constexpr int kMpichSum = 0x58000003;

// Open MPI: handles are pointers.
using OmpiCommInt = int (*)(void*, int*);
using OmpiAllreduce = int (*)(const void*, void*, int, void*, void*, void*);
using OmpiBcast = int (*)(void*, int, void*, int, void*);
// The MPICH ABI: handles are ints.
using MpichCommInt = int (*)(int, int*);
using MpichAllreduce = int (*)(const void*, void*, int, int, int, int);
using MpichBcast = int (*)(void*, int, int, int, int);

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// The libraries to try, in order.
std::vector<std::string> Candidates() {
  if (const char* named = Env("SHARDPACK_MPI_LIBRARY")) return {named};
  const std::vector<std::string> open_mpi = {"libmpi.so.40"};
  const std::vector<std::string> mpich = {"libmpi.so.12", "libmpich.so.12"};
  std::vector<std::string> order;
  const bool mpich_launcher = Env("OMPI_COMM_WORLD_SIZE") == nullptr &&
                              (Env("PMI_SIZE") != nullptr || Env("MPI_LOCALNRANKS") != nullptr);
  for (const auto* list :
       mpich_launcher ? std::vector{&mpich, &open_mpi} : std::vector{&open_mpi, &mpich}) {
    order.insert(order.end(), list->begin(), list->end());
  }
  return order;
}

// The number of ranks the launcher says it started, or 0 where it says nothing.
int LauncherSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (const char* value = Env(name)) return std::atoi(value);
  }
  return 0;
}

StatusOr<MpiSession::Api*> Load(std::string* library) {
  std::string tried;
  for (const std::string& name : Candidates()) {
    // RTLD_GLOBAL: Open MPI's components, loaded by the library itself, resolve its symbols
    // through the global scope.
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      tried +=
          std::string(tried.empty() ? " " : "; ") + (why != nullptr ? why : name + ": not found");
      continue;
    }
    auto* api = new MpiSession::Api;
    api->open_mpi = dlsym(handle, "ompi_mpi_comm_world") != nullptr;
    std::string missing;
    const auto find = [&](const char* symbol) {
      void* address = dlsym(handle, symbol);
      if (address == nullptr) missing += std::string(missing.empty() ? "" : ", ") + symbol;
      return address;
    };
    api->initialized = reinterpret_cast<int (*)(int*)>(find("MPI_Initialized"));
    api->init = reinterpret_cast<int (*)(int*, char***)>(find("MPI_Init"));
    api->finalize = reinterpret_cast<int (*)()>(find("MPI_Finalize"));
    api->comm_rank = find("MPI_Comm_rank");
    api->comm_size = find("MPI_Comm_size");
    api->allreduce = find("MPI_Allreduce");
    api->bcast = find("MPI_Bcast");
    if (api->open_mpi) {
      api->comm_world = find("ompi_mpi_comm_world");
      api->int_type = find("ompi_mpi_int");
      api->sum = find("ompi_mpi_op_sum");
    }
    if (!missing.empty()) {
      delete api;
      return UnavailableError("MPI library " + name + " lacks " + missing +
                              ": not an MPI of the Open MPI or MPICH ABI");
    }
    *library = name + (api->open_mpi ? " (Open MPI)" : " (MPICH ABI)");
    return api;  // never unloaded: MPI_Finalize runs at the session's end
  }
  return UnavailableError(
      "no MPI library found (Open MPI's libmpi.so.40, or libmpi.so.12 / "
      "libmpich.so.12 of MPICH, Intel MPI or MVAPICH); load your MPI's environment (e.g. "
      "module load openmpi) or set SHARDPACK_MPI_LIBRARY to its libmpi. Without MPI, run "
      "the parts with --part I/N and join them with shardpack merge. Tried:" +
      tried + ".");
}

}  // namespace

StatusOr<std::unique_ptr<MpiSession>> MpiSession::Start() {
  std::string library;
  SHARDPACK_ASSIGN_OR_RETURN(Api * api, Load(&library));
  int initialized = 0;
  if (api->initialized(&initialized) != kSuccess) {
    return UnavailableError(library + ": MPI_Initialized failed");
  }
  if (!initialized && api->init(nullptr, nullptr) != kSuccess) {
    return UnavailableError(library + ": MPI_Init failed");
  }
  int rank = 0;
  int size = 1;
  int rank_result = 0;
  int size_result = 0;
  if (api->open_mpi) {
    rank_result = reinterpret_cast<OmpiCommInt>(api->comm_rank)(api->comm_world, &rank);
    size_result = reinterpret_cast<OmpiCommInt>(api->comm_size)(api->comm_world, &size);
  } else {
    rank_result = reinterpret_cast<MpichCommInt>(api->comm_rank)(kMpichCommWorld, &rank);
    size_result = reinterpret_cast<MpichCommInt>(api->comm_size)(kMpichCommWorld, &size);
  }
  if (rank_result != kSuccess || size_result != kSuccess) {
    return UnavailableError(library + ": MPI_Comm_rank or MPI_Comm_size failed");
  }
  const int launched = LauncherSize();
  if (launched > 0 && launched != size) {
    return UnavailableError(library + " sees " + std::to_string(size) +
                            " rank(s) where the launcher started " + std::to_string(launched) +
                            ": it is not the launcher's MPI (set SHARDPACK_MPI_LIBRARY to the "
                            "libmpi of the mpirun used)");
  }
  return std::unique_ptr<MpiSession>(new MpiSession(api, rank, size, std::move(library)));
}

MpiSession::~MpiSession() { api_->finalize(); }

int MpiSession::CountFailed(bool ok) {
  int mine = ok ? 0 : 1;
  int failed = 0;
  if (api_->open_mpi) {
    reinterpret_cast<OmpiAllreduce>(api_->allreduce)(&mine, &failed, 1, api_->int_type, api_->sum,
                                                     api_->comm_world);
  } else {
    reinterpret_cast<MpichAllreduce>(api_->allreduce)(&mine, &failed, 1, kMpichInt, kMpichSum,
                                                      kMpichCommWorld);
  }
  return failed;
}

int MpiSession::FromRoot(int value) {
  if (api_->open_mpi) {
    reinterpret_cast<OmpiBcast>(api_->bcast)(&value, 1, api_->int_type, 0, api_->comm_world);
  } else {
    reinterpret_cast<MpichBcast>(api_->bcast)(&value, 1, kMpichInt, 0, kMpichCommWorld);
  }
  return value;
}

}  // namespace shardpack::cli
