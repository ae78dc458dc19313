#!/usr/bin/env python3
"""The loader on the GPU, in three forms over the same dataset, one after the other:

  host   batches in pinned host memory, normalised to float16 on the CPU;
  cuda   the same batches copied to the GPU as uint8 (the H2D path alone);
  cuda+normalise   copied as uint8 and normalised to float16 by the CUDA kernel.

Each is timed over epochs after a first one, the batches consumed on torch's current
stream (a sum per batch) and the stream synchronised once per epoch, not per batch. The
difference between the last two is the normalise kernel's cost per sample. Also checks
that the kernel's batches equal the CPU normaliser's, on a stream other than the default.

    python3 loader_throughput.py DATASET --threads 16
"""

import argparse
import time

import torch

import shardpack
import shardpack.torch  # noqa: F401  (DLPack conversion to torch tensors)


def epochs_per_second(loader, epochs):
    rates = []
    for epoch in range(epochs + 1):
        start = time.perf_counter()
        samples = 0
        total = torch.zeros((), device="cuda")
        for x, _ in loader:
            total += x.float().sum() if x.is_cuda else 0
            samples += x.shape[0]
        torch.cuda.current_stream().synchronize()
        if epoch > 0:  # the first epoch warms the page cache and the CUDA context
            rates.append(samples / (time.perf_counter() - start))
    rates.sort()
    return rates[len(rates) // 2]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    a = p.parse_args()
    common = dict(batch_size=a.batch_size, num_threads=a.threads, seed=1)
    half = dict(normalize="imagenet", dtype="float16")
    forms = {
        "host": shardpack.Loader(a.dataset, **common, **half),
        "cuda": shardpack.Loader(a.dataset, device="cuda:0", **common),
        "cuda+normalise": shardpack.Loader(a.dataset, device="cuda:0", **common, **half),
    }
    rates = {name: epochs_per_second(loader, a.epochs) for name, loader in forms.items()}
    for name, rate in rates.items():
        print(f"{name}: {rate:.0f} samples/s")
    kernel_us = 1e6 / rates["cuda+normalise"] - 1e6 / rates["cuda"]
    print(f"normalise kernel: {kernel_us:.2f} us per sample above the uint8 copy")

    # The kernel's output equals the CPU normaliser's, consumed on a side stream.
    side = torch.cuda.Stream()
    host = shardpack.Loader(a.dataset, **common, **half)
    gpu = shardpack.Loader(a.dataset, device="cuda:0", **common, **half)
    with torch.cuda.stream(side):
        for (hx, _), (gx, _) in zip(host, gpu):
            if not torch.equal(gx.cpu(), hx):
                raise SystemExit("the GPU's normalised batch differs from the CPU's")
    print("normalised batches on a side stream: equal to the CPU's")


if __name__ == "__main__":
    main()
