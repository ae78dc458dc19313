"""state_dict / load_state_dict: an interrupted run goes on byte for byte."""

import numpy as np
import pytest
from conftest import collect

import shardpack

OPTIONS = dict(
    batch_size=7,
    seed=11,
    output_size=24,
    transform="random_resized_crop",
    flip=True,
    framework="numpy",
)


def run(path, epochs, state=None, stop_after=None):
    """Batches (epoch, index, labels, pixels) from `state` through `epochs`."""
    ld = shardpack.Loader(path, state=state, **OPTIONS)
    out = []
    start = ld.epoch
    for epoch in range(start, epochs):
        ld.set_epoch(epoch)
        for batch in ld.batches():
            out.append((batch.epoch, batch.index, batch.labels, np.from_dlpack(batch).copy()))
            if stop_after is not None and len(out) == stop_after:
                return out, ld.state_dict()
    return out, ld.state_dict()


def test_resume_mid_epoch_gives_identical_batches(dataset_path):
    full, _ = run(dataset_path, epochs=2)
    assert len(full) == 18  # 9 batches per epoch
    head, state = run(dataset_path, epochs=2, stop_after=12)
    assert state["loader_state"].startswith("shardpack-loader-state 2 epoch=1 next_batch=3 ")
    tail, _ = run(dataset_path, epochs=2, state=state)
    resumed = head + tail
    assert [(e, i) for e, i, _, _ in resumed] == [(e, i) for e, i, _, _ in full]
    for (_, _, la, xa), (_, _, lb, xb) in zip(resumed, full):
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(xa, xb)


def test_load_state_dict_on_a_running_loader(dataset_path):
    ld = shardpack.Loader(dataset_path, **OPTIONS)
    it = ld.batches()
    next(it), next(it)
    state = ld.state_dict()
    expected = [(b.index, b.labels, np.from_dlpack(b).copy()) for b in it]
    ld.load_state_dict(state)
    ld.set_epoch(0)  # keeps the restored position
    got = [(b.index, b.labels, np.from_dlpack(b).copy()) for b in ld.batches()]
    assert [g[0] for g in got] == [e[0] for e in expected] == list(range(2, 9))
    for (_, la, xa), (_, lb, xb) in zip(got, expected):
        np.testing.assert_array_equal(la, lb)
        np.testing.assert_array_equal(xa, xb)


def test_set_epoch_after_iterating_restarts_the_epoch(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=10, framework="numpy")
    first, _, _ = collect(ld, limit=2)
    ld.set_epoch(0)
    again, _, _ = collect(ld)
    np.testing.assert_array_equal(again, ld.epoch_order(0))
    np.testing.assert_array_equal(first, again[:20])


def test_state_for_another_configuration_is_refused(dataset_path):
    state = shardpack.Loader(dataset_path, batch_size=7, seed=1).state_dict()
    with pytest.raises(shardpack.InvalidArgumentError, match="another configuration"):
        shardpack.Loader(dataset_path, batch_size=7, seed=2, state=state)
    with pytest.raises(shardpack.InvalidArgumentError, match="loader state"):
        shardpack.Loader(dataset_path, state={"loader_state": "garbage"})


def test_state_at_the_end_of_an_epoch_resumes_with_the_next(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=20, framework="numpy")
    collect(ld)
    state = ld.state_dict()
    again = shardpack.Loader(dataset_path, batch_size=20, framework="numpy", state=state)
    epochs = []
    for epoch in range(0, 2):
        again.set_epoch(epoch)
        epochs.append([b.epoch for b in again.batches()])
    assert epochs == [[], [1, 1, 1]]


def test_stats_count_across_every_load_state_dict(dataset_path):
    ld = shardpack.Loader(dataset_path, batch_size=4, framework="numpy")
    start = ld.state_dict()
    for _ in range(20):  # repositioned each batch, as Keras's out-of-order PyDataset does
        ld.next_batch()
        ld.load_state_dict(start)
    for _ in range(3):
        ld.next_batch()
    s = ld.stats()
    assert s.batches == 23 and s.samples == 23 * 4, s
    assert 0.0 <= s.mean_ready_batches and s.io
