"""shardpack: image folders converted once into shards of pre-decoded pixels, streamed
to training without copies.

    import shardpack
    shardpack.convert("photos/", "data/photos", size=256)
    loader = shardpack.Loader("data/photos", batch_size=256, output_size=224,
                              random_crop=True, flip=True, normalize="imagenet")
    for images, labels in loader:   # torch tensors, N x 3 x 224 x 224 float32
        ...

``shardpack.torch`` has the DataLoader adapter and torchrun's rank and world size.
docs/PYTHON.md documents the API and the lifetime of the batches.
"""

from shardpack import _shardpack
from shardpack._dataset import Dataset, Sample
from shardpack._distributed import DistributedInfo
from shardpack._errors import *  # noqa: F401,F403
from shardpack._errors import __all__ as _errors_all
from shardpack._loader import Batch, Loader, LoaderStats
from shardpack._tools import (
    ConvertSummary,
    MergeSummary,
    VerifyFault,
    VerifyReport,
    convert,
    info,
    merge,
    verify,
)

__version__ = _shardpack.version()

__all__ = [
    "__version__",
    "Batch",
    "ConvertSummary",
    "Dataset",
    "DistributedInfo",
    "Loader",
    "LoaderStats",
    "MergeSummary",
    "Sample",
    "VerifyFault",
    "VerifyReport",
    "convert",
    "info",
    "merge",
    "verify",
] + _errors_all
