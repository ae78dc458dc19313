#!/usr/bin/env bash
# The loader on a dataset bigger than the memory it may use (issue 22), against the disk's
# own rates measured in the same run. Builds a dataset of SAMPLES synthetic
# 256x256x3 samples (30,000: 5.9 GB, Caltech-256-sized) unless DIR holds one, then, with
# the page cache dropped before each run and every reader inside a memory cgroup (v1 or
# v2) that caps what it may cache at LIMIT (default: a third of the dataset):
#   - fio: sequential 1 MiB reads, and random reads of one record's size at queue depth 1
#     and 8 (O_DIRECT: the device, not the cache);
#   - cat of the shards (sequential, through the page cache);
#   - shardpack bench, one epoch per shuffle mode at THREADS threads.
# Prints one table: samples/s and GB/s of each, and the loader's share of the disk's
# random-read rate. Needs root (cgroups, drop_caches); installs fio from Debian if absent.
# Usage: bash bench/out_of_core.sh [DIR] [SAMPLES] [LIMIT_BYTES]   (BACKEND=lmdb for LMDB)
# Environment: THREADS (default 2), SHUFFLES (default "global block"), BENCH_FLAGS (more
# shardpack bench flags), SKIP_FIO=1 (loader rows only).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-out/bench-ooc}
samples=${2:-30000}
threads=${THREADS:-2}
shuffles=${SHUFFLES:-global block}
[ -x build/tools/shardpack ] || bash scripts/build.sh
command -v fio > /dev/null || { apt-get update -qq && apt-get install -y -qq fio > /dev/null; }

if [ ! -f "$dir/manifest.json" ]; then
  rm -rf "$dir"
  build/samples/write_synthetic "$dir" --samples "$samples" --size 256x256 --classes 256 \
    --backend "${BACKEND:-tfrecord}" > /dev/null
fi
shards=$(ls "$dir"/shard-*.tfrecord "$dir"/shard-*.lmdb 2> /dev/null || true)
data_bytes=$(cat $shards | wc -c)
limit=${3:-$(( data_bytes / 3 ))}
record_bytes=$(( data_bytes / samples ))
record_kib=$(( (record_bytes + 1023) / 1024 ))

# A memory cgroup whose limit covers the page cache its processes fill.
if [ -d /sys/fs/cgroup/memory ]; then  # v1
  cg=/sys/fs/cgroup/memory/shardpack-ooc
  mkdir -p "$cg"
  echo "$limit" > "$cg/memory.limit_in_bytes"
else  # v2
  cg=/sys/fs/cgroup/shardpack-ooc
  mkdir -p "$cg"
  echo "$limit" > "$cg/memory.max"
fi
in_cgroup() { sh -c "echo \$\$ > $cg/cgroup.procs; exec \"\$@\"" sh "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
seconds() { python3 -c "import time; print(time.monotonic())"; }

calc() { python3 -c "print($1)"; }
printf 'out of core: %s, %d samples of %d bytes, %.2f GB; cgroup limit %.2f GB (%.0f%% of the data); %d threads\n\n' \
  "$dir" "$samples" "$record_bytes" "$(calc "$data_bytes / 1e9")" \
  "$(calc "$limit / 1e9")" "$(calc "100 * $limit / $data_bytes")" "$threads"
printf '| what | samples/s | GB/s | share of random QD1 |\n|---|---|---|---|\n'

fio_rate() {  # RW BS DEPTH JOBS -> bytes/s
  local files
  files=$(echo "$shards" | head -64 | tr '\n' ':' | sed 's/:$//')
  drop
  fio --name=ooc --filename="$files" --rw="$1" --bs="$2" --iodepth="$3" --numjobs="$4" \
    --ioengine=libaio --direct=1 --runtime=15 --time_based --group_reporting \
    --output-format=json 2> /dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); print(int(j['jobs'][0]['read']['bw_bytes']))"
}
row() {  # WHAT BYTES_PER_S
  printf '| %s | %.0f | %.2f | %.2f |\n' "$1" "$(calc "$2 / $record_bytes")" \
    "$(calc "$2 / 1e9")" "$(calc "$2 / $random_qd1")"
}
random_qd1=$(fio_rate randread "${record_kib}k" 1 1)
row "fio random ${record_kib} KiB reads, depth 1, 1 job" "$random_qd1"
if [ "${SKIP_FIO:-0}" != 1 ]; then
  row "fio random ${record_kib} KiB reads, depth 8, 1 job" "$(fio_rate randread "${record_kib}k" 8 1)"
  row "fio random ${record_kib} KiB reads, depth 1, $threads jobs" "$(fio_rate randread "${record_kib}k" 1 "$threads")"
  row "fio sequential 1 MiB reads, depth 8" "$(fio_rate read 1m 8 1)"
fi

drop
t0=$(seconds)
in_cgroup cat $shards > /dev/null
t1=$(seconds)
row "cat of the shards (page cache, sequential)" "$(calc "$data_bytes / ($t1 - $t0)")"

for shuffle in $shuffles; do
  drop
  # One epoch: the loader's row of shardpack bench gives samples/s.
  line=$(in_cgroup build/tools/shardpack bench "$dir" --threads "$threads" --shuffle "$shuffle" \
    --epochs 1 ${BENCH_FLAGS:-} | grep "^| $shuffle |")
  per_s=$(echo "$line" | awk -F'|' '{gsub(/ /, "", $4); print $4}')
  row "shardpack bench --shuffle $shuffle" "$(calc "$per_s * $record_bytes")"
done
rmdir "$cg" 2> /dev/null || true
