"""C++ errors arrive as Python exceptions carrying file, record and offset."""

import gc
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import collect

import shardpack


def flip_pixel_byte(path, index):
    """Flips a byte in the pixels of sample `index`; returns (file, record, offset)."""
    ds = shardpack.Dataset(path)
    shard, record, offset = ds.locate(index)
    entry = next(e for e in shardpack.info(path)["shards"] if e["file"] == shard)
    with open(os.path.join(path, entry["index"]["file"])) as f:
        size = int(f.read().splitlines()[record].split()[1])
    where = offset + size - 4 - 10  # 10 bytes before the record's data CRC: pixels
    with open(os.path.join(path, shard), "r+b") as f:
        f.seek(where)
        byte = f.read(1)[0]
        f.seek(where)
        f.write(bytes([byte ^ 0x01]))
    return shard, record, offset


def test_corrupt_record_fails_the_batch_naming_file_record_offset(dataset_copy):
    shard, record, offset = flip_pixel_byte(dataset_copy, 17)
    ld = shardpack.Loader(dataset_copy, batch_size=6, shuffle="none", framework="numpy")
    it = ld.batches()
    for _ in range(2):  # samples 0..11
        next(it)
    with pytest.raises(shardpack.CorruptionError) as e:
        for _ in it:  # batch 2 holds sample 17
            pass
    message = str(e.value)
    assert f"{shard}: record {record} at offset {offset}: " in message
    assert "checksum" in message
    assert e.value.code == "Corruption" and isinstance(e.value, shardpack.Error)
    ld.set_epoch(1)  # a new epoch after the failure
    assert next(ld.batches()).index == 0


def test_corrupt_record_skipped_when_asked(dataset_copy):
    flip_pixel_byte(dataset_copy, 17)
    ld = shardpack.Loader(
        dataset_copy, batch_size=6, shuffle="none", on_corrupt="skip", framework="numpy"
    )
    sizes = [b.size for b in ld.batches()]
    assert sizes == [6, 6, 5] + [6] * 7
    assert ld.stats().skipped_corrupt == 1
    indices, _, _ = collect(ld)  # the next epoch, also without 17
    assert 17 not in indices.tolist() and len(indices) == 59


def test_dataset_get_raises_for_the_damaged_sample_only(dataset_copy):
    shard, record, offset = flip_pixel_byte(dataset_copy, 3)
    ds = shardpack.Dataset(dataset_copy)
    ds[2], ds[4]
    with pytest.raises(shardpack.CorruptionError, match=f"record {record} at offset {offset}"):
        ds[3]
    assert shardpack.Dataset(dataset_copy, verify_crc=False)[3].pixels.shape == (32, 32, 3)


def test_a_view_of_a_shard_truncated_while_open_reads_zeros_and_is_reported(dataset_copy):
    ds = shardpack.Dataset(dataset_copy)
    pixels = ds[3].pixels
    shard, record, offset = ds.locate(3)
    ds.check_intact(3)
    os.truncate(os.path.join(dataset_copy, shard), 0)
    assert int(pixels.sum()) == 0  # the lost pages read zeros; the process lives
    with pytest.raises(shardpack.ShardpackIOError, match=f"{shard}: record {record} at offset {offset}: the file is shorter"):
        ds.check_intact(3)
    with pytest.raises(shardpack.ShardpackIOError, match="SIGBUS"):
        ds[3]


def test_loader_without_crc_checks_does_not_notice(dataset_copy):
    flip_pixel_byte(dataset_copy, 17)
    ld = shardpack.Loader(dataset_copy, batch_size=6, verify_crc=False, framework="numpy")
    assert sum(b.size for b in ld.batches()) == 60


def test_missing_shard_is_reported_at_open(dataset_copy):
    shard = shardpack.info(dataset_copy)["shards"][0]["file"]
    os.remove(os.path.join(dataset_copy, shard))
    with pytest.raises(shardpack.Error, match=shard):
        shardpack.Loader(dataset_copy, framework="numpy")


