#!/usr/bin/env bash
# shardpack's loader against FFCV 1.0.2's on JPEG-encoded data ("JPEG mode"): the same
# images, stored as the same JPEG files, decoded by each loader into batches of 256 images of
# 256 x 256 x 3 uint8, on the same cores with the same number of threads, in one run, medians
# of REPS rounds interleaved, each ratio against FFCV taken within a round.
#
# What is read, per size in SIZES (each built once, untimed, and kept in DATA_DIR/SIZE):
#   sp-jpeg90         shardpack convert --encoding jpeg --quality 90 --subsampling 420 of the
#                     raw dataset sp-tfrecord that bench/peers/run.sh made (its 256x256 crop
#                     of the corpus images; --size 256x256 --fit crop again is the identity).
#                     The raw dataset, not the corpus, is the source: run.sh's list of images
#                     depends on how many images the corpus held then, and the corpus may have
#                     been remade since; this way both tools encode exactly the same pixels.
#   ffcv-jpg90.beton  bench/peers/write_formats.py ffcv-jpg of the same sp-tfrecord: FFCV's
#                     DatasetWriter, RGBImageField(write_mode="jpg", jpeg_quality=90), which
#                     encodes with OpenCV (libjpeg-turbo, 4:2:0 by default).
# (90: QUALITY.) A check made once per size (DATA_DIR/SIZE/jpeg-mode-check-q90.json, by
# the FFCV venv's Python, which also sees the shardpack package) compares every sample's
# JPEG bytes and label in the two files, and decodes the first batch with each loader
# against the raw pixels (a JPEG error: small, not zero).
#
# How it is read: bench/peers/readers.py shardpack-py (shardpack.Loader, global shuffle; its
# C++ worker threads decode straight into the batch) and readers.py ffcv (FFCV Loader,
# OrderOption.RANDOM, SimpleRGBImageDecoder, which for a jpg field is libjpeg-turbo with
# TJFLAG_FASTDCT), each pinned to THREADS cores (taskset) with THREADS threads, batch 256,
# the files read into the page cache right before (so the disk is not measured). readers.py
# times epoch 1 (start-up included) and the steady state (epochs 2.., at least READ_EPOCHS
# epochs and READ_SECONDS s, at most READ_MAX_SECONDS in all) and the CPU seconds. The two
# readers alternate which goes first from round to round.
#
# A shared machine: before each reader the script waits until, three seconds in a row, no
# compiler runs and other processes take under CONTENTION cores of the reader's cores (at
# most QUIET_CAP s; a reader that had to start anyway is named in the notes). While it runs, it
# measures the CPU time other processes take on the reader's cores (/proc/stat of those
# cores less the reader's own CPU time, from /usr/bin/time) and samples once a second
# whether a compiler runs. A run in which others took more than CONTENTION cores is run
# again, RETRIES times at most; the last run counts, the others go to the .discarded file.
# The table gives, per reader, how much of its cores others took; samples per CPU-second
# is the figure that contention disturbs least.
#
# Needs: bench/peers/run.sh's raw datasets DATA_DIR/SIZE/sp-tfrecord; the shardpack package
# in pyenv's python3 and FFCV in out/venv-peers-ffcv (both as run.sh installs them; this
# script installs nothing); a shardpack CLI with --encoding (copied to a private folder
# first, so that a rebuild during the run does not touch it).
#
# Writes out/bench/jpeg-peers.md (the table, also printed) and the raw runs in
# out/bench/jpeg-peers-runs.jsonl (runs done again: out/bench/jpeg-peers-runs.jsonl.discarded).
# Usage: bash bench/peers/jpeg_mode.sh     (about 4 minutes with the defaults on 2 quiet
#   cores once the datasets exist, longer while others use the cores; building the datasets
#   the first time adds about 2 minutes)
# Environment: SIZES (default "30000 3000"), REPS (default 3), THREADS (default 2), QUALITY
#   (JPEG quality of both datasets, default 90), DATA_DIR (default out/bench/peers-data),
#   SHARDPACK_BIN (default build-peers/tools/shardpack if it has --encoding, else
#   build/tools/shardpack), READ_SECONDS (default 8), READ_EPOCHS (default 3),
#   READ_MAX_SECONDS (default 60), QUIET_CAP (default 300), CONTENTION (cores, default 0.1),
#   RETRIES (default 2), SHM (default /dev/shm).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
t_start=$SECONDS
sizes=${SIZES:-30000 3000}
reps=${REPS:-3}
threads=${THREADS:-2}
quality=${QUALITY:-90}
data=${DATA_DIR:-out/bench/peers-data}
read_seconds=${READ_SECONDS:-8}
read_epochs=${READ_EPOCHS:-3}
read_max_seconds=${READ_MAX_SECONDS:-60}
quiet_cap=${QUIET_CAP:-300}
contention=${CONTENTION:-0.1}
retries=${RETRIES:-2}
batch=256
size=256
ffcv_py=out/venv-peers-ffcv/bin/python
out=out/bench
runs=$out/jpeg-peers-runs.jsonl
report=$out/jpeg-peers.md
work=${SHM:-/dev/shm}/shardpack-jpeg-mode.$$
watcher=
trap '[ -z "$watcher" ] || kill "$watcher" 2> /dev/null; rm -rf "$work"' EXIT
mkdir -p "$work" "$out"
say() { echo "jpeg-mode: $*" >&2; }
die() { say "$*"; exit 2; }
[ "$(nproc)" -ge "$threads" ] || die "THREADS=$threads but this machine has $(nproc) cores"
pin=(taskset -c "0-$((threads - 1))")
notes=()

