"""What the Python benchmarks time: samples/s of one pass over a reader."""

import time


def epoch_rate(reader):
    """Samples/s of one whole pass over `reader` (each item (images, labels), images with
    the batch first: NumPy, torch, TensorFlow or JAX)."""
    n = 0
    start = time.perf_counter()
    for images, _ in reader:
        n += int(images.shape[0])
    return n / (time.perf_counter() - start)
