"""NVIDIA DALI (nvidia-dali-cuda130), CPU pipelines only: fn.readers.tfrecord with the .idx
files shardpack writes reads its shards, whole and split by DALI's own sharding
(shard_id, num_shards), with the same pixels and labels; its image decoder decodes encoded
and mixed datasets; fn.readers.caffe reads a Caffe-schema LMDB shard (convert --format lmdb
--lmdb-schema caffe), raw or encoded."""

import shutil

import numpy as np
import pytest

from conftest import manifest

try:
    from nvidia.dali import fn, pipeline_def
    import nvidia.dali.tfrecord as tfrec
    import nvidia.dali.types as types
except Exception as e:  # ImportError, or a missing shared library
    pytest.skip(f"NVIDIA DALI cannot be imported here ({type(e).__name__}: {e}); "
                "bash scripts/install-interop.sh installs nvidia-dali-cuda130",
                allow_module_level=True)


def dali_records(dataset, shard_id, num_shards):
    """Every (filename, label, pixels) DALI's TFRecord reader gives for one DALI shard, in
    its order. batch_size 1 and no padding: one iteration per record of the shard."""
    m = manifest(dataset)
    paths = [str(dataset / s["file"]) for s in m["shards"]]
    indexes = [str(dataset / s["index"]["file"]) for s in m["shards"]]

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        f = fn.readers.tfrecord(
            path=paths, index_path=indexes, shard_id=shard_id, num_shards=num_shards,
            random_shuffle=False, name="reader",
            features={
                "image/raw": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/height": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                "image/width": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                "image/channels": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
            })
        return (f["image/raw"], f["image/height"], f["image/width"], f["image/channels"],
                f["image/class/label"], f["image/filename"])

    p = pipe()
    p.build()
    meta = p.reader_meta("reader")
    assert meta["number_of_shards"] == num_shards and meta["shard_id"] == shard_id
    # DALI splits the records into contiguous ranges: [N*i/n, N*(i+1)/n).
    n = m["num_samples"]
    size = n * (shard_id + 1) // num_shards - n * shard_id // num_shards
    out = []
    for _ in range(size):
        raw, h, w, c, label, name = (np.array(t[0]) for t in p.run())
        out.append((name.tobytes().decode(), int(label[0]),
                    raw.reshape(int(h[0]), int(w[0]), int(c[0]))))
    return out


@pytest.fixture(scope="module")
def dataset(cli, image_tree, tmp_path_factory):
    dst = tmp_path_factory.mktemp("dali") / "ds"
    cli("convert", image_tree.root, dst, "--keep", "--shard-records", "5", "--quiet")
    return dst


def test_dali_reads_every_record_with_our_index_files(dataset, image_tree):
    records = dali_records(dataset, 0, 1)
    assert sorted(name for name, _, _ in records) == sorted(image_tree.images)
    for name, label, pixels in records:
        source, source_label, _ = image_tree.images[name]
        assert label == source_label
        np.testing.assert_array_equal(pixels, source)


@pytest.mark.parametrize("num_shards", [2, 3, 5])
def test_dali_sharding_splits_the_records_disjointly(dataset, image_tree, num_shards):
    whole = [name for name, _, _ in dali_records(dataset, 0, 1)]
    parts = []
    for shard_id in range(num_shards):
        part = dali_records(dataset, shard_id, num_shards)
        for name, label, pixels in part:
            np.testing.assert_array_equal(pixels, image_tree.images[name][0])
            assert label == image_tree.images[name][1]
        parts.extend(name for name, _, _ in part)
    assert parts == whole  # contiguous, disjoint, together everything, in file order


def caffe_lmdb_dir(cli, image_tree, tmp_path, *flags):
    """Converts the tree (8x6) in the Caffe schema with `flags`, and as Example records for
    reference; returns (an LMDB directory holding the one shard as data.mdb, the reference).
    Caffe (and DALI's Caffe reader) open an LMDB directory holding data.mdb."""
    dst = tmp_path / "caffe"
    cli("convert", image_tree.root, dst, "--size", "8x6", "--format", "lmdb",
        "--lmdb-schema", "caffe", *flags, "--quiet")
    reference = tmp_path / "reference"
    cli("convert", image_tree.root, reference, "--size", "8x6", "--quiet")
    m = manifest(dst)
    assert len(m["shards"]) == 1
    lmdb_dir = tmp_path / "caffe-lmdb"
    lmdb_dir.mkdir()
    shutil.copy(dst / m["shards"][0]["file"], lmdb_dir / "data.mdb")
    return lmdb_dir, reference


def test_dali_caffe_reader_reads_a_caffe_schema_shard(cli, image_tree, tmp_path):
    lmdb_dir, reference = caffe_lmdb_dir(cli, image_tree, tmp_path)

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        images, labels = fn.readers.caffe(path=str(lmdb_dir), random_shuffle=False,
                                          name="reader")
        return images, labels

    p = pipe()
    p.build()
    assert p.reader_meta("reader")["epoch_size"] == 12
    expected = dali_records(reference, 0, 1)  # the same conversion as Example records
    for name, label, pixels in expected:
        images, labels = p.run()
        got = np.array(images[0])
        assert int(np.array(labels[0]).reshape(-1)[0]) == label, name
        # DALI hands out Datum.data as it is stored, shaped (H, W, C) without reordering
        # the bytes; they are Caffe's CHW planes, blue first.
        h, w, c = pixels.shape
        assert got.shape == (h, w, c)
        chw = got.reshape(c, h, w)
        np.testing.assert_array_equal(chw.transpose(1, 2, 0)[:, :, ::-1], pixels, err_msg=name)