def test_cuda_device_without_a_gpu_is_unavailable(dataset_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(shardpack.UnavailableError, match="no CUDA device"):
        shardpack.Loader(dataset_path, device="cuda:0")
    gc.collect()


def test_filter_and_fit_names_are_the_libraries_and_others_are_refused(tmp_path, dataset_path):
    for name in ("area", "bilinear", "bicubic", "lanczos3", "lanczos"):
        shardpack.Loader(dataset_path, batch_size=2, transform="center_crop",
                         output_size=(4, 4), filter=name, framework="numpy")
    for bad in ("nearest", "Lanczos3", 3):
        with pytest.raises(shardpack.InvalidArgumentError, match="filter"):
            shardpack.Loader(dataset_path, batch_size=2, transform="center_crop",
                             output_size=(4, 4), filter=bad, framework="numpy")
    with pytest.raises(shardpack.InvalidArgumentError,
                       match='unknown fit mode "fill": expected "stretch", "crop" or "pad"'):
        shardpack.convert(str(tmp_path), str(tmp_path / "out"), size=8, fit="fill")
    assert list(shardpack._shardpack.ResizeFilter.__members__) == [
        "area", "bilinear", "bicubic", "lanczos3"]


def test_a_bad_resize_kernels_variable_is_refused_when_the_loader_is_made(dataset_path):
    """SHARDPACK_RESIZE_KERNELS is read once per process, so a fresh interpreter: a loader
    that resamples (a flip alone included) is refused at once, naming the variable, and
    one that passes the samples through is not."""
    script = textwrap.dedent(f"""
        import shardpack
        shardpack.Loader({dataset_path!r}, batch_size=2, framework="numpy")
        for kw in (dict(flip=True), dict(transform="center_crop", output_size=(4, 4))):
            try:
                shardpack.Loader({dataset_path!r}, batch_size=2, framework="numpy", **kw)
            except shardpack.InvalidArgumentError as e:
                print("refused:", e)
            else:
                print("made:", kw)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "SHARDPACK_RESIZE_KERNELS": "avx3"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    for line in lines:
        assert line.startswith("refused:"), r.stdout
        assert 'SHARDPACK_RESIZE_KERNELS: "avx3" is none of portable, avx2, avx512' in line


def test_a_refused_credential_is_a_permission_error():
    # The C++ PermissionDenied code (S3's AccessDenied, SignatureDoesNotMatch, ...);
    # tests/interop/test_s3.py raises it from a real server.
    cls = shardpack._errors.exception_class("PermissionDenied")
    assert cls is shardpack.PermissionDeniedError
    assert issubclass(cls, PermissionError) and issubclass(cls, shardpack.Error)
    assert cls.code == "PermissionDenied"


def test_a_loader_over_its_memory_limit_is_refused_before_allocating(dataset_path):
    with pytest.raises(shardpack.ResourceExhaustedError) as e:
        shardpack.Loader(dataset_path, batch_size=256, max_memory=1 << 20)
    # 4 slots of 256 x 32 x 32 x 3 bytes.
    assert str(e.value).startswith(
        "loader: the ring needs 3145728 bytes (prefetch 2 + 2 slots of batch 256 x 32 x 32 x 3 "
        "bytes) but only 1048576 bytes are available (LoaderOptions::max_memory_bytes)"
    ), str(e.value)
    # Without a limit of its own: what the process may hold, whatever the machine.
    with pytest.raises(shardpack.ResourceExhaustedError, match=r"are available \(7/8 of "):
        shardpack.Loader(dataset_path, batch_size=2**31 - 1)
    # Under a limit it fits in, the loader reads the dataset's 60 samples.
    loader = shardpack.Loader(dataset_path, batch_size=8, max_memory=64 << 20)
    assert len(collect(loader)[0]) == 60

