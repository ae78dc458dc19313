"""convert, verify, info and the package's metadata."""

import importlib.metadata
import inspect
import os

import numpy as np
import pytest
from conftest import CLASS_COLOURS, PER_CLASS, make_image_folder

import shardpack


def test_version_is_the_library_and_package_version():
    assert shardpack.__version__ == importlib.metadata.version("shardpack")
    assert shardpack.__version__.count(".") == 2


def write_calls():
    """This process's write system calls so far (/proc/self/io), or None."""
    try:
        with open("/proc/self/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("syscw:"))
    except (OSError, StopIteration):
        return None


def test_write_chunk_gives_the_same_bytes(image_folder, tmp_path):
    # Shards written (pwrite: write_method "write"; "auto" may map) in 4 KiB
    # chunks (several records each) and in the default 2 MiB ones hold the bytes of shards
    # written record by record; a chunk that is not a multiple of 4096 is refused, naming it.
    default = inspect.signature(shardpack.convert).parameters["write_chunk"].default
    assert default == 2 << 20 == shardpack._shardpack.ConvertOptions().write_chunk_bytes
    shards, calls = {}, {}
    for chunk in (0, 4096, default):
        before = write_calls()
        shardpack.convert(
            image_folder, tmp_path / str(chunk), size=(24, 32), write_chunk=chunk,
            write_method="write"
        )
        calls[chunk] = None if before is None else write_calls() - before
        shards[chunk] = {
            p.name: p.read_bytes() for p in sorted((tmp_path / str(chunk)).glob("*.tfrecord"))
        }
    assert shards[0] and shards[0] == shards[4096] == shards[default]
    if calls[0] is not None:
        # One write a record against one a shard (the shards are under 2 MiB).
        records = len(shardpack.Dataset(tmp_path / "0"))
        assert calls[0] - calls[default] >= records - len(shards[0])
    with pytest.raises(shardpack.InvalidArgumentError, match="write chunk of 5000 bytes"):
        shardpack.convert(image_folder, tmp_path / "bad", size=(24, 32), write_chunk=5000)


def test_write_method_gives_the_same_bytes(image_folder, tmp_path):
    # Shards written through mappings ("map"), by pwrite ("write") and by the default
    # ("auto", one of the two) hold the same bytes; a method that is none is refused.
    assert inspect.signature(shardpack.convert).parameters["write_method"].default == "auto"
    shards = {}
    for method in ("write", "map", "auto"):
        summary = shardpack.convert(
            image_folder, tmp_path / method, size=(24, 32), write_method=method
        )
        # How they were written: the method asked for, or auto's choice.
        assert summary.write_method in ((method,) if method != "auto" else ("write", "map"))
        shards[method] = {
            p.name: p.read_bytes() for p in sorted((tmp_path / method).glob("*.tfrecord"))
        }
    assert shards["write"] and shards["write"] == shards["map"] == shards["auto"]
    with pytest.raises(shardpack.InvalidArgumentError, match="write_method"):
        shardpack.convert(image_folder, tmp_path / "bad", size=(24, 32), write_method="mmap")


def test_convert_accounts_for_every_input(image_folder, tmp_path):
    progress = []
    s = shardpack.convert(
        image_folder, tmp_path / "ds", size=(24, 32), shard_records=16, progress=progress.append
    )
    assert s.inputs == s.written + s.rejected
    assert s.written == len(CLASS_COLOURS) * PER_CLASS
    assert s.rejected == 1
    assert s.rejects[0][0] == os.path.join("apple", "broken.jpg")
    assert "JPEG" in s.rejects[0][1] or "image" in s.rejects[0][1]
    assert s.shards == 4 and s.manifest["num_samples"] == s.written
    assert s.manifest["image"]["height"] == 24 and s.manifest["image"]["width"] == 32
    assert progress[-1]["done"] == progress[-1]["total"] == s.inputs
    assert os.path.exists(tmp_path / "ds" / "rejects.tsv")
    assert "60 written, 1 rejected" in str(s)
    # Where the time went: the stages that ran took time, and fit in the threads' time.
    t = s.stages
    assert t["threads"] >= 1
    assert all(t[k] > 0 for k in ("pipeline", "read", "decode", "resize", "write"))
    assert t["encode"] == 0
    busy = sum(t[k] for k in ("read", "decode", "resize", "encode", "write"))
    assert busy <= t["threads"] * t["pipeline"]
    assert abs(t["idle"] - (t["threads"] * t["pipeline"] - busy)) < 1e-9


def test_convert_size_string_is_width_by_height(image_folder, tmp_path):
    s = shardpack.convert(image_folder, tmp_path / "ds", size="32x24", format="lmdb")
    assert (s.manifest["image"]["height"], s.manifest["image"]["width"]) == (24, 32)
    assert s.manifest["backend"] == "lmdb"


def test_convert_refuses_an_existing_dataset_unless_overwrite(dataset_path, image_folder):
    with pytest.raises(shardpack.AlreadyExistsError) as e:
        shardpack.convert(image_folder, dataset_path, size=32)
    assert isinstance(e.value, FileExistsError)
    assert dataset_path in str(e.value)


def test_convert_overwrite_replaces(image_folder, tmp_path):
    shardpack.convert(image_folder, tmp_path / "ds", size=16)
    s = shardpack.convert(image_folder, tmp_path / "ds", size=20, overwrite=True)
    assert shardpack.info(tmp_path / "ds")["image"]["height"] == 20 == s.manifest["image"]["height"]


def test_convert_strict_raises_corruption_naming_the_file(image_folder, tmp_path):
    with pytest.raises(shardpack.CorruptionError, match="broken.jpg"):
        shardpack.convert(image_folder, tmp_path / "ds", size=16, strict=True)
    assert not os.path.exists(tmp_path / "ds" / "manifest.json")


def test_convert_needs_exactly_one_geometry(image_folder, tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        shardpack.convert(image_folder, tmp_path / "ds")
    with pytest.raises(ValueError, match="exactly one"):
        shardpack.convert(image_folder, tmp_path / "ds", size=16, keep=True)


def test_convert_bad_option_is_invalid_argument(image_folder, tmp_path):
    with pytest.raises(ValueError, match="format"):
        shardpack.convert(image_folder, tmp_path / "ds", size=16, format="zip")
    with pytest.raises(shardpack.InvalidArgumentError):
        shardpack.convert(image_folder, tmp_path / "ds", size=16, channels=2)


def test_convert_output_does_not_depend_on_threads(tmp_path):
    make_image_folder(str(tmp_path / "src"), per_class=4)
    a = shardpack.convert(tmp_path / "src", tmp_path / "a", size=16, threads=1)
    b = shardpack.convert(tmp_path / "src", tmp_path / "b", size=16, threads=2)
    assert [s["xxh3_128"] for s in a.manifest["shards"]] == [
        s["xxh3_128"] for s in b.manifest["shards"]
    ]


def test_parts_converted_separately_and_merged_equal_one_conversion(image_folder, tmp_path):
    options = dict(size=16, shard_records=5, shuffle=True, seed=3)
    one = shardpack.convert(image_folder, tmp_path / "one", **options)
    for i in (2, 0, 1):
        shardpack.convert(image_folder, tmp_path / "parts", part=f"{i}/3", **options)
    with pytest.raises(shardpack.NotFoundError, match="no parts to merge"):
        shardpack.merge(tmp_path / "nothing")
    m = shardpack.merge(tmp_path / "parts")
    assert m.ok and m.parts == 3 and not m.already_merged
    assert (m.inputs, m.written, m.rejected) == (one.inputs, one.written, one.rejected)
    assert "merged 3 parts" in str(m)
    merged = shardpack.Dataset(tmp_path / "parts")
    single = shardpack.Dataset(tmp_path / "one")
    assert len(merged) == len(single)
    for i in range(len(single)):
        a, b = merged[i], single[i]
        assert (a.label, a.filename) == (b.label, b.filename)
        assert np.array_equal(a.pixels, b.pixels)
    assert shardpack.merge(tmp_path / "parts").already_merged


def test_merge_names_a_missing_part(image_folder, tmp_path):
    shardpack.convert(image_folder, tmp_path / "d", size=16, part=(0, 2))
    with pytest.raises(shardpack.NotFoundError, match="parts 1 of 2 are missing"):
        shardpack.merge(tmp_path / "d")
    with pytest.raises(ValueError, match="0 <= I < N"):
        shardpack.convert(image_folder, tmp_path / "d", size=16, part=(2, 2))


def test_convert_lmdb_schema_and_input_are_checked(image_folder, tmp_path):
    with pytest.raises(ValueError, match="lmdb_schema"):
        shardpack.convert(image_folder, tmp_path / "x", size=16, lmdb_schema="datum")
    with pytest.raises(shardpack.InvalidArgumentError, match="Caffe"):
        shardpack.convert(image_folder, tmp_path / "x", size=16, lmdb_schema="caffe")
    s = shardpack.convert(
        image_folder, tmp_path / "c", size=16, format="lmdb", lmdb_schema="caffe", input="folders"
    )
    assert s.manifest["lmdb_schema"] == "caffe"


def test_verify_intact_dataset(dataset_path):
    r = shardpack.verify(dataset_path)
    assert r.ok and bool(r)
    assert r.records == 60 and r.fault_count == 0 and r.faults == []
    assert ": OK: " in str(r)


def test_verify_names_file_record_and_offset_of_a_flipped_byte(dataset_copy):
    ds = shardpack.Dataset(dataset_copy)
    shard, record, offset = ds.locate(13)
    with open(os.path.join(dataset_copy, shard), "r+b") as f:
        f.seek(offset + 100)
        byte = f.read(1)
        f.seek(offset + 100)
        f.write(bytes([byte[0] ^ 0x40]))
    r = shardpack.verify(dataset_copy)
    assert not r.ok
    fault = next(f for f in r.faults if f.record >= 0)
    assert (fault.file, fault.record, fault.offset) == (shard, record, offset)
    assert f"{shard}: record {record} at offset {offset}: " in str(fault)
    assert "FAULTS" in str(r)


def test_verify_without_manifest_is_not_found(tmp_path):
    with pytest.raises(shardpack.NotFoundError) as e:
        shardpack.verify(tmp_path)
    assert isinstance(e.value, FileNotFoundError)


def test_info_is_the_manifest_with_total_bytes(dataset_path):
    i = shardpack.info(dataset_path)
    assert i["num_samples"] == 60 and i["backend"] == "tfrecord"
    assert [c["name"] for c in i["classes"]] == sorted(CLASS_COLOURS)
    files = [s["file"] for s in i["shards"]] + [s["index"]["file"] for s in i["shards"]]
    assert i["total_bytes"] == sum(os.path.getsize(os.path.join(dataset_path, f)) for f in files)


def test_info_of_a_folder_without_manifest_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        shardpack.info(tmp_path)


def test_dataset_sample_is_a_read_only_view(dataset_path):
    ds = shardpack.Dataset(dataset_path)
    s = ds[5]
    assert s.pixels.shape == (32, 32, 3) and s.pixels.dtype == np.uint8
    assert not s.pixels.flags.writeable
    assert ds.classes[s.label] == s.class_text
    assert s.filename.startswith(s.class_text + "/")
    with pytest.raises(IndexError):
        ds[60]
    assert ds[-1].filename == ds[59].filename