def test_dali_decodes_an_encoded_dataset_to_the_raw_datasets_pixels(cli, image_tree, tmp_path):
    """convert --encoding png: DALI's TFRecord reader with our .idx files and its CPU image
    decoder (fn.decoders.image) give exactly the pixels of the raw conversion."""
    cli("convert", image_tree.root, tmp_path / "png", "--keep", "--encoding", "png",
        "--shard-records", "5", "--quiet")
    m = manifest(tmp_path / "png")
    paths = [str(tmp_path / "png" / s["file"]) for s in m["shards"]]
    indexes = [str(tmp_path / "png" / s["index"]["file"]) for s in m["shards"]]

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        f = fn.readers.tfrecord(
            path=paths, index_path=indexes, random_shuffle=False, name="reader",
            features={
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
                "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
            })
        images = fn.decoders.image(f["image/encoded"], device="cpu", output_type=types.RGB)
        return images, f["image/class/label"], f["image/filename"]

    p = pipe()
    p.build()
    seen = []
    for _ in range(m["num_samples"]):
        images, labels, names = (np.array(t[0]) for t in p.run())
        name = names.tobytes().decode()
        source, source_label, _ = image_tree.images[name]
        assert int(labels[0]) == source_label
        np.testing.assert_array_equal(images, source, err_msg=name)
        seen.append(name)
    assert sorted(seen) == sorted(image_tree.images)


def test_dali_caffe_reader_decodes_encoded_datums_to_the_raw_pixels(cli, image_tree, tmp_path):
    """--encoding png --lmdb-schema caffe: DALI's Caffe reader returns each Datum's file and
    fn.decoders.image decodes it to exactly the raw conversion's pixels (PNG is lossless)."""
    lmdb_dir, reference = caffe_lmdb_dir(cli, image_tree, tmp_path, "--encoding", "png")

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1)
    def pipe():
        files, labels = fn.readers.caffe(path=str(lmdb_dir), random_shuffle=False,
                                         name="reader")
        return fn.decoders.image(files, device="cpu", output_type=types.RGB), labels

    p = pipe()
    p.build()
    expected = dali_records(reference, 0, 1)
    assert p.reader_meta("reader")["epoch_size"] == len(expected)
    for name, label, pixels in expected:
        images, labels = p.run()
        assert int(np.array(labels[0]).reshape(-1)[0]) == label, name
        np.testing.assert_array_equal(np.array(images[0]), pixels, err_msg=name)


def test_dali_reads_a_mixed_dataset_with_a_conditional(cli, tmp_path):
    """convert --encoding mixed: DALI's TFRecord reader takes both image features (empty
    default) and, with conditional execution on image/format, decodes image/encoded in a
    JPEG record and reshapes image/raw in a raw one. Raw records (the noise image) give exactly the raw
    conversion's pixels, JPEG ones at least 30 dB from them."""
    import wire

    y, x = np.mgrid[0:64, 0:64]
    smooth = np.stack([x * 4, y * 4, (x + y) * 2], axis=-1).astype(np.uint8)
    noise = np.random.default_rng(7).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    (tmp_path / "src" / "a").mkdir(parents=True)
    for name, px in (("smooth", smooth), ("noise", noise)):
        wire.write_png(tmp_path / "src" / "a" / f"{name}.png", px)
    cli("convert", tmp_path / "src", tmp_path / "raw", "--size", "48x48", "--quiet")
    cli("convert", tmp_path / "src", tmp_path / "mixed", "--size", "48x48", "--quiet",
        "--encoding", "mixed", "--quality", "95", "--subsampling", "444")
    m = manifest(tmp_path / "mixed")
    assert m["image"]["encoding"] == "mixed"
    reference = {name: pixels for name, _, pixels in dali_records(tmp_path / "raw", 0, 1)}

    @pipeline_def(batch_size=1, num_threads=1, device_id=None, seed=1, enable_conditionals=True)
    def pipe():
        f = fn.readers.tfrecord(
            path=[str(tmp_path / "mixed" / s["file"]) for s in m["shards"]],
            index_path=[str(tmp_path / "mixed" / s["index"]["file"]) for s in m["shards"]],
            random_shuffle=False, name="reader",
            features={
                "image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/raw": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/format": tfrec.FixedLenFeature((), tfrec.string, ""),
                "image/filename": tfrec.FixedLenFeature((), tfrec.string, ""),
            })
        # image/format is "JPEG" or "raw": its first byte tells them apart.
        is_jpeg = f["image/format"][0] == ord("J")
        if is_jpeg:
            image = fn.decoders.image(f["image/encoded"], device="cpu", output_type=types.RGB)
        else:
            image = fn.reshape(f["image/raw"], shape=[48, 48, 3])
        return image, is_jpeg, f["image/filename"]

    p = pipe()
    p.build()
    kinds = {}
    for _ in range(m["num_samples"]):
        image, is_jpeg, name = (np.array(t[0]) for t in p.run())
        name = name.tobytes().decode()
        kinds[name] = "jpeg" if bool(is_jpeg) else "raw"
        want = reference[name]
        if kinds[name] == "raw":
            np.testing.assert_array_equal(image, want, err_msg=name)
        else:
            mse = np.mean((image.astype(np.float64) - want.astype(np.float64)) ** 2)
            assert 10 * np.log10(255.0 ** 2 / max(mse, 1e-12)) >= 30, name
    assert kinds == {"a/noise.png": "raw", "a/smooth.png": "jpeg"}
