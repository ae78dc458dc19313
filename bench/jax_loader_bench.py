#!/usr/bin/env python3
"""shardpack.jax.Loader against the PyTorch path (shardpack.Loader, framework="torch") on
the same dataset, in one run: samples/s of whole epochs, the two alternating epoch by
epoch, per-pair ratios and their median.

Two shapes of batch: the samples as stored (uint8, no transform: the GPU path's host work)
and a training transform (random 224 crop of the stored 256, flip, normalize="imagenet",
float32). The consumer does nothing with a batch but drop it, so the figures are the
loaders' own; JAX batches are NHWC and PyTorch's NCHW (each framework's usual layout,
both views of the same slot memory for uint8, both produced by the C++ threads for float).

Usage: python3 bench/jax_loader_bench.py DATASET [--batch-size 256] [--epochs 4]
       (needs scripts/install-python.sh: shardpack, torch and jax in python3)
"""

import argparse
import statistics

import jax  # noqa: F401  (imported before timing: its start-up is not the loader's)
import torch  # noqa: F401

import shardpack
import shardpack.jax
from rates import epoch_rate

SHAPES = {
    "uint8 as stored": {},
    "crop 224 + flip + normalize": dict(
        output_size=224, random_crop=True, flip=True, normalize="imagenet"
    ),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--epochs", type=int, default=4, help="measured epochs per side and shape")
    p.add_argument("--threads", type=int, default=0, help="loader threads (0: all cores)")
    a = p.parse_args()

    print(f"dataset {a.dataset}: {shardpack.info(a.dataset)['num_samples']} samples, "
          f"batch {a.batch_size}, jax {jax.__version__}, torch {torch.__version__}")
    print("| batches | PyTorch path samples/s | JAX samples/s | JAX / PyTorch (median of pairs) |")
    print("|---|---|---|---|")
    for name, kwargs in SHAPES.items():
        common = dict(batch_size=a.batch_size, seed=0, num_threads=a.threads, **kwargs)
        torch_loader = shardpack.Loader(a.dataset, framework="torch", **common)
        jax_loader = shardpack.jax.Loader(a.dataset, **common)
        epoch_rate(torch_loader)  # warm-up: page cache, threads, first compilation
        epoch_rate(jax_loader)
        pairs = []
        for _ in range(a.epochs):
            t = epoch_rate(torch_loader)
            j = epoch_rate(jax_loader)
            pairs.append((t, j))
        t = statistics.median(p[0] for p in pairs)
        j = statistics.median(p[1] for p in pairs)
        ratio = statistics.median(p[1] / p[0] for p in pairs)
        print(f"| {name} | {t:,.0f} | {j:,.0f} | **{ratio:.2f}x** |", flush=True)


if __name__ == "__main__":
    main()
