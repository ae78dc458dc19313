"""Fixtures of the interoperability tests: the shardpack CLI (never the Python binding),
the C++ samples that exercise the Dataset and Loader, and a small PNG class-folder tree
whose pixels are known exactly.

The binaries come from SHARDPACK_BIN (default build/tools/shardpack) and
SHARDPACK_SAMPLES (default: the samples/ folder next to the binary's tools/ folder).
"""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import wire

REPO = Path(__file__).resolve().parents[2]


def _bin():
    return Path(os.environ.get("SHARDPACK_BIN", REPO / "build" / "tools" / "shardpack"))


@pytest.fixture(scope="session")
def shardpack_bin():
    path = _bin()
    if not path.is_file():
        pytest.fail(f"{path}: no shardpack binary; build it (bash scripts/build.sh) or set "
                    "SHARDPACK_BIN")
    return path


@pytest.fixture(scope="session")
def samples_dir(shardpack_bin):
    path = Path(os.environ.get("SHARDPACK_SAMPLES", shardpack_bin.parent.parent / "samples"))
    for name in ("read_dataset", "train_loop"):
        if not (path / name).is_file():
            pytest.fail(f"{path / name}: no sample binary; build the samples or set "
                        "SHARDPACK_SAMPLES")
    return path


class Cli:
    def __init__(self, binary):
        self.binary = binary

    def __call__(self, *args, expect=0):
        """Runs `shardpack ARGS`; asserts the exit code; returns the CompletedProcess."""
        p = subprocess.run([str(self.binary), *map(str, args)], capture_output=True, text=True)
        assert p.returncode == expect, (
            f"shardpack {' '.join(map(str, args))}: exit {p.returncode}, expected {expect}\n"
            f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p


@pytest.fixture(scope="session")
def cli(shardpack_bin):
    return Cli(shardpack_bin)


def manifest(dataset):
    return json.loads((Path(dataset) / "manifest.json").read_text())


class ImageTree:
    """SRC/<class>/<name>.png with known pixels. `images[relative path]` is
    (HWC uint8 array, label, class name); labels follow bytewise-sorted class names."""

    def __init__(self, root: Path, channels=3):
        self.root = root
        self.images = {}
        rng = np.random.default_rng(2026)
        classes = ["001.ant", "002.bee", "003.cat"]
        for label, name in enumerate(classes):
            (root / name).mkdir(parents=True)
            for k in range(4):
                h, w = 9 + 3 * k + label, 14 - 2 * k + label
                px = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
                rel = f"{name}/img{k}.png"
                wire.write_png(root / rel, px)
                self.images[rel] = (px, label, name)


@pytest.fixture(scope="session")
def image_tree(tmp_path_factory):
    return ImageTree(tmp_path_factory.mktemp("images"))


@pytest.fixture(scope="session")
def gray_tree(tmp_path_factory):
    return ImageTree(tmp_path_factory.mktemp("gray"), channels=1)
