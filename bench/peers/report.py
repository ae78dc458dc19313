"""The table and the bar chart of bench/peers/run.sh, from its raw runs.

Input: RUNS, one JSON object a line, one per timed repetition of a method:
  {"kind": "convert"|"read", "method": ..., "rep": r, "samples": n, "seconds": s,
   "samples_per_s": x, "cpu_cores": c or null, "samples_per_cpu_s": y or null,
   "version": "..."}
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


def summarize(runs, kind):
    """{method: {"sps": median, "lo", "hi", "cores": median or None, "per_cpu": ...}}."""
    out = {}
    for method in sorted({r["method"] for r in runs if r["kind"] == kind}):
        rs = [r for r in runs if r["kind"] == kind and r["method"] == method]
        sps = [r["samples_per_s"] for r in rs]
        cores = [r["cpu_cores"] for r in rs if r.get("cpu_cores") is not None]
        per_cpu = [r["samples_per_cpu_s"] for r in rs if r.get("samples_per_cpu_s")]
        out[method] = {"sps": statistics.median(sps), "lo": min(sps), "hi": max(sps),
                       "n": len(rs), "version": rs[-1].get("version", ""),
                       "cores": statistics.median(cores) if cores else None,
                       "per_cpu": statistics.median(per_cpu) if per_cpu else None}
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


def targets(read, unavailable, cores):
    """The issue's two targets, per core, judged both ways; returns markdown lines."""
    ref = read.get("shardpack-py")
    peers = {m: read[m] for m in PRE_DECODED_PEERS if m in read}
    lines = []
    if ref is None:
        return ["- shardpack.Loader did not run: no target can be judged."]
    if peers:
        best = max(peers, key=lambda m: peers[m]["sps"])
        best_cpu = max((m for m in peers if peers[m]["per_cpu"]),
                       key=lambda m: peers[m]["per_cpu"], default=None)
        given = ref["sps"] / peers[best]["sps"]
        line = (f"- **≥ 1.5× the fastest peer reader on the same pre-decoded data, per core**: "
                f"per core given ({cores} each), shardpack.Loader {fmt(ref['sps'] / cores)} "
                f"against {best} {fmt(peers[best]['sps'] / cores)} samples/s: "
                f"**{given:.2f}×, {'met' if given >= 1.5 else 'not met'}**")
        if best_cpu and ref["per_cpu"]:
            used = ref["per_cpu"] / peers[best_cpu]["per_cpu"]
            line += (f"; per CPU-second, against the most frugal peer ({best_cpu}, "
                     f"{fmt(peers[best_cpu]['per_cpu'])}): {fmt(ref['per_cpu'])}, "
                     f"**{used:.2f}×, {'met' if used >= 1.5 else 'not met'}**")
        missing = [m for m in PRE_DECODED_PEERS if m not in read]
        if missing:
            line += f" (not measured: {', '.join(missing)})"
        lines.append(line + ".")
    jpeg = read.get("torch-jpeg")
    if jpeg:
        given = ref["sps"] / jpeg["sps"]
        line = (f"- **≥ 50× the JPEG-folder DataLoader, per core**: per core given, "
                f"{given:.1f}×, **{'met' if given >= 50 else 'not met'}**")
        if jpeg["per_cpu"] and ref["per_cpu"]:
            used = ref["per_cpu"] / jpeg["per_cpu"]
            line += f"; per CPU-second {used:.1f}×, **{'met' if used >= 50 else 'not met'}**"
        lines.append(line + ".")
    else:
        lines.append(f"- JPEG-folder DataLoader: not measured ({unavailable.get('torch-jpeg')}).")
    return lines


def chart(path, conv, read, unavailable, meta):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(10, 8.5),
                             gridspec_kw={"height_ratios": [len(CONVERT) + 1, len(READ) + 1]})
    panels = [
        (axes[0], CONVERT, conv, "shardpack", "images/s",
         f"Convert {meta['n_images']} JPEGs to 256×256×3 TFRecord, {meta['cores']} cores"),
        (axes[1], READ, read, "shardpack-py", "samples/s (log scale)",
         f"Read 256×256×3 uint8 batches of {meta['batch']}, {meta['cores']} cores, "
         f"page cache"),
    ]
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
    conv, read = summarize(runs, "convert"), summarize(runs, "read")
    lines = [
        f"# shardpack and its peers",
        "",
        f"{meta['cpu']}, {cores} cores given to every method, {meta['date']}, commit "
        f"{meta['commit']}. Medians of {meta['reps']} repetitions, interleaved round by "
        f"round; before each timed run the script waits for any compiler on the machine to "
        f"finish (at most {meta['quiet_cap']} s: the runs that started anyway are listed "
        f"under Notes). Every ratio is against shardpack in the same run. Command: "
        f"`bash bench/peers/run.sh` (N={meta['n_images']}, REPS={meta['reps']}).",
        "",
        f"## Conversion: the same {meta['n_images']} JPEGs (Caltech-sized real photos, "
        f"median about 332×280) to 256×256×3 uint8 (shorter side, centre crop), TFRecord",
        "",
        *table(CONVERT, conv, "shardpack", unavailable, "images", cores, meta),
        "",
        f"## Reading pre-decoded data: {meta['samples']} samples of 256×256×3 uint8 (those "
        f"pixels), batches of {meta['batch']}, shuffled, from the page cache",
        "",
        f"Each Python reader runs in its own process: a warm-up (an epoch, at most "
        f"{meta['warmup_seconds']:g} s), then at least {meta['seconds']:g} s of whole "
        f"batches; the consumer checks each batch's shape and drops it. The C++ rows are "
        f"`shardpack bench` (median epoch of {meta['cpp_epochs']}, the first left out).",
        "",
        *table(READ, read, "shardpack-py", unavailable, "samples", cores, meta),
        "",
        "## Targets (issue 6), judged on shardpack.Loader through Python",
        "",
        *targets(read, unavailable, cores),
    ]
    if meta.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {n}" for n in meta["notes"]]
    text = "\n".join(lines) + "\n"
    with open(a.md, "w", encoding="utf-8") as f:
        f.write(text)
    chart(a.png, conv, read, unavailable, meta)
    print(text, end="")


if __name__ == "__main__":
    main()
