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
