"""shardpack.tf against the real TensorFlow and Keras: the loader's batches as a
tf.data.Dataset and as a Keras PyDataset, the same samples and order as the loader gives
PyTorch code, Keras models that learn from them, ranks from TF_CONFIG, and
LoaderCheckpoint's resume. Uses the Python binding (the wheel scripts/install-python.sh
builds, which scripts/install-interop.sh installs here)."""

import json
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


def test_without_a_copy_the_tensors_adopt_the_ring_and_holding_too_many_is_refused(colours):
    # copy=False: the same batches, and the tensors are the ring's slots: with
    # prefetch=1 the ring has 3, so 3 batches held leave the loader no slot to fill.
    zero_copy = shardpack.tf.dataset(colours, batch_size=10, seed=3, copy=False)
    copied = shardpack.tf.dataset(colours, batch_size=10, seed=3)
    for (ax, ay), (bx, by) in zip(zero_copy, copied, strict=True):
        assert np.array_equal(ax.numpy(), bx.numpy()) and np.array_equal(ay, by)
    held = shardpack.tf.dataset(colours, batch_size=10, prefetch=1, copy=False)
    it = iter(held)
    kept = [next(it) for _ in range(3)]
    # TensorFlow wraps an error raised in a generator as UnknownError.
    with pytest.raises(tf.errors.UnknownError, match="FailedPreconditionError: .*still held"):
        next(it)
    # The default copies into TensorFlow's memory: holding a whole epoch is fine.
    kept = list(shardpack.tf.dataset(colours, batch_size=10, prefetch=1))
    assert len(kept) == 8


def test_a_pass_stops_when_a_newer_one_starts_and_holds_no_slot_while_paused(colours):
    # With copy=True the generator keeps no view of a slot between batches: two passes
    # interleaved never run out of the ring (prefetch=1: 3 slots), and the older pass
    # stops where the newer one started, never reading into its epoch (the newer pass
    # reads all of the next epoch).
    ds = shardpack.tf.dataset(colours, batch_size=10, seed=3, prefetch=1)
    first = iter(ds)
    next(first)
    second = iter(ds)
    got = [x.numpy() for x, _ in [next(second)]]
    # The older pass ends short, which the cardinality check reports.
    with pytest.raises(tf.errors.FailedPreconditionError, match="expected to contain 8"):
        list(first)
    got += [x.numpy() for x, _ in second]
    loader = shardpack.Loader(colours, 10, seed=3, framework="numpy", layout="NHWC")
    loader.set_epoch(1)
    want = [np.array(x) for x, _ in loader]  # epoch 1: the second pass's
    assert len(got) == len(want) == 8
    assert all(np.array_equal(a, b) for a, b in zip(got, want))


def test_an_epoch_without_batches_is_refused_saying_why(colours):
    with pytest.raises(shardpack.InvalidArgumentError, match="an epoch has no batches"):
        shardpack.tf.dataset(colours, batch_size=100, drop_last=True)


def small_model():
    """A seeded, compiled CNN for the 16x16 colours, small enough to train in seconds."""
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
    return model


@pytest.mark.parametrize("copy", [True, False])
def test_keras_fit_learns_from_the_dataset(colours, copy):
    # copy=False: model.fit holds no more batches than the ring has (prefetch=1: 3 slots).
    model = small_model()
    ds = shardpack.tf.dataset(colours, batch_size=12, seed=1, flip=True, copy=copy, prefetch=1)
    assert ds.cardinality().numpy() == 6  # 72 samples in batches of 12
    history = model.fit(ds, epochs=6, verbose=0, shuffle=False)
    losses = history.history["loss"]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0], losses
    # Six Keras epochs were six loader epochs.
    assert ds.shardpack_loader.epoch == 5


def test_a_framework_other_than_numpy_is_refused(colours):
    with pytest.raises(shardpack.InvalidArgumentError, match="leave framework out"):
        shardpack.tf.dataset(colours, framework="torch")


