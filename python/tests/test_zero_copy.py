"""Batches are views of the loader's ring slots: no copy, released when dropped."""

import gc
import warnings

import numpy as np
import pytest

import shardpack

torch = pytest.importorskip("torch")


def test_torch_tensor_adopts_the_slot_memory(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=8, prefetch=2, framework="numpy")
    batch = ld.next_batch()
    t = torch.from_dlpack(batch)
    a = np.from_dlpack(batch)
    assert t.data_ptr() == batch.data_address == a.ctypes.data
    assert t.shape == (8, 3, 32, 32) and t.dtype == torch.uint8 and t.device.type == "cpu"
    a[0, 0, 0, 0] = 255 - a[0, 0, 0, 0]  # one memory: a write through one view shows in the other
    assert int(t[0, 0, 0, 0]) == int(a[0, 0, 0, 0])


def test_slots_repeat_with_period_prefetch_plus_two(dataset_path):
    for prefetch in (1, 3):
        ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=prefetch, seed=1)
        slots = prefetch + 2
        pointers = [images.data_ptr() for images, _ in ld]  # each dropped before the next
        assert len(pointers) == 15
        assert len(set(pointers[:slots])) == slots
        assert all(pointers[i] == pointers[i % slots] for i in range(len(pointers)))


def test_a_held_tensor_keeps_its_batch_after_the_loader_and_batch_are_gone(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=8, shuffle="none")
    images, labels = next(iter(ld))
    expected = np.stack([shardpack.Dataset(dataset_path)[i].pixels for i in range(8)])
    expected = expected.transpose(0, 3, 1, 2)  # stored HWC, delivered NCHW
    del ld
    gc.collect()
    np.testing.assert_array_equal(images.numpy(), expected)
    assert labels.tolist() == [shardpack.Dataset(dataset_path)[i].label for i in range(8)]


def test_labels_are_copies_that_hold_no_slot(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=1)
    kept = [labels for _, labels in ld]  # 15 batches through a ring of 3 slots
    assert len(kept) == 15 and all(k.dtype == torch.int64 for k in kept)


def test_holding_too_many_batches_raises_instead_of_hanging(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=1, seed=4)
    it = iter(ld)
    held = [next(it), next(it), next(it)]  # the ring's 3 slots
    with pytest.raises(shardpack.FailedPreconditionError, match="slot") as e:
        next(it)
    assert isinstance(e.value, RuntimeError)
    del held, e
    gc.collect()
    rest = [labels for _, labels in it]  # the loader goes on where it was
    assert len(rest) == len(ld) - 3
    order = ld.epoch_order(0)
    ds = shardpack.Dataset(dataset_path)
    assert rest[0].tolist() == [ds[int(i)].label for i in order[12:16]]


def test_prefetch_plus_one_batches_may_be_held(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=2)
    window = []
    for images, _ in ld:
        window.append(images)
        if len(window) > 3:
            window.pop(0)
    assert len(window) == 3


def test_numpy_framework_yields_arrays_sharing_the_slot(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=1, framework="numpy")
    pointers = [images.ctypes.data for images, _ in ld]
    assert len(set(pointers)) == 3


def test_loop_variable_held_across_epochs_is_fine(dataset_path):
    # 60 samples in batches of 4: 15 batches; the last (14) sits in slot 14 % 7 == 0 of a
    # ring of prefetch + 2 = 7 slots, the one the next epoch's batch 0 needs.
    ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=5, seed=2)
    for epoch in range(3):
        ld.set_epoch(epoch)
        labels_seen = 0
        for images, labels in ld:  # `images` still holds the previous epoch's last batch  # noqa: B007
            labels_seen += len(labels)
        assert labels_seen == 60
    assert ld.stats().batches == 45


def test_ring_is_reused_across_epochs_when_no_batch_is_held(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=4, prefetch=1, framework="numpy")
    first = [b.data_address for b in ld.batches()]
    gc.collect()
    second = [b.data_address for b in ld.batches()]  # auto-advance to epoch 1
    assert set(first) == set(second) and len(set(first)) == 3
    assert ld.epoch == 1


def test_gil_is_released_while_waiting_for_a_batch(variable_path):
    import threading

    ld = shardpack.Loader(
        variable_path,
        batch_size=40,
        num_threads=1,
        prefetch=1,
        output_size=512,
        transform="random_resized_crop",
        filter="lanczos3",
        framework="numpy",
    )
    counts = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counts[0] += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    during = 0
    try:
        # Each epoch's first batch is started by set_epoch and made while next_batch waits
        # (tens of milliseconds), so the wait cannot find it ready, however long the spinner
        # took to start.
        for epoch in range(1, 4):
            ld.set_epoch(epoch)
            before = counts[0]
            ld.next_batch()
            during += counts[0] - before
    finally:
        stop.set()
        spinner.join()
    assert during > 1000


def test_writing_through_a_torch_view_of_dataset_pixels_is_harmless(dataset_path, lmdb_path):
    for path in (dataset_path, lmdb_path):
        ds = shardpack.Dataset(path)
        original = ds[5].pixels.copy()
        pixels = ds[5].pixels
        assert not pixels.flags.writeable  # numpy refuses; torch only warns (once)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            t = torch.from_numpy(pixels)
        t.add_(1)  # an in-place augmentation: was a SIGSEGV on the read-only map
        assert int(t[0, 0, 0]) == (int(original[0, 0, 0]) + 1) % 256
        again = shardpack.Dataset(path)[5].pixels
        np.testing.assert_array_equal(again, original)  # the file and other readers unchanged
        assert shardpack.verify(path).ok


def test_a_batch_still_referenced_at_exit_leaks_nothing(dataset_path):
    import subprocess
    import sys

    script = f"""
import torch, shardpack
ld = shardpack.Loader({dataset_path!r}, batch_size=4, normalize="imagenet")
images, labels = next(iter(ld))
w = torch.ones(3, requires_grad=True)
graph = (images * w[None, :, None, None]).sum()  # the batch lives on in an autograd graph
kept = [images, graph]
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "leak" not in r.stderr, r.stderr
