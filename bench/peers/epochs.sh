#!/usr/bin/env bash
# shardpack's Python loader against FFCV epoch by epoch (issue 23), from the page cache, at
# the sizes users have: SIZES samples of 256x256x3 (default 30,000, Caltech-256's size,
# and 3,000). For each size: a synthetic dataset (build/samples/write_synthetic) and an
# FFCV .beton of the same pixels (bench/peers/ffcv_out_of_core.py write, 8 MiB pages, its
# default), both read into the page cache first; then ROUNDS rounds, each a fresh process
# per reader, alternating, of EPOCHS epochs (bench/peers/epochs.py: batch 256, a random
# order every epoch, drop_last, 2 threads; FFCV with os_cache=True, its setting for data in
# memory). Prints the medians over the rounds: the first epoch, the steady state (the
# median of epochs 2..), the first-batch latency of the first and of later epochs, and the
# ratios shardpack / FFCV.
# Needs out/venv-peers-ffcv (bench/peers/run.sh installs it).
# Usage: bash bench/peers/epochs.sh   Environment: SIZES ("30000 3000"), ROUNDS (3),
#   EPOCHS (5), DIR (out/bench-epochs).
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes=${SIZES:-30000 3000}
rounds=${ROUNDS:-3}
epochs=${EPOCHS:-5}
dir=${DIR:-out/bench-epochs}
py=out/venv-peers-ffcv/bin/python
[ -x "$py" ] || { echo "epochs: $py missing: run bash bench/peers/run.sh once to install FFCV" >&2; exit 2; }
[ -x build/samples/write_synthetic ] || bash scripts/build.sh
mkdir -p "$dir"
runs=$(mktemp)
for n in $sizes; do
  data=$dir/synthetic-$n
  [ -f "$data/manifest.json" ] ||
    build/samples/write_synthetic "$data" --samples "$n" --size 256x256 --classes 256 > /dev/null
  [ -f "$data.beton" ] ||
    "$py" bench/peers/ffcv_out_of_core.py write "$data" "$data.beton" --page-size 8388608 \
      > /dev/null 2>&1
  cat "$data"/shard-* "$data.beton" > /dev/null  # into the page cache
  for round in $(seq "$rounds"); do
    for reader in shardpack ffcv; do
      target=$data
      [ "$reader" = ffcv ] && target=$data.beton
      "$py" bench/peers/epochs.py "$reader" "$target" --epochs "$epochs" 2> /dev/null |
        tail -1 | sed "s/^{/{\"size\": $n, \"round\": $round, /" >> "$runs"
    done
  done
done
python3 - "$runs" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("| samples | reader | first epoch samples/s | steady samples/s | first / steady | "
      "first batch, epoch 1 (ms) | first batch, later (ms) |")
print("|---|---|---|---|---|---|---|")
med = statistics.median
table = {}
for size in sorted({r["size"] for r in runs}, reverse=True):
    for reader in ("shardpack", "ffcv"):
        rs = [r for r in runs if r["size"] == size and r["reader"] == reader]
        e1 = med(r["epoch1_per_s"] for r in rs)
        st = med(r["steady_per_s"] for r in rs)
        fb1 = med(r["first_batch_s"][0] for r in rs) * 1000
        fbl = med(med(r["first_batch_s"][1:]) for r in rs) * 1000
        table[size, reader] = (e1, st)
        print(f"| {size:,} | {rs[0]['version']} | {e1:,.0f} | {st:,.0f} | {e1 / st:.2f} | "
              f"{fb1:.0f} | {fbl:.0f} |")
for size in sorted({r["size"] for r in runs}, reverse=True):
    (s1, ss), (f1, fs) = table[size, "shardpack"], table[size, "ffcv"]
    print(f"\n{size:,} samples: shardpack / FFCV, first epoch {s1 / f1:.2f}x, steady {ss / fs:.2f}x "
          f"(per round: " + ", ".join(
              f"{a['steady_per_s'] / b['steady_per_s']:.2f}" for a, b in zip(
                  [r for r in runs if r['size'] == size and r['reader'] == 'shardpack'],
                  [r for r in runs if r['size'] == size and r['reader'] == 'ffcv'])) + ")")
PY
rm -f "$runs"
