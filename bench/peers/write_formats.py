"""Writes the pre-decoded samples of a shardpack TFRecord dataset in a peer's own format,
for bench/peers/run.sh: the same pixels and labels, so that every reader reads the same data.
Untimed: only the readers are compared on these.

  ffcv    one .beton file by FFCV's DatasetWriter: image as RGBImageField(write_mode="raw")
          (the H x W x 3 uint8 pixels as they are, no JPEG), label as IntField
          Python: out/venv-peers-ffcv
  ffcv-jpg  the same, but FFCV's "JPEG mode" (for bench/peers/jpeg_mode.sh): image as
          RGBImageField(write_mode="jpg", jpeg_quality=--jpeg-quality), which FFCV encodes
          with OpenCV (cv2.imencode, 4:2:0), label as IntField    Python: out/venv-peers-ffcv
  mosaic  a directory of MDS shards by MosaicML Streaming's MDSWriter: image as an
          "ndarray:uint8:H,W,3" column, label as "int", no compression, 64 MiB shards
          Python: out/venv-peers-mosaic

The samples come from the shards through bench/tfrecord_io.py (no TensorFlow needed), in
the dataset's order.

Usage: python write_formats.py {ffcv,ffcv-jpg,mosaic} DATASET OUT [--threads 2]
  [--jpeg-quality 90]  (ffcv-jpg only)
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tfrecord_io  # noqa: E402  (bench/tfrecord_io.py)


def load_samples(dataset):
    """[(H x W x C uint8 array, label)] of every record, in shard order."""
    with open(os.path.join(dataset, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    h, w, c = m["image"]["height"], m["image"]["width"], m["image"]["channels"]
    samples = []
    for shard in m["shards"]:
        for payload in tfrecord_io.read_records(os.path.join(dataset, shard["file"])):
            ex = tfrecord_io.parse_example(payload)
            pixels = np.frombuffer(ex["image/raw"][0], np.uint8).reshape(h, w, c).copy()
            samples.append((pixels, int(ex["image/class/label"][0])))
    return samples


class Indexed:
    """The indexable dataset FFCV's writer takes: item i is (pixels, label)."""

    def __init__(self, samples):
        self.samples = samples

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        return self.samples[i]


def write_ffcv(samples, out, threads):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    writer = DatasetWriter(out, {"image": RGBImageField(write_mode="raw"), "label": IntField()},
                           num_workers=threads)
    writer.from_indexed_dataset(Indexed(samples))


def write_ffcv_jpg(samples, out, threads, quality):
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    writer = DatasetWriter(out, {"image": RGBImageField(write_mode="jpg", jpeg_quality=quality),
                                 "label": IntField()},
                           num_workers=threads)
    writer.from_indexed_dataset(Indexed(samples))


def write_mosaic(samples, out):
    from streaming import MDSWriter

    h, w, c = samples[0][0].shape
    columns = {"image": f"ndarray:uint8:{h},{w},{c}", "label": "int"}
    with MDSWriter(out=out, columns=columns, compression=None, size_limit=1 << 26) as writer:
        for pixels, label in samples:
            writer.write({"image": pixels, "label": label})


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("format", choices=["ffcv", "ffcv-jpg", "mosaic"])
    p.add_argument("dataset", help="a shardpack TFRecord dataset (manifest.json)")
    p.add_argument("out")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--jpeg-quality", type=int, default=90,
                   help="ffcv-jpg: the JPEG quality FFCV encodes with, 1..100")
    a = p.parse_args()
    samples = load_samples(a.dataset)
    if a.format == "ffcv":
        write_ffcv(samples, a.out, a.threads)
    elif a.format == "ffcv-jpg":
        write_ffcv_jpg(samples, a.out, a.threads, a.jpeg_quality)
    else:
        write_mosaic(samples, a.out)
    print(f"write_formats: {a.format}: {len(samples)} samples written to {a.out}", flush=True)


if __name__ == "__main__":
    main()