def run_sample(*args):
    sample = Path(__file__).resolve().parents[2] / "samples" / "train_keras.py"
    r = subprocess.run([sys.executable, str(sample), *map(str, args)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_the_keras_sample_trains_and_resumes(colours, tmp_path):
    options = ["--batch-size", "12", "--size", "16", "--lr", "0.03", "--checkpoint", tmp_path]
    out = run_sample(colours, "--epochs", "4", *options)
    m = re.search(r"loss: ([0-9.]+) -> ([0-9.]+)", out)
    assert m, out
    first, last = map(float, m.groups())
    assert last < first, out
    assert json.loads((tmp_path / "loader.json").read_text())["epoch"] == 4
    out = run_sample(colours, "--epochs", "5", *options)
    assert f"resumed at epoch 4 from {tmp_path}" in out and "Epoch 5/5" in out, out
    assert "Epoch 4/5" not in out, out


def numpy_epochs(path, batch_size, epochs, **kwargs):
    """The loader's batches, epoch after epoch, as NumPy copies: what shardpack.tf's
    readers must deliver."""
    loader = shardpack.Loader(path, batch_size, framework="numpy", layout="NHWC", **kwargs)
    return [[(np.array(x), y) for x, y in loader] for _ in range(epochs)]


def assert_same_batches(got, want, what=""):
    assert len(got) == len(want), what
    for k, ((gx, gy), (wx, wy)) in enumerate(zip(got, want)):
        assert np.array_equal(gx, wx) and np.array_equal(gy, wy), f"{what} batch {k}"


def recording_model():
    """(model, seen): a small classifier for the colours (16x16x3, 3 classes), compiled to
    run eagerly, and the list of the (images, labels) of its every training step, as Keras
    fed them."""
    keras = tf.keras
    seen = []

    class Recording(keras.Model):
        def train_step(self, data):
            images, labels = data
            seen.append((np.array(images), np.array(labels)))
            return super().train_step(data)

    inputs = keras.Input((16, 16, 3))
    x = keras.layers.Rescaling(1 / 255)(inputs)
    x = keras.layers.Conv2D(4, 3, activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    model = Recording(inputs, keras.layers.Dense(3)(x))
    model.compile(optimizer=keras.optimizers.Adam(0.05), run_eagerly=True,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, seen


def epochs_of(seen, epochs, steps):
    """``seen`` cut into ``epochs`` epochs of ``steps`` steps."""
    assert len(seen) == epochs * steps, (len(seen), epochs, steps)
    return [seen[k:k + steps] for k in range(0, len(seen), steps)]


def test_import_shardpack_tf_imports_neither_tensorflow_nor_keras():
    r = subprocess.run([sys.executable, "-c", "import sys, shardpack.tf; "
                        "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_the_py_dataset_is_a_keras_py_dataset_made_once():
    assert issubclass(shardpack.tf.PyDataset, tf.keras.utils.PyDataset)
    assert shardpack.tf.PyDataset is shardpack.tf.PyDataset
    assert issubclass(shardpack.tf.LoaderCheckpoint, tf.keras.callbacks.Callback)
    from shardpack.tf import PyDataset
    assert PyDataset is shardpack.tf.PyDataset


def test_model_fit_reads_the_py_datasets_batches_as_the_loader_gives_them(colours, recwarn):
    ds = shardpack.tf.PyDataset(colours, batch_size=10, seed=3, flip=True)
    assert isinstance(ds, tf.keras.utils.PyDataset) and len(ds) == 8  # 72 samples
    model, seen = recording_model()
    model.fit(ds, epochs=2, verbose=0, shuffle=False)
    want = numpy_epochs(colours, 10, 2, seed=3, flip=True)
    for epoch, got in enumerate(epochs_of(seen, 2, 8)):
        assert_same_batches(got, want[epoch], f"epoch {epoch}")
    assert ds.epoch == 2
    assert not [w for w in recwarn if "shardpack" in str(w.message)]


def test_batches_out_of_order_are_served_exactly_with_one_warning(colours):
    ds = shardpack.tf.PyDataset(colours, batch_size=10, seed=3)
    (want,) = numpy_epochs(colours, 10, 1, seed=3)
    assert_same_batches([ds[0], ds[1]], want[:2])
    with pytest.warns(RuntimeWarning, match=r"batch 5 of epoch 0 .* shuffle=False") as caught:
        assert_same_batches([ds[5], ds[2], ds[0], ds[-1]], [want[5], want[2], want[0], want[7]])
    assert len(caught) == 1
    with pytest.raises(IndexError, match="batch 8 of an epoch of 8"):
        ds[8]


def test_model_fit_with_keras_shuffling_still_reads_each_loader_batch_once(colours):
    ds = shardpack.tf.PyDataset(colours, batch_size=12, seed=4)
    model, seen = recording_model()
    tf.keras.utils.set_random_seed(0)
    with pytest.warns(RuntimeWarning, match="shuffle=False"):
        model.fit(ds, epochs=2, verbose=0)  # shuffle=True, Keras's default
    want = numpy_epochs(colours, 12, 2, seed=4)
    for epoch, got in enumerate(epochs_of(seen, 2, 6)):
        key = lambda batch: batch[1].tobytes() + batch[0].tobytes()  # noqa: E731
        assert [key(b) for b in got] != [key(b) for b in want[epoch]], epoch  # reordered
        assert sorted(map(key, got)) == sorted(map(key, want[epoch])), epoch


def test_keras_fit_learns_from_the_py_dataset(colours):
    model = small_model()
    ds = shardpack.tf.PyDataset(colours, batch_size=12, seed=1, flip=True)
    losses = model.fit(ds, epochs=6, verbose=0, shuffle=False).history["loss"]
    assert len(losses) == 6 and losses[-1] < 0.5 * losses[0], losses
    assert ds.epoch == 6


@pytest.mark.parametrize("keras_arguments", [{"workers": 4}, {"use_multiprocessing": True}])
def test_the_py_dataset_refuses_keras_workers_and_processes(colours, keras_arguments):
    with pytest.raises(shardpack.InvalidArgumentError, match="leave both out"):
        shardpack.tf.PyDataset(colours, **keras_arguments)


# Ranks.

LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK",
    "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
    "MPI_LOCALRANKID", "SLURM_LOCALID",
)


@pytest.fixture
def environment(monkeypatch):
    """No launcher's variables and no TF_CONFIG; ``environment(**variables)`` sets some."""
    for name in LAUNCHER_VARIABLES + ("TF_CONFIG",):
        monkeypatch.delenv(name, raising=False)

    def set_variables(**variables):
        for name, value in variables.items():
            text = value if isinstance(value, str) else json.dumps(value)
            monkeypatch.setenv(name, text)

    return set_variables


def two_workers(index):
    return {"cluster": {"worker": ["host0:2222", "host1:2222"]},
            "task": {"type": "worker", "index": index}}


def test_tf_config_workers_read_disjoint_halves_as_loader_ranks_do(colours, environment):
    orders = []
    for rank in range(2):
        environment(TF_CONFIG=two_workers(rank))
        assert shardpack.tf.distributed_info() == (rank, 2, 0)
        ds = shardpack.tf.dataset(colours, batch_size=8, seed=2)
        policy = ds.options().experimental_distribute.auto_shard_policy
        assert policy == tf.data.experimental.AutoShardPolicy.OFF
        got = [(x.numpy(), y.numpy()) for x, y in ds]
        (want,) = numpy_epochs(colours, 8, 1, seed=2, rank=rank, world_size=2)
        assert_same_batches(got, want, f"rank {rank}")
        orders.append(set(ds.shardpack_loader.epoch_order(0).tolist()))
    assert not orders[0] & orders[1] and orders[0] | orders[1] == set(range(72))


def test_tf_config_numbers_the_chief_first_as_multi_worker_mirrored_strategy_does(environment):
    cluster = {"chief": ["c:1"], "worker": ["w0:1", "w1:1"], "evaluator": ["e:1"]}
    for task, rank in ((("chief", 0), 0), (("worker", 0), 1), (("worker", 1), 2)):
        environment(TF_CONFIG={"cluster": cluster, "task": dict(zip(("type", "index"), task))})
        assert shardpack.tf.distributed_info() == (rank, 3, 0), task
    environment(TF_CONFIG={"cluster": cluster, "task": {"type": "evaluator", "index": 0}})
    assert shardpack.tf.distributed_info() == (0, 1, 0)


def test_without_tf_config_the_launchers_variables_give_the_ranks(environment):
    assert shardpack.tf.distributed_info() == (0, 1, 0)
    environment(TF_CONFIG={})
    assert shardpack.tf.distributed_info() == (0, 1, 0)
    environment(RANK="1", WORLD_SIZE="2", LOCAL_RANK="1")
    assert shardpack.tf.distributed_info() == (1, 2, 1)
    # The same shape as the other frameworks' (one type).
    assert type(shardpack.tf.distributed_info()) is shardpack.DistributedInfo
    environment(TF_CONFIG=two_workers(0))  # TF_CONFIG first
    assert shardpack.tf.distributed_info() == (0, 2, 0)


def test_explicit_ranks_win_over_tf_config(colours, environment):
    environment(TF_CONFIG=two_workers(1))
    ds = shardpack.tf.dataset(colours, batch_size=8, rank=0, world_size=1)
    assert len(ds.shardpack_loader) == 9  # all 72 samples
    with pytest.raises(shardpack.InvalidArgumentError, match="rank and world_size together"):
        shardpack.tf.dataset(colours, batch_size=8, rank=1)


@pytest.mark.parametrize("config, fault", [
    ("{not json", "not JSON"),
    ([1, 2], "expected a JSON object"),
    ({"cluster": {"worker": ["a:1", "b:1"]}}, 'no "task"'),
    ({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 2}},
     '"index" is 2, and "cluster"."worker" has 2 tasks'),
    ({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}}, '"index" is None'),
    ({"cluster": {"worker": "a:1"}, "task": {"type": "worker", "index": 0}},
     '"cluster"."worker" is not a list'),
    ({"cluster": {"chief": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}},
     "2 chiefs"),
    ({"cluster": {"master": ["a:1"]}, "task": {"type": "master", "index": 0}},
     'unknown task type "master"'),
    ({"cluster": {"worker": ["a:1"], "ps": ["p:1"]}, "task": {"type": "ps", "index": 0}},
     "reads no training data"),
])
def test_a_malformed_tf_config_is_refused_naming_it(colours, environment, config, fault):
    environment(TF_CONFIG=config)
    with pytest.raises(shardpack.InvalidArgumentError, match=f"TF_CONFIG: .*{re.escape(fault)}"):
        shardpack.tf.distributed_info()
    with pytest.raises(shardpack.InvalidArgumentError, match="TF_CONFIG"):
        shardpack.tf.dataset(colours, batch_size=8)


def test_the_py_dataset_leaves_splitting_to_keras_under_tf_config(colours, environment):
    environment(TF_CONFIG=two_workers(1))
    assert len(shardpack.tf.PyDataset(colours, batch_size=8)) == 9  # all 72 samples
    assert len(shardpack.tf.PyDataset(colours, batch_size=8, rank=1, world_size=2)) == 5


# LoaderCheckpoint.


class Preempted(Exception):
    pass


def preempt_at(epoch, batch):
    """A callback that stops training with Preempted after ``batch`` of ``epoch``."""
    class Preempt(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, e, logs=None):
            self.epoch = e

        def on_train_batch_end(self, b, logs=None):
            if (self.epoch, b) == (epoch, batch):
                raise Preempted

    return Preempt()


READERS = {
    "PyDataset": lambda path: shardpack.tf.PyDataset(path, batch_size=12, seed=5, flip=True),
    "dataset": lambda path: shardpack.tf.dataset(path, batch_size=12, seed=5, flip=True),
}


@pytest.mark.parametrize("reader", READERS)
def test_a_resumed_fit_reads_exactly_the_batches_of_an_uninterrupted_one(colours, tmp_path,
                                                                         reader):
    make = READERS[reader]
    whole, seen = recording_model()
    whole.fit(make(colours), epochs=4, verbose=0, shuffle=False)
    want = epochs_of(seen, 4, 6)

    # Preempted in the middle of epoch 2: the state saved after epoch 1 names epoch 2.
    path = tmp_path / "ckpt" / "loader.json"
    ds = make(colours)
    first, _ = recording_model()
    with pytest.raises(Preempted):
        first.fit(ds, epochs=4, verbose=0, shuffle=False,
                  callbacks=[shardpack.tf.LoaderCheckpoint(ds, path), preempt_at(2, 3)])
    saved = json.loads(path.read_text())
    assert (saved["epoch"], saved["next_batch"]) == (2, 0)
    assert [p.name for p in path.parent.iterdir()] == ["loader.json"]  # no temporary left

    ds = make(colours)
    checkpoint = shardpack.tf.LoaderCheckpoint(ds, path)
    start = checkpoint.restore()
    assert start == 2
    resumed, seen = recording_model()
    resumed.fit(ds, epochs=4, initial_epoch=start, verbose=0, shuffle=False,
                callbacks=[checkpoint])
    got = epochs_of(seen, 2, 6)
    for epoch in (2, 3):
        assert_same_batches(got[epoch - 2], want[epoch], f"epoch {epoch}")
    assert json.loads(path.read_text())["epoch"] == 4


def test_the_callback_gives_the_reader_kerass_epoch(colours, tmp_path):
    ds = shardpack.tf.PyDataset(colours, batch_size=12, seed=6)
    ds.set_epoch(5)
    model, seen = recording_model()
    model.fit(ds, epochs=2, verbose=0, shuffle=False,
              callbacks=[shardpack.tf.LoaderCheckpoint(ds, tmp_path / "loader.json")])
    want = numpy_epochs(colours, 12, 2, seed=6)
    for epoch, got in enumerate(epochs_of(seen, 2, 6)):
        assert_same_batches(got, want[epoch], f"epoch {epoch}")


def test_a_fit_starting_at_another_epoch_than_the_saved_one_is_refused(colours, tmp_path):
    path = tmp_path / "loader.json"
    ds = shardpack.tf.PyDataset(colours, batch_size=12)
    recording_model()[0].fit(ds, epochs=2, verbose=0, shuffle=False,
                          callbacks=[shardpack.tf.LoaderCheckpoint(ds, path)])
    ds = shardpack.tf.PyDataset(colours, batch_size=12)
    with pytest.raises(shardpack.InvalidArgumentError,
                       match="loader state is at epoch 2, and model.fit starts at epoch 0: "
                             "pass initial_epoch=2"):
        recording_model()[0].fit(ds, epochs=3, verbose=0, shuffle=False,
                              callbacks=[shardpack.tf.LoaderCheckpoint(ds, path)])


def test_a_state_saved_for_other_options_is_refused_naming_them(colours, tmp_path):
    path = tmp_path / "loader.json"
    ds = shardpack.tf.PyDataset(colours, batch_size=12, seed=1)
    recording_model()[0].fit(ds, epochs=1, verbose=0, shuffle=False,
                          callbacks=[shardpack.tf.LoaderCheckpoint(ds, path)])
    other = shardpack.tf.PyDataset(colours, batch_size=12, seed=2)
    with pytest.raises(shardpack.InvalidArgumentError, match="seed"):
        shardpack.tf.LoaderCheckpoint(other, path).restore()


def test_a_state_saved_mid_epoch_is_restored_at_its_epochs_start(colours, tmp_path):
    loader = shardpack.Loader(colours, 12, framework="numpy")
    loader.set_epoch(1)
    next(iter(loader))
    path = tmp_path / "loader.json"
    path.write_text(json.dumps(loader.state_dict()))  # epoch 1, batch 1
    ds = shardpack.tf.dataset(colours, batch_size=12)
    assert shardpack.tf.LoaderCheckpoint(ds, path).restore() == 1
    state = ds.shardpack_loader.state_dict()
    assert (state["epoch"], state["next_batch"]) == (1, 0)


def test_each_rank_saves_to_its_own_file(colours, tmp_path):
    loader = shardpack.Loader(colours, 8, rank=1, world_size=2, framework="numpy")
    with pytest.raises(shardpack.InvalidArgumentError, match=r"rank 1 of 2.*\{rank\}"):
        shardpack.tf.LoaderCheckpoint(loader, tmp_path / "loader.json")
    checkpoint = shardpack.tf.LoaderCheckpoint(loader, tmp_path / "loader-{rank}.json")
    assert checkpoint.path == str(tmp_path / "loader-1.json")
    with pytest.raises(shardpack.InvalidArgumentError, match="not a list"):
        shardpack.tf.LoaderCheckpoint([], tmp_path / "x.json")