# ---- tools: nothing is installed here ------------------------------------------------------
python3 -c 'import shardpack' 2> /dev/null ||
  die "pyenv python3 cannot import shardpack (scripts/install-python.sh installs it)"
"$ffcv_py" -c 'import ffcv.loader, ffcv.writer' 2> /dev/null ||
  die "$ffcv_py cannot import FFCV (bash bench/peers/run.sh installs it)"
has_encoding() { [ -x "$1" ] && "$1" convert --help 2> /dev/null | grep -q -- '--encoding'; }
if [ -n "${SHARDPACK_BIN:-}" ]; then
  src_bin=$SHARDPACK_BIN
elif has_encoding build-peers/tools/shardpack; then
  src_bin=build-peers/tools/shardpack
else
  src_bin=build/tools/shardpack
fi
has_encoding "$src_bin" || die "$src_bin is missing or its convert has no --encoding"
cp "$src_bin" "$work/shardpack"
shardpack=$work/shardpack

# ---- the datasets, once per size (untimed) -------------------------------------------------
manifest_samples() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["num_samples"])' \
  "$1/manifest.json"; }
declare -A samples_of=()
for ns in $sizes; do
  d=$data/$ns
  raw=$d/sp-tfrecord
  sp=$d/sp-jpeg$quality
  beton=$d/ffcv-jpg$quality.beton
  check=$d/jpeg-mode-check-q$quality.json
  [ -f "$raw/manifest.json" ] || die "$raw is missing: bash bench/peers/run.sh makes it"
  samples_of[$ns]=$(manifest_samples "$raw")
  [ "${samples_of[$ns]}" -ge "$batch" ] || die "$raw: fewer samples than one batch"
  if [ ! -f "$sp/manifest.json" ] || [ "$(manifest_samples "$sp")" != "${samples_of[$ns]}" ]; then
    say "$ns: shardpack convert --encoding jpeg --quality $quality -> $sp"
    rm -rf "$sp" "$sp.tmp" "$check"
    "$shardpack" convert "$raw" "$sp.tmp" --input tfrecord --size ${size}x${size} --fit crop \
      --encoding jpeg --quality "$quality" --subsampling 420 --threads "$threads" --quiet \
      --json > "$d/sp-jpeg$quality.json" || die "shardpack convert failed"
    mv "$sp.tmp" "$sp"
  fi
  if [ ! -f "$beton" ]; then
    say "$ns: write_formats.py ffcv-jpg --jpeg-quality $quality -> $beton"
    rm -f "$beton.tmp" "$check"
    "$ffcv_py" bench/peers/write_formats.py ffcv-jpg "$raw" "$beton.tmp" --threads "$threads" \
      --jpeg-quality "$quality" > "$d/write-ffcv-jpg$quality.log" 2>&1 ||
      { tail -5 "$d/write-ffcv-jpg$quality.log"; die "write_formats.py ffcv-jpg failed"; }
    mv "$beton.tmp" "$beton"
  fi
  if [ ! -f "$check" ]; then
    say "$ns: checking that both hold the same JPEGs and that both loaders decode them"
    "$ffcv_py" - "$raw" "$sp" "$beton" > "$check.tmp" 2> "$work/check.err" << 'EOF' ||
