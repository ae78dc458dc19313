"""Epoch by epoch: the first epoch, the steady state and the start-up of each, for
shardpack's Python Loader and FFCV's Loader on the same pixels (issue 23: the lead
measured on epochs of 11 batches was FFCV's start-up, not its reading).

Python: out/venv-peers-ffcv/bin/python (pyenv's python3 with --system-site-packages, so
shardpack and torch are importable there too; bench/peers/run.sh or
bench/peers/ffcv_out_of_core.py's note say how it is made).

Each run is a fresh process that reads EPOCHS epochs of one reader and prints one JSON line:
  reader, version, samples (per epoch), epochs,
  first_batch_s   [per epoch] from asking for the epoch's iterator to its first batch
  epoch_s         [per epoch] from asking for the iterator to the last batch
  epoch1_per_s    samples / epoch_s of the first epoch (its start-up included)
  steady_per_s    samples / median epoch_s of epochs 2.. (start-up included: what a
                  training loop sees every epoch)
Every reader: batches of 256 uint8 HWC images, a random order every epoch (shardpack:
shuffle="global"; FFCV: OrderOption.RANDOM), drop_last, 2 threads. FFCV is configured as
its documentation recommends for a dataset in memory: os_cache=True. The consumer touches
nothing: both hand out batches already in memory.

Usage: python epochs.py shardpack DATASET_DIR --epochs 5
       python epochs.py ffcv FILE.beton --epochs 5
"""

import argparse
import json
import statistics
import time


def shardpack_epochs(a):
    import shardpack

    loader = shardpack.Loader(a.data, batch_size=a.batch_size, num_threads=a.threads,
                              shuffle="global", seed=0, drop_last=True)
    return loader, f"shardpack {shardpack.__version__}"


def ffcv_epochs(a):
    import importlib.metadata

    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption

    loader = Loader(a.data, batch_size=a.batch_size, num_workers=a.threads,
                    order=OrderOption.RANDOM, drop_last=True, os_cache=True, seed=0,
                    pipelines={"image": [SimpleRGBImageDecoder()], "label": [IntDecoder()]})
    return loader, f"ffcv {importlib.metadata.version('ffcv')}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reader", choices=["shardpack", "ffcv"])
    p.add_argument("data")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    loader, version = (shardpack_epochs if a.reader == "shardpack" else ffcv_epochs)(a)
    first, epoch = [], []
    samples = 0
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        n = 0
        t_first = None
        for images, _labels in loader:
            if t_first is None:
                t_first = time.perf_counter() - t0
            n += images.shape[0]
        epoch.append(time.perf_counter() - t0)
        first.append(t_first)
        samples = n
    steady = statistics.median(epoch[1:]) if len(epoch) > 1 else epoch[0]
    print(json.dumps({
        "reader": a.reader, "version": version, "samples": samples, "epochs": a.epochs,
        "first_batch_s": [round(x, 4) for x in first], "epoch_s": [round(x, 4) for x in epoch],
        "epoch1_per_s": round(samples / epoch[0]), "steady_per_s": round(samples / steady),
    }))


if __name__ == "__main__":
    main()
