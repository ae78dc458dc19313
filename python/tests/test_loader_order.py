"""The Python loader delivers exactly the C++ loader's order and the stored samples."""

import numpy as np
import pytest
from conftest import collect

import shardpack


def loader(path, **kw):
    # The samples as stored (HWC), to compare with Dataset pixels; the default layout is
    # test_one_layout_for_every_dtype's.
    kw.setdefault("framework", "numpy")
    kw.setdefault("layout", "NHWC")
    return shardpack.Loader(path, **kw)


@pytest.mark.parametrize("shuffle", ["none", "global", "block"])
def test_batches_follow_epoch_order_and_hold_the_stored_samples(dataset_path, shuffle):
    ds = shardpack.Dataset(dataset_path)
    ld = loader(ds, batch_size=8, shuffle=shuffle, seed=3, block_size=4, block_window=2)
    for epoch in range(2):
        ld.set_epoch(epoch)
        indices, labels, images = collect(ld)
        np.testing.assert_array_equal(indices, ld.epoch_order(epoch))
        assert sorted(indices.tolist()) == list(range(60))
        pixels = np.concatenate(images)
        for k, i in enumerate(indices):
            assert labels[k] == ds[int(i)].label
            np.testing.assert_array_equal(pixels[k], ds[int(i)].pixels)
    if shuffle == "none":
        np.testing.assert_array_equal(ld.epoch_order(0), np.arange(60))
    else:
        assert not np.array_equal(ld.epoch_order(0), ld.epoch_order(1))


def test_lmdb_dataset_reads_the_same_way(lmdb_path):
    ds = shardpack.Dataset(lmdb_path)
    ld = loader(ds, batch_size=7, seed=1)
    indices, labels, images = collect(ld)
    np.testing.assert_array_equal(indices, ld.epoch_order(0))
    for k, i in enumerate(indices[:20]):
        np.testing.assert_array_equal(np.concatenate(images)[k], ds[int(i)].pixels)


def test_order_and_bytes_do_not_depend_on_threads_or_prefetch(dataset_path):
    a = loader(
        dataset_path,
        batch_size=8,
        seed=5,
        num_threads=1,
        prefetch=1,
        output_size=24,
        random_crop=True,
        flip=True,
    )
    b = loader(
        dataset_path,
        batch_size=8,
        seed=5,
        num_threads=2,
        prefetch=4,
        output_size=24,
        random_crop=True,
        flip=True,
    )
    ia, _, xa = collect(a)
    ib, _, xb = collect(b)
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(np.concatenate(xa), np.concatenate(xb))


def test_seed_changes_the_order(dataset_path):
    assert not np.array_equal(
        loader(dataset_path, seed=1).epoch_order(0), loader(dataset_path, seed=2).epoch_order(0)
    )


@pytest.mark.parametrize("tail", ["partial", "drop", "pad"])
def test_ranks_split_the_epoch(dataset_path, tail):
    world = 4  # 60 samples: 15 per rank; batches of 4 -> 3 full + 1 of 3
    parts = []
    for rank in range(world):
        ld = loader(dataset_path, batch_size=4, seed=9, rank=rank, world_size=world, tail=tail)
        sizes = [b.size for b in ld.batches()]
        ld.set_epoch(0)
        assert ld.epoch == 0
        batches = list(ld.batches())
        valid = np.concatenate([b.indices[: b.valid] for b in batches])
        np.testing.assert_array_equal(valid, ld.epoch_order(0)[: len(valid)])
        expected = {"partial": [4, 4, 4, 3], "drop": [4, 4, 4], "pad": [4, 4, 4, 4]}[tail]
        assert sizes == expected and len(ld) == len(expected)
        if tail == "pad":
            assert batches[-1].valid == 3
            assert batches[-1].indices[3] == batches[0].indices[0]
        parts.append(valid)
        del batches
    everything = np.concatenate(parts)
    if tail == "drop":
        assert len(everything) == 48 and len(set(everything.tolist())) == 48
    else:
        assert sorted(everything.tolist()) == list(range(60))