import json, os, sys
import numpy as np
sys.path.insert(0, "bench")
import tfrecord_io  # noqa: E402

raw, sp, beton = sys.argv[1:4]

def records(dataset):
    with open(os.path.join(dataset, "manifest.json")) as f:
        m = json.load(f)
    for shard in m["shards"]:
        for payload in tfrecord_io.read_records(os.path.join(dataset, shard["file"])):
            yield tfrecord_io.parse_example(payload)

from ffcv.reader import Reader  # noqa: E402
r = Reader(beton)
table = np.sort(r.alloc_table, order="sample_id")  # one allocation per sample: the image
labels = r.metadata["f1"]
with open(beton, "rb") as f:
    data = f.read()
n = same = same_label = sp_bytes = 0
for i, ex in enumerate(records(sp)):
    jpeg = bytes(ex["image/encoded"][0])
    ptr, length = int(table[i]["ptr"]), int(table[i]["size"])
    same += jpeg == data[ptr:ptr + length]
    same_label += int(ex["image/class/label"][0]) == int(labels[i])
    sp_bytes += len(jpeg)
    n += 1
assert n == len(table) == r.num_samples, (n, len(table), r.num_samples)

B = 256  # the first batch, in order, against the raw pixels
first = np.stack([np.frombuffer(ex["image/raw"][0], np.uint8).reshape(256, 256, 3)
                  for ex, _ in zip(records(raw), range(B))]).astype(np.int16)
from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder  # noqa: E402
from ffcv.loader import Loader, OrderOption  # noqa: E402
ffcv_batch = next(iter(Loader(beton, batch_size=B, num_workers=1, order=OrderOption.SEQUENTIAL,
                              pipelines={"image": [SimpleRGBImageDecoder()],
                                         "label": [IntDecoder()]})))[0]
import shardpack  # noqa: E402
sp_batch = next(iter(shardpack.Loader(sp, batch_size=B, shuffle="none", num_threads=1,
                                      layout="NHWC")))[0]

def error(batch):
    d = np.abs(np.asarray(batch).astype(np.int16) - first)
    return {"mean_abs": round(float(d.mean()), 3), "max_abs": int(d.max()),
            "exact_fraction": round(float((d == 0).mean()), 3),
            "psnr_db": round(float(10 * np.log10(255 ** 2 / (d.astype(np.float64) ** 2).mean())), 2)}

print(json.dumps({"samples": n, "identical_jpegs": same, "identical_labels": same_label,
                  "jpeg_bytes_per_sample": sp_bytes / n,
                  "ffcv_jpeg_bytes_per_sample": float(table["size"].sum()) / n,
                  "decode_vs_raw": {"shardpack": error(sp_batch), "ffcv": error(ffcv_batch)}}))
EOF
      { tail -5 "$work/check.err"; die "the check of the $ns-sample datasets failed"; }
    mv "$check.tmp" "$check"
  fi
done

