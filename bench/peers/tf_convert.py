"""The converter a TensorFlow user writes, for bench/peers/run.sh.

The `build_image_data.py` way (tensorflow/models research/inception), with the resize that
script leaves to training done here, so that the output is what `shardpack convert --size
WxH --fit crop` writes: every image is read (tf.io.read_file), decoded
(tf.io.decode_image, channels=3: JPEG and PNG alike), scaled so that its shorter side is
the target (tf.image.resize, Lanczos-3 with antialias, the filter shardpack and Pillow use),
centre-cropped to W x H, rounded to uint8, and written as a tf.train.Example with the
features shardpack writes (image/height, width, channels, class/label, class/text,
filename, format "raw", raw/crc32c, raw) by tf.io.TFRecordWriter to one TFRecord file.

Parallelism: tf.data, not processes. The decode + resize + crop runs in
`Dataset.map(num_parallel_calls=THREADS)` on a private thread pool of THREADS threads
(TensorFlow's intra- and inter-op pools also set to THREADS); the Python main thread builds
and writes the Examples, in input order, while the pool works ahead (prefetch).
EXIF orientation is not applied (TensorFlow has no op for it); images TensorFlow cannot
decode are counted as rejects and skipped (tf.data's ignore_errors).

Usage: python tf_convert.py ROOT LIST WIDTH HEIGHT THREADS --out FILE
  LIST: "relative/path label" lines, as `shardpack convert --list` takes.
Prints one line: "tf mode=tfrecord threads=T inputs=N converted=K seconds=S cpu_seconds=C"
(seconds and CPU from just before the first image to the closed file: TensorFlow's import
is left out).
"""
import argparse
import os
import resource
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import crc32c  # noqa: E402  (PyPI: crc32c, as bench/pillow_convert.py)
import tensorflow as tf  # noqa: E402


def read_list(root, list_path):
    paths, labels = [], []
    with open(list_path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            path, _, label = line.rpartition(" ")
            paths.append(path)
            labels.append(int(label))
    return paths, labels


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("root")
    p.add_argument("list")
    p.add_argument("width", type=int)
    p.add_argument("height", type=int)
    p.add_argument("threads", type=int)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    w, h = a.width, a.height

    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    rel_paths, labels = read_list(a.root, a.list)
    classes = [str(i).encode() for i in range(max(labels) + 1)]  # as `--list` names them

    def load(path, label, rel):
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        shape = tf.cast(tf.shape(image)[:2], tf.float32)
        scale = tf.maximum(h / shape[0], w / shape[1])
        size = tf.maximum(tf.cast(tf.math.round(shape * scale), tf.int32), [h, w])
        image = tf.image.resize(image, size, method="lanczos3", antialias=True)
        top = (size[0] - h) // 2
        left = (size[1] - w) // 2
        image = image[top:top + h, left:left + w, :]
        image = tf.cast(tf.clip_by_value(tf.math.round(image), 0, 255), tf.uint8)
        return image, label, rel

    start, cpu0 = time.perf_counter(), cpu_seconds()
    full = [os.path.join(a.root, r) for r in rel_paths]
    options = tf.data.Options()
    options.threading.private_threadpool_size = a.threads
    ds = (tf.data.Dataset.from_tensor_slices((full, labels, rel_paths))
          .map(load, num_parallel_calls=a.threads, deterministic=True)
          .ignore_errors()
          .prefetch(2 * a.threads)
          .with_options(options))

    def int64(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[v]))

    def bytes_(v):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))

    converted = 0
    with tf.io.TFRecordWriter(a.out) as writer:
        for image, label, rel in ds:
            pixels = image.numpy().tobytes()
            label = int(label)
            example = tf.train.Example(features=tf.train.Features(feature={
                "image/height": int64(h),
                "image/width": int64(w),
                "image/channels": int64(3),
                "image/class/label": int64(label),
                "image/class/text": bytes_(classes[label]),
                "image/filename": bytes_(rel.numpy()),
                "image/format": bytes_(b"raw"),
                "image/raw/crc32c": int64(crc32c.crc32c(pixels)),
                "image/raw": bytes_(pixels),
            }))
            writer.write(example.SerializeToString())
            converted += 1
    secs = time.perf_counter() - start
    cpu = cpu_seconds() - cpu0
    print(f"tf mode=tfrecord threads={a.threads} inputs={len(full)} converted={converted} "
          f"seconds={secs:.3f} cpu_seconds={cpu:.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
