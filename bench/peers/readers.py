"""The reading side of bench/peers/run.sh: one reader of one tool, in this process.

Every reader delivers the same thing: batches of B uint8 images of H x W x 3 (channels
last; the JPEG DataLoader's too) and their labels, as a NumPy array or a torch tensor on the
host, shuffled, from the same images. The consumer only checks each batch's shape and type
and drops it. Methods, and the Python each runs under (run.sh picks it):

  shardpack-py  shardpack.Loader (the C++ loader through the Python binding, DLPack torch
                tensors, no copy) on the TFRecord shards, global shuffle        pyenv python3
                (on an encoded dataset of fixed size, jpeg_mode.sh's, its C++ worker threads
                decode each JPEG straight into the batch)
  torch-jpeg    torchvision ImageFolder + DataLoader on the JPEG folder: PIL decode,
                Resize(256) + CenterCrop(256) (bilinear: cheaper than the Lanczos the
                pre-decoded data was made with), HWC uint8; shuffle=True         pyenv python3
  dali          DALI fn.readers.tfrecord (CPU pipeline) on the TFRecord shards with
                shardpack's .idx files, random_shuffle (a 1024-sample buffer),
                image/raw reshaped to H x W x 3, the batch a NumPy view of its
                dense output (no copy)                                          out/venv-interop
  tfdata        tf.data.TFRecordDataset(num_parallel_reads) on the TFRecord shards,
                shuffle(1024), batch, tf.io.parse_example + decode_raw, prefetch out/venv-interop
  lmdb          python-lmdb on the LMDB shards: a random permutation of all keys per
                epoch, txn.get (zero-copy buffers), tf.train.Example.FromString, the
                pixels copied into the batch array; --threads threads per batch  out/venv-interop
  ffcv          FFCV Loader on a .beton written from the same pre-decoded pixels
                (RGBImageField, write_mode="raw"), OrderOption.RANDOM,
                SimpleRGBImageDecoder                                          out/venv-peers-ffcv
                (a write_mode="jpg" .beton, bench/peers/jpeg_mode.sh's, goes through the same
                decoder, which then decodes each JPEG: libjpeg-turbo, TJFLAG_FASTDCT)
  mosaic        MosaicML Streaming StreamingDataset (local MDS shards written from the
                same pre-decoded pixels, ndarray column) + torch DataLoader,
                shuffle=True                                                  out/venv-peers-mosaic

Measurement, epoch by epoch (issue 23: on a small dataset the per-epoch start-up of a
reader is most of its time, so epochs are told apart): the data is in the page cache
(run.sh reads it first); epoch 1 is timed from asking for the reader's first iterator
(after its construction, which is not timed) to its last batch, and so holds the start-up
that one-pass work (evaluation, a fine-tuning pass) pays: JIT compilation, worker start,
first faults. Then epochs 2, 3, ... until at least --epochs epochs and --seconds seconds
after epoch 1 (whole epochs), or --max-seconds in all (a slow reader's epoch is then cut:
"partial"). Steady state: the samples of epochs 2.. over their time, each epoch's start-up
included (what a training loop sees every epoch). First-batch latency: from asking for an
epoch's iterator to its first batch, for epoch 1 and (median) for the later epochs. DALI's
pipeline and tf.data's repeat-free dataset run epoch after epoch as a training loop would
drive them (DALI: samples / batch batches of its endless reader). The CPU time is that of
this process and all its children (DataLoader workers), from
bench/python_loader_bench.py's Monitor, over the steady epochs (over epoch 1 when there
is no other).

Usage: python readers.py METHOD DATA --samples N [--batch-size 256] [--threads 2]
  DATA: the dataset directory (manifest.json) or file the method reads (torch-jpeg: the
  image folder; ffcv: the .beton file; mosaic: the MDS directory). N: samples in it.
Prints one JSON line: method, version, dataset_samples, epochs (measured; the last may be
partial), samples and seconds (of the steady epochs), samples_per_s (steady; epoch 1's when
it is the only one), epoch1_per_s, first_batch_ms (epoch 1), later_first_batch_ms
(median of the later epochs, null if none), partial, cpu_seconds, cpu_cores (CPU seconds
per second), samples_per_cpu_s, peak_rss_mb.
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from python_loader_bench import Monitor  # noqa: E402  (bench/python_loader_bench.py)

SHUFFLE_BUFFER = 1024  # samples: DALI's default initial_fill, and tf.data's buffer


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("method",
                   choices=["shardpack-py", "torch-jpeg", "dali", "tfdata", "lmdb", "ffcv",
                            "mosaic"])
    p.add_argument("data")
    p.add_argument("--samples", type=int, required=True, help="samples in DATA (one epoch)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--size", type=int, default=256, help="images are SIZE x SIZE x 3")
    p.add_argument("--threads", type=int, default=2, help="threads or worker processes")
    p.add_argument("--epochs", type=int, default=3, help="fewest epochs, the first included")
    p.add_argument("--seconds", type=float, default=8.0,
                   help="least time of the steady epochs (whole epochs)")
    p.add_argument("--max-seconds", type=float, default=60.0,
                   help="most time in all: a longer epoch is cut (partial)")
    return p.parse_args()


def manifest_files(dataset, key="file"):
    with open(os.path.join(dataset, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    if key == "index":
        return [os.path.join(dataset, s["index"]["file"]) for s in m["shards"]]
    return [os.path.join(dataset, s["file"]) for s in m["shards"]]


# ---- the readers: each returns (a function giving one epoch's iterator of (images, labels),
#      version) ------------------------------------------------------------------------------

def shardpack_py(a):
    import shardpack

    loader = shardpack.Loader(a.data, batch_size=a.batch_size, num_threads=a.threads,
                              shuffle="global", seed=0, drop_last=True, prefetch=2,
                              layout="NHWC")
    return (lambda: iter(loader)), f"shardpack {shardpack.__version__}"


def to_hwc(image):
    """PIL image -> H x W x 3 uint8 torch tensor (a module-level function: workers pickle it)."""
    import torch

    return torch.from_numpy(np.array(image, dtype=np.uint8))


def torch_jpeg(a):
    import torch
    import torchvision
    from torchvision import transforms as T  # noqa: N812

    transform = T.Compose([T.Resize(a.size), T.CenterCrop(a.size), to_hwc])
    dataset = torchvision.datasets.ImageFolder(a.data, transform=transform)
    loader = torch.utils.data.DataLoader(dataset, batch_size=a.batch_size, shuffle=True,
                                         num_workers=a.threads, persistent_workers=True,
                                         prefetch_factor=2, drop_last=True)
    return (lambda: iter(loader)), f"torch {torch.__version__}, torchvision {torchvision.__version__}"


def dali(a):
    import nvidia.dali
    import nvidia.dali.tfrecord as tfrec
    from nvidia.dali import fn, pipeline_def

    @pipeline_def(batch_size=a.batch_size, num_threads=a.threads, device_id=None, seed=0,
                  prefetch_queue_depth=2)
    def pipe():
        f = fn.readers.tfrecord(
            path=manifest_files(a.data), index_path=manifest_files(a.data, "index"),
            random_shuffle=True, initial_fill=SHUFFLE_BUFFER, name="reader",
            features={"image/raw": tfrec.FixedLenFeature((), tfrec.string, ""),
                      "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
        return fn.reshape(f["image/raw"], shape=[a.size, a.size, 3]), f["image/class/label"]

    p = pipe()
    p.build()

    def epoch():  # the reader runs on across epochs: an epoch is samples / batch batches
        for _ in range(a.samples // a.batch_size):
            images, labels = p.run()
            # The reader's batch is one dense buffer: a NumPy view of it, no copy (as_array
            # copies, at half the speed; it stays as the fallback).
            images = (np.asarray(images.as_tensor()) if images.is_dense_tensor()
                      else images.as_array())
            yield images, labels.as_array()

    return epoch, f"nvidia-dali {nvidia.dali.__version__}"


def tfdata(a):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    features = {"image/raw": tf.io.FixedLenFeature([], tf.string),
                "image/class/label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(serialized):  # a whole batch at once: the vectorised, faster way
        ex = tf.io.parse_example(serialized, features)
        images = tf.reshape(tf.io.decode_raw(ex["image/raw"], tf.uint8), [-1, a.size, a.size, 3])
        return images, ex["image/class/label"]

    options = tf.data.Options()
    options.threading.private_threadpool_size = a.threads
    ds = (tf.data.TFRecordDataset(manifest_files(a.data), num_parallel_reads=a.threads)
          .shuffle(SHUFFLE_BUFFER, seed=0)
          .batch(a.batch_size, drop_remainder=True)
          .map(parse, num_parallel_calls=a.threads)
          .prefetch(2)
          .with_options(options))

    def epoch():  # each iteration of the dataset is an epoch (reshuffled)
        for images, labels in ds:
            yield images.numpy(), labels.numpy()

    return epoch, f"tensorflow {tf.__version__}"


def lmdb_reader(a):
    import lmdb
    from concurrent.futures import ThreadPoolExecutor

    from tensorflow.core.example import example_pb2  # tf.train.Example

    paths = manifest_files(a.data)
    envs = [lmdb.open(p, subdir=False, readonly=True, lock=False, readahead=False)
            for p in paths]
    keys = [(e, b"%010d" % i) for e, env in enumerate(envs) for i in range(env.stat()["entries"])]
    local = threading.local()  # a read transaction per thread and environment

    def fill(out, labels, order, lo, hi):
        if not hasattr(local, "txns"):
            local.txns = [env.begin(buffers=True) for env in envs]
        for j in range(lo, hi):
            e, key = keys[order[j]]
            ex = example_pb2.Example.FromString(local.txns[e].get(key))
            f = ex.features.feature
            out[j] = np.frombuffer(f["image/raw"].bytes_list.value[0], np.uint8).reshape(
                a.size, a.size, 3)
            labels[j] = f["image/class/label"].int64_list.value[0]

    pool = ThreadPoolExecutor(a.threads) if a.threads > 1 else None
    rng = np.random.default_rng(0)

    def epoch():
        b = a.batch_size
        order = rng.permutation(len(keys))
        for start in range(0, len(order) - b + 1, b):
            out = np.empty((b, a.size, a.size, 3), np.uint8)
            labels = np.empty(b, np.int64)
            part = order[start:start + b]
            if pool is None:
                fill(out, labels, part, 0, b)
            else:
                cuts = [b * t // a.threads for t in range(a.threads + 1)]
                list(pool.map(lambda t: fill(out, labels, part, cuts[t], cuts[t + 1]),
                              range(a.threads)))
            yield out, labels

    return epoch, f"lmdb {lmdb.__version__}"


def ffcv_reader(a):
    import importlib.metadata

    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    loader = Loader(a.data, batch_size=a.batch_size, num_workers=a.threads,
                    order=OrderOption.RANDOM, drop_last=True, os_cache=True, seed=0,
                    pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
    return (lambda: iter(loader)), f"ffcv {importlib.metadata.version('ffcv')}"


def mosaic(a):
    import streaming
    import torch
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # left by an earlier run that was killed
    dataset = StreamingDataset(local=a.data, shuffle=True, shuffle_seed=0,
                               batch_size=a.batch_size)
    loader = torch.utils.data.DataLoader(dataset, batch_size=a.batch_size,
                                         num_workers=a.threads, persistent_workers=True,
                                         prefetch_factor=2, drop_last=True)

    def epoch():
        for sample in loader:
            yield sample["image"], sample["label"]

    return epoch, f"mosaicml-streaming {streaming.__version__}"


READERS = {"shardpack-py": shardpack_py, "torch-jpeg": torch_jpeg, "dali": dali,
           "tfdata": tfdata, "lmdb": lmdb_reader, "ffcv": ffcv_reader, "mosaic": mosaic}


def check(images, a):
    """Every reader must deliver B x SIZE x SIZE x 3 uint8, whatever its array type."""
    shape = tuple(images.shape)
    dtype = str(images.dtype)
    if shape != (a.batch_size, a.size, a.size, 3) or dtype not in ("uint8", "torch.uint8"):
        raise SystemExit(f"readers.py {a.method}: batch of {shape} {dtype}, expected "
                         f"({a.batch_size}, {a.size}, {a.size}, 3) uint8")


def main():
    a = parse_args()
    monitor = Monitor()
    monitor.start()
    epoch, version = READERS[a.method](a)
    cpu0 = monitor.cpu_seconds()
    start = time.perf_counter()
    measured = []  # per epoch: samples, seconds, first-batch seconds, cut short
    cpu_after_first = None
    while True:
        t0 = time.perf_counter()
        first, samples, partial = None, 0, False
        for images, _ in epoch():
            if first is None:
                first = time.perf_counter() - t0
            check(images, a)
            samples += images.shape[0]
            del images  # shardpack: releases the ring slot
            if time.perf_counter() - start >= a.max_seconds:
                partial = True
                break
        measured.append((samples, time.perf_counter() - t0, first, partial))
        if len(measured) == 1:
            cpu_after_first = monitor.cpu_seconds()
            steady_start = time.perf_counter()
        if partial:
            break
        steady_time = time.perf_counter() - steady_start
        if len(measured) >= a.epochs and (len(measured) > 1 and steady_time >= a.seconds):
            break
    cpu = monitor.cpu_seconds() - cpu_after_first
    monitor.stop()
    e1_samples, e1_seconds, e1_first, _ = measured[0]
    steady = measured[1:]
    if steady and sum(m[0] for m in steady) > 0:
        samples = sum(m[0] for m in steady)
        seconds = sum(m[1] for m in steady)
        later_first = statistics.median(m[2] for m in steady if m[2] is not None)
    else:  # one (possibly partial) epoch: its rate is all there is; CPU over it
        samples, seconds, later_first = e1_samples, e1_seconds, None
        cpu = cpu_after_first - cpu0
    print(json.dumps({
        "method": a.method, "version": version, "threads": a.threads,
        "dataset_samples": a.samples, "epochs": len(measured),
        "partial": any(m[3] for m in measured), "samples": samples,
        "seconds": round(seconds, 4), "samples_per_s": samples / seconds,
        "epoch1_per_s": e1_samples / e1_seconds, "first_batch_ms": round(e1_first * 1000, 1),
        "later_first_batch_ms": None if later_first is None else round(later_first * 1000, 1),
        "cpu_seconds": round(cpu, 3), "cpu_cores": cpu / seconds,
        "samples_per_cpu_s": samples / cpu if cpu > 0 else None,
        "peak_rss_mb": round(monitor.peak_rss / 2**20)}), flush=True)
    os._exit(0)  # skip the workers' and pipelines' shutdown; run.sh only reads stdout


if __name__ == "__main__":
    main()
