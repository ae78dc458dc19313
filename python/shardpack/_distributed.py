"""Which part of the data this process reads: one shape, (rank, world_size, local_rank),
for every framework's ``distributed_info()`` (shardpack.torch, shardpack.tf,
shardpack.jax), each asking its framework first and then the launcher's variables here."""

import os
from typing import NamedTuple

from shardpack import _shardpack

__all__ = ["DistributedInfo", "from_launcher"]


class DistributedInfo(NamedTuple):
    rank: int
    world_size: int
    local_rank: int  # the process's index on its node (its GPU), 0 when unknown


# The node-local rank each launcher sets, by the source rank_from_environment names.
_LOCAL_RANK_VARIABLES = {
    "torchrun": "LOCAL_RANK",
    "openmpi": "OMPI_COMM_WORLD_LOCAL_RANK",
    "pmi": "MPI_LOCALRANKID",
    "slurm": "SLURM_LOCALID",
}


def from_launcher():
    """``DistributedInfo`` from a launcher's environment variables (torchrun's RANK and
    WORLD_SIZE, then Open MPI's, PMI's and Slurm's: the C++ library's
    RankFromEnvironment, docs/SCALE.md), else (0, 1, 0). Raises InvalidArgumentError (a
    ValueError) naming the variables for half a pair or values out of range."""
    rank, world_size, source = _shardpack.rank_from_environment()
    local = int(os.environ.get(_LOCAL_RANK_VARIABLES.get(source, "LOCAL_RANK"), "0"))
    return DistributedInfo(rank, world_size, local)
