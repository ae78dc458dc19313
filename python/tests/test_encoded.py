"""Datasets of encoded images (convert(encoding="jpeg"|"png"), docs/FORMAT.md §2.5): the
Dataset and the Loader give decoded pixels; PNG gives exactly the raw conversion's."""

import json
import os

import numpy as np
import pytest

import shardpack

from conftest import collect


@pytest.fixture(scope="module")
def raw_and_png(image_folder, tmp_path_factory):
    root = tmp_path_factory.mktemp("encoded")
    raw, png = str(root / "raw"), str(root / "png")
    shardpack.convert(image_folder, raw, size=32, format="lmdb", shard_records=25)
    shardpack.convert(image_folder, png, size=32, format="lmdb", shard_records=25,
                      encoding="png")
    return raw, png


def test_png_samples_are_the_raw_datasets_pixels(raw_and_png):
    raw, png = (shardpack.Dataset(p) for p in raw_and_png)
    with open(os.path.join(raw_and_png[1], "manifest.json")) as f:
        m = json.load(f)
    assert m["format_version"] == "1.3" and m["image"]["encoding"] == "png"
    assert len(png) == len(raw) > 0
    for i in range(len(png)):
        a, b = raw[i], png[i]
        assert b.pixels.shape == (32, 32, 3) and b.pixels.dtype == np.uint8
        np.testing.assert_array_equal(b.pixels, a.pixels)
        assert (b.label, b.filename) == (a.label, a.filename)


def test_loader_batches_of_a_png_dataset_equal_the_raw_ones(raw_and_png):
    def epoch(path):
        loader = shardpack.Loader(path, batch_size=8, shuffle="global", seed=3,
                                  num_threads=2, framework="numpy", layout="NHWC")
        return collect(loader)

    (ri, rl, rimg), (pi, pl, pimg) = epoch(raw_and_png[0]), epoch(raw_and_png[1])
    np.testing.assert_array_equal(pi, ri)
    np.testing.assert_array_equal(pl, rl)
    for a, b in zip(rimg, pimg):
        np.testing.assert_array_equal(b, a)


def test_png_compression_changes_the_files_not_the_pixels(raw_and_png, image_folder, tmp_path):
    fast = str(tmp_path / "fast")
    shardpack.convert(image_folder, fast, size=32, format="lmdb", shard_records=25,
                      encoding="png", png_compression=1)
    with open(os.path.join(fast, "manifest.json")) as f:
        assert json.load(f)["options"]["png_compression"] == 1
    a, b = shardpack.Dataset(raw_and_png[1]), shardpack.Dataset(fast)
    assert len(a) == len(b) > 0
    for i in range(len(a)):
        np.testing.assert_array_equal(b[i].pixels, a[i].pixels)
    with pytest.raises(ValueError, match="png_compression"):
        shardpack.convert(image_folder, str(tmp_path / "bad"), size=32, encoding="png",
                          png_compression=10)


def test_jpeg_dataset_decodes_close_to_the_raw_pixels(image_folder, tmp_path):
    raw, jpeg = str(tmp_path / "raw"), str(tmp_path / "jpeg")
    shardpack.convert(image_folder, raw, size=32)
    shardpack.convert(image_folder, jpeg, size=32, encoding="jpeg", quality=95,
                      subsampling=444)
    a, b = shardpack.Dataset(raw), shardpack.Dataset(jpeg)
    for i in range(len(a)):
        x = a[i].pixels.astype(np.float64)
        y = b[i].pixels.astype(np.float64)
        psnr = 10 * np.log10(255.0 ** 2 / max(np.mean((x - y) ** 2), 1e-12))
        assert psnr >= 30, f"sample {i}: {psnr:.1f} dB"


def test_bad_encoding_options_are_value_errors(image_folder, tmp_path):
    with pytest.raises(ValueError, match="encoding must be one of"):
        shardpack.convert(image_folder, str(tmp_path / "x"), size=32, encoding="webp")
    with pytest.raises(ValueError, match="quality"):
        shardpack.convert(image_folder, str(tmp_path / "y"), size=32, encoding="jpeg",
                          quality=0)


def test_decode_scaled_shrinks_only_where_the_crop_is_twice_the_output(image_folder, tmp_path):
    # 64x64 JPEGs cropped to 16x16 from the shorter side resized to 18 (8/7 of 16): the
    # crop's source is 3.5x the output, decoded at 1/2 with decode_scaled; resized to 56
    # it is 1.14x, decoded whole either way.
    raw, jpeg = str(tmp_path / "raw"), str(tmp_path / "jpeg")
    shardpack.convert(image_folder, raw, size=64)
    shardpack.convert(image_folder, jpeg, size=64, encoding="jpeg", quality=95)

    def epoch(path, scaled, shorter):
        loader = shardpack.Loader(path, batch_size=8, shuffle="none", num_threads=2,
                                  output_size=16, transform="center_crop",
                                  resize_shorter=shorter, decode_scaled=scaled,
                                  framework="numpy", layout="NHWC")
        return np.concatenate(collect(loader)[2]).astype(np.float64)

    def psnr(a, b):
        return 10 * np.log10(255.0 ** 2 / max(np.mean((a - b) ** 2), 1e-12))

    np.testing.assert_array_equal(epoch(jpeg, True, 56), epoch(jpeg, False, 56))
    full, scaled, ref = epoch(jpeg, False, 0), epoch(jpeg, True, 0), epoch(raw, True, 0)
    assert not np.array_equal(full, scaled), "decode_scaled changed nothing"
    assert psnr(scaled, ref) >= 30 and psnr(full, ref) >= 30, (psnr(scaled, ref), psnr(full, ref))


def test_mixed_dataset_reads_raw_and_jpeg_records(tmp_path):
    # A smooth image compresses to a small JPEG; noise does not and stays raw.
    from PIL import Image

    y, x = np.mgrid[0:64, 0:64]
    smooth = np.stack([x * 4, y * 4, (x + y) * 2], axis=-1).astype(np.uint8)
    noise = np.random.default_rng(3).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    src = tmp_path / "src" / "a"
    src.mkdir(parents=True)
    Image.fromarray(smooth).save(src / "smooth.png")
    Image.fromarray(noise).save(src / "noise.png")
    raw, mixed = str(tmp_path / "raw"), str(tmp_path / "mixed")
    shardpack.convert(str(tmp_path / "src"), raw, size=48)
    shardpack.convert(str(tmp_path / "src"), mixed, size=48, encoding="mixed", quality=95,
                      subsampling=444, mixed_ratio=0.5)
    with open(os.path.join(mixed, "manifest.json")) as f:
        m = json.load(f)
    assert (m["format_version"], m["image"]["encoding"]) == ("1.4", "mixed")
    a, b = shardpack.Dataset(raw), shardpack.Dataset(mixed)
    by_name = {a[i].filename: a[i].pixels for i in range(len(a))}
    for i in range(len(b)):
        s = b[i]
        want = by_name[s.filename].astype(np.float64)
        if s.filename.endswith("noise.png"):
            np.testing.assert_array_equal(s.pixels, by_name[s.filename])
        else:
            mse = np.mean((s.pixels.astype(np.float64) - want) ** 2)
            assert 10 * np.log10(255.0 ** 2 / max(mse, 1e-12)) >= 30
    with pytest.raises(shardpack.InvalidArgumentError, match="mixed_ratio"):
        shardpack.convert(str(tmp_path / "src"), str(tmp_path / "x"), size=48,
                          encoding="mixed", mixed_ratio=0)