# ---- a quiet machine: three seconds in a row with no compiler running and the reader's cores
#      idle (others under CONTENTION cores) ------------------------------------------------------
compiling() { ps -e -o comm= | grep -qxE 'cc1plus|cc1|collect2|ld|lto1|nvcc|rustc'; }
hz=$(getconf CLK_TCK)
cores_busy() {  # the jiffies the pinned cores have been busy, whoever ran on them
  awk -v n="$threads" '$1 ~ /^cpu[0-9]+$/ && substr($1, 4) + 0 < n {
    s += $2 + $3 + $4 + $7 + $8 + $9 } END { print s }' /proc/stat  # user nice system irq softirq steal
}
busy_start=0
wait_quiet() {  # what
  local waited=0 quiet=0 b0 load why
  busy_start=0
  while [ "$quiet" -lt 3 ]; do
    b0=$(cores_busy)
    sleep 1
    waited=$((waited + 1))
    load=$(awk -v b0="$b0" -v b1="$(cores_busy)" -v hz="$hz" 'BEGIN { printf "%.2f", (b1 - b0) / hz }')
    why=
    if compiling; then
      why="a compiler was running"
    elif awk -v l="$load" -v c="$contention" 'BEGIN { exit !(l > c) }'; then
      why="other processes took $load of its cores"
    fi
    if [ -z "$why" ]; then
      quiet=$((quiet + 1))
      continue
    fi
    quiet=0
    if [ "$waited" -ge "$quiet_cap" ]; then
      notes+=("round $rep, $1: started after the ${quiet_cap} s cap while $why")
      busy_start=1
      return
    fi
    [ "$waited" -gt 1 ] || say "waiting before $1: $why"
  done
}
watch_compiler() {  # FILE: a line for each second (about) in which a compiler runs
  while :; do
    if compiling; then echo >> "$1"; fi
    sleep 1
  done
}

# ---- timed rounds --------------------------------------------------------------------------
warm() { find "$@" -type f -exec cat {} + > /dev/null; }
contended=0
read_once() {  # rep size reader python data attempt; contended=1 when others took the cores
  local rep=$1 ns=$2 reader=$3 python=$4 path=$5 attempt=$6 json b0 t0 others
  warm "$path"
  wait_quiet "$reader ($ns samples)"
  : > "$work/compiler"
  watch_compiler "$work/compiler" &
  watcher=$!
  b0=$(cores_busy)
  t0=$(date +%s.%N)
  if ! json=$(/usr/bin/time -f '%U %S' -o "$work/time" "${pin[@]}" "$python" \
        bench/peers/readers.py "$reader" "$path" --samples "${samples_of[$ns]}" \
        --batch-size $batch --size $size --threads "$threads" --epochs "$read_epochs" \
        --seconds "$read_seconds" --max-seconds "$read_max_seconds" \
        2> "$work/read-$reader.err" | tail -1) || [[ $json != "{"* ]]; then
    kill "$watcher"; wait "$watcher" 2> /dev/null || true; watcher=
    cp "$work/read-$reader.err" "$out/jpeg-peers-read-$reader.err"
    notes+=("round $rep, $reader at $ns samples failed: $(grep -E 'Error|error' \
      "$work/read-$reader.err" | tail -1 | cut -c1-200) (stderr: $out/jpeg-peers-read-$reader.err)")
    say "${notes[-1]}"
    contended=0
    return
  fi
  # Others' share of the pinned cores while the reader ran: their busy time less the
  # reader's own CPU time (all its threads and children), per second.
  others=$(awk -v b0="$b0" -v b1="$(cores_busy)" -v hz="$hz" -v t0="$t0" -v t1="$(date +%s.%N)" \
    '{ o = (b1 - b0) / hz - ($1 + $2); printf "%.3f", (o > 0 ? o : 0) / (t1 - t0) }' "$work/time")
  kill "$watcher"; wait "$watcher" 2> /dev/null || true; watcher=
  echo "${json%\}}, \"kind\": \"read\", \"rep\": $rep, \"size\": $ns, \"attempt\": $attempt, \
\"others_cores\": $others, \"compiler_seconds\": $(wc -l < "$work/compiler"), \
\"started_busy\": $busy_start}" >> "$work/attempt.json"
  contended=$(awk -v o="$others" -v c="$contention" 'BEGIN { print (o > c) ? 1 : 0 }')
}
read_one() {  # rep size reader python data: rerun (RETRIES times at most) when contended
  local attempt=1
  : > "$work/attempt.json"
  while :; do
    read_once "$@" "$attempt"
    [ "$contended" = 1 ] && [ "$attempt" -le "$retries" ] || break
    say "round $1, $3 at $2 samples: other processes used $(sed -n \
      's/.*"others_cores": \([0-9.]*\).*/\1/p' "$work/attempt.json") of its cores, running it again"
    cat "$work/attempt.json" >> "$runs.discarded"
    : > "$work/attempt.json"
    attempt=$((attempt + 1))
  done
  cat "$work/attempt.json" >> "$runs"
}

