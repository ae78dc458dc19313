"""Random access to a dataset's samples (shardpack::Dataset)."""

import json
import os
from typing import NamedTuple

import numpy as np

from shardpack import _shardpack

__all__ = ["Dataset", "Sample"]


class Sample(NamedTuple):
    """One stored sample. ``pixels`` is a read-only HWC uint8 array: for TFRecord
    datasets a view into the shard (no copy) that keeps its dataset open while it lives,
    for LMDB datasets a copy, for datasets of encoded images (``convert(encoding=...)``)
    the image decoded into an array of its own. NumPy refuses writes to it; ``pixels.copy()`` gives an
    array of your own. A write through another framework's view that ignores the flag
    (``torch.from_numpy(sample.pixels)`` then an in-place op) is harmless: the shard is
    mapped copy-on-write, so it changes a private copy of the page, never the file nor
    what other readers see."""

    pixels: np.ndarray
    label: int
    class_text: str
    filename: str


class Dataset:
    """A shardpack dataset opened by its manifest, with random access by global index.

    ``Dataset(path)[i]`` returns a :class:`Sample`; its checksums are checked unless
    ``verify_crc=False``. Opening reads the manifest and the shard indexes, not the
    records. Thread-safe. One Dataset may be shared by several loaders
    (``Loader(dataset, ...)``). Raises ``NotFoundError`` without a manifest and
    ``CorruptionError`` for a damaged record, naming file, record and offset.
    """

    def __init__(self, path, verify_crc=True):
        self._verify_crc = bool(verify_crc)
        self._ds = _shardpack.Dataset(os.fspath(path), self._verify_crc)
        self._manifest = None

    def __len__(self):
        return len(self._ds)

    def __reduce__(self):
        # By path: a process that unpickles it (spawn start method, DataLoader workers)
        # opens the same files; the mappings are per process anyway.
        return (Dataset, (self.path, self._verify_crc))

    def __getitem__(self, index):
        n = len(self._ds)
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"dataset index must be an int, not {type(index).__name__}")
        index = int(index)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"sample {index} is outside [0, {n})")
        pixels, label, class_text, filename = self._ds.get(index, self._verify_crc)
        return Sample(np.asarray(pixels), label, class_text, filename)

    @property
    def path(self):
        """The dataset directory."""
        return self._ds.dir

    @property
    def manifest(self):
        """The manifest as a dict (the contents of manifest.json)."""
        if self._manifest is None:
            self._manifest = json.loads(self._ds.manifest_json)
        return self._manifest

    @property
    def classes(self):
        """Class names; label i is classes[i]."""
        return [c["name"] for c in self.manifest["classes"]]

    def check_intact(self, index):
        """Raises ``ShardpackIOError`` naming the file if the shard holding sample ``index``
        shrank while open. A sample's ``pixels`` view reads the mapped shard: were the
        file truncated meanwhile (the dataset modified while in use), the lost pages read
        as zeros instead of killing the process. Call it after reading a view to know
        that what was read was the file's; ``dataset[i]`` checks what it reads itself."""
        self._ds.check_intact(int(index))

    def locate(self, index):
        """(shard file, record number, byte offset) of sample ``index``; the offset
        is 0 for LMDB shards."""
        return self._ds.locate(int(index))

    def __repr__(self):
        return f"shardpack.Dataset({self.path!r}, {len(self)} samples)"
