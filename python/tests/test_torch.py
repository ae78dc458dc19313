"""PyTorch: training on loader batches, the DataLoader adapter, torchrun, the GPU path."""

import pickle
import time

import numpy as np
import pytest

import shardpack

torch = pytest.importorskip("torch")
import shardpack.torch as sptorch  # noqa: E402


def test_training_loop_on_loader_batches_reduces_the_loss(dataset_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    loader = shardpack.Loader(
        dataset_path,
        batch_size=12,
        seed=0,
        output_size=28,
        random_crop=True,
        flip=True,
        normalize="imagenet",
    )
    epoch_losses = []
    for epoch in range(8):
        loader.set_epoch(epoch)
        losses = []
        for images, labels in loader:
            assert images.shape == (12, 3, 28, 28) and images.dtype == torch.float32
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        epoch_losses.append(float(np.mean(losses)))
    assert epoch_losses[-1] < 0.5 * epoch_losses[0], epoch_losses
    s = loader.stats()
    assert s.batches == 40 and s.samples == 480 and 0 <= s.wait_seconds <= s.seconds
    assert "samples/s" in str(s)


def test_dataloader_adapter_passes_batches_through(dataset_path):
    ds = sptorch.IterableDataset(dataset_path, batch_size=8, seed=4)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    assert len(dl) == len(ds) == 8
    got = []
    for images, labels in dl:  # each batch dropped before the next: the ring is reused
        assert images.shape[1:] == (3, 32, 32) and images.dtype == torch.uint8
        assert images.is_contiguous(memory_format=torch.channels_last)
        got.append(labels)
    del images
    assert len(got) == 8
    order = ds.loader.epoch_order(0)
    reference = shardpack.Dataset(dataset_path)
    assert torch.cat(got).tolist() == [reference[int(i)].label for i in order]
    ds.set_epoch(1)
    assert ds.state_dict()["loader_state"].startswith("shardpack-loader-state 2 epoch=1 ")


def test_dataloader_with_a_batch_size_is_refused_with_the_fix(dataset_path):
    ds = sptorch.IterableDataset(dataset_path, batch_size=8)
    dl = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=0)
    with pytest.raises(shardpack.InvalidArgumentError, match="batch_size=None"):
        next(iter(dl))
    copy = pickle.loads(pickle.dumps(ds))  # without its loader: the copy makes its own
    images, labels = next(iter(torch.utils.data.DataLoader(copy, batch_size=None)))
    assert images.shape == (8, 3, 32, 32) and labels.shape == (8,)


def test_dataloader_adapter_refuses_worker_processes(dataset_path):
    ds = sptorch.IterableDataset(dataset_path, batch_size=8)
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=1)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(dl))


LAUNCHER_VARIABLES = (
    "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
)  # fmt: skip


def test_distributed_info_reads_torchrun_environment(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert sptorch.distributed_info() == (0, 1, 0)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")
    info = sptorch.distributed_info()
    assert (info.rank, info.world_size, info.local_rank) == (3, 4, 1)
    monkeypatch.setenv("RANK", "4")
    with pytest.raises(ValueError, match="RANK"):
        sptorch.distributed_info()


def test_distributed_info_reads_srun_and_mpirun_environment(monkeypatch):
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "6")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_LOCALID", "2")
    assert sptorch.distributed_info() == (6, 8, 2)
    # mpirun inside a Slurm allocation: Open MPI's own variables win.
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    assert sptorch.distributed_info() == (1, 2, 1)
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE")
    with pytest.raises(ValueError, match="OMPI_COMM_WORLD_SIZE=\\(unset\\)"):
        sptorch.distributed_info()


RANK_READER = """
import json, sys
import shardpack, shardpack.torch as sptorch
info = sptorch.distributed_info()
loader = shardpack.Loader(sys.argv[1], batch_size=4, seed=9, rank=info.rank,
                          world_size=info.world_size, framework="numpy")
epochs = []
for epoch in range(2):
    loader.set_epoch(epoch)
    epochs.append([[int(i) for i in b.indices[: b.valid]] for b in loader.batches()])
print(json.dumps({"rank": info.rank, "epochs": epochs}))
"""


def test_torchrun_ranks_together_read_every_sample_each_epoch(dataset_path):
    """Four processes started as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK):
    equal batch counts, and together every sample of each epoch, repeats only to even
    out the ranks (fewer than world_size of them; docs/LOADER.md)."""
    import json
    import os
    import subprocess
    import sys

    world = 4
    procs = []
    for rank in range(world):
        env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARIABLES}
        env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", RANK_READER, str(dataset_path)],
                env=env, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
        )
    results = sorted((json.loads(p.communicate(timeout=120)[0]) for p in procs),
                     key=lambda r: r["rank"])  # fmt: skip
    assert [p.returncode for p in procs] == [0] * world
    n = len(shardpack.Dataset(dataset_path))
    for epoch in range(2):
        batches = [len(r["epochs"][epoch]) for r in results]
        assert len(set(batches)) == 1, batches
        read = [i for r in results for b in r["epochs"][epoch] for i in b]
        assert set(read) == set(range(n))
        assert len(read) == -(-n // world) * world  # ceil(n / W) * W
        assert len(read) - n < world


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_batches_equal_host_batches(dataset_path):
    options = dict(batch_size=8, seed=3, normalize="imagenet", dtype="float16")
    host = shardpack.Loader(dataset_path, **options)
    gpu = shardpack.Loader(dataset_path, device="cuda:0", **options)
    for (hx, hy), (gx, gy) in zip(host, gpu):
        assert gx.device.type == "cuda" and gy.device.type == "cuda"
        assert torch.equal(gx.cpu(), hx) and torch.equal(gy.cpu(), hy)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_batches_are_ready_on_torchs_current_stream(dataset_path):
    # Consumed on a stream other than the default: the conversion makes torch's current
    # stream wait for the batch's copy and kernel, so every value is the host path's. The
    # copies queued on that stream are compared bit for bit (a sum on the GPU would add in
    # another order than the CPU's and differ in the last bits).
    options = dict(batch_size=8, seed=3, normalize="imagenet", dtype="float16")
    host = shardpack.Loader(dataset_path, **options)
    gpu = shardpack.Loader(dataset_path, device="cuda:0", **options)
    side = torch.cuda.Stream()
    copies = []
    with torch.cuda.stream(side):
        for gx, _ in gpu:
            copies.append(gx.clone())
    side.synchronize()
    expected = [hx.clone() for hx, _ in host]
    assert len(copies) == len(expected)
    for got, want in zip(copies, expected):
        assert torch.equal(got.cpu(), want)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_taking_a_prepared_gpu_batch_does_not_wait_for_the_gpu(dataset_path):
    # No synchronisation per batch: while the current stream is busy with a long kernel
    # (about a second), next() hands over a batch the workers already prepared.
    gpu = shardpack.Loader(dataset_path, device="cuda:0", batch_size=4, prefetch=2, seed=1)
    batches = iter(gpu)
    next(batches)
    torch.cuda.synchronize()
    time.sleep(0.5)  # the workers fill the ring
    torch.cuda._sleep(2_000_000_000)
    start = time.perf_counter()
    next(batches)
    waited = time.perf_counter() - start
    torch.cuda.synchronize()
    assert waited < 0.3, waited
