"""Resize quality of `shardpack convert` against Pillow on real photos (bench/convert_bench.sh).

The reference is the Pillow pipeline a user writes (bench/pillow_convert.py pillow_fit):
full decode, ImageOps.exif_transpose, convert("RGB"), ImageOps.fit(WxH, LANCZOS). Against
it, per input (matched by image/filename), this compares:

  shardpack        the pixels `shardpack convert --size WxH --fit crop` wrote (read back from
                   its TFRecord shards). Large JPEGs are decoded with DCT scaling (1/2..1/8)
                   and then resampled, so most of the difference comes from there.
  shardpack-keep   `shardpack convert --keep` (full-size decode, oriented, alpha composited on
                   white), then Pillow's ImageOps.fit: isolates decoding, orientation and
                   alpha/16-bit handling from the resampler and DCT scaling.
  pillow-draft     Pillow with im.draft("RGB", (W, H)): Pillow's own DCT scaling, the same
                   trade shardpack makes.
and the two DCT-scaled outputs with each other (shardpack vs pillow-draft).

Figures per group (all, JPEG, JPEG decoded with DCT scaling by shardpack, JPEG at full size,
PNG, and PNG split into opaque 8-bit, with alpha, 16-bit): mean absolute difference in
8-bit levels over all bytes, PSNR from the pooled mean squared error, byte-identical
outputs, and the worst image.

Python: convert_bench.sh's venv (Pillow 13 and numpy from PyPI, bench/requirements-pillow.txt):
shardpack's resampler follows Pillow 13's arithmetic, pass order included (Pillow before 13
always resamples horizontally first, so portrait crops differ by a level or two there).
Any Python 3 with Pillow and numpy runs it.

Usage: python resize_quality.py --size WxH --json OUT.json [--md OUT.md] \
           --set NAME ROOT LIST SHARDS KEEP_SHARDS [--set ...]
  LIST: "relative/path label" lines; SHARDS, KEEP_SHARDS: shardpack outputs of that list
  (KEEP_SHARDS may be "-" to skip the shardpack-keep comparison).
"""
import glob
import json
import math
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pillow_convert import pillow_fit, read_list  # noqa: E402
import tfrecord_io  # noqa: E402

W = H = 0
ROOT = ""


def read_shards(directory):
    """{filename: (height, width, channels, raw bytes)} of every record under directory."""
    out = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.tfrecord"))):
        for payload in tfrecord_io.read_records(path):
            e = tfrecord_io.parse_example(payload)
            name = bytes(e["image/filename"][0]).decode("utf-8", "surrogateescape")
            out[name] = (e["image/height"][0], e["image/width"][0], e["image/channels"][0],
                         bytes(e["image/raw"][0]))
    return out