: > "$runs.discarded"
: > "$runs"
for rep in $(seq 1 "$reps"); do
  for ns in $sizes; do
    say "round $rep/$reps: $ns samples"
    d=$data/$ns
    if [ $((rep % 2)) = 1 ]; then
      read_one "$rep" "$ns" shardpack-py python3 "$d/sp-jpeg$quality"
      read_one "$rep" "$ns" ffcv "$ffcv_py" "$d/ffcv-jpg$quality.beton"
    else
      read_one "$rep" "$ns" ffcv "$ffcv_py" "$d/ffcv-jpg$quality.beton"
      read_one "$rep" "$ns" shardpack-py python3 "$d/sp-jpeg$quality"
    fi
  done
done

# ---- the report ----------------------------------------------------------------------------
printf '%s\n' "${notes[@]+"${notes[@]}"}" > "$work/notes"
{
  echo "cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit=$(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD \
    2> /dev/null || echo ' + uncommitted changes')"
  echo "shardpack_bin=$src_bin ($("$shardpack" --version))"
  echo "minutes=$(( (SECONDS - t_start + 30) / 60 ))"
} > "$work/meta"
python3 - "$runs" "$runs.discarded" "$work/meta" "$work/notes" "$report" "$data" "$quality" "$threads" "$batch" \
  "$reps" "$read_epochs" "$read_seconds" "$read_max_seconds" "$contention" "$retries" $sizes << 'EOF'
import json, os, statistics, sys

runs_file, discarded_file, meta_file, notes_file, report, data, q = sys.argv[1:8]
threads, batch, reps, epochs, seconds, max_seconds, contention, retries = sys.argv[8:16]
sizes = [int(s) for s in sys.argv[16:]]
runs = [json.loads(line) for line in open(runs_file) if line.strip()]
discarded = [json.loads(line) for line in open(discarded_file) if line.strip()]
meta = dict(line.rstrip("\n").split("=", 1) for line in open(meta_file) if "=" in line)
notes = [line.rstrip("\n") for line in open(notes_file) if line.strip()]
READERS = [("shardpack-py", "shardpack (Python Loader)"), ("ffcv", "FFCV 1.0.2 Loader")]
med = statistics.median


def group(method, size):
    return [r for r in runs if r["method"] == method and r["size"] == size]


def ratio(size, key):  # median over rounds of shardpack / FFCV within the round
    ffcv = {r["rep"]: r[key] for r in group("ffcv", size) if r.get(key)}
    vals = [r[key] / ffcv[r["rep"]] for r in group("shardpack-py", size)
            if r.get(key) and r["rep"] in ffcv]
    return med(vals) if vals else None


def f0(x):
    return "n/a" if x is None else f"{x:,.0f}"


