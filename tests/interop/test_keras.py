"""shardpack.tf against the real TensorFlow and Keras: the loader's batches as a
tf.data.Dataset, the same samples and order as the loader gives PyTorch code, and a Keras
model that learns from them. Uses the Python binding (the wheel scripts/install-python.sh
builds, which scripts/install-interop.sh installs here)."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import wire

shardpack = pytest.importorskip(
    "shardpack", reason="the binding is not installed here: run bash scripts/install-python.sh, "
    "then bash scripts/install-interop.sh")
tf = pytest.importorskip("tensorflow")
import shardpack.tf  # noqa: E402


@pytest.fixture(scope="module")
def colours(tmp_path_factory, cli):
    """3 classes of 16x16 noisy images around a colour of their own, 24 each, converted."""
    root = tmp_path_factory.mktemp("colours")
    rng = np.random.default_rng(7)
    means = [(200, 40, 40), (40, 200, 40), (40, 40, 200)]
    for label, mean in enumerate(means):
        (root / f"c{label}").mkdir()
        for k in range(24):
            px = np.clip(rng.normal(mean, 30, (16, 16, 3)), 0, 255).astype(np.uint8)
            wire.write_png(root / f"c{label}" / f"{k:02d}.png", px)
    dst = tmp_path_factory.mktemp("ds") / "colours"
    cli("convert", root, dst, "--size", "16x16", "--shard-records", "20", "--quiet")
    return dst


def test_the_dataset_gives_the_loaders_batches_epoch_after_epoch(colours):
    ds = shardpack.tf.dataset(colours, batch_size=10, seed=3)
    assert ds.element_spec[0].shape.as_list() == [None, 16, 16, 3]
    assert ds.element_spec[0].dtype == tf.uint8 and ds.element_spec[1].dtype == tf.int64
    loader = shardpack.Loader(colours, 10, seed=3, framework="numpy", layout="NHWC")
    for epoch in range(2):
        got = [(x.numpy(), y.numpy()) for x, y in ds]
        want = [(np.array(x), y) for x, y in loader]
        assert len(got) == len(want) == 8, epoch  # 72 samples, the last batch of 2
        for (gx, gy), (wx, wy) in zip(got, want):
            assert np.array_equal(gx, wx) and np.array_equal(gy, wy), epoch
    assert ds.shardpack_loader.epoch == 1


def test_keras_fit_learns_from_the_dataset(colours):
    keras = tf.keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((16, 16, 3)),
        keras.layers.Rescaling(1 / 255),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(3),
    ])
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    ds = shardpack.tf.dataset(colours, batch_size=12, seed=1, flip=True)
    assert ds.cardinality().numpy() == 6  # 72 samples in batches of 12
    history = model.fit(ds, epochs=6, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0], losses
    # Six Keras epochs were six loader epochs.
    assert ds.shardpack_loader.epoch == 5


def test_a_framework_other_than_numpy_is_refused(colours):
    with pytest.raises(shardpack.InvalidArgumentError, match="leave framework out"):
        shardpack.tf.dataset(colours, framework="torch")


def test_the_keras_sample_trains(colours):
    sample = Path(__file__).resolve().parents[2] / "samples" / "train_keras.py"
    r = subprocess.run([sys.executable, str(sample), str(colours), "--epochs", "4",
                        "--batch-size", "12", "--size", "16", "--lr", "0.03"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = re.search(r"loss: ([0-9.]+) -> ([0-9.]+)", r.stdout)
    assert m, r.stdout
    first, last = map(float, m.groups())
    assert last < first, r.stdout
