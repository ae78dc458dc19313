"""The loader: batches of a dataset in a ring of slots, handed to Python without a copy.

See docs/PYTHON.md for the lifetime rules and docs/LOADER.md for the order promises.
"""

import dataclasses
import importlib
import importlib.util
import numbers
import os
import time

import numpy as np

from shardpack import _shardpack
from shardpack._dataset import Dataset
from shardpack._errors import InvalidArgumentError
from shardpack._util import INT32_MAX, UINT64_MAX, enum_member, integer, parsed_name

__all__ = ["Loader", "Batch", "LoaderStats"]

# DLPack device types (dlpack.h).
_DL_CPU = 1
_DL_CUDA = 2

# torchvision's ImageNet statistics, for normalize="imagenet".
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _parse_device(device):
    """-1 for the host, else the CUDA device number. Accepts "cpu", "cuda", "cuda:N",
    an int (a CUDA device, -1 the host) or a torch.device."""
    if device is None:
        return -1
    if isinstance(device, numbers.Integral):
        return int(device)
    text = str(device)  # torch.device prints as "cpu" / "cuda:0"
    if text == "cpu":
        return -1
    if text == "cuda":
        try:
            import torch

            return torch.cuda.current_device()
        except Exception:  # no torch, or no usable device: let the loader say so
            return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    raise InvalidArgumentError(f'device must be "cpu", "cuda" or "cuda:N", not {device!r}')


def _pair(value, what):
    """(a, b) from a pair or a single number (a square)."""
    if isinstance(value, numbers.Number):
        return value, value
    try:
        a, b = value
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what} must be a number or a pair, not {value!r}") from None
    return a, b


def _stream_handle(stream):
    """DLPack's stream argument for CUDA -> the int the binding takes (None: legacy)."""
    if stream is None:
        return 1
    return int(stream)


@dataclasses.dataclass
class LoaderStats:
    """Counters of a :class:`Loader` since it was made."""

    batches: int
    samples: int
    bytes: int  # pixel bytes copied into the ring
    skipped_corrupt: int  # samples left out by on_corrupt="skip"
    seconds: float  # since the loader was made
    wait_seconds: float  # time the consumer spent waiting for batches
    mean_ready_batches: float  # batches ready when one was asked for, averaged
    io: str = ""  # the I/O path and why ("mapped (dataset ...)", "read-ahead: ...")
    bytes_read: int = 0  # read-ahead path: bytes read from storage
    # read-ahead path: read units (batches; a block shuffle's windows) found in the page
    # cache whole
    batches_from_page_cache: int = 0
    # mapped path: bytes found outside the page cache after a wait for the disk, read ahead
    bytes_found_missing: int = 0

    @property
    def samples_per_second(self):
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def wait_fraction(self):
        """Share of the time spent waiting for data (0..1)."""
        return self.wait_seconds / self.seconds if self.seconds > 0 else 0.0

    def __str__(self):
        s = self.seconds if self.seconds > 0 else 1e-9
        return (
            f"{self.batches} batches, {self.samples / s:.0f} samples/s, "
            f"{self.bytes / s / 1e9:.2f} GB/s, waited {100 * self.wait_seconds / s:.1f}% of "
            f"the time ({self.wait_seconds:.2f} s), {self.mean_ready_batches:.2f} batches "
            f"ready on average, {self.skipped_corrupt} corrupt samples skipped"
        )


