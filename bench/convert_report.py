"""Turns bench/convert_bench.sh's raw timings into its markdown report (standard library only).

Usage: python convert_report.py TIMES.tsv META.json QUALITY.md [STAGES.tsv] > convert.md
TIMES.tsv: set, converter, threads, rep, seconds, inputs, converted, megapixels (floor only).
Rates are inputs / median seconds; the floor's are decoded images / median seconds.
STAGES.tsv: shardpack's stage seconds per run (convert --json "stages").
"""
import csv
import json
import statistics
import sys

LABELS = {
    "floor": "libjpeg-turbo full-size decode alone (floor, bench/decode_floor)",
    "shardpack": "**shardpack convert**",
    "shardpack-jpeg": "**shardpack convert --encoding jpeg --quality 90**",
    "ffcv-raw": "FFCV {ffcv} DatasetWriter, raw pixels (max side 256)",
    "ffcv-jpg": "FFCV {ffcv} DatasetWriter, JPEG quality 90 (max side 256)",
    "pillow-tfrecord": "Pillow {pil} + TFRecord write (the user's converter)",
    "pillow-resize": "Pillow {pil}, no write",
    "pillow-draft": "Pillow {pil} with draft (DCT scaling), no write",
    "debian-pillow-resize": "Debian Pillow {deb}, no write (earlier baseline)",
    "debian-pillow-draft": "Debian Pillow {deb} with draft, no write (earlier baseline)",
}
ORDER = list(LABELS)


STAGES = ("read", "decode", "resize", "encode", "write", "idle")


def stage_table(w, path):
    """shardpack's stage times: median milliseconds per image of each, and its share of the
    threads' time (threads x pipeline seconds)."""
    runs = {}
    for row in csv.DictReader(open(path), delimiter="\t"):
        runs.setdefault((row["set"], row["converter"], int(row["threads"])), []).append(row)
    if not runs:
        return
    w("## Where shardpack's time went (`convert --stats`)\n")
    w("Thread-seconds of each stage per image (median of the runs, ms) and its share of the "
      "pipeline's threads x seconds; idle is the rest (threads waiting for the in-order "
      "write stage or for work).\n")
    w("| set | converter | threads | " + " | ".join(STAGES) + " |")
    w("|---|---|---|" + "---|" * len(STAGES))
    for (s, conv, t), rows in sorted(runs.items()):
        n = int(rows[0]["inputs"])
        cells = []
        for k in STAGES:
            ms = statistics.median(float(r[k]) for r in rows) * 1e3 / n
            share = statistics.median(float(r[k]) / (t * float(r["pipeline"])) for r in rows)
            cells.append(f"{ms:.3f} ({share * 100:.0f}%)")
        w(f"| {s} | {conv} | {t} | " + " | ".join(cells) + " |")
    w("")