def test_drop_last_is_tail_drop(dataset_path):
    ld = loader(dataset_path, batch_size=16, drop_last=True)
    assert len(ld) == 3 and [b.size for b in ld.batches()] == [16, 16, 16]
    with pytest.raises(ValueError, match="contradicts"):
        loader(dataset_path, drop_last=True, tail="pad")


def test_every_for_loop_is_a_new_epoch_and_remaining_goes_on_explicitly(dataset_path):
    ld = loader(dataset_path, batch_size=16, seed=2)
    first = []
    for n, (images, labels) in enumerate(ld):  # noqa: B007 (held on purpose)
        first.append(labels)
        if n == 1:
            break
    del images  # the loop variable would hold batch 1's slot into the next epoch
    rest = [labels for _, labels in ld.remaining()]
    assert len(first) + len(rest) == len(ld) == 4
    assert ld.epoch == 0
    ds = shardpack.Dataset(dataset_path)
    expected = [ds[int(i)].label for i in ld.epoch_order(0)]
    np.testing.assert_array_equal(np.concatenate(first + rest), expected)  # epoch 0, whole
    for batch in ld:  # a new loop: epoch 1
        break
    del batch
    assert ld.epoch == 1
    third = [labels for _, labels in ld]  # after a break: the next epoch, not the rest
    assert ld.epoch == 2 and len(third) == 4
    it = iter(ld)  # an iterator continues itself; a newer pass stops it
    next(it)
    newer = iter(ld)
    assert list(it) == [] and ld.epoch == 4
    assert len(list(newer)) == 4


