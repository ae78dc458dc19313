"""A dataset at an http:// URL, served by a real nginx on loopback, reads like a local one:
shardpack.Loader and shardpack.verify go through the C++ library's fetch into the cache
(docs/REMOTE.md). The cache directory comes from SHARDPACK_CACHE_DIR."""

import os
import socket
import subprocess
import time

import numpy as np
import pytest
from conftest import collect

import shardpack

NGINX = "/usr/sbin/nginx"


@pytest.fixture
def served(dataset_path, tmp_path):
    """URL of dataset_path served by nginx on an ephemeral loopback port."""
    if not os.path.exists(NGINX):
        pytest.skip(f"{NGINX} is missing (Debian: apt-get install nginx-light)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    work = tmp_path / "nginx"
    work.mkdir()
    root, name = os.path.split(dataset_path)
    temp_paths = "".join(
        f"  {kind}_temp_path {work}/{kind};\n"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (work / "nginx.conf").write_text(
        f"error_log {work}/error.log warn;\npid {work}/nginx.pid;\n"
        "events { worker_connections 64; }\n"
        f"http {{\n  access_log {work}/access.log;\n{temp_paths}"
        "  default_type application/octet-stream;\n"
        f"  server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n"
    )
    proc = subprocess.Popen(
        [NGINX, "-c", str(work / "nginx.conf"), "-p", str(work), "-g",
         "daemon off; master_process off;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:  # ready when it accepts a connection
            assert proc.poll() is None, (work / "error.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not listen within 10 s"
                time.sleep(0.005)
        yield f"http://127.0.0.1:{port}/{name}"
    finally:
        proc.terminate()
        proc.wait()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = str(tmp_path / "cache")
    monkeypatch.setenv("SHARDPACK_CACHE_DIR", path)
    return path


def test_loader_over_http_delivers_the_local_batches(served, dataset_path, cache_dir):
    remote = shardpack.Loader(served, batch_size=8, seed=3, framework="numpy")
    local = shardpack.Loader(dataset_path, batch_size=8, seed=3, framework="numpy")
    r_indices, r_labels, r_images = collect(remote)
    l_indices, l_labels, l_images = collect(local)
    np.testing.assert_array_equal(r_indices, l_indices)
    np.testing.assert_array_equal(r_labels, l_labels)
    np.testing.assert_array_equal(np.concatenate(r_images), np.concatenate(l_images))
    assert any(name.startswith("shard-") for _, _, files in os.walk(cache_dir) for name in files)


def test_verify_over_http_passes(served, cache_dir):
    report = shardpack.verify(served)
    assert report.ok, report.faults
    assert report.records == 60


def test_a_server_without_the_dataset_raises_naming_the_url(served, cache_dir):
    with pytest.raises(Exception, match="manifest.json: HTTP 404"):
        shardpack.Loader(served + "-missing", batch_size=8)


def test_info_over_http_reads_the_manifest_only(served, cache_dir):
    info = shardpack.info(served)
    assert info["num_samples"] == 60
    assert not os.path.exists(cache_dir)
