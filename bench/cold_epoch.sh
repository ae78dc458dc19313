#!/usr/bin/env bash
# The loader's cold epoch on the mapped path, and what it leaves in the page cache for the
# next process (issue 23; docs/LOADER.md, "The first epoch from the page cache"), with
# `--huge-pages off` (the read-ahead hinted with MADV_WILLNEED: the cache fills in 4 KiB
# pages) against `on` (the mappings advised MADV_HUGEPAGE, 8 threads mapping the records
# ahead: 2 MiB folios). Each round, each way: the page cache dropped, one `shardpack bench
# --epochs 2` process (its first epoch is the cold one), how much of the cache is then in
# huge pages (FileHugePages), and a next `shardpack bench --epochs 4 --huge-pages off`
# process (its first epoch against its later ones; the target is >= 0.9; the cache holds
# the whole dataset, so it reads nothing ahead either way). Both ways read the same shards
# with a global shuffle, ROUNDS rounds, the order turning each round. Before each round, fio
# measures the disk: sequential 2 MiB reads at depth 8 and random record-sized reads at
# depth 32 (O_DIRECT, 6 s each), as the disk's own rates vary from minute to minute.
#
# Prints one markdown table (also out/bench/cold-epoch.md). Run as root (drop_caches);
# installs fio from Debian if absent. The machine's free page reporting order is printed:
# where the host takes free blocks back (an order up to the largest block, 10 on x86),
# huge pages cost a host fault per page on first touch, and `--huge-pages auto` chooses off.
#
# Usage: bash bench/cold_epoch.sh [DIR]   (default out/bench-ooc, as bench/out_of_core.sh
#   leaves it: 30,000 samples of 256x256x3; made with write_synthetic when absent)
# Environment: ROUNDS (default 3), THREADS (all cores), WAYS ("off on"), SAMPLES (30000,
#   for a DIR made here), BUILD_DIR (build).
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
dir=${1:-out/bench-ooc}
rounds=${ROUNDS:-3}
threads=${THREADS:-$(nproc)}
ways=${WAYS:-off on}
samples=${SAMPLES:-30000}
build=${BUILD_DIR:-build}
out=out/bench
say() { echo "cold_epoch: $*" >&2; }
die() { say "$*"; exit 2; }
[ "$(id -u)" = 0 ] || die "run as root: every cold epoch needs the page cache dropped"
command -v fio > /dev/null || { apt-get update -qq && apt-get install -y -qq fio > /dev/null; }

. bench/build_targets.sh
build_targets shardpack_cli write_synthetic
sp=$build/tools/shardpack
[ -x "$sp" ] || die "$sp is missing"
if [ ! -f "$dir/manifest.json" ]; then
  say "writing $samples samples of 256x256x3 into $dir"
  rm -rf "$dir"
  "$build/samples/write_synthetic" "$dir" --samples "$samples" --size 256x256 --classes 256 > /dev/null
fi
shards=$(ls "$dir"/*.tfrecord 2> /dev/null) || die "$dir holds no TFRecord shards"
record_kib=$(( $(cat $shards | wc -c) / $(wc -l < <(cat "$dir"/*.idx)) / 1024 ))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
fio_gbs() {  # RW BS DEPTH -> GB/s
  local files
  files=$(echo "$shards" | head -64 | xargs -n1 basename | tr '\n' ':' | sed 's/:$//')
  drop
  fio --name=cold --directory="$dir" --filename="$files" --rw="$1" --bs="$2" --iodepth="$3" \
    --ioengine=libaio --direct=1 --runtime=6 --time_based --output-format=json 2> /dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); print('%.2f' % (j['jobs'][0]['read']['bw_bytes'] / 1e9))"
}
huge_mb() { awk '/^FileHugePages:/ {printf "%.0f", $2 / 1024}' /proc/meminfo; }
bench_line() {  # WAY EPOCHS -> the table row of the global shuffle
  "$sp" bench "$dir" --epochs "$2" --no-baseline --shuffle global --threads "$threads" \
    --io mapped --huge-pages "$1" | grep '^| global' || die "shardpack bench failed on $dir"
}
# Columns of bench's row: shuffle threads samples/s GB/s memcpy ratio first-epoch-GB/s ...
col() { awk -F'|' -v k="$1" '{gsub(/ /, "", $k); print $k}'; }

order=$(cat /sys/module/page_reporting/parameters/page_reporting_order 2> /dev/null || echo none)
say "free page reporting order: $order"
: > "$work/rows"
for round in $(seq "$rounds"); do
  seq_gbs=$(fio_gbs read 2m 8) || die "fio failed on $dir"
  rand_gbs=$(fio_gbs randread "${record_kib}k" 32) || die "fio failed on $dir"
  list=$ways
  [ $((round % 2)) -eq 0 ] && list=$(tr ' ' '\n' <<< "$ways" | tac | tr '\n' ' ')
  for way in $list; do
    drop
    line=$(bench_line "$way" 2)
    say "round $round, $way, cold process: $line"
    cold=$(col 8 <<< "$line")
    huge=$(huge_mb)
    # The next process reads a cached dataset: no page is read ahead, whatever the way; it
    # runs with the hints alike for both.
    line=$(bench_line off 4)
    say "round $round, $way, next process: $line"
    ratio=$(awk -F'|' '{gsub(/ /, ""); printf "%.2f", $8 / $5}' <<< "$line")
    echo "$way $cold $huge $ratio $seq_gbs $rand_gbs" >> "$work/rows"
    echo "| $round | $way | $cold | $huge | $ratio | $seq_gbs | $rand_gbs |" >> "$work/table"
  done
done

median() { sort -g | awk '{v[NR] = $1} END {m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf (m == int(m) ? "%d" : "%.2f"), m}'; }
{
  echo "# Cold epoch and the next process's first epoch ($(date -u +%Y-%m-%dT%H:%MZ), $(git describe --always --dirty))"
  echo
  echo "$dir: $(wc -l < <(cat "$dir"/*.idx)) samples, $(cat $shards | wc -c | awk '{printf "%.2f", $1 / 1e9}') GB" \
    "of shards ($(df -T "$dir" | awk 'NR == 2 {print $2}')); $threads threads, global shuffle," \
    "\`--io mapped\`; free page reporting order $order. Cold: the first epoch after" \
    "drop_caches. Next: a new process's first epoch against its later ones. fio: the disk" \
    "just before the round (O_DIRECT; sequential 2 MiB at depth 8, random ${record_kib} KiB at depth 32)."
  echo
  echo "| round | --huge-pages | cold epoch GB/s | cache in huge pages (MB) | next process (hints): first/later | fio sequential GB/s | fio random GB/s |"
  echo "|---|---|---|---|---|---|---|"
  cat "$work/table"
  for way in $ways; do
    printf '| median | %s' "$way"
    for k in 2 3 4 5 6; do printf ' | %s' "$(awk -v w="$way" -v k="$k" '$1 == w {print $k}' "$work/rows" | median)"; done
    echo " |"
  done
} | tee "$out/cold-epoch.md"
