"""JAX: the loader's batches as ``jax.Array``, on a device or across a sharding.

    import jax, shardpack.jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(jax.devices(), ("data",))      # every process's devices
    loader = shardpack.jax.Loader("data/", batch_size=128, output_size=224, flip=True,
                                  sharding=NamedSharding(mesh, P("data")))
    for epoch in range(start, 90):
        loader.set_epoch(epoch)
        for images, labels in loader:      # jax.Array, NHWC, split over the mesh
            state = train_step(state, images, labels)

The batches come from :class:`shardpack.Loader` (its C++ threads, shuffles, transforms,
``state_dict()`` and ``load_state_dict()`` for resuming, exactly as in PyTorch code).
Without ``device`` or ``sharding`` each batch is a ``jax.Array`` on the CPU adopting the
ring slot through DLPack, without a copy (the slot is refilled once the array is gone;
keep at most ``prefetch + 1`` batches alive). Placing it on an accelerator or across a
sharding is JAX's own host-to-device transfer. JAX needs to be installed (``pip install
jax``); ``import shardpack`` alone does not import it.
"""

from shardpack import _loader
from shardpack._distributed import DistributedInfo, from_launcher
from shardpack._errors import InvalidArgumentError

__all__ = ["Loader", "DistributedInfo", "distributed_info"]


def _jax():
    try:
        import jax
    except ImportError as e:
        raise ImportError("shardpack.jax needs JAX: pip install jax") from e
    return jax


def distributed_info():
    """This process's (rank, world_size, local_rank): ``jax.process_index()`` and
    ``jax.process_count()`` once ``jax.distributed.initialize()`` has run (call it before
    making a Loader), else the launcher's environment variables (torchrun's RANK and
    WORLD_SIZE, Open MPI's, PMI's, Slurm's: docs/SCALE.md), else (0, 1, 0); the local rank
    is the launcher's. Asking does not start JAX's backend."""
    jax = _jax()
    launcher = from_launcher()
    if jax.distributed.is_initialized():
        return DistributedInfo(jax.process_index(), jax.process_count(), launcher.local_rank)
    return launcher


def _label_sharding(jax, sharding):
    """The labels' sharding for images split by ``sharding``: the same mesh axes over
    the batch dimension."""
    named = jax.sharding.NamedSharding
    if not isinstance(sharding, named):
        raise InvalidArgumentError(
            "sharding must be a jax.sharding.NamedSharding whose first PartitionSpec entry "
            f"splits the batch, not {type(sharding).__name__}"
        )
    spec = tuple(sharding.spec)
    if not spec or spec[0] is None:
        raise InvalidArgumentError(
            f"sharding {sharding.spec} does not split the batch: its PartitionSpec's first "
            'entry names the mesh axes of the batch dimension, e.g. PartitionSpec("data")'
        )
    return named(sharding.mesh, jax.sharding.PartitionSpec(spec[0]))


class Loader(_loader.Loader):
    """A :class:`shardpack.Loader` delivering ``(images, labels)`` as ``jax.Array``:
    images N x H x W x C (``layout`` NHWC unless given), labels int32 (JAX's default
    integer width; int64 with ``jax_enable_x64``).

    Arguments are the Loader's, and:
        device: a ``jax.Device`` to put each batch on (default: leave it on the CPU, where
            it adopts the ring slot without a copy).
        sharding: a ``jax.sharding.NamedSharding`` splitting the batch dimension; each
            process's batch is its part of a global batch of ``batch_size`` x processes
            (``jax.make_array_from_process_local_data``). Not with ``device``.
        rank, world_size: default :func:`distributed_info` (JAX's processes).

    ``state_dict()``, ``load_state_dict()``, ``set_epoch()``, ``remaining()`` and
    ``len()`` are the Loader's.
    """

    def __init__(
        self,
        path,
        batch_size=256,
        *,
        device=None,
        sharding=None,
        rank=None,
        world_size=None,
        **loader_kwargs,
    ):
        jax = _jax()
        if loader_kwargs.get("framework", "jax") != "jax":
            raise InvalidArgumentError("shardpack.jax.Loader delivers jax.Array: leave framework out")
        if device is not None and sharding is not None:
            raise InvalidArgumentError("give device or sharding, not both")
        self._label_sharding = None if sharding is None else _label_sharding(jax, sharding)
        if rank is None and world_size is None:
            rank, world_size, _ = distributed_info()
        elif rank is None or world_size is None:
            raise InvalidArgumentError("give rank and world_size together, or neither")
        self._jax = jax
        self._placement = device
        self._sharding = sharding
        loader_kwargs["framework"] = "jax"
        super().__init__(path, batch_size, rank=rank, world_size=world_size, **loader_kwargs)

    def _convert(self, batch):
        images, labels = super()._convert(batch)
        jax = self._jax
        if self._sharding is not None:
            place = jax.make_array_from_process_local_data
            return place(self._sharding, images), place(self._label_sharding, labels)
        if self._placement is not None:
            return jax.device_put(images, self._placement), jax.device_put(labels, self._placement)
        return images, labels
