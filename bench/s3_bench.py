#!/usr/bin/env python3
"""The loader reading an s3:// dataset from a loopback S3 server (moto's, signatures
enforced) against the same dataset on local disk, in one run: the download of every file
into an empty cache (signed, ranged, checksummed) over each number of connections asked
for; samples/s of an epoch with a cold cache (the download over the default connections,
then the epoch); then of a loader opened again on the warm cache, its epochs alternating
with those of the local copy.

Run with the interop environment (moto[server], boto3, TensorFlow-free use of the binding):
  bash scripts/install-python.sh && bash scripts/install-interop.sh
  out/venv-interop/bin/python bench/s3_bench.py DATASET [--batch 256] [--epochs 3]
      [--connections 1,2,4,8] [--link-rate 50m]
The dataset is uploaded to the server first (not timed). Loopback S3 measures shardpack's
side (signing, the cache, checksums) and moto's Python server, not a network. With
--link-rate MB/s, the requests go through a proxy (below) that sends each connection's
responses at most that fast: an object store whose single stream is slower than the
link, as a far one's is (moto sets the ceiling of all of them together).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "interop"))
from moto_s3 import Moto, Proxy  # noqa: E402

import shardpack  # noqa: E402
from rates import epoch_rate  # noqa: E402

BUCKET = "shardpack-bench"


class RateLimitingProxy(Proxy):
    """Relays to moto, sending each connection's responses at most `rate` bytes/s
    (requests pass unthrottled): an object store whose single stream is slower than the
    link, as a far one's is."""

    def __init__(self, upstream_port, rate):
        self.rate = rate
        super().__init__(upstream_port)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def serve(self, client, first):
        self.relay(client, rate=self.rate)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a local shardpack dataset directory")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3, help="warm and local epochs each")
    p.add_argument("--connections", default="1,2,4,8",
                   help="the downloads to time, by number of connections (comma-separated)")
    p.add_argument("--link-rate", type=float,
                   help="each connection's rate through a throttling proxy, MB/s")
    a = p.parse_args()
    counts = [int(c) for c in a.connections.split(",")]

    local = Path(a.dataset)
    files = [f for f in sorted(local.iterdir()) if f.is_file() and f.name != ".lock"]
    total = sum(f.stat().st_size for f in files)
    samples = shardpack.info(str(local))["num_samples"]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "out")) as tmp:
        moto = Moto(Path(tmp))
        proxy = None
        try:
            key_id, secret = moto.reader(BUCKET)
            s3 = moto.client("s3", key_id, secret)
            start = time.perf_counter()
            for f in files:
                s3.upload_file(str(f), BUCKET, f"ds/{f.name}")
            print(f"uploaded {len(files)} files, {total / 1e6:,.0f} MB, to {moto.endpoint} in "
                  f"{time.perf_counter() - start:.1f} s (not timed below)")
            for k in [k for k in os.environ if k.startswith("AWS_")]:
                del os.environ[k]
            endpoint = moto.endpoint
            if a.link_rate:
                proxy = RateLimitingProxy(moto.port, a.link_rate * 1e6)
                endpoint = proxy.endpoint
            os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID=key_id,
                              AWS_SECRET_ACCESS_KEY=secret, AWS_REGION="us-east-1",
                              SHARDPACK_CACHE_DIR=str(Path(tmp) / "cache"), NO_PROXY="127.0.0.1")
            url = f"s3://{BUCKET}/ds"
            kwargs = dict(batch_size=a.batch, framework="numpy")

            downloads = {}  # connections -> seconds
            for n in counts:
                os.environ["SHARDPACK_CONNECTIONS"] = str(n)
                cache = Path(tmp) / f"cache-{n}"
                os.environ["SHARDPACK_CACHE_DIR"] = str(cache)
                start = time.perf_counter()
                shardpack.Dataset(url)  # downloads every file into the empty cache
                downloads[n] = time.perf_counter() - start
                shutil.rmtree(cache)
            del os.environ["SHARDPACK_CONNECTIONS"]
            os.environ["SHARDPACK_CACHE_DIR"] = str(Path(tmp) / "cache")

            start = time.perf_counter()
            remote = shardpack.Loader(url, **kwargs)  # downloads every file into the cache
            fetch = time.perf_counter() - start
            first = epoch_rate(remote)
            cold = samples / (fetch + samples / first)
            del remote
            start = time.perf_counter()
            remote = shardpack.Loader(url, **kwargs)  # the cache checked, nothing fetched
            reopen = time.perf_counter() - start
            local_loader = shardpack.Loader(str(local), **kwargs)
            epoch_rate(local_loader)  # the local copy into the page cache, as the cache's is
            warm, disk = [], []
            for _ in range(a.epochs):
                warm.append(epoch_rate(remote))
                disk.append(epoch_rate(local_loader))
            del remote
        finally:
            if proxy:
                proxy.close()
            moto.stop()
    w, d = statistics.median(warm), statistics.median(disk)
    print(f"dataset {local}: {samples:,} samples, {total / 1e6:,.0f} MB in {len(files)} files, "
          f"batch {a.batch}" + (f", each connection at most {a.link_rate:g} MB/s (proxy)"
                                if a.link_rate else ""))
    print("| connections | download s | MB/s | / 1 connection |")
    print("|---|---|---|---|")
    base = downloads.get(1)
    for n, sec in downloads.items():
        ratio = f"{base / sec:.2f}x" if base else "-"
        print(f"| {n} | {sec:.2f} | {total / sec / 1e6:,.0f} | {ratio} |")
    print()
    print("| reader | samples/s | / local disk |")
    print("|---|---|---|")
    print(f"| s3://, cold cache (download {fetch:.1f} s, {total / fetch / 1e6:,.0f} MB/s, then "
          f"the epoch) | {cold:,.0f} | {cold / d:.2f}x |")
    print(f"| s3://, warm cache (opened in {reopen:.2f} s: the manifest fetched, the cache "
          f"checked) | {w:,.0f} | {w / d:.2f}x |")
    print(f"| local disk | {d:,.0f} | 1.00x |")


if __name__ == "__main__":
    main()
