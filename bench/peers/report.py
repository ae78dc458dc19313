"""The table and the bar chart of bench/peers/run.sh, from its raw runs.

Input: RUNS, one JSON object a line, one per timed repetition of a method:
  {"kind": "convert"|"read", "method": ..., "rep": r, "samples": n, "seconds": s,
   "samples_per_s": x, "cpu_cores": c or null, "samples_per_cpu_s": y or null,
   "version": "..."}
and for reading also "size" (samples in the dataset), "epoch1_per_s" (the first epoch,
its start-up included), "first_batch_ms" and "later_first_batch_ms" (first-batch latency
of epoch 1 and of later epochs) and "partial" (a slow reader's epoch cut at the time cap);
samples_per_s is then the steady state, epochs 2.. (bench/peers/readers.py).
and META (JSON): the machine, the run's settings, and "unavailable": {method: reason} for
the peers whose packages did not install or whose runs failed.

Each figure is the median over the repetitions (the range follows it). "shardpack / this"
divides shardpack's median by the row's: above 1, shardpack is faster. Per core: samples/s
divided by the cores the method was given (every method gets the same), and samples per
CPU-second (samples/s divided by the cores it kept busy, this process and its children).
The reference for reading is shardpack.Loader through the Python binding, which delivers
its batches to Python as every peer does; the C++ rows show the loader without Python.

Python: out/venv-interop (matplotlib, from bench/peers/requirements.txt).
Usage: python report.py RUNS META --md OUT.md --png OUT.png   (prints the markdown)
"""

import argparse
import json
import statistics

CONVERT = [
    ("shardpack", "shardpack convert (C++)",
     "`shardpack convert --size 256x256 --fit crop --threads 2`: libjpeg-turbo, Lanczos, "
     "TFRecord + .idx"),
    ("pillow", "Pillow + TFRecord writer",
     "bench/pillow_convert.py: Pillow {pillow}, ImageOps.fit Lanczos, 2 processes, the "
     "`tfrecord` package's writer"),
    ("tf", "TensorFlow decode + resize",
     "bench/peers/tf_convert.py: the build_image_data.py way, tf.io.decode_image + "
     "tf.image.resize (Lanczos-3, antialias) + crop in tf.data (2 threads), "
     "tf.io.TFRecordWriter; TensorFlow's import not timed"),
]
READ = [
    ("shardpack-py", "shardpack.Loader (Python)",
     "reference: the C++ loader through the Python binding, torch tensors by DLPack, "
     "global shuffle, CRC checked, TFRecord shards"),
    ("shardpack-cpp", "shardpack Loader (C++)",
     "`shardpack bench --shuffle global --threads 2`: the same loader without Python, "
     "TFRecord shards; CPU time not separable (the run also times memcpy)"),
    ("shardpack-cpp-lmdb", "shardpack Loader (C++), LMDB",
     "as above, on the LMDB shards"),
    ("dali", "DALI TFRecord reader (CPU)",
     "fn.readers.tfrecord with our .idx files, random_shuffle (1024 buffer), reshape, "
     "the batch a NumPy view of its dense output"),
    ("tfdata", "tf.data TFRecordDataset",
     "num_parallel_reads=2, shuffle(1024), batch, parse_example + decode_raw, prefetch"),
    ("lmdb", "python-lmdb + tf.train.Example",
     "our LMDB shards: txn.get (zero-copy), Example.FromString, pixels into the batch "
     "array; random permutation; {threads} threads, each a part of the batch"),
    ("lmdb-1", "python-lmdb, 1 thread", "as above, in the main thread alone"),
    ("ffcv", "FFCV Loader",
     ".beton of the same pixels (RGBImageField raw), OrderOption.RANDOM, 2 workers"),
    ("mosaic", "MosaicML Streaming",
     "local MDS shards of the same pixels (ndarray column), StreamingDataset shuffle + "
     "DataLoader, 2 workers"),
    ("torch-jpeg", "ImageFolder + DataLoader (JPEGs)",
     "torchvision: PIL decode, Resize(256) bilinear + CenterCrop(256), 2 workers, "
     "shuffle"),
]
PRE_DECODED_PEERS = ["dali", "tfdata", "lmdb", "lmdb-1", "ffcv", "mosaic"]


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def median_of(rs, key):
    values = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(values) if values else None


def summarize(runs, kind, size=None):
    """{method: {"sps": median, "lo", "hi", "cores": median or None, "per_cpu": ...,
    "epoch1", "first_ms", "later_ms": medians or None, "partial": bool}}; reading: of the
    runs on datasets of `size` samples."""
    out = {}
    runs = [r for r in runs if r["kind"] == kind and (size is None or r.get("size") == size)]
    for method in sorted({r["method"] for r in runs}):
        rs = [r for r in runs if r["method"] == method]
        sps = [r["samples_per_s"] for r in rs]
        cores = [r["cpu_cores"] for r in rs if r.get("cpu_cores") is not None]
        per_cpu = [r["samples_per_cpu_s"] for r in rs if r.get("samples_per_cpu_s")]
        out[method] = {"sps": statistics.median(sps), "lo": min(sps), "hi": max(sps),
                       "n": len(rs), "version": rs[-1].get("version", ""),
                       "cores": statistics.median(cores) if cores else None,
                       "per_cpu": statistics.median(per_cpu) if per_cpu else None,
                       "epoch1": median_of(rs, "epoch1_per_s"),
                       "first_ms": median_of(rs, "first_batch_ms"),
                       "later_ms": median_of(rs, "later_first_batch_ms"),
                       "partial": any(r.get("partial") for r in rs)}
    return out


