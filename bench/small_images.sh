#!/usr/bin/env bash
# Small images (issue 55): shardpack's Python Loader against FFCV at 32x32 and 64x64, and
# `shardpack bench`'s loader against a memcpy of the same samples, in one run.
#
#   1. Datasets, made once into DATA_DIR: write_synthetic's 300,000 samples of 32x32x3 and
#      150,000 of 64x64x3 (TFRecord, 100 classes), and the same pixels in FFCV's raw .beton
#      (bench/peers/ffcv_out_of_core.py write, 8 MiB pages).
#   2. ROUNDS rounds; in each, for each size, shardpack then FFCV (bench/peers/readers.py:
#      shardpack-py, global shuffle, DLPack torch tensors; ffcv, OrderOption.RANDOM,
#      SimpleRGBImageDecoder), batches of 256 on THREADS threads, each reader's files read
#      by `cat` right before it (the page cache, not the disk, is measured). Steady state
#      (epochs 2..) and the first epoch apart, as readers.py reports them.
#   3. `shardpack bench --shuffle global` of each dataset (the C++ loader against a memcpy
#      of the same samples in the same order, same threads).
# Prints a Markdown table of the medians and the ratios; the raw JSON lines go to
# DATA_DIR/small-images-runs.jsonl.
#
# Pythons: pyenv's python3 with shardpack installed (scripts/install-python.sh) for
# shardpack; out/venv-peers-ffcv (bench/peers/run.sh's install_extra ffcv, from
# bench/peers/requirements-ffcv.txt) for FFCV.
# Usage: bash bench/small_images.sh     (DATA_DIR default out/bench/small-images, ROUNDS 3,
#        THREADS 2, SHARDPACK_BIN default build/tools/shardpack, SIZES "32 64")
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA_DIR:-out/bench/small-images}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
sp=${SHARDPACK_BIN:-build/tools/shardpack}
synthetic=${WRITE_SYNTHETIC:-build/samples/write_synthetic}
ffcv_py=out/venv-peers-ffcv/bin/python
sizes=${SIZES:-32 64}
[ -x "$sp" ] && [ -x "$synthetic" ] || { echo "small_images: $sp or $synthetic missing: run scripts/build.sh" >&2; exit 1; }
python3 -c "import shardpack" || { echo "small_images: python3 lacks shardpack: run scripts/install-python.sh" >&2; exit 1; }
"$ffcv_py" -c "import ffcv.loader" 2>/dev/null ||
  { echo "small_images: no FFCV in out/venv-peers-ffcv (bench/peers/run.sh installs it)" >&2; exit 1; }
mkdir -p "$data"
runs=$data/small-images-runs.jsonl
: > "$runs"

samples_of() { case $1 in 32) echo 300000 ;; 64) echo 150000 ;; *) echo "small_images: size $1: 32 or 64" >&2; exit 2 ;; esac; }
for s in $sizes; do
  n=$(samples_of "$s")
  d=$data/sp-$s
  if [ ! -f "$d/manifest.json" ]; then
    rm -rf "$d"
    "$synthetic" "$d" --samples "$n" --size "${s}x$s" --classes 100 --backend tfrecord > /dev/null
  fi
  if [ ! -f "$data/ffcv-$s.beton" ]; then
    "$ffcv_py" bench/peers/ffcv_out_of_core.py write "$d" "$data/ffcv-$s.beton.tmp" \
      --threads "$threads" > /dev/null
    mv "$data/ffcv-$s.beton.tmp" "$data/ffcv-$s.beton"
  fi
done

# read_one ROUND SIZE METHOD PYTHON DATA: one reader's run, its JSON line tagged and kept.
read_one() {
  local round=$1 s=$2 method=$3 py=$4 path=$5
  if [ -d "$path" ]; then cat "$path"/* > /dev/null; else cat "$path" > /dev/null; fi
  "$py" bench/peers/readers.py "$method" "$path" --samples "$(samples_of "$s")" \
    --threads "$threads" --batch-size 256 --size "$s" |
    python3 -c 'import json, sys
r = json.loads(sys.stdin.read()); r.update(round=int(sys.argv[1]), size=int(sys.argv[2])); print(json.dumps(r))' \
      "$round" "$s" >> "$runs"
}
for round in $(seq "$rounds"); do
  for s in $sizes; do
    echo "small_images: round $round, ${s}x$s: shardpack, FFCV" >&2
    read_one "$round" "$s" shardpack-py python3 "$data/sp-$s"
    read_one "$round" "$s" ffcv "$ffcv_py" "$data/ffcv-$s.beton"
  done
done

echo "## Small images: shardpack.Loader and FFCV, $threads threads, batch 256, page cache"
echo
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $(date -u +%Y-%m-%d), $(git rev-parse --short HEAD 2>/dev/null)."
echo
python3 - "$runs" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print("| samples | shardpack steady | FFCV steady | steady ratio (per round) | shardpack epoch 1 | FFCV epoch 1 | epoch 1 ratio |")
print("|---|---|---|---|---|---|---|")
for size in sorted({r["size"] for r in runs}):
    def pick(method, key):
        return [r[key] for r in sorted(runs, key=lambda r: r["round"])
                if r["size"] == size and r["method"].startswith(method)]
    sp, ff = pick("shardpack", "samples_per_s"), pick("ffcv", "samples_per_s")
    sp1, ff1 = pick("shardpack", "epoch1_per_s"), pick("ffcv", "epoch1_per_s")
    n = next(r["dataset_samples"] for r in runs if r["size"] == size)
    ratios = ", ".join(f"{a / b:.2f}" for a, b in zip(sp, ff))
    med = statistics.median
    print(f"| {n:,} of {size}x{size} | {med(sp):,.0f} | {med(ff):,.0f} | **{med(sp) / med(ff):.2f}** ({ratios}) "
          f"| {med(sp1):,.0f} | {med(ff1):,.0f} | {med(sp1) / med(ff1):.2f} |")
PY
echo
echo "shardpack bench (C++ loader / memcpy of the same samples, global order, $threads threads, 4 epochs):"
echo
for s in $sizes; do
  "$sp" bench "$data/sp-$s" --epochs 4 --threads "$threads" --shuffle global |
    awk -F'|' -v s="$s" '/^\| global/ {gsub(/ /, "", $4); gsub(/ /, "", $7); printf "- %sx%s: %s samples/s, %s of memcpy\n", s, s, $4, $7}'
done