class Batch:
    """One batch of the ring, exported through DLPack without a copy.

    ``torch.from_dlpack(batch)`` and ``np.from_dlpack(batch)`` (host path) adopt the
    slot's memory; the slot stays held until this object and every array made from it
    are gone, then it is refilled. Images are N x C x H x W (the loader's ``layout``,
    default "NCHW") or N x H x W x C ("NHWC"), uint8 or float32/float16, strided over the
    slot's memory: uint8 samples are stored HWC, so uint8 NCHW is what PyTorch calls
    channels_last, and normalised floats are stored CHW. On the GPU path ``__dlpack__(stream=s)``
    makes ``s`` wait for the batch's copy (no host synchronisation), and the slot's
    reuse waits for the work queued on ``s`` until the batch is released.
    """

    __slots__ = ("_b", "_nchw")

    def __init__(self, handle, nchw=True):
        self._b = handle
        self._nchw = nchw

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self._b.device >= 0 and stream != -1:
            self._b.wait_on(_stream_handle(stream))
        return self._b.images(self._nchw).__dlpack__(
            max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self):
        if self._b.device >= 0:
            return (_DL_CUDA, self._b.device)
        return (_DL_CPU, 0)

    def numpy(self):
        """The images as a NumPy array sharing the slot (host path only)."""
        if self._b.device >= 0:
            raise InvalidArgumentError("numpy(): the batch is on a CUDA device; use torch.from_dlpack")
        return np.from_dlpack(self)

    @property
    def labels(self):
        """int64 labels, a new array (holding it holds no slot)."""
        return self._b.labels()

    @property
    def indices(self):
        """uint64 global sample indices, a new array."""
        return self._b.indices()

    @property
    def epoch(self):
        return self._b.epoch

    @property
    def index(self):
        """The batch's index within its epoch."""
        return self._b.index

    @property
    def size(self):
        """Samples in the batch (N)."""
        return self._b.size

    @property
    def valid(self):
        """Samples that are not tail="pad" fill: the first ``valid`` ones."""
        return self._b.valid

    @property
    def device(self):
        """ "cpu" or "cuda:N"."""
        return "cpu" if self._b.device < 0 else f"cuda:{self._b.device}"

    @property
    def data_address(self):
        """Address of the images in the ring slot (device memory on the GPU path)."""
        return self._b.data_address

    def __len__(self):
        return self._b.size

    def __repr__(self):
        return (
            f"shardpack.Batch(epoch={self.epoch}, index={self.index}, size={self.size}, "
            f"device={self.device!r})"
        )


# The frameworks a Loader delivers to, in the order framework="auto" tries them, with the
# module each imports and what to install for it.
_FRAMEWORKS = {
    "torch": ("torch", "torch"),
    "tensorflow": ("tensorflow", "tensorflow-cpu (or tensorflow)"),
    "jax": ("jax.numpy", "jax"),
}


def _import_framework(name):
    """The module batches are made with for framework ``name``, or ImportError naming
    the package to install."""
    module, package = _FRAMEWORKS[name]
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f'shardpack.Loader(framework="{name}") needs {name}: pip install {package}, '
            'or pass framework="numpy"'
        ) from e


def _first_framework():
    """(name, module) of the first of torch, TensorFlow and JAX that imports here, else
    ("numpy", None): what framework="auto" picks. A framework that is not installed is
    not imported (find_spec), so the check costs only the chosen import."""
    for name, (module, _) in _FRAMEWORKS.items():
        if importlib.util.find_spec(module.split(".")[0]) is None:
            continue
        try:
            return name, _import_framework(name)
        except ImportError:
            continue
    return "numpy", None