def main():
    times_path, meta_path, quality_path = sys.argv[1:4]
    stages_path = sys.argv[4] if len(sys.argv) > 4 else None
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

    def paired_ratio(s, num, den, t):
        """The median over rounds of num's rate / den's rate in the same round: the
        machine's drift between rounds (20% here) cancels out of each pair."""
        a, b = runs.get((s, num, t)), runs.get((s, den, t))
        if not a or not b:
            return None

        def per_rep(rows, conv):
            return {r["rep"]: (int(r["converted"] or 0) if conv == "floor" else int(r["inputs"]))
                    / float(r["seconds"]) for r in rows}
        ra, rb = per_rep(a, num), per_rep(b, den)
        return statistics.median(ra[k] / rb[k] for k in ra if k in rb)

    sets = {k: v for k, v in meta["sets"].items() if v["n"] > 0}
    main_sets = [k for k, v in sets.items() if not v.get("subset")]
    subsets = [k for k, v in sets.items() if v.get("subset")]
    threads = sorted({k[2] for k in runs})
    pil, deb, ffcv = meta["pillow"], meta["debian_pillow"], meta.get("ffcv", "none")
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
            w(f"| {s} | {LABELS[conv].format(pil=pil, deb=deb, ffcv=ffcv)} | " + " | ".join(cells) +
              f" | {eff} | {spread * 100:.0f}% |")
    w("")
    w("MP/s: source megapixels per second (the stored image size, whatever the decoder "
      "does with it). Parallel efficiency: 2-thread rate / (2 x 1-thread rate). Spread: "
      "(slowest - fastest) / median run. The floor times decodes of files already in "
      "memory; every other row is the wall time of the whole command (start, scan, read, "
      "decode, resize, write).\n")

    w("## Ratios (same cores, same run)\n")
    w("Each ratio is the median over the rounds of the two rates measured in the same "
      "round.\n")
    cols = [(s, t) for s in main_sets for t in threads]
    w("| ratio | " + " | ".join(f"{s}, {t} thr" for s, t in cols) + " | target |")
    w("|---|" + "---|" * (len(cols) + 1))

    def ratio_row(label, num, den, target=None, per_set_target=None):
        cells = []
        for s, t in cols:
            x = paired_ratio(s, num, den, t)
            if x is None:
                cells.append("–")
                continue
            goal = per_set_target.get(s) if per_set_target else target
            if isinstance(goal, dict):
                goal = goal.get(t)
            mark = "" if goal is None else (" ✓" if x >= goal else " ✗")
            cells.append(f"{x:.2f}x{mark}")
        if per_set_target:
            def goal_text(v):
                if isinstance(v, dict):
                    return " / ".join(f"{g}x at {t} thr" for t, g in v.items())
                return f"{v}x"
            tgt = ", ".join(f"≥ {goal_text(v)} on {k}" for k, v in per_set_target.items())
        else:
            tgt = f"≥ {target}x" if target else ""
        w(f"| {label} | " + " | ".join(cells) + f" | {tgt} |")

    ratio_row("shardpack per core / bare full-size decode per core", "shardpack", "floor",
              per_set_target={"A": {1: 0.78, 2: 0.76}, "B": 1.1})
    ratio_row(f"shardpack / FFCV {ffcv} writer, raw", "shardpack", "ffcv-raw", target=1.5)
    ratio_row(f"shardpack --encoding jpeg / FFCV {ffcv} writer, JPEG", "shardpack-jpeg",
              "ffcv-jpg", target=1.5)
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
            x = paired_ratio(s, "shardpack", "floor", t)
            cells.append("–" if x is None else f"{x:.2f}x")
        w("| shardpack per core / bare full-size decode per core | " + " | ".join(cells) + " |")
        w("")

    if stages_path:
        stage_table(w, stages_path)

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
    w("- **shardpack convert --encoding jpeg**: the same, each 256x256 image then encoded by "
      "libjpeg-turbo at quality 90, 4:2:0 (docs/FORMAT.md, encoded shards).")
    w(f"- **FFCV {ffcv} DatasetWriter**: `bench/ffcv_convert.py` (out/venv-peers-ffcv), as "
      "FFCV's ImageNet example writes: (PIL image, label) items loaded as torchvision's "
      "ImageFolder does, RGBImageField(max_resolution=256, write_mode raw or jpg, "
      "jpeg_quality 90), IntField, num_workers = T processes, one .beton in /dev/shm; timed "
      "from the writer's creation (Python's start and imports not counted). FFCV keeps the "
      "aspect ratio (a 4:3 photo becomes 256x192, resized by OpenCV INTER_AREA): fewer "
      "pixels resized and written than shardpack's 256x256.")
    w("- Quality: `bench/resize_quality.py`, shardpack's shards read back (TFRecord framing + "
      "Example parsed by hand, bench/tfrecord_io.py) and matched by image/filename.")
    print("\n".join(out))


if __name__ == "__main__":
    main()
