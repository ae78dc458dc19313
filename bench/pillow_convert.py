"""The baseline a user writes without shardpack: Pillow decodes, orients and resizes every
image (ImageOps.fit, Lanczos, as `shardpack convert --size WxH --fit crop` does) and the
pixels are collected, in a process pool of the given size. Writes nothing: it measures
decode + resize only, which flatters the baseline.

Run with Debian's /usr/bin/python3 and python3-pil:
    /usr/bin/python3 bench/pillow_convert.py SRC WIDTH HEIGHT PROCESSES [draft]
"""
import os
import sys
import time
from multiprocessing import Pool

from PIL import Image, ImageOps

W = H = 0
DRAFT = False


def convert(path):
    try:
        with Image.open(path) as im:
            if DRAFT:  # libjpeg DCT scaling, as shardpack uses: the fast way to use Pillow
                im.draft("RGB", (W, H))
            im = ImageOps.exif_transpose(im).convert("RGB")
            out = ImageOps.fit(im, (W, H), Image.LANCZOS)
            return len(out.tobytes())
    except Exception:  # a reject, as shardpack counts it
        return -1


def main():
    global W, H, DRAFT
    src, W, H, procs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    DRAFT = len(sys.argv) > 5 and sys.argv[5] == "draft"
    files = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if not f.startswith("."))
    start = time.perf_counter()
    with Pool(procs) as pool:
        results = pool.map(convert, files, chunksize=16)
    secs = time.perf_counter() - start
    ok = sum(1 for r in results if r > 0)
    print(f"pillow{' draft' if DRAFT else ''} {procs} processes: {len(files)} inputs, {ok} converted, {secs:.2f} s, "
          f"{len(files) / secs:.0f} images/s")


if __name__ == "__main__":
    main()