def scale_denominator(width, height, transpose):
    """shardpack's ChooseJpegScaleDenominator for --size WxH --fit crop."""
    if transpose:
        width, height = height, width
    for d in (8, 4, 2):
        if -(-height // d) >= H and -(-width // d) >= W:
            return d
    return 1


def describe(rel):
    """(format, DCT denominator shardpack uses, has alpha, 16-bit) from the file itself."""
    path = os.path.join(ROOT, rel)
    with Image.open(path) as im:
        fmt = im.format
        orientation = im.getexif().get(0x0112, 1)
        alpha = im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info
        denom = 1
        if fmt == "JPEG":
            denom = scale_denominator(im.size[0], im.size[1], orientation in (5, 6, 7, 8))
    deep = False
    if fmt == "PNG":
        with open(path, "rb") as f:
            deep = f.read(25)[24] == 16  # IHDR bit depth
    return fmt, denom, alpha, deep


def references(rel):
    """Pillow's full pipeline and its draft variant, as uint8 arrays (or None)."""
    path = os.path.join(ROOT, rel)
    try:
        full = np.asarray(pillow_fit(path, W, H))
        draft = np.asarray(pillow_fit(path, W, H, draft=True))
        return rel, describe(rel), full, draft
    except Exception as e:  # Pillow rejects it: not compared
        return rel, None, repr(e), None


class Stats:
    def __init__(self):
        self.n = 0
        self.abs_sum = 0
        self.sq_sum = 0
        self.values = 0
        self.identical = 0
        self.worst = (-1.0, "")

    def add(self, rel, a, b):
        d = a.astype(np.int32) - b.astype(np.int32)
        abs_sum = int(np.abs(d).sum())
        self.n += 1
        self.abs_sum += abs_sum
        self.sq_sum += int((d * d).sum())
        self.values += d.size
        self.identical += abs_sum == 0
        mad = abs_sum / d.size
        if mad > self.worst[0]:
            self.worst = (mad, rel)

    def result(self):
        if self.n == 0:
            return None
        mse = self.sq_sum / self.values
        return {
            "n": self.n,
            "mad": self.abs_sum / self.values,
            "psnr": float("inf") if mse == 0 else 10 * math.log10(255 * 255 / mse),
            "identical": self.identical,
            "worst_mad": self.worst[0],
            "worst": self.worst[1],
        }


COMPARISONS = ["shardpack", "shardpack-keep", "pillow-draft", "shardpack~draft"]


def groups_of(fmt, denom, alpha, deep):
    g = ["all"]
    if fmt == "JPEG":
        g += ["JPEG", "JPEG, DCT-scaled" if denom > 1 else "JPEG, full-size decode"]
    elif fmt == "PNG":
        g.append("PNG")
        if alpha:
            g.append("PNG with alpha")
        if deep:
            g.append("PNG, 16-bit")
        if not alpha and not deep:
            g.append("PNG, opaque, 8-bit or less")
    return g


def evaluate(name, root, list_path, shards, keep_shards, procs):
    global ROOT
    ROOT = root
    items = read_list(root, list_path)
    converted = read_shards(shards)
    kept = read_shards(keep_shards) if keep_shards != "-" else None
    stats = {}
    missing = {"shardpack": [], "pillow": []}
    with Pool(procs) as pool:
        for rel, desc, full, draft in pool.imap(references, [r for r, _ in items], chunksize=1):
            if desc is None:
                missing["pillow"].append(f"{rel}: {full}")
                continue
            if rel not in converted:
                missing["shardpack"].append(rel)
                continue
            h, w, c, raw = converted[rel]
            ours = np.frombuffer(raw, np.uint8).reshape(h, w, c)
            pairs = {"shardpack": (ours, full), "pillow-draft": (draft, full),
                     "shardpack~draft": (ours, draft)}
            if kept is not None and rel in kept:
                kh, kw, kc, kraw = kept[rel]
                im = Image.frombuffer("RGB", (kw, kh), kraw, "raw", "RGB", 0, 1)
                pairs["shardpack-keep"] = (np.asarray(ImageOps.fit(im, (W, H), Image.LANCZOS)),
                                           full)
            for group in groups_of(*desc):
                for comp, (a, b) in pairs.items():
                    stats.setdefault((group, comp), Stats()).add(rel, a, b)
    rows = []
    order = ["all", "JPEG", "JPEG, full-size decode", "JPEG, DCT-scaled", "PNG",
             "PNG, opaque, 8-bit or less", "PNG with alpha", "PNG, 16-bit"]
    for group in order:
        row = {"set": name, "group": group}
        for comp in COMPARISONS:
            s = stats.get((group, comp))
            row[comp] = s.result() if s else None
        if row["shardpack"] is not None:
            rows.append(row)
    return {"set": name, "inputs": len(items), "rows": rows, "missing": missing}


def fmt_cell(r):
    if r is None:
        return "–"
    psnr = "∞" if r["psnr"] == float("inf") else f"{r['psnr']:.1f} dB"
    return f"{r['mad']:.3f} / {psnr} ({r['identical']}/{r['n']} identical)"


def markdown(results):
    lines = [
        f"Against Pillow's full pipeline (full decode, exif_transpose, convert RGB, "
        f"ImageOps.fit {W}x{H} LANCZOS). Cells: mean absolute difference (8-bit levels) / PSNR "
        f"(byte-identical outputs).",
        "",
        "| set | group | n | shardpack convert | shardpack --keep + Pillow fit "
        "| Pillow draft | shardpack vs Pillow draft | worst (shardpack) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for row in res["rows"]:
            sp = row["shardpack"]
            worst = f"{sp['worst']} ({sp['worst_mad']:.2f})" if sp["worst_mad"] > 0 else "–"
            lines.append(
                f"| {row['set']} | {row['group']} | {sp['n']} | {fmt_cell(sp)} | "
                f"{fmt_cell(row['shardpack-keep'])} | {fmt_cell(row['pillow-draft'])} | "
                f"{fmt_cell(row['shardpack~draft'])} | {worst} |")
    notes = []
    for res in results:
        for who, names in res["missing"].items():
            if names:
                notes.append(f"{res['set']}: not compared, no {who} output for "
                             f"{len(names)}: " + "; ".join(names[:5]))
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main():
    global W, H
    args = sys.argv[1:]
    sets, json_path, md_path, procs = [], None, None, os.cpu_count() or 1
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--size":
            W, H = (int(x) for x in args[i + 1].split("x"))
            i += 2
        elif a == "--json":
            json_path = args[i + 1]
            i += 2
        elif a == "--md":
            md_path = args[i + 1]
            i += 2
        elif a == "--procs":
            procs = int(args[i + 1])
            i += 2
        elif a == "--set":
            sets.append(args[i + 1:i + 6])
            i += 6
        else:
            sys.exit(__doc__)
    if not sets or not W or not json_path or any(len(s) != 5 for s in sets):
        sys.exit(__doc__)
    results = [evaluate(*s, procs) for s in sets]
    with open(json_path, "w") as f:
        json.dump(results, f, indent=1)
    md = markdown(results)
    if md_path:
        with open(md_path, "w") as f:
            f.write(md)
    sys.stdout.write(md)


if __name__ == "__main__":
    main()
