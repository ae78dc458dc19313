#!/usr/bin/env python3
"""The usual PyTorch input pipeline against shardpack.Loader, in one run, on the same images.

  baseline:  torchvision.datasets.ImageFolder on the JPEG folder (PIL decode,
             RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize) through
             DataLoader(num_workers=W, pin_memory=True, persistent_workers=True,
             prefetch_factor=2, shuffle=True)
  shardpack: shardpack.Loader on the same images converted once (256x256, centre crop)
             with the same transforms done by its C++ threads (random_resized_crop to
             224, flip, normalize="imagenet", float32), num_threads=W; and again with the
             classic cheaper crop (random_crop: a 224 window of the stored 256, no
             resampling), same batch shape; and that crop delivered as uint8 N x 224 x
             224 x 3, which is all the host does on the GPU path (a CUDA kernel
             normalises there after the copy)

All but the last deliver float32 batches of B x 3 x 224 x 224 torch tensors on the host;
the consumer does nothing with them. Each side runs in its own process (so CPU time and memory are
its own), measured after a warm-up: samples/s, CPU seconds per 1000 samples (user + system
of the process and all its children) and the peak, over the run, of the resident set
summed over the process and its children (RSS, and RSS without file-backed pages, i.e.
RssAnon + RssShmem: the shared page cache of mapped shards or JPEG files left out, the
DataLoader's shared-memory batches kept in). The conversion is timed too, but is not part of
the loader figures: it happens once, offline.

Usage: python3 bench/python_loader_bench.py JPEG_FOLDER WORK_DIR [--batch-size 128]
       (bench/python_loader_bench.sh makes the images and runs it)
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

import psutil


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("images", help="folder of class folders of JPEGs")
    p.add_argument("work", help="folder for the converted dataset")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count(),
        help="DataLoader workers and shardpack threads (default: all cores)",
    )
    p.add_argument("--seconds", type=float, default=20.0, help="minimum measured time per side")
    p.add_argument(
        "--run",
        choices=["torchvision", "shardpack", "shardpack-crop", "shardpack-uint8"],
        help=argparse.SUPPRESS,
    )
    p.add_argument("--output", help="also write the table (markdown) here")
    return p.parse_args()


def proc_status(pid):
    """The kB fields of /proc/PID/status, in bytes (VmRSS = RssAnon + RssFile + RssShmem)."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            parts = value.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[name] = int(parts[0]) * 1024
    return out


class Monitor:
    """Samples the summed RSS of this process and its children every 50 ms."""

    def __init__(self):
        self.me = psutil.Process()
        self.peak_rss = 0
        self.peak_anon = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def processes(self):
        return [self.me] + self.me.children(recursive=True)

    def sample(self):
        rss = anon = 0
        for p in self.processes():
            try:
                status = proc_status(p.pid)
            except OSError:
                continue
            rss += status["VmRSS"]
            anon += status["RssAnon"] + status["RssShmem"]
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_anon = max(self.peak_anon, anon)

    def cpu_seconds(self):
        total = 0.0
        for p in self.processes():
            try:
                t = p.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += t.user + t.system
        return total

    def _run(self):
        while not self._stop.wait(0.05):
            self.sample()

    def start(self):
        self._thread.start()

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.sample()


def measure(batches, batch_size, seconds, monitor, warmup_batches):
    """Consumes `batches` (an endless iterator): warm-up, then at least `seconds`."""
    for _ in range(warmup_batches):
        next(batches)
    cpu0, t0, samples = monitor.cpu_seconds(), time.perf_counter(), 0
    while True:
        images, _ = next(batches)
        assert images.shape[1:] in ((3, 224, 224), (224, 224, 3)), images.shape
        samples += images.shape[0]
        del images
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds and samples >= 4 * batch_size:
            break
    cpu = monitor.cpu_seconds() - cpu0
    return {
        "samples": samples,
        "seconds": elapsed,
        "samples_per_s": samples / elapsed,
        "cpu_ms_per_sample": 1000 * cpu / samples,
    }


def endless(make_iter):
    while True:
        yield from make_iter()