def fmt(x, digits=0):
    return "–" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "–"
    r = a / b
    return f"{r:.2f}×" if r < 10 else f"{r:.1f}×" if r < 100 else f"{r:.0f}×"


def table(rows, stats, ref, unavailable, unit, cores, meta):
    r = stats.get(ref)
    head = (f"| method | {unit}/s, median (range) | shardpack / this | {unit}/s per core "
            f"(÷ {cores}) | cores busy | {unit} per CPU-second | shardpack / this, per "
            f"CPU-second | notes |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for method, name, note in rows:
        note = note.format(**meta.get("note_args", {}))
        s = stats.get(method)
        if s is None:
            why = unavailable.get(method, "not run")
            lines.append(f"| {name} | – | – | – | – | – | – | **not measured**: {why} |")
            continue
        version = f" ({s['version']})" if s["version"] else ""
        rng = f" ({fmt(s['lo'])}–{fmt(s['hi'])})"
        lines.append(
            f"| {name} | {fmt(s['sps'])}{rng} | {ratio(r['sps'], s['sps'])} | "
            f"{fmt(s['sps'] / cores)} | {fmt(s['cores'], 2)} | {fmt(s['per_cpu'])} | "
            f"{ratio(r['per_cpu'], s['per_cpu'])} | {note}{version} |")
    return lines


def read_table(stats, unavailable, meta):
    """The reading table of one size: steady state, first epoch, first-batch latencies."""
    r = stats.get("shardpack-py")
    lines = ["| method | steady samples/s, median (range) | shardpack / this | first epoch "
             "samples/s | shardpack / this, first epoch | first batch (ms), epoch 1 / later | "
             "cores busy | samples per CPU-second | notes |",
             "|---|---|---|---|---|---|---|---|---|"]
    for method, name, note in READ:
        note = note.format(**meta.get("note_args", {}))
        s = stats.get(method)
        if s is None:
            why = unavailable.get(method, "not run")
            lines.append(f"| {name} | – | – | – | – | – | – | – | **not measured**: {why} |")
            continue
        version = f" ({s['version']})" if s["version"] else ""
        partial = " (one epoch, cut at the time cap)" if s["partial"] else ""
        latency = (f"{fmt(s['first_ms'])} / {fmt(s['later_ms'])}"
                   if s["first_ms"] is not None else "–")
        lines.append(
            f"| {name} | {fmt(s['sps'])} ({fmt(s['lo'])}–{fmt(s['hi'])}){partial} | "
            f"{ratio(r['sps'], s['sps']) if r else '–'} | {fmt(s['epoch1'])} | "
            f"{ratio(r['epoch1'], s['epoch1']) if r else '–'} | {latency} | "
            f"{fmt(s['cores'], 2)} | {fmt(s['per_cpu'])} | {note}{version} |")
    return lines


def targets(by_size, unavailable):
    """Issue 23's targets, at each size; returns markdown lines."""
    lines = []
    for size, read in by_size.items():
        ref = read.get("shardpack-py")
        if ref is None:
            lines.append(f"- {size:,} samples: shardpack.Loader did not run.")
            continue
        peers = {m: read[m] for m in PRE_DECODED_PEERS if m in read}
        if peers:
            best = max(peers, key=lambda m: peers[m]["sps"])
            given = ref["sps"] / peers[best]["sps"]
            first = max(peers, key=lambda m: peers[m]["epoch1"] or 0)
            line = (f"- **{size:,} samples**: steady state {fmt(ref['sps'])} samples/s against "
                    f"the fastest peer ({best}) {fmt(peers[best]['sps'])}: **{given:.2f}×**")
            if ref["epoch1"] and peers[first]["epoch1"]:
                line += (f"; first epoch {fmt(ref['epoch1'])} against {first} "
                         f"{fmt(peers[first]['epoch1'])}: **{ref['epoch1'] / peers[first]['epoch1']:.2f}×**")
            if "ffcv" in read:
                line += f"; against FFCV, steady **{ref['sps'] / read['ffcv']['sps']:.2f}×**"
            if ref["epoch1"]:
                line += (f"; shardpack's first epoch is **{ref['epoch1'] / ref['sps']:.2f}** of its "
                         f"steady state")
            lines.append(line + ".")
        jpeg = read.get("torch-jpeg")
        if jpeg:
            lines.append(f"- {size:,} samples: against the JPEG-folder DataLoader "
                         f"{ref['sps'] / jpeg['sps']:.0f}× (steady state).")
    return lines


def chart(path, conv, by_size, unavailable, meta):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = list(by_size)
    fig, axes = plt.subplots(1 + len(sizes), 1, figsize=(10, 4 + 4.2 * len(sizes)),
                             gridspec_kw={"height_ratios": [len(CONVERT) + 1] +
                                          [len(READ) + 1] * len(sizes)})
    panels = [(axes[0], CONVERT, conv, "shardpack", "images/s",
               f"Convert {meta['n_images']} JPEGs to 256×256×3 TFRecord, {meta['cores']} cores")]
    for ax, size in zip(axes[1:], sizes):
        panels.append((ax, READ, by_size[size], "shardpack-py", "samples/s, steady state (log scale)",
                       f"Read {size:,} samples of 256×256×3 uint8, batches of {meta['batch']}, "
                       f"{meta['cores']} cores, page cache"))
    for ax, rows, stats, ref, xlabel, title in panels:
        names = [name for _, name, _ in rows][::-1]
        methods = [m for m, _, _ in rows][::-1]
        values = [stats[m]["sps"] if m in stats else 0 for m in methods]
        colours = ["#1f77b4" if m.startswith("shardpack") else "#9a9a9a" for m in methods]
        ax.barh(range(len(methods)), values, color=colours)
        ax.set_yticks(range(len(methods)), names)
        ax.set_xlabel(xlabel)
        ax.set_title(title, fontsize=11)
        if ref == "shardpack-py":
            ax.set_xscale("log")
        top = max(values) if any(values) else 1
        ax.set_xlim(right=top * (8 if ref == "shardpack-py" else 1.45))
        for i, m in enumerate(methods):
            if m in stats:
                label = f" {stats[m]['sps']:,.0f}"
                if not m.startswith("shardpack") and ref in stats:
                    label += f"  (shardpack {ratio(stats[ref]['sps'], stats[m]['sps'])})"
                ax.text(values[i], i, label, va="center", fontsize=8.5)
            else:
                why = unavailable.get(m, "not run")
                ax.text(ax.get_xlim()[0] * (1.1 if ref == "shardpack-py" else 1), i,
                        f" not measured: {why[:70]}", va="center", fontsize=8, color="#b00000")
    fig.suptitle(f"shardpack and its peers, same images, same output, one run "
                 f"(medians of {meta['reps']}); {meta['cpu']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("runs")
    p.add_argument("meta")
    p.add_argument("--md", required=True)
    p.add_argument("--png", required=True)
    a = p.parse_args()
    runs = load(a.runs)
    with open(a.meta, encoding="utf-8") as f:
        meta = json.load(f)
    unavailable = meta.get("unavailable", {})
    cores = meta["cores"]
    conv = summarize(runs, "convert")
    by_size = {size: summarize(runs, "read", size)
               for size in sorted({r["size"] for r in runs if r["kind"] == "read"},
                                  reverse=True)}
    lines = [
        f"# shardpack and its peers",
        "",
        f"{meta['cpu']}, {cores} cores given to every method, {meta['date']}, commit "
        f"{meta['commit']}. Medians of {meta['reps']} repetitions, interleaved round by "
        f"round; before each timed run the script waits for any compiler on the machine to "
        f"finish (at most {meta['quiet_cap']} s: the runs that started anyway are listed "
        f"under Notes). Every ratio is against shardpack in the same run. Command: "
        f"`bash bench/peers/run.sh` (SIZES=\"{' '.join(str(x) for x in meta['sizes'])}\", "
        f"CONVERT_N={meta['n_images']}, REPS={meta['reps']}).",
        "",
        f"## Conversion: the same {meta['n_images']} JPEGs (Caltech-sized real photos, "
        f"median about 332×280) to 256×256×3 uint8 (shorter side, centre crop), TFRecord",
        "",
        *table(CONVERT, conv, "shardpack", unavailable, "images", cores, meta),
        "",
    ]
    for size, read in by_size.items():
        lines += [
            f"## Reading pre-decoded data: {size:,} samples of 256×256×3 uint8, batches of "
            f"{meta['batch']}, shuffled, from the page cache",
            "",
            f"Each Python reader runs in its own process, its dataset read into the page cache "
            f"first: its first epoch (from asking for the iterator, start-up included), then "
            f"epochs until at least {meta['epochs']} and {meta['seconds']:g} s of steady "
            f"epochs, at most {meta['max_seconds']:g} s in all (a slower reader's epoch is cut "
            f"there). The consumer checks each batch's shape and drops it. The C++ rows are "
            f"`shardpack bench` (first epoch, then the median of the next "
            f"{meta['cpp_epochs'] - 1}).",
            "",
            *read_table(read, unavailable, meta),
            "",
        ]
    lines += [
        "## Targets (issue 23), judged on shardpack.Loader through Python",
        "",
        *targets(by_size, unavailable),
    ]
    if meta.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in meta["notes"]]
    text = "\n".join(lines) + "\n"
    with open(a.md, "w", encoding="utf-8") as f:
        f.write(text)
    chart(a.png, conv, by_size, unavailable, meta)
    print(text, end="")


if __name__ == "__main__":
    main()
