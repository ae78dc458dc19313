// RankFromEnvironment (loader.h): the launchers' environment variables, in one place.
#include <cerrno>
#include <cstdlib>
#include <string>

#include "shardpack/loader.h"

namespace shardpack {
namespace {

struct Launcher {
  const char* source;
  const char* rank;
  const char* size;
};

// In order of precedence: torchrun under srun or mpirun still sets its own variables,
// which describe the training processes; srun under mpirun likewise.
constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"pmi", "PMI_RANK", "PMI_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS"},
};

bool ParseInt(const char* text, long* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  *out = std::strtol(text, &end, 10);
  return errno == 0 && *end == '\0';
}

}  // namespace

StatusOr<DistributedRank> RankFromEnvironment() {
  for (const Launcher& l : kLaunchers) {
    const char* rank = std::getenv(l.rank);
    const char* size = std::getenv(l.size);
    if (rank == nullptr && size == nullptr) continue;
    const std::string shown = std::string(l.rank) + "=" + (rank ? rank : "(unset)") + ", " +
                              l.size + "=" + (size ? size : "(unset)");
    long r = 0, n = 0;
    if (!ParseInt(rank, &r) || !ParseInt(size, &n) || n < 1 || n > 1 << 24 || r < 0 || r >= n) {
      return InvalidArgumentError(shown + ": expected integers with 0 <= rank < size");
    }
    return DistributedRank{static_cast<int>(r), static_cast<int>(n), l.source};
  }
  return DistributedRank{};
}

}  // namespace shardpack
