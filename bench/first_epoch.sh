#!/usr/bin/env bash
# The first epoch from the page cache right after a conversion (issue 23; docs/LOADER.md,
# "The first epoch from the page cache"), and what the converter's ways of writing cost to
# get it.
# Set A's photos (IMAGES/scale, the corpus of bench/make-bench-images.sh, listed
# again and again to SAMPLES samples) are converted to 256x256 (crop) into DIR, on the disk,
# each of the ways in CHUNKS, ROUNDS rounds, the order turning each round. A way is a
# number, `--write-method write --write-chunk N` (0: record by record; 2097152, the default
# chunk: whole 2 MiB chunks, so that the page cache holds the shards in 2 MiB folios), or
# `map`, `--write-method map` (copies into the files' mappings, 2 MiB folios too; auto's
# choice on ext4 where the host leaves free memory alone). After each conversion,
# with its shards still in the page cache, two `shardpack bench --epochs 4 --no-baseline
# --shuffle global` processes read them: each one's first epoch against its later ones (the
# target is >= 0.9). The shards of every way are checked to be the same bytes.
#
# Prints one markdown table (also out/bench/first-epoch.md): per round and way, the
# conversion's images/s (its own seconds, `convert --json`) and GB/s of shards, and the two
# processes' first/later ratios (and the Python loader's, PY=1); then the medians. Also the
# machine's free page reporting order and first_touch's rates: on a virtual machine that
# reports free memory to its host, fresh 2 MiB blocks cost a host fault per page
# (docs/LOADER.md), and so do 2 MiB folios. And whether a DAMON scheme pages out memory it
# finds cold, with what the first process found outside the page cache.
#
# Usage: bash bench/first_epoch.sh [DIR]   (default out/first-epoch; emptied at the end)
# Environment: SAMPLES (default 30000: 5.9 GB of shards; two ways' shards are never in the
#   cache at once), ROUNDS (3), THREADS (all cores), CHUNKS ("0 2097152 map"), IMAGES
#   (out/bench-images), BUILD_DIR (build), PY=1: a third process, the Python loader as
#   bench/peers/readers.py shardpack-py runs it (pyenv's python3 with the package installed,
#   scripts/install-python.sh), its epoch 1 against its steady epochs.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
dir=${1:-out/first-epoch}
samples=${SAMPLES:-30000}
rounds=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
chunks=${CHUNKS:-0 2097152 map}
images=${IMAGES:-out/bench-images}
py=${PY:-0}
build=${BUILD_DIR:-build}
out=out/bench
say() { echo "first_epoch: $*" >&2; }
die() { say "$*"; exit 2; }

# The binaries, up to date with the sources.
. bench/build_targets.sh
build_targets shardpack_cli first_touch
sp=$build/tools/shardpack
[ -x "$sp" ] && [ -x "$build/bench/first_touch" ] || die "$sp or $build/bench/first_touch is missing"
if [ ! -d "$images/scale" ]; then
  tool=bench/make-bench-images.sh
  [ -f "$tool" ] || die "$images/scale is missing and $tool is not here to make it"
  bash "$tool" "$images" 3000
fi
[ -f "$images/manifest-scale.tsv" ] || die "$images/manifest-scale.tsv is missing"
mkdir -p "$dir"
work=$(mktemp -d)
trap 'rm -rf "$work" "$dir"/converted-*' EXIT

# "path label" lines (label: the class folder's index), repeated to SAMPLES lines.
awk -F'\t' 'NR > 1 { if (!($2 in label)) label[$2] = n++; print $1, label[$2] }' \
  "$images/manifest-scale.tsv" > "$work/once"
files=$(wc -l < "$work/once")
[ "$files" -gt 0 ] || die "no photos listed in $images/manifest-scale.tsv"
for _ in $(seq $(( (samples + files - 1) / files ))); do cat "$work/once"; done |
  awk -v n="$samples" 'NR <= n' > "$work/list"

