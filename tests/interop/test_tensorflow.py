"""TensorFlow (tensorflow-cpu) against shardpack, both ways:

- tf.data.TFRecordDataset + tf.io.parse_single_example read every record of shards that
  `shardpack convert` wrote, and get the pixels, labels and metadata shardpack stored (as
  an independent reader of the spec reads them, and as the source PNGs hold them);
- records written by tf.io.TFRecordWriter in shardpack's schema become a dataset with
  `shardpack adopt`, which `shardpack verify`, the Dataset API (samples/read_dataset) and
  the Loader (samples/train_loop) read;
- build_image_data.py-style records (image/encoded JPEG) pass `shardpack verify
  --tfrecord` and `shardpack convert` re-packs them, rejecting bad records by file,
  record and offset.
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest

import wire
from conftest import manifest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu is not installed "
                         "(bash scripts/install-interop.sh installs it)")

SPEC = {
    "image/raw": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/channels": tf.io.FixedLenFeature([], tf.int64),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    "image/class/text": tf.io.FixedLenFeature([], tf.string),
    "image/filename": tf.io.FixedLenFeature([], tf.string),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/raw/crc32c": tf.io.FixedLenFeature([], tf.int64),
}


def _bytes(v):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))


def _int64(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))


def shard_files(dataset):
    return [str(dataset / s["file"]) for s in manifest(dataset)["shards"]]


@pytest.mark.parametrize("geometry", [
    ["--keep"],
    ["--size", "16x12", "--fit", "crop"],
    ["--max-side", "10", "--channels", "1"],
], ids=["keep", "fixed-16x12", "max-side-gray"])
def test_tensorflow_reads_every_record_of_converted_shards(cli, image_tree, tmp_path, geometry):
    dst = tmp_path / "ds"
    cli("convert", image_tree.root, dst, *geometry, "--shard-records", "5", "--quiet")
    m = manifest(dst)
    files = shard_files(dst)
    assert len(files) == 3

    independent = [payload for f in files for _, payload in wire.read_tfrecord(f)]
    records = [r.numpy() for r in tf.data.TFRecordDataset(files)]
    assert records == [bytes(p) for p in independent]  # TF frames exactly the spec's records

    seen = []
    for record, payload in zip(records, independent):
        t = tf.io.parse_single_example(record, SPEC)
        ours = wire.parse_example(payload)
        h, w, c = (int(t[k]) for k in ("image/height", "image/width", "image/channels"))
        raw = t["image/raw"].numpy()
        label = int(t["image/class/label"])
        name = t["image/filename"].numpy().decode()
        assert len(raw) == h * w * c
        assert int(t["image/raw/crc32c"]) == wire.crc32c(raw)
        assert t["image/format"].numpy() == b"raw"
        assert t["image/class/text"].numpy().decode() == m["classes"][label]["name"]
        for key, value in ((("image/raw"), raw), ("image/filename", name.encode()),
                           ("image/class/text", t["image/class/text"].numpy())):
            assert ours[key] == ("bytes", [value]), key
        for key in ("image/height", "image/width", "image/channels", "image/class/label",
                    "image/raw/crc32c"):
            assert ours[key] == ("int64", [int(t[key])]), key
        source, source_label, source_class = image_tree.images[name]
        assert (label, m["classes"][label]["name"]) == (source_label, source_class)
        assert c == m["image"]["channels"]
        if "height" in m["image"]:
            assert (h, w) == (m["image"]["height"], m["image"]["width"])
        if geometry == ["--keep"]:
            np.testing.assert_array_equal(np.frombuffer(raw, np.uint8).reshape(h, w, c), source)
        seen.append(name)
    assert sorted(seen) == sorted(image_tree.images)
    assert len(seen) == m["num_samples"]


def write_tf_raw_dataset(directory, count=12, shape=(8, 6, 3), files=2, seed=7):
    """tf.io.TFRecordWriter writes shardpack's schema; returns [(pixels, label)] in order."""
    rng = np.random.default_rng(seed)
    samples = []
    for f in range(files):
        with tf.io.TFRecordWriter(str(directory / f"train-{f:05d}-of-{files:05d}")) as writer:
            for k in range(count // files):
                n = f * (count // files) + k
                px = rng.integers(0, 256, shape, dtype=np.uint8)
                raw = px.tobytes()
                label = n % 3
                example = tf.train.Example(features=tf.train.Features(feature={
                    "image/raw": _bytes(raw),
                    "image/height": _int64(shape[0]),
                    "image/width": _int64(shape[1]),
                    "image/channels": _int64(shape[2]),
                    "image/class/label": _int64(label),
                    "image/class/text": _bytes(f"class-{label}".encode()),
                    "image/filename": _bytes(f"sample{n}.png".encode()),
                    "image/format": _bytes(b"raw"),
                    "image/raw/crc32c": _int64(wire.crc32c(raw)),
                }))
                writer.write(example.SerializeToString())
                samples.append((px, label))
    return samples


def test_tensorflow_written_dataset_is_adopted_verified_and_read(cli, samples_dir, tmp_path):
    d = tmp_path / "tf-written"
    d.mkdir()
    samples = write_tf_raw_dataset(d)
    cli("verify", d, expect=2)  # TFRecord files alone are not a dataset
    out = cli("adopt", d)
    assert "adopted 2 files, 12 records, 3 classes" in out.stdout
    m = manifest(d)
    assert [s["file"] for s in m["shards"]] == ["train-00000-of-00002", "train-00001-of-00002"]
    assert [s["index"]["file"] for s in m["shards"]] == [
        "train-00000-of-00002.idx", "train-00001-of-00002.idx"]
    assert (m["image"]["height"], m["image"]["width"], m["image"]["channels"]) == (8, 6, 3)
    assert [c["name"] for c in m["classes"]] == ["class-0", "class-1", "class-2"]
    assert "OK" in cli("verify", d).stdout

    # The Dataset API reads every sample (with its checksums): per-class counts and means.
    rd = subprocess.run([samples_dir / "read_dataset", d], capture_output=True, text=True)
    assert rd.returncode == 0, rd.stderr
    for label in range(3):
        pixels = [px for px, lb in samples if lb == label]
        mean = np.mean([px.mean() for px in pixels])
        line = re.search(rf"class {label} class-{label}\s+(\d+) samples, mean pixel ([\d.]+)",
                         rd.stdout)
        assert line, rd.stdout
        assert int(line.group(1)) == len(pixels)
        assert abs(float(line.group(2)) - mean) <= 0.051

    # The Loader: one epoch in batches of 4; its checksum sums each sample's first byte.
    tl = subprocess.run([samples_dir / "train_loop", d, "--epochs", "1", "--batch-size", "4"],
                        capture_output=True, text=True)
    assert tl.returncode == 0, tl.stderr
    assert "epoch 0: 12 samples" in tl.stdout
    assert f"checksum {sum(int(px.flat[0]) for px, _ in samples)}" in tl.stdout

    # A flipped pixel is named by file, record and offset.
    path = d / "train-00001-of-00002"
    offset, payload = wire.read_tfrecord(path)[2]
    data = bytearray(path.read_bytes())
    data[offset + 12 + len(payload) - 1] ^= 1  # the last pixel byte of record 2
    path.write_bytes(bytes(data))
    bad = cli("verify", d, expect=1)
    assert f"train-00001-of-00002: record 2 at offset {offset}: data checksum" in bad.stderr
    tl = subprocess.run([samples_dir / "train_loop", d, "--epochs", "1", "--batch-size", "4"],
                        capture_output=True, text=True)
    assert tl.returncode != 0 and "train-00001-of-00002" in tl.stderr, tl.stdout + tl.stderr


def build_image_data_example(jpeg, label, text, h, w, filename):
    """The features of TensorFlow's models/research/inception build_image_data.py."""
    return tf.train.Example(features=tf.train.Features(feature={
        "image/height": _int64(h),
        "image/width": _int64(w),
        "image/colorspace": _bytes(b"RGB"),
        "image/channels": _int64(3),
        "image/class/label": _int64(label),
        "image/class/text": _bytes(text.encode()),
        "image/format": _bytes(b"JPEG"),
        "image/filename": _bytes(filename.encode()),
        "image/encoded": _bytes(jpeg),
    })).SerializeToString()


def test_build_image_data_records_verify_and_convert(cli, image_tree, tmp_path):
    src = tmp_path / "tf-jpeg"
    src.mkdir()
    items = sorted(image_tree.images.items())
    jpegs = {}
    for f in range(2):
        with tf.io.TFRecordWriter(str(src / f"train-{f:05d}-of-00002")) as writer:
            for rel, (px, label, name) in items[f::2]:
                jpegs[rel] = tf.io.encode_jpeg(px, quality=95).numpy()
                # build_image_data.py's labels are 1-based (0 is "background").
                writer.write(build_image_data_example(jpegs[rel], label + 1, name,
                                                      px.shape[0], px.shape[1], rel))
    out = cli("verify", "--tfrecord", src)
    assert ": OK: 2 files, 12 records" in out.stdout

    dst = tmp_path / "repacked"
    summary = json.loads(cli("convert", src, dst, "--keep", "--json", "--quiet").stdout)
    assert (summary["inputs"], summary["written"], summary["rejected"]) == (12, 12, 0)
    cli("verify", dst)
    m = manifest(dst)
    assert m["classes"][0] == {"name": "0", "count": 0}
    assert [c["name"] for c in m["classes"][1:]] == ["001.ant", "002.bee", "003.cat"]
    worst = 0
    for record in tf.data.TFRecordDataset(shard_files(dst)):
        t = tf.io.parse_single_example(record, SPEC)
        rel = t["image/filename"].numpy().decode()
        px, label, name = image_tree.images[rel]
        assert int(t["image/class/label"]) == label + 1
        expected = tf.io.decode_jpeg(jpegs[rel], dct_method="INTEGER_ACCURATE").numpy()
        got = np.frombuffer(t["image/raw"].numpy(), np.uint8).reshape(expected.shape)
        worst = max(worst, int(np.abs(got.astype(int) - expected.astype(int)).max()))
    # Both decode with libjpeg-turbo's accurate integer DCT and fancy upsampling.
    assert worst == 0


def test_bad_tensorflow_records_are_named_by_file_record_and_offset(cli, image_tree, tmp_path):
    src = tmp_path / "tf-bad"
    src.mkdir()
    px, label, name = image_tree.images["001.ant/img0.png"]
    jpeg = tf.io.encode_jpeg(px).numpy()
    path = src / "train-00000-of-00001"
    good = build_image_data_example(jpeg, 1, name, px.shape[0], px.shape[1], "a.jpg")
    truncated = build_image_data_example(jpeg[:len(jpeg) // 2], 1, name, px.shape[0],
                                         px.shape[1], "b.jpg")
    no_label = tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": _bytes(jpeg), "image/format": _bytes(b"JPEG")})).SerializeToString()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for example in (good, good, truncated, no_label, good):
            writer.write(example)
    offsets = [offset for offset, _ in wire.read_tfrecord(path)]
    data = bytearray(path.read_bytes())
    data[offsets[1] + 12 + 20] ^= 0x40  # record 1: a payload byte, so its data checksum
    path.write_bytes(bytes(data))

    bad = cli("verify", "--tfrecord", src, expect=1)
    lines = [l for l in bad.stderr.splitlines() if l.startswith("shardpack verify: ")]
    assert len(lines) == 3, bad.stderr
    assert lines[0].startswith(f"shardpack verify: train-00000-of-00001: record 1 at offset "
                               f"{offsets[1]}: data checksum")
    assert lines[1].startswith(f"shardpack verify: train-00000-of-00001: record 2 at offset "
                               f"{offsets[2]}: image/encoded: Corruption: JPEG")
    assert lines[2].startswith(f"shardpack verify: train-00000-of-00001: record 3 at offset "
                               f"{offsets[3]}: feature image/class/label: expected one int64")

    dst = tmp_path / "out"
    summary = json.loads(cli("convert", src, dst, "--keep", "--json", "--quiet").stdout)
    assert (summary["inputs"], summary["written"], summary["rejected"]) == (5, 2, 3)
    rows = (dst / "rejects.tsv").read_text().splitlines()
    assert rows[0] == "path\treason"
    paths = sorted(row.split("\t")[0] for row in rows[1:])
    assert paths == [f"train-00000-of-00001: record {i} at offset {offsets[i]}" for i in (1, 2, 3)]
    cli("verify", dst)


ENCODED_SPEC = {
    "image/encoded": tf.io.FixedLenFeature([], tf.string),
    "image/format": tf.io.FixedLenFeature([], tf.string),
    "image/height": tf.io.FixedLenFeature([], tf.int64),
    "image/width": tf.io.FixedLenFeature([], tf.int64),
    "image/channels": tf.io.FixedLenFeature([], tf.int64),
    "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    "image/class/text": tf.io.FixedLenFeature([], tf.string),
    "image/filename": tf.io.FixedLenFeature([], tf.string),
    "image/encoded/crc32c": tf.io.FixedLenFeature([], tf.int64),
}


def _decoded_by_filename(files, spec, decode):
    out = {}
    for record in tf.data.TFRecordDataset(files):
        t = tf.io.parse_single_example(record, spec)
        out[t["image/filename"].numpy().decode()] = (t, decode(t))
    return out


@pytest.mark.parametrize("encoding", ["png", "jpeg"])
def test_tensorflow_decodes_every_encoded_record_to_the_raw_datasets_pixels(cli, image_tree,
                                                                           tmp_path, encoding):
    """convert --encoding: tf.io.parse_single_example + tf.io.decode_image read every record.
    PNG is lossless: TF's pixels are exactly the raw conversion's. JPEG at quality 95 with
    4:4:4 chroma: at least 30 dB PSNR against them (these 16x12 synthetic patterns, all
    edges, measured 35 dB; real photos are measured by bench/encoded_size)."""
    geometry = ["--size", "16x12", "--fit", "crop", "--shard-records", "5", "--quiet"]
    cli("convert", image_tree.root, tmp_path / "raw", *geometry)
    extra = ["--quality", "95", "--subsampling", "444"] if encoding == "jpeg" else []
    cli("convert", image_tree.root, tmp_path / "enc", *geometry, "--encoding", encoding, *extra)
    m = manifest(tmp_path / "enc")
    assert m["format_version"] == "1.3"
    assert m["image"]["layout"] == "encoded" and m["image"]["encoding"] == encoding
    cli("verify", "--decode", tmp_path / "enc")

    raw = _decoded_by_filename(
        shard_files(tmp_path / "raw"), SPEC,
        lambda t: np.frombuffer(t["image/raw"].numpy(), np.uint8).reshape(
            int(t["image/height"]), int(t["image/width"]), int(t["image/channels"])))
    enc = _decoded_by_filename(
        shard_files(tmp_path / "enc"), ENCODED_SPEC,
        lambda t: tf.io.decode_image(t["image/encoded"], channels=int(t["image/channels"]),
                                     expand_animations=False).numpy())
    assert sorted(enc) == sorted(raw) and len(enc) == m["num_samples"]
    for name, (t, pixels) in enc.items():
        want_t, want = raw[name]
        assert t["image/format"].numpy() == (b"PNG" if encoding == "png" else b"JPEG")
        assert int(t["image/encoded/crc32c"]) == wire.crc32c(t["image/encoded"].numpy())
        assert pixels.shape == want.shape == (12, 16, m["image"]["channels"])
        assert int(t["image/class/label"]) == int(want_t["image/class/label"])
        if encoding == "png":
            np.testing.assert_array_equal(pixels, want, err_msg=name)
        else:
            mse = np.mean((pixels.astype(np.float64) - want.astype(np.float64)) ** 2)
            psnr = 10 * np.log10(255.0 ** 2 / max(mse, 1e-12))
            assert psnr >= 30, f"{name}: {psnr:.1f} dB"


def test_tensorflow_reads_a_mixed_dataset_branching_on_the_feature(cli, tmp_path):
    """convert --encoding mixed (format 1.4): smooth photos-like images become JPEG records,
    a noise image (whose JPEG saves little) a raw one. TensorFlow parses both features with
    an empty default and decodes image/encoded where present, image/raw otherwise: raw
    records are exactly the raw conversion's pixels, JPEG ones at least 30 dB from them.
    image/format says which ("raw" or "JPEG")."""
    y, x = np.mgrid[0:64, 0:64]
    smooth = np.stack([x * 4, y * 4, (x + y) * 2], axis=-1).astype(np.uint8)
    noise = np.random.default_rng(7).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    for name, px in (("smooth", smooth), ("noise", noise), ("smooth2", smooth[::-1].copy())):
        (tmp_path / "src" / "a").mkdir(parents=True, exist_ok=True)
        wire.write_png(tmp_path / "src" / "a" / f"{name}.png", px)
    geometry = ["--size", "48x48", "--quiet"]
    cli("convert", tmp_path / "src", tmp_path / "raw", *geometry)
    cli("convert", tmp_path / "src", tmp_path / "mixed", *geometry, "--encoding", "mixed",
        "--quality", "95", "--subsampling", "444")
    m = manifest(tmp_path / "mixed")
    assert m["format_version"] == "1.4" and m["image"]["encoding"] == "mixed"
    cli("verify", "--decode", tmp_path / "mixed")

    spec = {k: tf.io.FixedLenFeature([], v.dtype, default_value="" if v.dtype == tf.string else 0)
            for k, v in {**SPEC, **ENCODED_SPEC}.items() if k != "image/padding"}

    def decode(t):
        if t["image/format"].numpy() == b"JPEG":
            assert len(t["image/raw"].numpy()) == 0
            return "jpeg", tf.io.decode_jpeg(t["image/encoded"], channels=3).numpy()
        assert t["image/format"].numpy() == b"raw" and len(t["image/encoded"].numpy()) == 0
        return "raw", np.frombuffer(t["image/raw"].numpy(), np.uint8).reshape(48, 48, 3)

    raw = _decoded_by_filename(
        shard_files(tmp_path / "raw"), SPEC,
        lambda t: np.frombuffer(t["image/raw"].numpy(), np.uint8).reshape(48, 48, 3))
    mixed = _decoded_by_filename(shard_files(tmp_path / "mixed"), spec, decode)
    assert sorted(mixed) == sorted(raw) == ["a/noise.png", "a/smooth.png", "a/smooth2.png"]
    kinds = {name: kind for name, (_, (kind, _)) in mixed.items()}
    assert kinds == {"a/noise.png": "raw", "a/smooth.png": "jpeg", "a/smooth2.png": "jpeg"}
    for name, (t, (kind, pixels)) in mixed.items():
        want = raw[name][1]
        if kind == "raw":
            np.testing.assert_array_equal(pixels, want, err_msg=name)
        else:
            mse = np.mean((pixels.astype(np.float64) - want.astype(np.float64)) ** 2)
            assert 10 * np.log10(255.0 ** 2 / max(mse, 1e-12)) >= 30, name
