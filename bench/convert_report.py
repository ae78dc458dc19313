"""Turns bench/convert_bench.sh's raw timings into its markdown report (standard library only).

Usage: python convert_report.py TIMES.tsv META.json QUALITY.md > convert.md
TIMES.tsv: set, converter, threads, rep, seconds, inputs, converted, megapixels (floor only).
Rates are inputs / median seconds; the floor's are decoded images / median seconds.
"""
import csv
import json
import statistics
import sys

LABELS = {
    "floor": "libjpeg-turbo full-size decode alone (floor, bench/decode_floor)",
    "shardpack": "**shardpack convert**",
    "pillow-tfrecord": "Pillow {pil} + TFRecord write (the user's converter)",
    "pillow-resize": "Pillow {pil}, no write",
    "pillow-draft": "Pillow {pil} with draft (DCT scaling), no write",
    "debian-pillow-resize": "Debian Pillow {deb}, no write (earlier baseline)",
    "debian-pillow-draft": "Debian Pillow {deb} with draft, no write (earlier baseline)",
}
ORDER = list(LABELS)


def main():
    times_path, meta_path, quality_path = sys.argv[1:4]
    meta = json.load(open(meta_path))
    runs = {}
    for row in csv.DictReader(open(times_path), delimiter="\t"):
        key = (row["set"], row["converter"], int(row["threads"]))
        runs.setdefault(key, []).append(row)

    def rate(s, conv, t):
        rows = runs.get((s, conv, t))
        if not rows:
            return None
        secs = [float(r["seconds"]) for r in rows]
        med = statistics.median(secs)
        done = int(rows[0]["converted"] or 0) if conv == "floor" else int(rows[0]["inputs"])
        return {"rate": done / med, "seconds": med,
                "spread": (max(secs) - min(secs)) / med if med else 0.0,
                "converted": {int(r["converted"] or 0) for r in rows},
                "inputs": int(rows[0]["inputs"]), "n": len(secs)}

    sets = {k: v for k, v in meta["sets"].items() if v["n"] > 0}
    main_sets = [k for k, v in sets.items() if not v.get("subset")]
    subsets = [k for k, v in sets.items() if v.get("subset")]
    threads = sorted({k[2] for k in runs})
    pil, deb = meta["pillow"], meta["debian_pillow"]
    out = []
    w = out.append
    w(f"# shardpack convert benchmark ({meta['size']}x{meta['size']}, --fit crop, Lanczos)\n")
    w(f"`bash bench/convert_bench.sh {meta['images']}` — {meta['date']}, commit {meta['commit']}, "
      f"{meta['shardpack']} ({meta['binary']}), {meta['cpu']}, {meta['cores']} cores, "
      f"kernel {meta['kernel']}, libjpeg-turbo {meta['libjpeg']} (Debian), Python "
      f"{meta['python']}. Medians of {meta['reps']} runs, interleaved round by round; "
      f"outputs in /dev/shm; page cache warm. CPU busy outside the benchmark: "
      f"{meta['busy_before']} cores before, {meta['busy_after']} after"
      f"{' (NOT QUIET: figures disturbed)' if max(meta['busy_before'], meta['busy_after']) > 0.15 else ''}.\n")
    if meta.get("pypi_note"):
        w(f"**{meta['pypi_note']}**\n")
    for s, info in sets.items():
        w(f"- **{s}**: {info['name']}: {info['n']} files, {info['mp']:.1f} MP in all "
          f"({info['mp'] / info['n']:.2f} MP per image)")
    w("")

    w("## Throughput\n")
    head = "| set | converter | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} img/s (MP/s)"
                                              for t in threads)
    head += " | parallel efficiency | spread of runs |"
    w(head)
    w("|---|---|" + "---|" * (len(threads) + 2))
    for s, info in sets.items():
        mp_per_image = info["mp"] / info["n"]
        for conv in ORDER:
            rs = [rate(s, conv, t) for t in threads]
            if all(r is None for r in rs):
                continue
            cells = []
            for r in rs:
                if r is None:
                    cells.append("–")
                    continue
                bad = "" if r["converted"] == {r["inputs"]} else \
                    f" ({'/'.join(map(str, sorted(r['converted'])))} of {r['inputs']} converted)"
                cells.append(f"{r['rate']:,.1f} ({r['rate'] * mp_per_image:,.0f}){bad}")
            eff = "–"
            if len(threads) > 1 and rs[0] and rs[-1]:
                eff = f"{rs[-1]['rate'] / (threads[-1] * rs[0]['rate']):.2f}"
            spread = max(r["spread"] for r in rs if r)
            w(f"| {s} | {LABELS[conv].format(pil=pil, deb=deb)} | " + " | ".join(cells) +
              f" | {eff} | {spread * 100:.0f}% |")
    w("")
    w("MP/s: source megapixels per second (the stored image size, whatever the decoder "
      "does with it). Parallel efficiency: 2-thread rate / (2 x 1-thread rate). Spread: "
      "(slowest - fastest) / median run. The floor times decodes of files already in "
      "memory; every other row is the wall time of the whole command (start, scan, read, "
      "decode, resize, write).\n")

    w("## Ratios (same cores, same run)\n")
    cols = [(s, t) for s in main_sets for t in threads]
    w("| ratio | " + " | ".join(f"{s}, {t} thr" for s, t in cols) + " | target |")
    w("|---|" + "---|" * (len(cols) + 1))

    def ratio_row(label, num, den, target=None, per_set_target=None):
        cells = []
        for s, t in cols:
            a, b = rate(s, num, t), rate(s, den, t)
            if a is None or b is None:
                cells.append("–")
                continue
            x = a["rate"] / b["rate"]
            goal = per_set_target.get(s) if per_set_target else target
            mark = "" if goal is None else (" ✓" if x >= goal else " ✗")
            cells.append(f"{x:.2f}x{mark}")
        if per_set_target:
            tgt = ", ".join(f"≥ {v}x on {k}" for k, v in per_set_target.items())
        else:
            tgt = f"≥ {target}x" if target else ""
        w(f"| {label} | " + " | ".join(cells) + f" | {tgt} |")

    ratio_row("shardpack per core / bare full-size decode per core", "shardpack", "floor",
              per_set_target={"A": 0.85, "B": 1.0})
    ratio_row(f"shardpack / Pillow {pil} + TFRecord (the user's converter)", "shardpack",
              "pillow-tfrecord", target=3)
    ratio_row(f"shardpack / Pillow {pil}, no write", "shardpack", "pillow-resize")
    ratio_row(f"shardpack / Pillow {pil} draft, no write", "shardpack", "pillow-draft")
    ratio_row(f"shardpack / Debian Pillow {deb}, no write", "shardpack", "debian-pillow-resize")
    ratio_row(f"shardpack / Debian Pillow {deb} draft, no write", "shardpack",
              "debian-pillow-draft")
    ratio_row(f"Pillow {pil} + TFRecord / bare decode", "pillow-tfrecord", "floor")
    ratio_row(f"Pillow {pil} write cost: TFRecord rate / no-write rate", "pillow-tfrecord",
              "pillow-resize")
    w("")
    if subsets:
        w("B split by JPEG coding (floor and shardpack only):\n")
        cols = [(s, t) for s in subsets for t in threads]
        w("| ratio | " + " | ".join(f"{s}, {t} thr" for s, t in cols) + " |")
        w("|---|" + "---|" * len(cols))
        cells = []
        for s, t in cols:
            a, b = rate(s, "shardpack", t), rate(s, "floor", t)
            cells.append("–" if a is None or b is None else f"{a['rate'] / b['rate']:.2f}x")
        w("| shardpack per core / bare full-size decode per core | " + " | ".join(cells) + " |")
        w("")

    w("## Resize quality against Pillow\n")
    w(open(quality_path).read())
    w("Groups: *JPEG, DCT-scaled* are the JPEGs shardpack decodes at 1/2..1/8 (both sides "
      "still >= 256 after scaling); *full-size decode* the rest. *PNG with alpha*: shardpack "
      "composites on white (--background ffffff) while `convert(\"RGB\")` drops the alpha "
      "channel, so those differ by definition. *PNG, 16-bit*: Pillow opens 16-bit gray as "
      "mode I and `convert(\"RGB\")` clips it at 255; 16-bit RGB it truncates to 8 bits.\n")

    w("## How each row is made\n")
    w(f"- **shardpack convert**: `shardpack convert ROOT DST --list LIST --size 256x256 --fit "
      f"crop --threads T` into /dev/shm (TFRecord shards, 64 MiB, pixels aligned, manifest, "
      f".idx): decode with DCT scaling where both sides stay >= 256, EXIF orientation, "
      f"antialiased Lanczos (Pillow's arithmetic), CRC32C, write.")
    w("- **floor**: `bench/decode_floor`: all files read into memory first, then libjpeg API "
      "full-size decodes to RGB (defaults: accurate integer IDCT, fancy upsampling), T "
      "threads sharing the list; nothing resized or written; one untimed pass first.")
    w(f"- **Pillow + TFRecord**: `bench/pillow_convert.py ... tfrecord` with {meta['python']}: "
      "Image.open, exif_transpose, convert RGB, ImageOps.fit LANCZOS, then the features "
      "shardpack writes, serialized by the `tfrecord` PyPI package's TFRecordWriter (protobuf "
      "tf.train.Example; masked CRC32C framing with the `crc32c` package) into one file in "
      "/dev/shm, written by the parent in input order; T processes (Pool.imap; T = 1: a "
      f"plain loop). Writer used: {meta['writer']}.")
    w("- **no write / draft** rows: the same pipeline with the pixels dropped; draft adds "
      "`im.draft('RGB', (256, 256))` (libjpeg DCT scaling). The Debian rows run "
      "/usr/bin/python3 with python3-pil.")
    w("- Quality: `bench/resize_quality.py`, shardpack's shards read back (TFRecord framing + "
      "Example parsed by hand, bench/tfrecord_io.py) and matched by image/filename.")
    print("\n".join(out))


if __name__ == "__main__":
    main()
