"""python-lmdb (PyPI lmdb) against shardpack's LMDB shards: each shard opens read-only
without a lock file, its keys are the documented record numbers, and every value parses
as a tf.train.Example (TensorFlow's own message class, and an independent wire parse)
with the documented keys and the source pixels."""

import os

import numpy as np
import pytest

import wire
from conftest import manifest

lmdb = pytest.importorskip("lmdb", reason="python-lmdb is not installed "
                           "(bash scripts/install-interop.sh installs it)")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow", reason="tensorflow-cpu is not installed "
                         "(bash scripts/install-interop.sh installs it)")

# docs/FORMAT.md §2.1; image/pad only pads (§2.3, §4).
DOCUMENTED = {"image/height", "image/width", "image/channels", "image/class/label",
              "image/class/text", "image/filename", "image/format", "image/raw/crc32c",
              "image/raw"}
OPTIONAL = {"image/pad"}


@pytest.mark.parametrize("tree,channels", [("image_tree", 3), ("gray_tree", 1)])
def test_lmdb_shards_open_read_only_and_hold_documented_examples(cli, request, tmp_path, tree,
                                                                 channels):
    tree = request.getfixturevalue(tree)
    dst = tmp_path / "lmdb"
    cli("convert", tree.root, dst, "--keep", "--format", "lmdb", "--channels", channels,
        "--shard-records", "5", "--quiet")
    m = manifest(dst)
    assert m["backend"] == "lmdb" and "lmdb_schema" not in m
    seen = []
    for shard in m["shards"]:
        path = dst / shard["file"]
        env = lmdb.open(str(path), subdir=False, readonly=True, lock=False)
        try:
            assert env.stat()["entries"] == shard["records"]
            with env.begin() as txn:
                keys = []
                for key, value in txn.cursor():
                    keys.append(key)
                    example = tf.train.Example.FromString(value)
                    features = example.features.feature
                    assert DOCUMENTED <= set(features) <= DOCUMENTED | OPTIONAL
                    if "image/pad" in features:
                        assert set(features["image/pad"].bytes_list.value[0]) <= {0}
                    get_int = lambda k: features[k].int64_list.value[0]  # noqa: E731
                    h, w, c = (get_int(k) for k in ("image/height", "image/width",
                                                    "image/channels"))
                    raw = features["image/raw"].bytes_list.value[0]
                    assert len(raw) == h * w * c and c == channels
                    assert get_int("image/raw/crc32c") == wire.crc32c(raw)
                    assert features["image/format"].bytes_list.value[0] == b"raw"
                    name = features["image/filename"].bytes_list.value[0].decode()
                    label = get_int("image/class/label")
                    source, source_label, source_class = tree.images[name]
                    assert label == source_label
                    assert features["image/class/text"].bytes_list.value[0].decode() == \
                        source_class == m["classes"][label]["name"]
                    np.testing.assert_array_equal(
                        np.frombuffer(raw, np.uint8).reshape(source.shape), source)
                    # The independent wire parse agrees with TensorFlow's message class.
                    ours = wire.parse_example(value)
                    assert ours["image/raw"] == ("bytes", [raw])
                    assert ours["image/class/label"] == ("int64", [label])
                    seen.append(name)
            assert keys == [b"%010d" % i for i in range(shard["records"])]
        finally:
            env.close()
        assert not os.path.exists(str(path) + "-lock")  # lock=False leaves no lock file
    assert sorted(seen) == sorted(tree.images)
    cli("verify", dst)


# docs/FORMAT.md §2.5: an encoded dataset's values.
DOCUMENTED_ENCODED = {"image/height", "image/width", "image/channels", "image/class/label",
                      "image/class/text", "image/filename", "image/format",
                      "image/encoded/crc32c", "image/encoded"}


@pytest.mark.parametrize("tree,channels", [("image_tree", 3), ("gray_tree", 1)])
def test_encoded_lmdb_values_are_png_examples_of_the_source_pixels(cli, request, tmp_path,
                                                                    tree, channels):
    """convert --encoding png --format lmdb: python-lmdb reads every value, TensorFlow's
    Example class parses it with the documented keys, and tf.io.decode_png gives the
    source pixels exactly."""
    tree = request.getfixturevalue(tree)
    dst = tmp_path / "lmdb"
    cli("convert", tree.root, dst, "--keep", "--format", "lmdb", "--channels", channels,
        "--encoding", "png", "--shard-records", "5", "--quiet")
    m = manifest(dst)
    assert m["image"]["encoding"] == "png" and m["pixel_alignment"] == 1
    seen = []
    for shard in m["shards"]:
        env = lmdb.open(str(dst / shard["file"]), subdir=False, readonly=True, lock=False)
        try:
            with env.begin() as txn:
                for _, value in txn.cursor():
                    features = tf.train.Example.FromString(value).features.feature
                    assert set(features) == DOCUMENTED_ENCODED
                    encoded = features["image/encoded"].bytes_list.value[0]
                    assert features["image/format"].bytes_list.value[0] == b"PNG"
                    assert features["image/encoded/crc32c"].int64_list.value[0] == \
                        wire.crc32c(encoded)
                    name = features["image/filename"].bytes_list.value[0].decode()
                    source, source_label, _ = tree.images[name]
                    assert features["image/class/label"].int64_list.value[0] == source_label
                    pixels = tf.io.decode_png(encoded, channels=channels).numpy()
                    np.testing.assert_array_equal(pixels, source.reshape(pixels.shape))
                    seen.append(name)
        finally:
            env.close()
    assert sorted(seen) == sorted(tree.images)
    cli("verify", "--decode", dst)
