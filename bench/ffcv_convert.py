"""FFCV 1.0.2's writer as a conversion peer, for bench/convert_bench.sh: the same image files
and list that `shardpack convert` gets, written to one .beton file by FFCV's DatasetWriter
the way FFCV's own ImageNet example writes one (examples/imagenet-example/write_imagenet.py):
an indexed dataset of (PIL image, label) read with torchvision ImageFolder's loader
(Image.open, convert("RGB")), RGBImageField(max_resolution=256) (FFCV resizes an image whose
longer side passes 256 with cv2.resize INTER_AREA, keeping the aspect ratio) and IntField,
num_workers worker processes.

  raw  RGBImageField(write_mode="raw"): pixels as they are
  jpg  RGBImageField(write_mode="jpg", jpeg_quality=Q): FFCV encodes with OpenCV

The output is max-side 256 (a 4:3 photo becomes 256x192), less than shardpack's 256x256
crop: FFCV's writer resizes fewer pixels and writes fewer bytes than shardpack does.

Timed from the writer's creation to the file complete (Python's start and imports are
not counted). Prints: ffcv_convert mode=M threads=T seconds=S converted=N bytes=B
Python: out/venv-peers-ffcv (bench/peers/run.sh installs it).

Usage: python ffcv_convert.py ROOT LIST OUT.beton THREADS {raw,jpg} [--quality 90]
"""

import argparse
import os
import time

from PIL import Image


class Files:
    """Item i: (PIL image, label) of the list's line i, as torchvision's ImageFolder loads it."""

    def __init__(self, root, list_file):
        self.items = []
        with open(list_file, encoding="utf-8") as f:
            for line in f:
                path, label = line.rstrip("\n").rsplit(" ", 1)
                self.items.append((os.path.join(root, path), int(label)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        with open(path, "rb") as f:
            image = Image.open(f)
            return image.convert("RGB"), label


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("list")
    p.add_argument("out")
    p.add_argument("threads", type=int)
    p.add_argument("mode", choices=["raw", "jpg"])
    p.add_argument("--quality", type=int, default=90)
    a = p.parse_args()

    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    data = Files(a.root, a.list)
    if a.mode == "raw":
        image = RGBImageField(write_mode="raw", max_resolution=256)
    else:
        image = RGBImageField(write_mode="jpg", max_resolution=256, jpeg_quality=a.quality)
    t0 = time.perf_counter()
    writer = DatasetWriter(a.out, {"image": image, "label": IntField()}, num_workers=a.threads)
    writer.from_indexed_dataset(data)
    seconds = time.perf_counter() - t0
    print(f"ffcv_convert mode={a.mode} threads={a.threads} seconds={seconds:.3f} "
          f"converted={len(data)} bytes={os.path.getsize(a.out)}")


if __name__ == "__main__":
    main()
