"""PyTorch helpers: a DataLoader adapter and torchrun's rank and world size.

``shardpack.Loader`` already batches, shuffles, prefetches and shards by rank, so it
needs no ``DataLoader``. For code that insists on one::

    ds = shardpack.torch.IterableDataset("data/caltech256", batch_size=256, seed=0)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    for epoch in range(90):
        ds.set_epoch(epoch)
        for images, labels in dl:
            ...

``batch_size=None`` passes the loader's batches through unchanged (no collation, no
copy); ``num_workers=0`` because the loader's C++ threads do the work, and a worker
process would hold a second copy of the ring. Do not set ``pin_memory=True``: on the
GPU path the batches are already on the device, on the host path it would copy.
"""

import torch
import torch.utils.data

from shardpack._distributed import DistributedInfo, from_launcher
from shardpack._errors import InvalidArgumentError
from shardpack._loader import Loader

__all__ = ["IterableDataset", "DistributedInfo", "distributed_info"]


def distributed_info():
    """This process's (rank, world_size, local_rank): torch.distributed's when a
    process group is initialised, else the launcher's environment variables (torchrun's
    RANK and WORLD_SIZE, then Open MPI's, PMI's and Slurm's: the C++ library's
    RankFromEnvironment, docs/SCALE.md), else (0, 1, 0). Pass ``rank`` and
    ``world_size`` to :class:`shardpack.Loader` and ``device=f"cuda:{local_rank}"`` on
    GPUs. Raises ValueError for half a pair of variables or values out of range."""
    # InvalidArgumentError, a ValueError, names the variables when they are wrong.
    launcher = from_launcher()
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return DistributedInfo(
            torch.distributed.get_rank(), torch.distributed.get_world_size(), launcher.local_rank
        )
    return launcher


def _collated_by_dataloader():
    """True when a torch DataLoader with a batch_size (automatic batching) is what
    iterates the dataset: its fetcher is the caller of __iter__."""
    import sys

    try:
        from torch.utils.data._utils.fetch import _IterableDatasetFetcher
    except ImportError:  # another torch layout: nothing to check against
        return False
    frame = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            return False
        owner = frame.f_locals.get("self")
        if isinstance(owner, _IterableDatasetFetcher):
            return bool(getattr(owner, "auto_collation", False))
        frame = frame.f_back
    return False


class IterableDataset(torch.utils.data.IterableDataset):
    """A ``torch.utils.data.IterableDataset`` whose items are whole batches
    ``(images, labels)`` of a :class:`shardpack.Loader` made with the same arguments
    (``framework`` is always "torch"). Use it with
    ``DataLoader(ds, batch_size=None, num_workers=0)``: a DataLoader with a batch_size
    (which would stack batches into one more dimension) raises InvalidArgumentError
    saying so, and iterating it inside a DataLoader worker process raises RuntimeError.
    It pickles without its loader (the copy makes its own).

    The loader is made on first use (``ds.loader``); ``set_epoch``, ``state_dict``
    and ``load_state_dict`` are the loader's, and ``len(ds)`` is its batches per epoch.
    """

    def __init__(self, path, **loader_kwargs):
        super().__init__()
        if loader_kwargs.get("framework", "torch") != "torch":
            raise InvalidArgumentError("shardpack.torch.IterableDataset yields torch tensors")
        loader_kwargs["framework"] = "torch"
        self._path = path
        self._kwargs = loader_kwargs
        self._loader = None

    @property
    def loader(self):
        """The underlying :class:`shardpack.Loader` (made on first use)."""
        if self._loader is None:
            self._loader = Loader(self._path, **self._kwargs)
        return self._loader

    def __iter__(self):
        if torch.utils.data.get_worker_info() is not None:
            raise RuntimeError(
                "shardpack.torch.IterableDataset runs in the main process: use "
                "DataLoader(dataset, batch_size=None, num_workers=0)"
            )
        if _collated_by_dataloader():
            raise InvalidArgumentError(
                "shardpack.torch.IterableDataset yields whole batches: wrap it with "
                "DataLoader(dataset, batch_size=None, num_workers=0) (a DataLoader batch_size "
                "would stack batch_size of them into one more leading dimension); the batch "
                "size is the dataset's batch_size= argument"
            )
        return iter(self.loader)

    def __getstate__(self):
        # The Loader stays behind (it cannot be pickled); the copy makes its own.
        state = dict(self.__dict__)
        state["_loader"] = None
        return state

    def __len__(self):
        return len(self.loader)

    def set_epoch(self, epoch):
        self.loader.set_epoch(epoch)

    def state_dict(self):
        return self.loader.state_dict()

    def load_state_dict(self, state):
        self.loader.load_state_dict(state)
