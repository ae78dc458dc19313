"""FFCV, the peer, for the out-of-core benchmark: writes a .beton from a shardpack dataset
and reads it for whole epochs, printing one line of JSON per run.

Python: out/venv-peers-ffcv/bin/python (the venv that bench/peers/run.sh's install_extra
makes from bench/peers/requirements-ffcv.txt: pyenv's python3 with --system-site-packages,
ffcv 1.0.2).

  write DATASET OUT.beton [--page-size BYTES] [--threads 2]
      One .beton by FFCV's DatasetWriter, as bench/peers/write_formats.py writes it: image as
      RGBImageField(write_mode="raw") (the H x W x 3 uint8 pixels as they are), label as
      IntField, samples in the dataset's order. --page-size is DatasetWriter's page_size
      (a power of 2, at least 2 MiB; FFCV's default is 8 MiB = 1 << 23). DATASET is a
      shardpack TFRecord dataset (manifest.json + .tfrecord shards with their .idx files).
      Unlike write_formats.load_samples, which holds every sample in memory, the records are
      read one at a time through the .idx offsets (pread), so that a dataset bigger than
      memory can be written; they are parsed by bench/tfrecord_io.py as there.

  read BETON --order quasi_random|random --os-cache 0|1 --batch-size N --threads T
       [--epochs 1]
      EPOCHS epochs of FFCV's Loader (drop_last=True, seed 0, SimpleRGBImageDecoder +
      IntDecoder, THREADS workers), then one line of JSON on stdout:
        reader         "ffcv <version>"
        order, os_cache, batch_size, threads, epochs   as asked
        page_size      from the file's header (FFCV's Reader.page_size)
        samples        samples delivered, all epochs (N // batch_size * batch_size each)
        seconds        wall time from the first iter(loader) to the last batch, all epochs
                       (so it includes the first batch: Numba compilation and, with
                       os_cache 0, the page schedule and its buffer)
        samples_per_s  samples / seconds
        first_batch_s  from the first iter(loader) to the first batch
        peak_rss_mb    resource.getrusage(RUSAGE_SELF).ru_maxrss / 1024. With os_cache 1
                       this counts the pages of the mmapped file that were touched (file
                       backed, reclaimable), with os_cache 0 FFCV's own page buffer
        rss_anon_mb, rss_file_mb   RssAnon and RssFile of /proc/self/status after the last
                       batch (the iterator still alive), to tell the two apart
        cache_pages    with os_cache 0: pages in FFCV's process cache for the last epoch
                       (ProcessCacheContext's schedule.num_slots; each page_size bytes);
                       null with os_cache 1
      A run killed by the OOM killer prints nothing; the caller sees exit status 137.

Usage: out/venv-peers-ffcv/bin/python bench/peers/ffcv_out_of_core.py write DATASET OUT.beton
       out/venv-peers-ffcv/bin/python bench/peers/ffcv_out_of_core.py read OUT.beton \\
           --order quasi_random --os-cache 0 --batch-size 256 --threads 2
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tfrecord_io  # noqa: E402  (bench/tfrecord_io.py)


class ShardpackRecords:
    """The indexable dataset FFCV's writer takes: item i is (H x W x C uint8 pixels, label),
    record i of a shardpack TFRecord dataset, read on demand through the .idx offsets."""

    def __init__(self, dataset):
        with open(os.path.join(dataset, "manifest.json"), encoding="utf-8") as f:
            m = json.load(f)
        if m.get("backend", "tfrecord") != "tfrecord":
            raise SystemExit(f"ffcv_out_of_core.py: {dataset}: backend {m.get('backend')!r}, "
                             "only TFRecord datasets are supported")
        self.shape = (m["image"]["height"], m["image"]["width"], m["image"]["channels"])
        self.paths = []
        records = []  # (shard number, offset of the framed record, framed length)
        for s, shard in enumerate(m["shards"]):
            self.paths.append(os.path.join(dataset, shard["file"]))
            with open(os.path.join(dataset, shard["index"]["file"]), encoding="ascii") as f:
                for line in f:
                    offset, length = line.split()
                    records.append((s, int(offset), int(length)))
            if len(records) != shard["first_sample"] + shard["records"]:
                raise SystemExit(f"ffcv_out_of_core.py: {shard['index']['file']}: "
                                 f"{shard['records']} records expected")
        self.records = np.array(records, dtype=np.int64)
        self._fds = {}
        self._pid = None

    def __len__(self):
        return len(self.records)

    def _fd(self, shard):
        if self._pid != os.getpid():  # FFCV's writer forks its workers: one fd set each
            self._fds, self._pid = {}, os.getpid()
        if shard not in self._fds:
            self._fds[shard] = os.open(self.paths[shard], os.O_RDONLY)
        return self._fds[shard]

    def __getitem__(self, i):
        shard, offset, length = (int(x) for x in self.records[i])
        framed = os.pread(self._fd(shard), length, offset)
        if len(framed) != length:
            raise IOError(f"{self.paths[shard]}: short read at offset {offset}")
        ex = tfrecord_io.parse_example(memoryview(framed)[12:length - 4])
        pixels = np.frombuffer(ex["image/raw"][0], np.uint8).reshape(self.shape).copy()
        return pixels, int(ex["image/class/label"][0])


def write(a):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    data = ShardpackRecords(a.dataset)
    start = time.perf_counter()
    writer = DatasetWriter(a.out, {"image": RGBImageField(write_mode="raw"), "label": IntField()},
                           page_size=a.page_size, num_workers=a.threads)
    writer.from_indexed_dataset(data)
    print(f"ffcv_out_of_core: {len(data)} samples written to {a.out} "
          f"({os.path.getsize(a.out)} bytes, page size {a.page_size}) in "
          f"{time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def status_mb(key):
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(key + ":"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    return None


def read(a):
    import importlib.metadata

    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    order = {"quasi_random": OrderOption.QUASI_RANDOM, "random": OrderOption.RANDOM}[a.order]
    loader = Loader(a.beton, batch_size=a.batch_size, num_workers=a.threads, order=order,
                    drop_last=True, os_cache=bool(a.os_cache), seed=0,
                    pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
    samples = 0
    first_batch_s = None
    start = time.perf_counter()
    for _ in range(a.epochs):
        # Each epoch's iterator allocates its own page buffer (os_cache 0): drop the last
        # one first, or both are alive while the new one is made.
        it = images = labels = None
        it = iter(loader)
        for images, labels in it:
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - start
                if images.shape[0] != a.batch_size or str(images.dtype) != "uint8":
                    raise SystemExit(f"ffcv_out_of_core.py: batch of {tuple(images.shape)} "
                                     f"{images.dtype}")
            samples += len(labels)
    seconds = time.perf_counter() - start
    schedule = getattr(it.memory_context, "schedule", None)  # ProcessCacheContext only
    result = {
        "reader": f"ffcv {importlib.metadata.version('ffcv')}",
        "order": a.order,
        "os_cache": a.os_cache,
        "batch_size": a.batch_size,
        "threads": a.threads,
        "epochs": a.epochs,
        "page_size": int(loader.reader.page_size),
        "samples": samples,
        "seconds": round(seconds, 3),
        "samples_per_s": round(samples / seconds, 1),
        "first_batch_s": None if first_batch_s is None else round(first_batch_s, 3),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_anon_mb": status_mb("RssAnon"),
        "rss_file_mb": status_mb("RssFile"),
        "cache_pages": None if schedule is None else int(schedule.num_slots),
    }
    print(json.dumps(result), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write a .beton from a shardpack TFRecord dataset")
    w.add_argument("dataset", help="a shardpack TFRecord dataset (manifest.json)")
    w.add_argument("out", help="the .beton to write")
    w.add_argument("--page-size", type=int, default=1 << 23,
                   help="DatasetWriter's page_size in bytes (default 8 MiB, FFCV's)")
    w.add_argument("--threads", type=int, default=2, help="writer processes (default 2)")
    r = sub.add_parser("read", help="read a .beton for whole epochs, print one JSON line")
    r.add_argument("beton")
    r.add_argument("--order", choices=["quasi_random", "random"], required=True)
    r.add_argument("--os-cache", type=int, choices=[0, 1], required=True)
    r.add_argument("--batch-size", type=int, required=True)
    r.add_argument("--threads", type=int, required=True)
    r.add_argument("--epochs", type=int, default=1)
    a = p.parse_args()
    write(a) if a.command == "write" else read(a)


if __name__ == "__main__":
    main()
