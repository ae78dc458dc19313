"""The input pipeline Keras gets: shardpack.tf.dataset against tf.data's own TFRecord reader
(TFRecordDataset + parse_single_example + decode_raw, parallel and prefetched, as
TensorFlow's guide writes it: files interleaved, a 1,024-record shuffle buffer) on the same
shards, in one run, alternating epochs; shardpack twice, with its default copy of each batch
into TensorFlow's memory and with copy=False (the tensors adopt the ring's slots). No model:
each batch is only pulled through the tf.data iterator, as model.fit pulls it.

Run with the interop environment, which has TensorFlow and the binding:
  bash scripts/install-python.sh && bash scripts/install-interop.sh
  out/venv-interop/bin/python bench/keras_input_bench.py DATASET [--batch 256] [--epochs 3]
Prints samples/s of each reader's epochs after its first, and shardpack's ratio to each
(medians). A third reader is tf.data at its fastest (records shuffled serialized, parsed a
batch at a time), as bench/peers/readers.py reads them.

With --jpegs FOLDER (the class folders of JPEGs the dataset was converted from, e.g.
out/bench/images-30000/scale for bench/peers' 30,000-sample dataset), Keras's own way in,
keras.utils.image_dataset_from_directory (decode and resize to the dataset's size, cropped
to its aspect ratio as `convert --fit crop`, shuffled), is timed too: --jpeg-epochs whole
epochs (default 1, its files read into the page cache first) in the same run; it is slow,
so its epochs are fewer. Its batches are float32 (what the utility delivers), shardpack's
uint8.
"""

import argparse
import glob
import json
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

import shardpack.tf  # noqa: E402
from rates import epoch_rate  # noqa: E402


def shards(path):
    """(the image's (h, w, c), the parse spec of pixels and label, the shard files)."""
    m = json.load(open(os.path.join(path, "manifest.json")))
    shape = (m["image"]["height"], m["image"]["width"], m["image"]["channels"])
    spec = {"image/raw": tf.io.FixedLenFeature([], tf.string),
            "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
    return shape, spec, sorted(glob.glob(os.path.join(path, "*.tfrecord")))


def tfdata(path, batch):
    (h, w, c), spec, files = shards(path)

    def parse(record):
        t = tf.io.parse_single_example(record, spec)
        image = tf.reshape(tf.io.decode_raw(t["image/raw"], tf.uint8), (h, w, c))
        return image, t["image/class/label"]

    return (tf.data.Dataset.from_tensor_slices(files)
            .shuffle(len(files), seed=0)
            .interleave(tf.data.TFRecordDataset, num_parallel_calls=tf.data.AUTOTUNE)
            .shuffle(1024, seed=0)
            .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
            .batch(batch)
            .prefetch(tf.data.AUTOTUNE))


def tfdata_batched(path, batch):
    """The fastest tf.data pipeline we know for these shards (bench/peers/readers.py's):
    shuffle the serialized records, batch, then parse the whole batch at once."""
    (h, w, c), spec, files = shards(path)

    def parse(serialized):
        t = tf.io.parse_example(serialized, spec)
        images = tf.reshape(tf.io.decode_raw(t["image/raw"], tf.uint8), (-1, h, w, c))
        return images, t["image/class/label"]

    return (tf.data.TFRecordDataset(files, num_parallel_reads=2)
            .shuffle(1024, seed=0)
            .batch(batch)
            .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
            .prefetch(tf.data.AUTOTUNE))


def keras_from_jpegs(folder, batch, shape):
    """keras.utils.image_dataset_from_directory on the source JPEGs, as Keras's guides
    use it (prefetched)."""
    h, w, _ = shape
    ds = tf.keras.utils.image_dataset_from_directory(
        folder, batch_size=batch, image_size=(h, w), crop_to_aspect_ratio=True, shuffle=True,
        seed=0, label_mode="int", verbose=False)
    return ds.prefetch(tf.data.AUTOTUNE)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dataset")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--jpegs", help="the source JPEG class folders: also time "
                   "keras.utils.image_dataset_from_directory on them")
    p.add_argument("--jpeg-epochs", type=int, default=1)
    a = p.parse_args()
    readers = {
        "shardpack.tf.dataset (global shuffle)": shardpack.tf.dataset(a.dataset, a.batch),
        "shardpack.tf.dataset, copy=False": shardpack.tf.dataset(a.dataset, a.batch,
                                                                 copy=False),
        "tf.data TFRecordDataset + parse_single_example + decode_raw": tfdata(a.dataset, a.batch),
        "tf.data TFRecordDataset, batched parse_example + decode_raw": tfdata_batched(a.dataset,
                                                                                    a.batch),
    }
    jpeg_name = "keras.utils.image_dataset_from_directory (source JPEGs)"
    if a.jpegs:
        for root, _, files in os.walk(a.jpegs):  # into the page cache
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    fh.read()
        readers[jpeg_name] = keras_from_jpegs(a.jpegs, a.batch, shards(a.dataset)[0])
    rates = {name: [] for name in readers}
    for e in range(a.epochs):
        for name, ds in readers.items():
            if name == jpeg_name and not 1 <= e <= a.jpeg_epochs:
                continue
            r = epoch_rate(ds)
            if e > 0:  # the first epoch of each warms caches and threads
                rates[name].append(r)
    med = {name: statistics.median(r) for name, r in rates.items()}
    for name, r in rates.items():
        print(f"{name}: {med[name]:,.0f} samples/s (epochs: {', '.join(f'{x:,.0f}' for x in r)})")
    ours = [name for name in med if name.startswith("shardpack")]
    for mine in ours:
        for name in med:
            if name not in ours:
                print(f"{mine} / {name}: {med[mine] / med[name]:.2f}x")


if __name__ == "__main__":
    main()