order=$(cat /sys/module/page_reporting/parameters/page_reporting_order 2> /dev/null || echo none)
touch_rates=$("$build/bench/first_touch" 1024 1 3 3 | awk '{printf "%s%s", sep, $5; sep = ", "}')
# A DAMON scheme that pages out memory it finds cold (some virtual machines' images run
# one): it drops parts of the page cache a conversion has just written, which the next
# reader then reads back from the disk (docs/LOADER.md).
damon=off
for action in /sys/kernel/mm/damon/admin/kdamonds/*/contexts/*/schemes/*/action; do
  [ -e "$action" ] || continue
  if [ ! -r "$action" ]; then
    damon=unknown  # the files are root's
    break
  fi
  state=${action%/contexts/*}/state
  [ "$(cat "$action")" = pageout ] && [ "$(cat "$state" 2> /dev/null)" = on ] && damon=on
done
say "free page reporting order: $order; first touch of new huge pages: $touch_rates GB/s;" \
  "DAMON pageout: $damon"

# One way, one round: convert, then two bench processes. Appends a row to $work/rows:
# way images/s GB/s first/later#1 first/later#2 [first/later#3] MB-found#1
one() {
  local chunk=$1 d=$dir/converted-$1 seconds bytes line ratios="" found=0 how
  how=(--write-method write --write-chunk "$chunk")
  [ "$chunk" = map ] && how=(--write-method map)
  rm -rf "$dir"/converted-*
  "$sp" convert "$images/scale" "$d" --list "$work/list" --size 256x256 --fit crop \
    --threads "$threads" "${how[@]}" --quiet --json > "$work/convert.json"
  seconds=$(sed -n 's/^  "seconds": *\([0-9.e-]*\).*/\1/p' "$work/convert.json")
  for run in 1 2; do
    line=$("$sp" bench "$d" --epochs 4 --no-baseline --shuffle global --threads "$threads" |
      grep '^| global') || die "shardpack bench failed on $d"
    # Columns: shuffle threads samples/s GB/s memcpy ratio first-epoch-GB/s ...
    ratios="$ratios $(awk -F'|' '{gsub(/ /, ""); printf "%.2f", $8 / $5}' <<< "$line")"
    # What the first process found outside the page cache and hinted (the I/O column says
    # so only when it found something).
    if [ "$run" = 1 ]; then
      found=$(grep -o '[0-9.]* MB found outside the page cache' <<< "$line" | cut -d' ' -f1 || true)
      found=${found:-0}
    fi
    say "${how[*]}, process $run: $line"
  done
  if [ "$py" = 1 ]; then
    # A third process: the Python loader as bench/peers/run.sh runs it (epoch 1 against
    # the steady epochs, start-up included in both).
    line=$(python3 bench/peers/readers.py shardpack-py "$d" --samples "$samples" \
      --threads "$threads" --epochs 3 --seconds 2 | tail -1) || die "readers.py failed on $d"
    ratios="$ratios $(python3 -c 'import json, sys; j = json.loads(sys.argv[1])
print("%.2f" % (j["epoch1_per_s"] / j["samples_per_s"]))' "$line")"
    say "${how[*]}, Python loader: $line"
  fi
  # The size and digest after the readers, so that the first process reads what the
  # conversion left, nothing else (with them between: 0.86-0.98 of the later epochs in
  # two runs; a throwaway run without: 0.92-0.99; bench/results/first-epoch-*).
  bytes=$(cat "$d"/*.tfrecord | wc -c)
  cat "$d"/*.tfrecord | sha256sum | cut -d' ' -f1 > "$work/digest-$chunk"
  awk -v c="$chunk" -v n="$samples" -v s="$seconds" -v b="$bytes" -v r="$ratios" -v f="$found" \
    'BEGIN {printf "%s %.0f %.2f%s %s\n", c, n / s, b / s / 1e9, r, f}' >> "$work/rows"
}

: > "$work/rows"
for round in $(seq "$rounds"); do
  ways=$chunks
  # Turn the order each round: the way run first in a round is not always the same one.
  [ $((round % 2)) -eq 0 ] && ways=$(tr ' ' '\n' <<< "$chunks" | tac | tr '\n' ' ')
  for chunk in $ways; do
    one "$chunk"
    echo "$round $(tail -1 "$work/rows")" >> "$work/table"
  done
done
sort -u "$work"/digest-* | wc -l | grep -qx 1 || die "the ways wrote different shard bytes"

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
{
  echo "# First epoch after a conversion ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD))"
  echo
  echo "$samples photos of $images/scale to 256x256 crop, $threads threads, into $dir" \
    "($(df -T "$dir" | awk 'NR == 2 {print $2}')); free page reporting order $order;" \
    "DAMON pageout $damon;" \
    "first touch of new huge pages $touch_rates GB/s. Each conversion is followed by two" \
    "\`shardpack bench --epochs 4 --no-baseline --shuffle global\` processes: first epoch" \
    "against the later ones. Shard bytes identical across ways."
  echo
  if [ "$py" = 1 ]; then
    echo "| round | --write-chunk, or map | convert images/s | shard GB/s | first/later, process 1 | process 2 | Python loader, process 3 | MB found missing, process 1 |"
    echo "|---|---|---|---|---|---|---|---|"
  else
    echo "| round | --write-chunk, or map | convert images/s | shard GB/s | first/later, process 1 | process 2 | MB found missing, process 1 |"
    echo "|---|---|---|---|---|---|---|"
  fi
  awk '{printf "| %s", $1; for (i = 2; i <= NF; i++) printf " | %s", $i; print " |"}' "$work/table"
  for chunk in $chunks; do
    printf '| median | %s' "$chunk"
    for col in $(seq 2 $((py == 1 ? 7 : 6))); do
      printf ' | %s' "$(awk -v c="$chunk" -v k="$col" '$1 == c {print $k}' "$work/rows" | median)"
    done
    echo " |"
  done
} | tee "$out/first-epoch.md"
