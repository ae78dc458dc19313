"""Caffe-style LMDB output (convert --format lmdb --lmdb-schema caffe): values are Caffe
Datum messages, decoded here by Caffe's field numbers with an independent wire parse
(channels 1, height 2, width 3, data 4 = CHW BGR bytes, label 5, float_data 6, encoded 7),
under "%08d_<path>" keys as convert_imageset writes them. verify checks the dataset; the
Dataset and Loader refuse it with a message that names the schema."""

import subprocess

import numpy as np
import pytest

import wire
from conftest import manifest

lmdb = pytest.importorskip("lmdb", reason="python-lmdb is not installed "
                           "(bash scripts/install-interop.sh installs it)")


@pytest.mark.parametrize("tree,channels", [("image_tree", 3), ("gray_tree", 1)])
def test_caffe_schema_values_are_datums_under_convert_imageset_keys(cli, request, tmp_path,
                                                                     tree, channels):
    tree = request.getfixturevalue(tree)
    dst = tmp_path / "caffe"
    cli("convert", tree.root, dst, "--keep", "--format", "lmdb", "--lmdb-schema", "caffe",
        "--channels", channels, "--shard-records", "5", "--quiet")
    m = manifest(dst)
    assert (m["format_version"], m["lmdb_schema"], m["image"]["layout"]) == ("1.2", "caffe", "CHW")
    index = 0
    for shard in m["shards"]:
        env = lmdb.open(str(dst / shard["file"]), subdir=False, readonly=True, lock=False)
        try:
            with env.begin() as txn:
                for key, value in txn.cursor():
                    number, _, path = key.decode().partition("_")
                    assert number == "%08d" % index  # numbered across shards, in order
                    d = wire.parse_datum(value)
                    source, label, _ = tree.images[path]
                    h, w = source.shape[:2]
                    assert (d["channels"], d["height"], d["width"]) == (channels, h, w)
                    assert d["label"] == label
                    assert d["encoded"] == 0 and d["float_data"] == 0
                    chw = np.frombuffer(d["data"], np.uint8).reshape(channels, h, w)
                    hwc = chw.transpose(1, 2, 0)
                    if channels == 3:
                        hwc = hwc[:, :, ::-1]  # BGR planes, as OpenCV hands images to Caffe
                    np.testing.assert_array_equal(hwc, source, err_msg=path)
                    index += 1
        finally:
            env.close()
    assert index == len(tree.images) == m["num_samples"]
    assert "OK" in cli("verify", dst).stdout


def test_loader_refuses_a_caffe_dataset_naming_the_schema(cli, image_tree, samples_dir,
                                                          tmp_path):
    dst = tmp_path / "caffe"
    cli("convert", image_tree.root, dst, "--size", "8x8", "--format", "lmdb",
        "--lmdb-schema", "caffe", "--quiet")
    for program in ("read_dataset", "train_loop"):
        p = subprocess.run([samples_dir / program, dst], capture_output=True, text=True)
        assert p.returncode == 2, p.stdout + p.stderr
        assert "Caffe Datum values (lmdb_schema \"caffe\")" in p.stderr, p.stderr


def test_damaged_caffe_value_is_named_by_verify(cli, image_tree, tmp_path):
    dst = tmp_path / "caffe"
    cli("convert", image_tree.root, dst, "--size", "8x8", "--format", "lmdb",
        "--lmdb-schema", "caffe", "--quiet")
    path = dst / manifest(dst)["shards"][0]["file"]
    data = bytearray(path.read_bytes())
    at = data.find(b"00000003_")
    assert at > 0
    data[at:at + 8] = b"00000009"  # a key out of sequence, in place
    path.write_bytes(bytes(data))
    bad = cli("verify", dst, expect=1)
    assert "xxh3_128 checksum" in bad.stderr
    assert 'record 3: key "00000009_' in bad.stderr and 'expected "00000003_<path>"' in bad.stderr


def varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def test_encoded_caffe_datums_hold_the_example_schemas_files(cli, image_tree, tmp_path):
    """--encoding jpeg --lmdb-schema caffe: each value is convert_imageset --encoded's
    Datum (data, label, encoded = true, no shape), its data the very file the Example
    schema stores as image/encoded for the same conversion; verify --decode checks them."""
    args = ["--size", "16x12", "--format", "lmdb", "--encoding", "jpeg", "--quiet"]
    cli("convert", image_tree.root, tmp_path / "example", *args)
    cli("convert", image_tree.root, tmp_path / "caffe", *args, "--lmdb-schema", "caffe")
    m = manifest(tmp_path / "caffe")
    assert (m["format_version"], m["lmdb_schema"]) == ("1.3", "caffe")
    assert (m["image"]["layout"], m["image"]["encoding"]) == ("encoded", "jpeg")

    def values(dataset):
        out = []
        for shard in manifest(dataset)["shards"]:
            env = lmdb.open(str(dataset / shard["file"]), subdir=False, readonly=True, lock=False)
            try:
                with env.begin() as txn:
                    out.extend((bytes(k), bytes(v)) for k, v in txn.cursor())
            finally:
                env.close()
        return out

    examples = values(tmp_path / "example")
    datums = values(tmp_path / "caffe")
    assert len(datums) == len(examples) == m["num_samples"] > 0
    for index, ((key, value), (_, example)) in enumerate(zip(datums, examples)):
        assert key.decode().startswith("%08d_" % index)
        d = wire.parse_datum(value)
        e = wire.parse_example(example)
        assert d["encoded"] == 1 and d["float_data"] == 0
        assert "channels" not in d and "height" not in d and "width" not in d
        assert d["data"] == e["image/encoded"][1][0] and d["data"][:3] == b"\xff\xd8\xff"
        assert d["label"] == e["image/class/label"][1][0]
        # The fields in field-number order, as libprotobuf writes them.
        assert value == (b"\x22" + varint(len(d["data"])) + d["data"] + b"\x28" +
                         varint(d["label"]) + b"\x38\x01")
    assert "OK" in cli("verify", tmp_path / "caffe", "--decode").stdout