class Loader:
    """Streams a dataset in batches, shuffled, prefetched by C++ worker threads into a
    ring of ``prefetch + 2`` slots, and hands each batch over without a copy.

    Iterating yields ``(images, labels)``: torch tensors (``framework="torch"``; on
    ``device="cuda:N"`` already on the device, PyTorch's current stream made to wait for
    the copy), TensorFlow tensors (``"tensorflow"``), ``jax.Array`` (``"jax"``; see
    ``shardpack.jax.Loader`` for placement) or NumPy arrays (``"numpy"``); all but torch
    host only. The default, ``framework="auto"``, takes the first of torch, TensorFlow and
    JAX that imports, else NumPy; ``repr(loader)`` and ``loader.framework`` say which.
    Images are N x C x H x W (``layout="NCHW"``, the default for torch and NumPy, for every
    dtype) or N x H x W x C (``layout="NHWC"``, the default for TensorFlow and JAX): uint8, or float32/float16 when ``normalize`` or a float
    ``dtype`` is given; views of the ring slot whose strides follow its memory (uint8
    samples are stored HWC: uint8 NCHW is PyTorch's channels_last, which convolutions
    take as it is; ``.contiguous()`` makes a packed copy). Labels are int64 (copies). ``batches()`` yields the
    :class:`Batch` objects themselves (for DLPack consumers and ``valid``/``indices``).

    Lifetime: an images tensor is a view of its ring slot; the slot is refilled only
    after every view of it is gone. Keep at most ``prefetch + 1`` batches alive; needing
    a slot still held raises :class:`FailedPreconditionError` rather than waiting
    forever.

    Epochs, as with a PyTorch DataLoader: every ``for`` loop (every ``iter(loader)``)
    is a new pass, the next epoch, also after a ``break`` out of the last one; the first
    loop runs the epoch the loader was made or restored at. Going on with an interrupted
    epoch is explicit: ``loader.remaining()`` iterates the rest of the current epoch.
    ``set_epoch(e)`` moves to the start of epoch ``e`` for the next loop, except that it
    keeps a position the loader was created or restored at in that same epoch (so
    ``load_state_dict`` followed by the usual ``for epoch in range(start, n):
    loader.set_epoch(epoch)`` resumes mid-epoch).

    A Loader cannot be pickled (it holds worker threads and its ring); pickle its
    :class:`Dataset` or the path and make a Loader in the other process.

    Arguments (the C++ ``LoaderOptions``, docs/PYTHON.md has the table):
        path: dataset directory, or a :class:`Dataset` to share.
        batch_size: samples per batch (default 256).
        shuffle: "none", "global" (default) or "block" (``block_size``,
            ``block_window``).
        seed: seed of the shuffles and of the random transforms (default 0).
        num_threads: worker threads (0: all cores, at most 8).
        prefetch: batches prepared ahead (default 2; the ring has prefetch + 2 slots).
        io: how the shards are read: "auto" (default: the mapping while the dataset
            fits in 75% of what the page cache may hold for this process, its cgroup's
            memory limit included, else read-ahead), "mapped" or "readahead" (the
            epoch's next records read ahead, ``io_depth`` reads in flight, into buffers
            allocated once, bypassing the page cache). The batches are the same either
            way; ``loader.stats().io`` says which path and why (docs/LOADER.md).
        read_ahead: mapped path: bytes of the epoch's next samples the kernel is asked to
            read into the page cache ahead (default 128 MiB; 0: off).
        huge_pages: mapped path with ``read_ahead``: "on" reads the pages the cache lacks
            2 MiB at a time (the shards advised MADV_HUGEPAGE, 8 threads mapping the
            records ahead), so that the next process maps the cache in 2 MiB entries and
            its first epoch runs about as fast as its later ones; "off" hints them in
            4 KiB pages; "auto" (default) is "on" where the dataset fits in memory and
            the host of this virtual machine does not take free memory back (virtio
            balloon free page reporting). Same batches either way (docs/LOADER.md).
        io_buffer: read-ahead path: bytes of the buffers the records are read into
            (default 0: automatic, 384 MiB, or three windows of blocks under a block
            shuffle, at most 1 GiB; at least a batch).
        io_depth: read-ahead path: reads in flight (default 32).
        max_memory: the most bytes the loader's buffers may take (its ring of
            ``prefetch + 2`` batches of the output shape, its workers' scratch, the
            read-ahead buffers; docs/LOADER.md has the formula). 0 (default): 7/8 of
            what this process may hold (MemAvailable, and its cgroup's memory limit).
            More raises ResourceExhaustedError, naming both numbers, before anything
            is allocated.
        device: "cpu" (default), "cuda", "cuda:N", an int or a torch.device.
        rank, world_size: this process's part of each epoch (defaults 0, 1); see
            ``shardpack.torch.distributed_info()`` for torchrun.
        drop_last: drop the last, short batch (and cut the sample count to a multiple
            of world_size); same as ``tail="drop"``.
        tail: "partial" (default: the short batch is delivered), "drop" or "pad".
        output_size: (height, width) or an int; default: the dataset's fixed shape.
        transform: "none", "center_crop", "random_resized_crop" or "random_crop";
            default "random_crop" if ``random_crop`` else "center_crop" when
            ``output_size`` is given, else "none".
        random_crop: a random output_size window of each sample (fixed-size data).
        flip: mirror each sample left-right with probability 1/2.
        resize_shorter: center_crop's shorter side before cropping (0: 8/7 of output).
        scale, ratio: random_resized_crop's area fraction and aspect-ratio ranges.
        filter: "area", "bilinear" (default), "bicubic" or "lanczos3" (also: "lanczos").
        decode_scaled: JPEG datasets: decode a sample whose transform shrinks it to half
            or less at 1/2, 1/4 or 1/8 size (DCT scaling) before resampling (default
            True; False decodes every sample at full size).
        normalize: (mean, std) per channel in 0..1 units, or "imagenet"; output is
            float (``dtype`` float32 unless float16 is asked for), stored CHW.
        dtype: "uint8" (default without normalize), "float32" or "float16"; a float
            dtype without ``normalize`` scales to 0..1.
        verify_crc: check every record's checksums while copying (default True).
        on_corrupt: "fail" (default: the batch raises CorruptionError) or "skip"
            (the sample is left out and counted in ``stats().skipped_corrupt``).
        framework: "auto" (default: the first of torch, TensorFlow and JAX that
            imports, else "numpy"; "torch" for a GPU ``device``), "torch",
            "tensorflow", "jax" or "numpy".
        layout: "NCHW" or "NHWC", for every dtype (default: "NHWC" for TensorFlow and
            JAX, "NCHW" otherwise); never a copy, except for TensorFlow, which adopts
            only row-major memory (uint8 NHWC and float NCHW are; the other two are
            copied once).
        state: a ``state_dict()`` to start from.

    Errors raise the shardpack exception of the C++ status (``CorruptionError`` naming
    file, record and offset; ``InvalidArgumentError`` for bad options; ...). After a
    data error the loader can only be given a new epoch (``set_epoch``). One thread
    iterates a loader; several loaders may run in one process. Ctrl-C while waiting
    for a batch raises KeyboardInterrupt; the batch is kept for the next call.
    """

    def __init__(
        self,
        path,
        batch_size=256,
        *,
        shuffle="global",
        block_size=64,
        block_window=16,
        seed=0,
        num_threads=0,
        prefetch=2,
        read_ahead=128 << 20,
        io="auto",
        huge_pages="auto",
        io_buffer=0,
        io_depth=32,
        max_memory=0,
        device="cpu",
        rank=0,
        world_size=1,
        drop_last=False,
        tail=None,
        output_size=None,
        transform=None,
        random_crop=False,
        flip=False,
        resize_shorter=0,
        scale=(0.08, 1.0),
        ratio=(3.0 / 4.0, 4.0 / 3.0),
        filter="bilinear",
        decode_scaled=True,
        normalize=None,
        dtype=None,
        verify_crc=True,
        on_corrupt="fail",
        framework="auto",
        layout=None,
        state=None,
    ):
        if isinstance(path, Dataset):
            self._dataset = path
        else:
            self._dataset = Dataset(os.fspath(path), verify_crc=verify_crc)

        o = _shardpack.LoaderOptions()
        o.batch_size = integer(batch_size, "batch_size", 1, INT32_MAX)
        o.shuffle = enum_member(_shardpack.ShuffleMode, shuffle, "shuffle")
        o.block_size = integer(block_size, "block_size", 1, INT32_MAX)
        o.block_window = integer(block_window, "block_window", 1, INT32_MAX)
        o.seed = integer(seed, "seed", 0, UINT64_MAX)
        o.num_threads = integer(num_threads, "num_threads", 0, _shardpack.MAX_THREADS)
        o.prefetch = integer(prefetch, "prefetch", 1, _shardpack.MAX_PREFETCH)
        o.read_ahead_bytes = integer(read_ahead, "read_ahead", 0, UINT64_MAX)
        o.io = enum_member(_shardpack.IoPath, io, "io")
        o.huge_pages = enum_member(_shardpack.HugePages, huge_pages, "huge_pages")
        o.io_depth = integer(io_depth, "io_depth", 1, _shardpack.MAX_IO_DEPTH)
        o.io_buffer_bytes = integer(io_buffer, "io_buffer", 0, UINT64_MAX)
        o.max_memory_bytes = integer(max_memory, "max_memory", 0, UINT64_MAX)
        o.device = _parse_device(device)
        o.world_size = integer(world_size, "world_size", 1, INT32_MAX)
        o.rank = integer(rank, "rank", 0, o.world_size - 1)

        if tail is None:
            tail = "drop" if drop_last else "partial"
        elif drop_last and tail != "drop":
            raise InvalidArgumentError(f"drop_last=True contradicts tail={tail!r}")
        o.tail = enum_member(_shardpack.Tail, tail, "tail")

        if output_size is not None:
            height, width = _pair(output_size, "output_size")
            o.output_height = integer(height, "output_size height", 1, _shardpack.MAX_IMAGE_SIDE)
            o.output_width = integer(width, "output_size width", 1, _shardpack.MAX_IMAGE_SIDE)
        if transform is None:
            if random_crop:
                transform = "random_crop"
            elif output_size is not None:
                transform = "center_crop"
            else:
                transform = "none"
        elif random_crop and transform != "random_crop":
            raise InvalidArgumentError(f"random_crop=True contradicts transform={transform!r}")
        o.transform = enum_member(_shardpack.Transform, transform, "transform")
        o.random_flip = bool(flip)
        o.resize_shorter = integer(resize_shorter, "resize_shorter", 0, _shardpack.MAX_IMAGE_SIDE)
        o.rrc_scale_min, o.rrc_scale_max = (float(v) for v in _pair(scale, "scale"))
        o.rrc_ratio_min, o.rrc_ratio_max = (float(v) for v in _pair(ratio, "ratio"))
        o.filter = parsed_name(_shardpack.parse_resize_filter, filter, "filter")
        o.decode_scaled = bool(decode_scaled)

        if dtype is None:
            dtype = "uint8" if normalize is None else "float32"
        o.output_type = enum_member(_shardpack.OutputType, dtype, "dtype")
        if normalize is not None and dtype == "uint8":
            raise InvalidArgumentError('normalize needs dtype="float32" or "float16"')
        if normalize is None:
            mean, std = (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)  # a float dtype alone: 0..1
        elif isinstance(normalize, str):
            if normalize != "imagenet":
                raise InvalidArgumentError(
                    f'normalize must be "imagenet" (the only preset) or (mean, std) in 0..1 '
                    f"units, not {normalize!r}"
                )
            mean, std = IMAGENET_MEAN, IMAGENET_STD
        else:
            try:
                mean, std = normalize
            except (TypeError, ValueError):
                raise InvalidArgumentError(
                    f'normalize must be "imagenet" or (mean, std), not {normalize!r}'
                ) from None
        o.mean = [float(v) for v in _per_channel(mean, "mean")]
        o.std = [float(v) for v in _per_channel(std, "std")]

        o.verify_crc = bool(verify_crc)
        o.on_corrupt = enum_member(_shardpack.OnCorrupt, on_corrupt, "on_corrupt")

        if framework not in ("auto", "numpy", *_FRAMEWORKS):
            raise InvalidArgumentError(
                'framework must be "auto", "torch", "tensorflow", "jax" or "numpy", '
                f"not {framework!r}"
            )
        if framework == "auto" and o.device >= 0:
            framework = "torch"
            if importlib.util.find_spec("torch") is None:
                raise ImportError(
                    f"shardpack.Loader(device={device!r}) delivers torch tensors on the GPU "
                    "and PyTorch is not installed: install torch (pip install torch)"
                )
        if framework == "auto":
            framework, self._module = _first_framework()
        elif framework == "numpy":
            self._module = None
        else:
            self._module = _import_framework(framework)
        if framework != "torch" and o.device >= 0:
            raise InvalidArgumentError(
                f'framework="{framework}" takes host batches: use device="cpu" (only '
                "torch batches are delivered on the GPU; shardpack.jax places JAX batches "
                "on a device)"
            )
        self._framework = framework
        if layout is None:
            layout = "NHWC" if framework in ("tensorflow", "jax") else "NCHW"
        if layout not in ("NCHW", "NHWC"):
            raise InvalidArgumentError(f'layout must be "NCHW" or "NHWC", not {layout!r}')
        self._nchw = layout == "NCHW"
        self._options = o
        self._core = None
        self._retired = None  # the summed stats of the C++ loaders this one replaced
        self._created = time.monotonic()
        self._make(state)

    def _make(self, state):
        """(Re)creates the C++ loader at ``state`` (a state_dict, its text, or None)."""
        if isinstance(state, dict):
            if not isinstance(state.get("loader_state"), str):
                raise InvalidArgumentError(
                    "state must be a Loader.state_dict() (a dict holding the text "
                    f"'loader_state') or that text, not a dict with keys {sorted(state)}"
                )
            state = state["loader_state"]
        elif state is not None and not isinstance(state, str):
            raise InvalidArgumentError(
                f"state must be a Loader.state_dict() or its text, not {type(state).__name__}"
            )
        core = _shardpack.Loader(self._dataset._ds, self._options, state or "")
        if self._core is not None:
            # Summed as they retire: a loader repositioned every batch keeps one record.
            parts = [p for p in (self._retired, self._core.stats()) if p is not None]
            self._retired = _summed(parts, 0.0)
        # The old ring goes once the batches still held from it are dropped.
        self._core = core
        self._exhausted = False
        self._touched = False
        self._generation = getattr(self, "_generation", 0) + 1

    def _start_epoch(self, epoch):
        """Moves to batch 0 of ``epoch``, dropping what was prefetched. Batches still held
        from before stay valid: the ring starts the new epoch in the slot after the last
        batch handed out."""
        self._core.start_epoch(epoch)
        self._exhausted = False
        self._touched = False
        self._generation += 1

    # Iteration.

    def __iter__(self):
        # A new pass is a new epoch once this one has handed out a batch.
        if self._touched or self._exhausted:
            self._start_epoch(self.epoch + 1)
        return _EpochIterator(self)

    def remaining(self):
        """Iterates the rest of the current epoch, ``(images, labels)`` as iterating
        the loader does, without starting a new one: to go on after a ``break``."""
        while True:
            try:
                batch = self.next_batch()
            except StopIteration:
                return
            yield self._convert(batch)

    def __reduce__(self):
        raise TypeError(
            "a shardpack.Loader cannot be pickled: it holds C++ worker threads and a ring "
            "of (pinned) buffers, which cannot move to another process. Pickle its Dataset "
            "(loader.dataset) or the path and make a Loader there; with a torch DataLoader "
            "keep num_workers=0 (the loader's own threads do the work)"
        )

    def __next__(self):
        return self._convert(self.next_batch())

    def next_batch(self):
        """The next :class:`Batch` of the epoch; StopIteration at its end."""
        try:
            handle = self._core.next()
        except StopIteration:
            self._exhausted = True
            raise
        self._touched = True
        return Batch(handle, self._nchw)

    def batches(self):
        """Iterates an epoch as :class:`Batch` objects (same epoch rules as iterating
        the loader: a new call is a new epoch once a batch was handed out)."""
        if self._touched or self._exhausted:
            self._start_epoch(self.epoch + 1)
        while True:
            try:
                yield self.next_batch()
            except StopIteration:
                return

    def _convert(self, batch):
        if self._framework == "numpy":
            return batch.numpy(), batch.labels
        if self._framework == "jax":
            jnp = self._module
            return jnp.from_dlpack(batch), jnp.asarray(batch.labels)
        if self._framework == "tensorflow":
            tf = self._module
            images = batch.numpy()
            # TensorFlow adopts only row-major memory: uint8 NHWC and float NCHW are
            # (the slot's own order); the other two layouts are copied.
            if images.flags.c_contiguous:
                images = tf.experimental.dlpack.from_dlpack(batch.__dlpack__())
            else:
                images = tf.convert_to_tensor(np.ascontiguousarray(images))
            return images, tf.convert_to_tensor(batch.labels)
        torch = self._module
        images = torch.from_dlpack(batch)
        labels = torch.from_numpy(batch.labels)
        if batch._b.device >= 0:
            # From pinned memory, so that the copy is queued without a host sync.
            labels = labels.pin_memory().to(images.device, non_blocking=True)
        return images, labels

    def __len__(self):
        """Batches per epoch for this rank (the whole epoch, also after a resume)."""
        return self._core.batches_per_epoch

    # Epochs and state.

    def set_epoch(self, epoch):
        """Moves to the start of ``epoch``, dropping what was prefetched; keeps a
        position the loader was created or restored at in that epoch (see the class
        doc)."""
        epoch = integer(epoch, "epoch", 0, UINT64_MAX)
        if not self._touched and not self._exhausted and self.epoch == epoch:
            return
        self._start_epoch(epoch)

    @property
    def epoch(self):
        """The epoch the loader is in."""
        return _shardpack.parse_loader_state(self._core.state())["epoch"]

    def state_dict(self):
        """Where the loader stands, as a small dict to save with a checkpoint:
        ``{"loader_state": "<LoaderState::ToString()>", "epoch": e, "next_batch": b}``
        (the last two for reading; ``load_state_dict`` uses the text). The batch it
        names is the one the next iteration step returns."""
        text = self._core.state()
        parsed = _shardpack.parse_loader_state(text)
        return {"loader_state": text, "epoch": parsed["epoch"], "next_batch": parsed["next_batch"]}

    def load_state_dict(self, state):
        """Restarts at ``state`` (from ``state_dict()``, this or an earlier run's, or
        its text): the following batches are byte for byte those an uninterrupted run
        would have delivered from there. A state made for another seed, sample count,
        batch size, shuffle mode or rank layout raises InvalidArgumentError. Batches
        still held from before stay valid until dropped."""
        self._make(state)

    def stats(self):
        """A :class:`LoaderStats` of counters since this loader was made (across
        epochs and ``load_state_dict``); ``str(stats)`` is a one-line summary."""
        parts = [p for p in (self._retired, self._core.stats()) if p is not None]
        return _summed(parts, time.monotonic() - self._created)

    def epoch_order(self, epoch):
        """The global sample indices this rank reads in ``epoch``, in order (uint64),
        without tail="pad" fill: what iterating delivers, as a pure function of the
        options."""
        return self._core.epoch_order(int(epoch))

    @property
    def dataset(self):
        return self._dataset

    @property
    def batch_size(self):
        return self._options.batch_size

    @property
    def prefetch(self):
        return self._options.prefetch

    @property
    def device(self):
        d = self._options.device
        return "cpu" if d < 0 else f"cuda:{d}"

    @property
    def framework(self):
        """What the batches are: "torch", "tensorflow", "jax" or "numpy"
        (``framework="auto"`` resolved)."""
        return self._framework

    def __repr__(self):
        return (
            f"shardpack.Loader({self._dataset.path!r}, batch_size={self.batch_size}, "
            f"device={self.device!r}, framework={self._framework!r}, "
            f"{len(self)} batches per epoch)"
        )