def run_torchvision(args, monitor):
    import torch
    import torchvision
    from torchvision import transforms as T  # noqa: N812 (torchvision.transforms as T)

    transform = T.Compose(
        [
            T.RandomResizedCrop(224),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    dataset = torchvision.datasets.ImageFolder(args.images, transform=transform)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=True,
        persistent_workers=True,
        prefetch_factor=2,
        drop_last=True,
    )
    result = measure(
        endless(lambda: iter(loader)),
        args.batch_size,
        args.seconds,
        monitor,
        warmup_batches=2 * args.workers,
    )
    result["samples_in_dataset"] = len(dataset)
    return result


def run_shardpack(args, monitor):
    import shardpack

    dataset = os.path.join(args.work, "shards")
    loader = shardpack.Loader(
        dataset,
        batch_size=args.batch_size,
        num_threads=args.workers,
        prefetch=2,
        output_size=224,
        # The same augmentation as the baseline, or (shardpack-crop) the classic cheaper
        # one: a random 224 window of the stored 256 x 256 (no resampling).
        transform="random_resized_crop" if args.run == "shardpack" else "random_crop",
        flip=True,
        # shardpack-uint8: what the host does on the GPU path, where a CUDA kernel
        # normalises after the copy.
        normalize=None if args.run == "shardpack-uint8" else "imagenet",
        dtype="uint8" if args.run == "shardpack-uint8" else "float32",
        drop_last=True,
    )
    result = measure(
        endless(lambda: iter(loader)), args.batch_size, args.seconds, monitor, warmup_batches=4
    )
    result["samples_in_dataset"] = len(loader.dataset)
    result["loader_stats"] = str(loader.stats())
    return result


def child(args):
    monitor = Monitor()
    monitor.start()
    result = (run_torchvision if args.run == "torchvision" else run_shardpack)(args, monitor)
    monitor.stop()
    result["peak_rss_mb"] = monitor.peak_rss / 2**20
    result["peak_anon_mb"] = monitor.peak_anon / 2**20
    print(json.dumps(result), flush=True)
    os._exit(0)  # skip the DataLoader's worker shutdown; the parent only reads stdout


def side(args, name):
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        args.images,
        args.work,
        "--run",
        name,
        "--batch-size",
        str(args.batch_size),
        "--workers",
        str(args.workers),
        "--seconds",
        str(args.seconds),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    args = parse_args()
    if args.run:
        child(args)
        return
    import shardpack

    shards = os.path.join(args.work, "shards")
    if not os.path.exists(os.path.join(shards, "manifest.json")):
        s = shardpack.convert(args.images, shards, size=256, fit="crop", overwrite=True)
        print(f"converted once: {s}", flush=True)
    runs = [
        (
            "ImageFolder + DataLoader: RandomResizedCrop, flip, normalise (float32 NCHW)",
            side(args, "torchvision"),
        ),
        (
            "shardpack.Loader: random_resized_crop, flip, normalise (float32 NCHW)",
            side(args, "shardpack"),
        ),
        (
            "shardpack.Loader: random_crop 224 of 256, flip, normalise (float32 NCHW)",
            side(args, "shardpack-crop"),
        ),
        (
            "shardpack.Loader: random_crop, flip, uint8 (the GPU path's host work)",
            side(args, "shardpack-uint8"),
        ),
    ]
    import torch

    base = runs[0][1]
    lines = [
        f"Python loaders on {base['samples_in_dataset']} real JPEGs (converted once to 256x256 "
        f"for shardpack), batches of {args.batch_size} x 224 x 224, {args.workers} "
        f"workers/threads, {os.cpu_count()} cores, torch {torch.__version__}, shardpack "
        f"{shardpack.__version__}. Ratios against the first row, measured in the same run.",
        "",
        "| pipeline | samples/s | ratio | CPU ms per sample | ratio | peak RSS, all "
        "processes (MiB) | without file pages (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, r in runs:
        speed = r["samples_per_s"] / base["samples_per_s"]
        cpu = base["cpu_ms_per_sample"] / r["cpu_ms_per_sample"]
        lines.append(
            f"| {label} | {r['samples_per_s']:.0f} | {speed:.1f}x | {r['cpu_ms_per_sample']:.2f} "
            f"| {cpu:.1f}x | {r['peak_rss_mb']:.0f} | {r['peak_anon_mb']:.0f} |"
        )
    lines.append("")
    lines += [f"{label}: {r['loader_stats']}" for label, r in runs[1:]]
    text = "\n".join(lines)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