lines = [f"# shardpack vs FFCV 1.0.2 on JPEG-encoded data (quality {q}, 4:2:0)", "",
         f"`bash bench/peers/jpeg_mode.sh`, {meta['date']}, {meta['cpu']}, {threads} cores "
         f"(taskset) and {threads} threads per reader, batches of {batch} images of 256 x 256 x 3 "
         f"uint8, the files in the page cache; {reps} round(s) interleaved, medians (the range in "
         f"brackets). Ratios: the median over rounds of shardpack / FFCV in the same round. "
         f"Steady: epochs 2.. (at least {epochs} epochs and {seconds} s, at most "
         f"{max_seconds} s in all); epoch 1 holds each loader's start-up (FFCV: Numba "
         f"compilation). Samples per CPU-s: over the steady epochs, the process and its "
         f"children. Others: the CPU that other processes took on the reader's cores while it "
         f"ran (a run where they took over {contention} cores is run again, {retries} time(s) at most; "
         f"the last run counts).", "",
         "| samples | reader | bytes/sample | epoch 1, samples/s | steady, samples/s | "
         "samples per CPU-s | vs FFCV: steady | vs FFCV: epoch 1 | vs FFCV: per CPU-s | "
         "others, cores: median (max) |",
         "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
checks = {}
for size in sizes:
    d = os.path.join(data, str(size))
    m = json.load(open(os.path.join(d, f"sp-jpeg{q}", "manifest.json")))
    n = m["num_samples"]
    nbytes = {"shardpack-py": sum(s["bytes"] for s in m["shards"]) / n,
              "ffcv": os.path.getsize(os.path.join(d, f"ffcv-jpg{q}.beton")) / n}
    checks[size] = json.load(open(os.path.join(d, f"jpeg-mode-check-q{q}.json")))
    for method, name in READERS:
        g = group(method, size)
        if not g:
            lines.append(f"| {size:,} | {name} | {f0(nbytes[method])} | failed | | | | | | |")
            continue
        def cell(key):
            v = [r[key] for r in g if r.get(key)]
            if not v:
                return "n/a"
            return f0(med(v)) + (f" ({f0(min(v))}-{f0(max(v))})" if len(v) > 1 else "")
        if method == "ffcv":
            rs = ["1.00"] * 3
        else:
            rs = [("n/a" if x is None else f"**{x:.2f}x**" if i == 0 else f"{x:.2f}x")
                  for i, x in enumerate(ratio(size, k) for k in
                                        ("samples_per_s", "epoch1_per_s", "samples_per_cpu_s"))]
        others = [r["others_cores"] for r in g]
        lines.append(f"| {size:,} | {name} | {f0(nbytes[method])} | {cell('epoch1_per_s')} | "
                     f"{cell('samples_per_s')} | {cell('samples_per_cpu_s')} | "
                     f"{' | '.join(rs)} | {med(others):.2f} ({max(others):.2f}) |")
lines += ["", "Notes:", ""]
for size in sizes:
    c = checks[size]
    dec = c["decode_vs_raw"]
    lines.append(
        f"- {size:,} samples: the JPEG files in the two datasets are byte-identical in "
        f"{c['identical_jpegs']:,} of {c['samples']:,} samples (labels: "
        f"{c['identical_labels']:,}), {c['jpeg_bytes_per_sample']:,.0f} bytes each on average "
        f"(bytes/sample above: shardpack's shard files, with each record's TFRecord and Example "
        f"framing, and FFCV's .beton file, with its header, metadata and page padding). First "
        f"batch decoded against the raw pixels: shardpack mean |error| "
        f"{dec['shardpack']['mean_abs']}, PSNR {dec['shardpack']['psnr_db']} dB; FFCV "
        f"{dec['ffcv']['mean_abs']}, {dec['ffcv']['psnr_db']} dB (FFCV decodes with "
        f"libjpeg-turbo's TJFLAG_FASTDCT, shardpack with libjpeg's default, accurate IDCT).")
busy = [r for r in runs if r["compiler_seconds"]]
lines.append(f"- Runs again because others took the cores: {len(discarded)}. Counted runs "
             f"during which a compiler ran (sampled each second): {len(busy)} of {len(runs)}"
             + (": " + ", ".join(f"{r['method']} at {r['size']:,} in round {r['rep']} "
                                 f"({r['compiler_seconds']} s)" for r in busy) if busy else "")
             + ".")
versions = sorted({r["version"] for r in runs})
lines.append(f"- Versions: {', '.join(versions)}; shardpack CLI for the conversion: "
             f"{meta['shardpack_bin']}; commit {meta['commit']}.")
lines.append(f"- The run took about {meta['minutes']} min. Raw runs: "
             f"out/bench/jpeg-peers-runs.jsonl.")
lines += [f"- {n}" for n in notes]
text = "\n".join(lines) + "\n"
open(report, "w").write(text)
print(text, end="")
EOF
say "written: $report (raw: $runs)"