def test_one_layout_for_every_dtype_nchw_by_default_and_never_a_copy(dataset_path):
    def first(**kw):
        return next(iter(shardpack.Loader(dataset_path, batch_size=5, shuffle="none",
                                          framework="numpy", **kw)))

    stored, labels = first(layout="NHWC")
    assert stored.shape == (5, 32, 32, 3) and stored.dtype == np.uint8
    assert labels.dtype == np.int64 and labels.shape == (5,)
    images, _ = first()  # the default: NCHW, over the HWC memory (channels_last)
    assert images.shape == (5, 3, 32, 32) and images.strides == (3072, 1, 96, 3)
    np.testing.assert_array_equal(images, stored.transpose(0, 3, 1, 2))
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    f32, _ = first(normalize=(mean, std))
    assert f32.shape == (5, 3, 32, 32) and f32.dtype == np.float32 and f32.flags.c_contiguous
    expected = (images / 255.0 - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    np.testing.assert_allclose(f32, expected, atol=1e-5)
    f32_nhwc, _ = first(normalize=(mean, std), layout="NHWC")
    assert f32_nhwc.shape == (5, 32, 32, 3)
    np.testing.assert_array_equal(f32_nhwc, f32.transpose(0, 2, 3, 1))
    f16, _ = first(normalize=(mean, std), dtype="float16")
    assert f16.dtype == np.float16 and f16.shape == (5, 3, 32, 32)
    np.testing.assert_allclose(f16.astype(np.float32), f32, atol=2e-3)
    unit, _ = first(dtype="float32")
    np.testing.assert_allclose(unit, images / 255.0, atol=1e-6)
    with pytest.raises(shardpack.InvalidArgumentError, match='layout must be "NCHW" or "NHWC"'):
        first(layout="CHW")


def test_variable_size_dataset_needs_an_output_size(variable_path):
    with pytest.raises(shardpack.InvalidArgumentError):
        loader(variable_path)
    ld = loader(variable_path, batch_size=10, output_size=(24, 28), transform="random_resized_crop")
    images, _ = next(iter(ld))
    assert images.shape == (10, 24, 28, 3)
    center = loader(variable_path, batch_size=10, output_size=16)
    assert next(iter(center))[0].shape == (10, 16, 16, 3)


def test_several_loaders_interleave_in_one_process(dataset_path):
    a = loader(dataset_path, batch_size=8, seed=1)
    b = loader(dataset_path, batch_size=6, seed=2, shuffle="block")
    ia, ib = [], []
    gb = b.batches()
    for xa, xb in zip(a.batches(), gb):
        ia.append(xa.indices)
        ib.append(xb.indices)
    ib += [x.indices for x in gb]
    np.testing.assert_array_equal(np.concatenate(ia), a.epoch_order(0)[: 8 * len(ia)])
    np.testing.assert_array_equal(np.concatenate(ib), b.epoch_order(0))


def test_loaders_run_in_parallel_threads(dataset_path):
    import threading

    results = {}

    def run(seed):
        ld = loader(dataset_path, batch_size=4, seed=seed, num_threads=1)
        got = []
        for epoch in range(3):
            ld.set_epoch(epoch)
            got.append(np.concatenate([b.indices for b in ld.batches()]))
            assert np.array_equal(got[-1], ld.epoch_order(epoch))
        results[seed] = got

    threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [0, 1, 2, 3]


def test_bad_options_raise_value_errors(dataset_path):
    with pytest.raises(shardpack.InvalidArgumentError, match="batch_size"):
        loader(dataset_path, batch_size=0)
    with pytest.raises(ValueError, match="shuffle"):
        loader(dataset_path, shuffle="random")
    with pytest.raises(shardpack.InvalidArgumentError, match="rank"):
        loader(dataset_path, rank=2, world_size=2)
    with pytest.raises(ValueError, match="device"):
        loader(dataset_path, device="tpu")
    with pytest.raises(ValueError, match="normalize"):
        loader(dataset_path, normalize="imagenet", dtype="uint8")
    with pytest.raises(FileNotFoundError):
        loader(dataset_path + "-missing")


def test_read_ahead_changes_no_batch(dataset_path):
    orders = []
    for read_ahead in (0, 1, 128 << 20):
        ld = loader(dataset_path, batch_size=7, seed=3, read_ahead=read_ahead)
        orders.append(np.concatenate([b.indices for b in ld.batches()]))
    assert all(np.array_equal(orders[0], o) for o in orders[1:])
    with pytest.raises(shardpack.InvalidArgumentError, match="read_ahead must be an integer"):
        loader(dataset_path, read_ahead=-1)


def test_huge_pages_change_no_batch_and_the_stats_say_which(dataset_path):
    got = {}
    for huge_pages in ("on", "off", "auto"):
        ld = loader(dataset_path, batch_size=7, seed=3, io="mapped", huge_pages=huge_pages)
        indices, labels, images = collect(ld)
        got[huge_pages] = (indices, labels, np.concatenate(images))
        io = ld.stats().io
        if huge_pages == "on":
            assert io.endswith("; uncached pages read 2 MiB at a time by 8 threads (forced)"), io
        elif huge_pages == "off":
            assert io.endswith("; uncached pages hinted 4 KiB at a time (forced)"), io
        else:
            assert any(why in io for why in ("(the dataset fits in memory)", "reported to the host", "this kernel lacks")), io
    for way in ("off", "auto"):
        for a, b in zip(got["on"], got[way]):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(shardpack.InvalidArgumentError, match="huge_pages must be one of 'auto', 'on', 'off'"):
        loader(dataset_path, huge_pages=True)


def test_both_io_paths_deliver_the_same_batches(dataset_path):
    got = {}
    for io in ("mapped", "readahead"):
        ld = loader(dataset_path, batch_size=7, seed=3, io=io, io_depth=4)
        indices, labels, images = collect(ld)
        got[io] = (indices, labels, np.concatenate(images))
        stats = ld.stats()
        assert stats.io.startswith("mapped" if io == "mapped" else "read-ahead: "), stats.io
        # Read-ahead reads from storage, or from the page cache where it finds the batch there.
        assert (stats.bytes_read + stats.batches_from_page_cache > 0) == (io == "readahead")
        # The mapped path's scan for blocks missing from the page cache: the dataset was
        # just written, so it finds nothing (and the read-ahead path has no scan).
        assert stats.bytes_found_missing == 0
    for a, b in zip(got["mapped"], got["readahead"]):
        np.testing.assert_array_equal(a, b)
    assert len(got["mapped"][0]) == 60
    assert loader(dataset_path).stats().io.startswith("mapped (dataset "), "a small dataset fits"
    with pytest.raises(shardpack.InvalidArgumentError, match="io must be one of 'auto', 'mapped', 'readahead'"):
        loader(dataset_path, io="direct")
    with pytest.raises(shardpack.InvalidArgumentError, match="io_depth"):
        loader(dataset_path, io_depth=0)
