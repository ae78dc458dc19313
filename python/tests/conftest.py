"""Fixtures: image folders made here with NumPy and Pillow, converted with
shardpack.convert. Nothing is downloaded or read from the repository's build."""

import os
import shutil
import sys

# Test the installed package (pip install ./python), not the source folder python/shardpack,
# which has no extension module: `python -m pytest` run from python/ would put it first.
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _PACKAGE_ROOT]

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

import shardpack  # noqa: E402

# Four classes of distinct colours (learnable by a tiny network), with noise.
CLASS_COLOURS = {
    "apple": (200, 30, 30),
    "grass": (30, 180, 40),
    "sky": (40, 60, 210),
    "sand": (220, 200, 90),
}
PER_CLASS = 15


def make_image_folder(root, per_class=PER_CLASS, seed=0, broken=True):
    """SRC/<class>/<image> with JPEGs and PNGs of varying size; plus one file that is
    not an image (rejected by convert). Returns the number of real images."""
    rng = np.random.default_rng(seed)
    count = 0
    for name, colour in CLASS_COLOURS.items():
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for i in range(per_class):
            h, w = int(rng.integers(40, 72)), int(rng.integers(40, 72))
            noise = rng.normal(0, 25, size=(h, w, 3))
            pixels = np.clip(np.array(colour, dtype=np.float64) + noise, 0, 255)
            image = Image.fromarray(pixels.astype(np.uint8), "RGB")
            if i % 3 == 0:
                image.save(os.path.join(root, name, f"{i:03d}.png"))
            else:
                image.save(os.path.join(root, name, f"{i:03d}.jpg"), quality=90)
            count += 1
    if broken:
        with open(os.path.join(root, "apple", "broken.jpg"), "wb") as f:
            f.write(b"this is not a JPEG file")
    return count


@pytest.fixture(scope="session")
def image_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    make_image_folder(str(root))
    return str(root)


@pytest.fixture(scope="session")
def dataset_path(image_folder, tmp_path_factory):
    """A fixed-size (32x32 RGB) TFRecord dataset of 60 samples in 6 shards, shuffled."""
    dst = str(tmp_path_factory.mktemp("ds") / "tfrecord")
    shardpack.convert(image_folder, dst, size=32, shard_records=10, shuffle=True, seed=7)
    return dst


@pytest.fixture(scope="session")
def lmdb_path(image_folder, tmp_path_factory):
    dst = str(tmp_path_factory.mktemp("ds") / "lmdb")
    shardpack.convert(image_folder, dst, size=32, format="lmdb", shard_records=25)
    return dst


@pytest.fixture(scope="session")
def variable_path(image_folder, tmp_path_factory):
    """A variable-size dataset (longer side at most 64)."""
    dst = str(tmp_path_factory.mktemp("ds") / "variable")
    shardpack.convert(image_folder, dst, max_side=64)
    return dst


@pytest.fixture
def dataset_copy(dataset_path, tmp_path):
    """A private copy of dataset_path that a test may damage."""
    dst = str(tmp_path / "copy")
    shutil.copytree(dataset_path, dst)
    return dst


def collect(loader, limit=None):
    """(indices, labels, images) of the rest of the epoch, as NumPy copies."""
    indices, labels, images = [], [], []
    for n, batch in enumerate(loader.batches()):
        if limit is not None and n == limit:
            break
        indices.append(batch.indices)
        labels.append(batch.labels)
        images.append(np.from_dlpack(batch).copy())
    if not indices:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64), []
    return np.concatenate(indices), np.concatenate(labels), images


def pytest_collection_modifyitems(items):
    """Runs test_jax.py last: JAX's threads make a later fork (test_torch.py's DataLoader
    workers) unsafe."""
    items.sort(key=lambda item: item.path.name == "test_jax.py")
