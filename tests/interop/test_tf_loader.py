"""shardpack.Loader(framework="tensorflow") against the real TensorFlow: tf.Tensor batches
with the samples and order the loader gives PyTorch code, adopted through DLPack without a
copy where TensorFlow can (row-major memory) and copied once where it cannot; and
framework="auto" picks TensorFlow where torch is missing (as in this environment)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import wire

shardpack = pytest.importorskip(
    "shardpack", reason="the binding is not installed here: run bash scripts/install-python.sh, "
    "then bash scripts/install-interop.sh")
tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cli):
    """2 classes of 12x12 noise images, 20 each, converted."""
    root = tmp_path_factory.mktemp("noise")
    rng = np.random.default_rng(11)
    for label in range(2):
        (root / f"c{label}").mkdir()
        for k in range(20):
            wire.write_png(root / f"c{label}" / f"{k:02d}.png",
                           rng.integers(0, 256, (12, 12, 3), dtype=np.uint8))
    dst = tmp_path_factory.mktemp("ds") / "noise"
    cli("convert", root, dst, "--size", "12x12", "--quiet")
    return str(dst)


def numpy_epochs(path, epochs, **kwargs):
    loader = shardpack.Loader(path, framework="numpy", **kwargs)
    return [(np.array(x), y) for _ in range(epochs) for x, y in loader]


@pytest.mark.parametrize("kwargs", [
    dict(),                                                   # uint8 NHWC (the default)
    dict(layout="NCHW"),                                      # uint8 stored HWC: copied
    dict(normalize="imagenet", layout="NCHW"),                # float stored CHW
    dict(normalize="imagenet"),                               # float NHWC: copied
])
def test_tensorflow_batches_equal_the_numpy_paths_for_the_same_seed(dataset, kwargs):
    loader = shardpack.Loader(dataset, 8, seed=4, flip=True, framework="tensorflow", **kwargs)
    assert loader.framework == "tensorflow" and "framework='tensorflow'" in repr(loader)
    got = []
    for _ in range(2):
        for images, labels in loader:
            assert isinstance(images, tf.Tensor) and labels.dtype == tf.int64
            got.append((images.numpy(), labels.numpy()))
    want = numpy_epochs(dataset, 2, batch_size=8, seed=4, flip=True,
                        layout=kwargs.get("layout", "NHWC"),
                        normalize=kwargs.get("normalize"))
    assert len(got) == len(want) == 10
    for (gx, gy), (wx, wy) in zip(got, want):
        assert gx.shape == wx.shape and np.array_equal(gx, wx) and np.array_equal(gy, wy)


def test_row_major_batches_adopt_the_ring_slot_and_the_others_are_copies(dataset):
    # The ring has prefetch + 2 = 3 slots. Three adopted batches alive hold all of them,
    # so a fourth cannot be filled: only views of the slots can cause that.
    adopted = shardpack.Loader(dataset, 4, shuffle="none", prefetch=1, framework="tensorflow")
    it = iter(adopted)
    held = [next(it)[0] for _ in range(3)]
    with pytest.raises(shardpack.FailedPreconditionError, match="still held"):
        next(it)
    del held
    # NCHW uint8 is strided over the slot: TensorFlow gets a copy, and holding it holds
    # no slot.
    copied = shardpack.Loader(dataset, 4, shuffle="none", prefetch=1, framework="tensorflow",
                              layout="NCHW")
    held = [images for images, _ in copied]
    assert len(held) == len(copied) == 10


def test_auto_picks_tensorflow_where_torch_is_missing(dataset):
    script = "import sys\nsys.modules['torch'] = None\n" + textwrap.dedent(f"""
        import shardpack, tensorflow as tf
        loader = shardpack.Loader({dataset!r}, 8)
        images, labels = next(iter(loader))
        assert isinstance(images, tf.Tensor) and images.shape == (8, 12, 12, 3), images.shape
        print(loader.framework)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "tensorflow"


def test_auto_picks_tensorflow_before_jax(dataset):
    pytest.importorskip("jax")
    script = "import sys\nsys.modules['torch'] = None\n" + textwrap.dedent(f"""
        import shardpack
        print(shardpack.Loader({dataset!r}, 8).framework)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "tensorflow"


def test_a_gpu_device_is_refused_for_tensorflow_batches(dataset):
    with pytest.raises(shardpack.InvalidArgumentError, match='takes host batches: use device="cpu"'):
        shardpack.Loader(dataset, 8, framework="tensorflow", device="cuda:0")
