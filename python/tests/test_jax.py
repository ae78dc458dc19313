"""JAX reads the loader as PyTorch does: the same samples, labels and order for a seed,
jax.Array batches adopting the ring slot without a copy, placed on a device or split over a
sharding, resumed from a state_dict; and framework="auto" picks JAX after torch and
TensorFlow."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import importlib.util

import numpy as np
import pytest

import shardpack
import shardpack.jax  # imports JAX only when used

# JAX starts threads when imported, and a fork after that may deadlock (test_torch.py's
# DataLoader workers fork): conftest.py runs this module's tests last, and they import JAX
# through this fixture, not at collection.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="JAX is not installed (pip install jax)"
)


@pytest.fixture
def jax():
    import jax

    return jax

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "train_jax.py"


def run_python(code, env=None, blocked=()):
    """Runs `code` in a fresh interpreter where each module in `blocked` fails to
    import; returns its stdout."""
    script = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
    script += textwrap.dedent(code)
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def epochs_of(loader, epochs):
    """[(images, labels)] as NumPy copies over `epochs` passes."""
    out = []
    for _ in range(epochs):
        for images, labels in loader:
            out.append((np.asarray(images).copy(), np.asarray(labels).copy()))
    return out


def test_jax_batches_equal_the_torch_paths_for_the_same_seed(jax, dataset_path):
    torch = pytest.importorskip("torch")
    kwargs = dict(batch_size=8, seed=5, flip=True)
    ld = shardpack.jax.Loader(dataset_path, **kwargs)
    assert ld.framework == "jax" and "framework='jax'" in repr(ld)
    images, labels = next(iter(ld))
    assert isinstance(images, jax.Array) and isinstance(labels, jax.Array)
    assert images.shape == (8, 32, 32, 3) and images.dtype == np.uint8  # NHWC by default
    ref_loader = shardpack.Loader(dataset_path, framework="torch", layout="NHWC", **kwargs)
    ours = epochs_of(shardpack.jax.Loader(dataset_path, **kwargs), 2)
    ref = []
    for _ in range(2):
        for i, lab in ref_loader:
            assert torch.is_tensor(i)
            ref.append((i.numpy().copy(), lab.numpy()))
    assert len(ours) == len(ref) == 2 * len(ld)
    for (a, la), (b, lb) in zip(ours, ref, strict=True):
        assert np.array_equal(a, b)
        assert np.array_equal(la, lb)
    # The two epochs differ (the shuffle moved on), so equal order is not trivial.
    half = len(ours) // 2
    assert not all(np.array_equal(ours[i][1], ours[half + i][1]) for i in range(half))


def test_jax_batches_adopt_the_ring_slot_without_a_copy(dataset_path):
    ld = shardpack.jax.Loader(dataset_path, batch_size=4, shuffle="none", prefetch=1)
    it = iter(ld)
    images, _ = next(it)
    reference = shardpack.Loader(dataset_path, batch_size=4, shuffle="none", framework="numpy",
                                 layout="NHWC")
    assert np.array_equal(np.asarray(images), next(iter(reference))[0])
    addresses = set()
    held = [images]
    addresses.add(images.unsafe_buffer_pointer())
    # The ring has prefetch + 2 = 3 slots: three arrays alive hold all of them, and the
    # fourth batch cannot be filled, which only a view of the slot can cause.
    for _ in range(2):
        x, _ = next(it)
        held.append(x)
        addresses.add(x.unsafe_buffer_pointer())
    assert len(addresses) == 3
    with pytest.raises(shardpack.FailedPreconditionError, match="still held"):
        next(it)
    del held, images, x
    ld.set_epoch(1)
    for x, _ in ld:  # the slots are free again: a whole epoch goes through
        assert x.unsafe_buffer_pointer() in addresses


def test_a_sharding_splits_each_batch_over_the_devices():
    # Four CPU devices exist only in a fresh interpreter started with this flag; JAX's
    # default backend is made the CPU, which a machine with a GPU (and jax[cuda]) would
    # otherwise take first.
    out = run_python(
        """
        import jax, numpy as np, shardpack, shardpack.jax, tempfile, os
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from conftest import make_image_folder
        d = tempfile.mkdtemp()
        make_image_folder(os.path.join(d, "img"), broken=False)
        shardpack.convert(os.path.join(d, "img"), os.path.join(d, "ds"), size=16)
        assert len(jax.devices()) == 4
        mesh = Mesh(jax.devices(), ("data",))
        ld = shardpack.jax.Loader(os.path.join(d, "ds"), batch_size=8, seed=1,
                                  drop_last=True, sharding=NamedSharding(mesh, P("data")))
        ref = shardpack.Loader(os.path.join(d, "ds"), batch_size=8, seed=1, drop_last=True,
                               framework="numpy", layout="NHWC")
        n = 0
        for (images, labels), (ri, rl) in zip(ld, ref):
            assert images.shape == (8, 16, 16, 3), images.shape
            assert len(images.addressable_shards) == 4
            assert {s.data.shape for s in images.addressable_shards} == {(2, 16, 16, 3)}
            assert {s.data.shape for s in labels.addressable_shards} == {(2,)}
            assert np.array_equal(np.asarray(images), ri) and np.array_equal(labels, rl)
            n += 1
        assert n == len(ld) > 1
        # A device other than the one the batch is adopted on: the batch moves there.
        other = jax.devices()[1]
        images, labels = next(iter(shardpack.jax.Loader(os.path.join(d, "ds"), batch_size=4,
                                                        shuffle="none", device=other)))
        assert images.devices() == {other} and labels.devices() == {other}
        assert np.array_equal(np.asarray(images), next(iter(shardpack.Loader(
            os.path.join(d, "ds"), batch_size=4, shuffle="none", framework="numpy",
            layout="NHWC")))[0])
        print("ok", n)
        """,
        env={
            "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
            "JAX_PLATFORMS": "cpu",
            "PYTHONPATH": str(Path(__file__).parent),
        },
    )
    assert out.startswith("ok ")


def test_device_placement_and_bad_placements(jax, dataset_path):
    cpu = jax.devices("cpu")[0]
    images, labels = next(iter(shardpack.jax.Loader(dataset_path, batch_size=4, device=cpu)))
    assert images.devices() == {cpu} and labels.devices() == {cpu}
    mesh = jax.sharding.Mesh(jax.devices(), ("data",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    with pytest.raises(shardpack.InvalidArgumentError, match="device or sharding, not both"):
        shardpack.jax.Loader(dataset_path, device=cpu, sharding=sharding)
    unsplit = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(None, "data"))
    with pytest.raises(shardpack.InvalidArgumentError, match="does not split the batch"):
        shardpack.jax.Loader(dataset_path, sharding=unsplit)
    single = jax.sharding.SingleDeviceSharding(cpu)
    with pytest.raises(shardpack.InvalidArgumentError, match="must be a jax.sharding.NamedSharding"):
        shardpack.jax.Loader(dataset_path, sharding=single)
    with pytest.raises(shardpack.InvalidArgumentError, match="leave framework out"):
        shardpack.jax.Loader(dataset_path, framework="torch")
    with pytest.raises(shardpack.InvalidArgumentError, match="rank and world_size together"):
        shardpack.jax.Loader(dataset_path, rank=1)
    with pytest.raises(shardpack.InvalidArgumentError, match='takes host batches: use device="cpu"'):
        shardpack.Loader(dataset_path, framework="jax", device="cuda:0")


def test_resume_from_a_state_dict_delivers_what_an_uninterrupted_run_would(dataset_path):
    kwargs = dict(batch_size=8, seed=3, flip=True)
    whole = epochs_of(shardpack.jax.Loader(dataset_path, **kwargs), 2)
    first = shardpack.jax.Loader(dataset_path, **kwargs)
    it = iter(first)
    for _ in range(3):
        next(it)
    state = json.loads(json.dumps(first.state_dict()))  # as a checkpoint stores it
    resumed = shardpack.jax.Loader(dataset_path, state=state, **kwargs)
    rest = [(np.asarray(i).copy(), np.asarray(l).copy()) for i, l in resumed]
    rest += epochs_of(resumed, 1)
    assert len(rest) == len(whole) - 3
    for (a, la), (b, lb) in zip(rest, whole[3:]):
        assert np.array_equal(a, b) and np.array_equal(la, lb)


def test_ranks_come_from_the_launchers_environment(dataset_path):
    out = run_python(
        f"""
        import numpy as np, shardpack, shardpack.jax
        assert shardpack.jax.distributed_info() == (1, 2, 0)
        assert type(shardpack.jax.distributed_info()) is shardpack.DistributedInfo
        ld = shardpack.jax.Loader({dataset_path!r}, batch_size=4, seed=2)
        ref = shardpack.Loader({dataset_path!r}, batch_size=4, seed=2, rank=1, world_size=2,
                               framework="numpy", layout="NHWC")
        assert len(ld) == len(ref)
        for (a, la), (b, lb) in zip(ld, ref):
            assert np.array_equal(np.asarray(a), b) and np.array_equal(la, lb)
        print("ok")
        """,
        env={"RANK": "1", "WORLD_SIZE": "2"},
    )
    assert out.strip() == "ok"


def test_auto_picks_torch_then_tensorflow_then_jax_then_numpy(dataset_path):
    out = run_python(
        f"""
        import shardpack
        print(shardpack.Loader({dataset_path!r}, batch_size=4).framework)
        """,
        blocked=("torch", "tensorflow"),
    )
    assert out.strip() == "jax"
    out = run_python(
        f"""
        import shardpack
        print(shardpack.Loader({dataset_path!r}, batch_size=4).framework)
        """,
        blocked=("torch", "tensorflow", "jax"),
    )
    assert out.strip() == "numpy"


def test_without_jax_the_error_names_the_package(dataset_path):
    out = run_python(
        f"""
        import shardpack, shardpack.jax
        for make in (lambda: shardpack.jax.Loader({dataset_path!r}),
                     lambda: shardpack.Loader({dataset_path!r}, framework="jax")):
            try:
                make()
            except ImportError as e:
                assert "pip install jax" in str(e), str(e)
                print("ImportError")
        """,
        blocked=("jax",),
    )
    assert out.split() == ["ImportError", "ImportError"]


def test_the_jax_sample_trains_and_its_loss_falls(dataset_path, tmp_path):
    state = tmp_path / "state.json"
    r = subprocess.run(
        [sys.executable, str(SAMPLE), dataset_path, "--steps", "30", "--batch-size", "16",
         "--size", "32", "--lr", "0.05", "--log", "5", "--save", str(state)],
        capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stdout.splitlines() if x.startswith("loss: ")][-1]
    first, last = (float(v) for v in line[len("loss: "):].split(" -> "))
    assert last < first, r.stdout
    # The saved state is where the 30 steps left the loader: resuming from it reads on.
    saved = json.loads(state.read_text())
    batches = len(shardpack.Loader(dataset_path, 16, drop_last=True, framework="numpy"))
    # (step 30 was batch (30 - 1) % batches of epoch (30 - 1) // batches)
    assert (saved["epoch"], saved["next_batch"]) == ((30 - 1) // batches,
                                                     (30 - 1) % batches + 1), saved
