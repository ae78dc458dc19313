"""The converter a user writes without shardpack, in Pillow, for bench/convert_bench.sh.

Every image: Image.open, ImageOps.exif_transpose, convert("RGB"), ImageOps.fit to WxH with
Lanczos (what `shardpack convert --size WxH --fit crop` does), in a process pool of the
given size (1: a plain loop in this process, no pool). Modes:

  tfrecord  (the baseline) the pixels become a tf.train.Example with the features shardpack
            writes (image/height, width, channels, class/label, class/text, filename,
            format "raw", raw/crc32c, raw), written to one TFRecord file (--out) by the
            parent process in input order, as a user would with pool.imap.
            Serialization and framing: the `tfrecord` PyPI package (TFRecordWriter: the
            `protobuf` package's generated tf.train.Example, and `crc32c` from PyPI for the
            masked CRC32C of the framing), which is what a user without TensorFlow finds;
            the features' own pixel checksum uses the same `crc32c` package.
            Fallback when those packages cannot be imported (no PyPI): a hand-encoded
            Example with the same features and a table-driven pure-Python CRC32C; the
            script then prints "writer=fallback" and the figures are not comparable.
  resize    decode + orient + resize only, the pixels are dropped (flatters the baseline).
  draft     as resize, with im.draft("RGB", (W, H)) first: libjpeg DCT scaling, the fast way
            to use Pillow (and what shardpack does).

Python: convert_bench.sh's venv (the python3 on PATH, with bench/requirements-pillow.txt from
PyPI: Pillow 13, tfrecord, crc32c), the way a user installs them; its "Debian Pillow" rows run
the resize and draft modes with /usr/bin/python3 and python3-pil (Pillow 9.4) instead.

Usage: python pillow_convert.py ROOT LIST WIDTH HEIGHT PROCESSES MODE [--out FILE]
  LIST: "relative/path label" lines, as `shardpack convert --list` takes.
Prints one line: "pillow mode=M processes=P inputs=N converted=K seconds=S writer=W".
"""
import os
import struct
import sys
import time
from multiprocessing import Pool

from PIL import Image, ImageOps

W = H = 0
MODE = "resize"
CLASSES = []


def read_list(root, list_path):
    items = []
    with open(list_path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            path, _, label = line.rpartition(" ")
            items.append((path, int(label)))
    return items


def pillow_fit(path, width, height, draft=False):
    """The user's pipeline, shared with bench/resize_quality.py (its reference)."""
    with Image.open(path) as im:
        if draft:  # libjpeg DCT scaling: a no-op for PNG
            im.draft("RGB", (width, height))
        im = ImageOps.exif_transpose(im).convert("RGB")
        return ImageOps.fit(im, (width, height), Image.LANCZOS)


def convert(item):
    """Returns the pixels (bytes) or None for a reject, as shardpack counts them."""
    path, _ = item
    try:
        out = pillow_fit(os.path.join(ROOT, path), W, H, draft=MODE == "draft")
        pixels = out.tobytes()
        return pixels if MODE == "tfrecord" else len(pixels)
    except Exception:  # a reject
        return None


# ---- the writer: the `tfrecord` package, or the fallback --------------------------------

def _make_writer(out_path):
    try:
        import crc32c  # noqa: F401  (PyPI: crc32c)
        from tfrecord import TFRecordWriter  # PyPI: tfrecord (protobuf + crc32c)

        writer = TFRecordWriter(out_path)

        def write(pixels, rel, label):
            writer.write({
                "image/height": (H, "int"),
                "image/width": (W, "int"),
                "image/channels": (3, "int"),
                "image/class/label": (label, "int"),
                "image/class/text": (CLASSES[label], "byte"),
                "image/filename": (rel.encode(), "byte"),
                "image/format": (b"raw", "byte"),
                "image/raw/crc32c": (crc32c.crc32c(pixels), "int"),
                "image/raw": (pixels, "byte"),
            })

        return write, writer.close, "tfrecord+crc32c"
    except ImportError:
        pass

    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)

    def crc32c_py(data):
        c = 0xFFFFFFFF
        for b in data:
            c = table[(c ^ b) & 0xFF] ^ (c >> 8)
        return c ^ 0xFFFFFFFF

    def mask(c):
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    def ld(tag, payload):
        return bytes([tag]) + varint(len(payload)) + payload

    def entry(key, feature):
        return ld(0x0A, ld(0x0A, key.encode()) + ld(0x12, feature))

    def int64_feature(v):
        return ld(0x1A, ld(0x0A, varint(v)))

    def bytes_feature(v):
        return ld(0x0A, ld(0x0A, v))

    f = open(out_path, "wb")

    def write(pixels, rel, label):
        features = b"".join([
            entry("image/height", int64_feature(H)),
            entry("image/width", int64_feature(W)),
            entry("image/channels", int64_feature(3)),
            entry("image/class/label", int64_feature(label)),
            entry("image/class/text", bytes_feature(CLASSES[label])),
            entry("image/filename", bytes_feature(rel.encode())),
            entry("image/format", bytes_feature(b"raw")),
            entry("image/raw/crc32c", int64_feature(crc32c_py(pixels))),
            entry("image/raw", bytes_feature(pixels)),
        ])
        record = ld(0x0A, features)
        length = struct.pack("<Q", len(record))
        f.write(length)
        f.write(struct.pack("<I", mask(crc32c_py(length))))
        f.write(record)
        f.write(struct.pack("<I", mask(crc32c_py(record))))

    return write, f.close, "fallback"


def main():
    global ROOT, W, H, MODE, CLASSES
    args = sys.argv[1:]
    out_path = None
    if "--out" in args:
        i = args.index("--out")
        out_path = args[i + 1]
        del args[i:i + 2]
    if len(args) != 6 or args[5] not in ("tfrecord", "resize", "draft"):
        sys.exit(__doc__)
    ROOT, list_path = args[0], args[1]
    W, H, procs, MODE = int(args[2]), int(args[3]), int(args[4]), args[5]
    if MODE == "tfrecord" and not out_path:
        sys.exit("pillow_convert: tfrecord mode needs --out FILE")
    items = read_list(ROOT, list_path)
    # Classes by number, as `shardpack convert --list` names them.
    CLASSES = [str(i).encode() for i in range(max(label for _, label in items) + 1)]

    start = time.perf_counter()
    write = close = None
    writer_name = "none"
    if MODE == "tfrecord":
        write, close, writer_name = _make_writer(out_path)
    converted = 0
    # Small chunks keep a few large photos from landing on one worker.
    chunk = max(1, min(16, len(items) // (32 * procs)))
    pool = Pool(procs) if procs > 1 else None
    try:
        results = pool.imap(convert, items, chunksize=chunk) if pool else map(convert, items)
        for (rel, label), r in zip(items, results):
            if r is None:
                continue
            converted += 1
            if write is not None:
                write(r, rel, label)
    finally:
        if close is not None:
            close()
        if pool is not None:
            pool.close()
            pool.join()
    secs = time.perf_counter() - start
    print(f"pillow mode={MODE} processes={procs} inputs={len(items)} converted={converted} "
          f"seconds={secs:.3f} writer={writer_name}")


if __name__ == "__main__":
    main()