class _EpochIterator:
    """One pass of a Loader (what ``iter(loader)`` returns): ``(images, labels)`` until
    the epoch ends. It stops early once the loader has moved on (a newer pass,
    ``set_epoch`` or ``load_state_dict``), never reaching into another epoch."""

    def __init__(self, loader):
        self._loader = loader
        self._generation = loader._generation

    def __iter__(self):
        return self

    def __next__(self):
        if self._loader._generation != self._generation:
            raise StopIteration
        return self._loader._convert(self._loader.next_batch())


def _summed(parts, seconds):
    """One LoaderStats of the counters of `parts` (C++ loader stats or LoaderStats), the
    ready-batch mean weighted by batches, the io path of the last."""
    batches = sum(p.batches for p in parts)
    ready = sum(p.mean_ready_batches * p.batches for p in parts)
    return LoaderStats(
        batches=batches,
        samples=sum(p.samples for p in parts),
        bytes=sum(p.bytes for p in parts),
        skipped_corrupt=sum(p.skipped_corrupt for p in parts),
        seconds=seconds,
        wait_seconds=sum(p.wait_seconds for p in parts),
        mean_ready_batches=ready / batches if batches else 0.0,
        io=parts[-1].io,
        bytes_read=sum(p.bytes_read for p in parts),
        batches_from_page_cache=sum(p.batches_from_page_cache for p in parts),
        bytes_found_missing=sum(p.bytes_found_missing for p in parts),
    )


def _per_channel(values, what):
    """Three per-channel floats from one number or a sequence of 1 or 3."""
    if isinstance(values, numbers.Number):
        return (values,) * 3
    values = tuple(values)
    if len(values) == 1:
        return values * 3
    if len(values) != 3:
        raise InvalidArgumentError(f"{what} needs 1 or 3 values, not {len(values)}")
    return values
