#!/usr/bin/env bash
# The loader on a dataset bigger than the memory it may use (issue 22), against the disk's
# own rates measured in the same run. Builds a dataset of SAMPLES synthetic
# 256x256x3 samples (30,000: 5.9 GB, Caltech-256-sized) unless DIR holds one, then, with
# the page cache dropped before each run and every reader inside a memory cgroup (v1 or
# v2) that caps what it may cache at LIMIT (default: a third of the dataset):
#   - fio: random reads of one record's size at queue depth 1, 2, 8 and 32, sequential
#     1 MiB reads at depth 8, and random 1 MiB reads at depth 32 (a block shuffle's
#     pattern) (O_DIRECT: the device, not the cache);
#   - cat of the shards (sequential, through the page cache);
#   - shardpack bench, one epoch per I/O path x shuffle mode x thread count;
#   - FFCV 1.0.2 with os_cache=False (its out-of-core mode) on the same pixels, where
#     out/venv-peers-ffcv exists (bench/peers/run.sh installs it; FFCV=0 leaves it out):
#     QUASI_RANDOM and RANDOM at batch 256 with its default 8 MiB pages, and QUASI_RANDOM
#     with 2 MiB pages at batch 256 and 64. An OOM kill is a result ("killed"), not a failure.
# Prints one table: samples/s and GB/s of each, its share of the best random-read rate, of
# the sequential rate and (loader rows) of the disk's rate measured just before it (fio:
# random reads at depth 32 before a global shuffle, sequential ones before a block one), how busy the disk was during the run and its average queue of reads
# (/sys/class/block), CPU seconds per GB read, and peak RSS. Needs root (cgroups,
# drop_caches); installs fio from Debian if absent.
#   - with ENCODED=Q (a JPEG quality, e.g. 90): the same samples converted once (untimed,
#     `convert --input tfrecord --keep --encoding jpeg --quality Q`, into DIR-jpegQ) and
#     read by shardpack bench in the same cgroup, each shuffle x thread count, its first
#     epoch (from the disk) and its later ones apart (a JPEG dataset a tenth the size may
#     fit in what the cgroup may cache): encoded against raw samples/s where the disk is
#     the limit (issue 16). DIR must hold real photos (synthetic noise does not compress):
#     bench/peers/run.sh's out/bench/peers-data/30000/sp-tfrecord, say.
# Usage: bash bench/out_of_core.sh [DIR] [SAMPLES] [LIMIT_BYTES]   (BACKEND=lmdb for LMDB)
# Environment: THREADS (default "1 2"), SHUFFLES (default "global block"), IOS (default
# "mapped readahead"), BENCH_FLAGS (more shardpack bench flags), SKIP_FIO=1 (depth 1 only),
# FFCV=0, ENCODED=Q, DISK_BPS (bytes/s: emulate a slower disk, see below).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-out/bench-ooc}
samples=${2:-30000}
threads_list=${THREADS:-1 2}
shuffles=${SHUFFLES:-global block}
ios=${IOS:-mapped readahead}
[ -x build/tools/shardpack ] || bash scripts/build.sh
command -v fio > /dev/null || { apt-get update -qq && apt-get install -y -qq fio > /dev/null; }
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time > /dev/null; }

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
# DISK_BPS: a slower disk, emulated by the block I/O controller's read limit (cgroup v1
# blkio.throttle.read_bps_device) on the device under DIR, for fio and every reader alike.
bcg=
if [ -n "${DISK_BPS:-}" ]; then
  [ -d /sys/fs/cgroup/blkio ] || { echo "DISK_BPS needs cgroup v1's blkio controller" >&2; exit 2; }
  bcg=/sys/fs/cgroup/blkio/shardpack-ooc
  mkdir -p "$bcg"
  echo "$(cat "/sys/class/block/$(basename "$(df --output=source "$dir" | tail -1)")/dev") $DISK_BPS" \
    > "$bcg/blkio.throttle.read_bps_device"
fi
in_cgroup() {
  sh -c "echo \$\$ > $cg/cgroup.procs; [ -z \"$bcg\" ] || echo \$\$ > $bcg/cgroup.procs; exec \"\$@\"" sh "$@"
}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
seconds() { python3 -c "import time; print(time.monotonic())"; }

calc() { python3 -c "print($1)"; }
printf 'out of core: %s, %d samples of %d bytes, %.2f GB; cgroup limit %.2f GB (%.0f%% of the data); threads %s%s\n\n' \
  "$dir" "$samples" "$record_bytes" "$(calc "$data_bytes / 1e9")" \
  "$(calc "$limit / 1e9")" "$(calc "100 * $limit / $data_bytes")" "$threads_list" \
  "${DISK_BPS:+; disk reads limited to $(calc "${DISK_BPS:-0} / 1e6") MB/s (DISK_BPS)}"

fio_rate() {  # RW BS DEPTH JOBS -> bytes/s
  local files
  # Names relative to --directory: fio takes at most 4,096 characters of --filename.
  files=$(echo "$shards" | head -64 | xargs -n1 basename | tr '\n' ':' | sed 's/:$//')
  drop
  in_cgroup fio --name=ooc --directory="$dir" --filename="$files" --rw="$1" --bs="$2" --iodepth="$3" --numjobs="$4" \
    --ioengine=libaio --direct=1 --runtime="${FIO_SECONDS:-15}" --time_based --group_reporting \
    --output-format=json 2> /dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin); print(int(j['jobs'][0]['read']['bw_bytes']))"
}
declare -a rows
best_random=0
sequential=0
add() {  # WHAT BYTES_PER_S [CPU_S PEAK_RSS_KB PAIRED_FIO DISK_BUSY DISK_QUEUE]
  rows+=("$1|$2|${3:--}|${4:--}|${5:--}|${6:--}|${7:--}")
}
# The device under DIR: its I/O counters (/sys/class/block/DEV/stat) give how busy the disk
# was during a run and how many reads it had queued on average, figures that the disk's
# run-to-run variance (+-20% seen here) does not blur.
dev=$(basename "$(df --output=source "$dir" | tail -1)")
disk_stat() { [ -r "/sys/class/block/$dev/stat" ] && cat "/sys/class/block/$dev/stat" || echo "0 0 0 0 0 0 0 0 0 0 0"; }
disk_busy() {  # STAT_BEFORE STAT_AFTER SECONDS -> "busy% queue"
  python3 -c "
a=[int(x) for x in '$1'.split()]; b=[int(x) for x in '$2'.split()]; t=$3
print('%.0f %.1f' % (min(100, (b[9]-a[9]) / 10 / t), (b[10]-a[10]) / 1000 / t))"
}
for depth in 1 2 8 32; do
  [ "${SKIP_FIO:-0}" = 1 ] && [ "$depth" != 1 ] && continue
  rate=$(fio_rate randread "${record_kib}k" "$depth" 1)
  add "fio random ${record_kib} KiB reads, depth $depth" "$rate"
  [ "$rate" -gt "$best_random" ] && best_random=$rate
done
if [ "${SKIP_FIO:-0}" != 1 ]; then
  sequential=$(fio_rate read 1m 8 1)
  add "fio sequential 1 MiB reads, depth 8" "$sequential"
  # What a block shuffle asks of the disk: reads of up to 1 MiB (pieces of its blocks) at
  # random places, many in flight. Not a target; it says how much of the gap to the
  # sequential rate is the disk's own.
  add "fio random 1 MiB reads, depth 32" "$(fio_rate randread 1m 32 1)"
fi

drop
t0=$(seconds)
in_cgroup cat $shards > /dev/null
t1=$(seconds)
add "cat of the shards (page cache, sequential)" "$(calc "int($data_bytes / ($t1 - $t0))")"

timed=$(mktemp)
for io in $ios; do
  for shuffle in $shuffles; do
    for threads in $threads_list; do
      drop
      # One epoch: the loader's row of shardpack bench gives samples/s; /usr/bin/time the
      # CPU seconds and the peak RSS.
      what="shardpack, $io, --shuffle $shuffle, $threads threads"
      # The disk's own rate right before, for a paired ratio (the disk's rate drifts, and
      # now and then halves for minutes): what this shuffle's target is measured against,
      # sequential 1 MiB reads at depth 8 for a block shuffle (or none), random
      # record-sized reads at depth 32 for a global one.
      if [ "${SKIP_FIO:-0}" = 1 ]; then
        paired=-
      elif [ "$shuffle" = global ]; then
        paired=$(FIO_SECONDS=6 fio_rate randread "${record_kib}k" 32 1)
      else
        paired=$(FIO_SECONDS=6 fio_rate read 1m 8 1)
      fi
      drop
      before=$(disk_stat)
      t0=$(seconds)
      rc=0
      line=$(in_cgroup /usr/bin/time -f '%U %S %M' -o "$timed" build/tools/shardpack bench "$dir" \
        --threads "$threads" --shuffle "$shuffle" --io "$io" --epochs 1 --no-baseline \
        ${BENCH_FLAGS:-} | grep "^| $shuffle |") || rc=$?
      if [ -z "$line" ]; then
        rows+=("$what|failed (exit $rc; killed when out of memory in the cgroup)|-|-")
        continue
      fi
      per_s=$(echo "$line" | awk -F'|' '{gsub(/ /, "", $4); print $4}')
      read -r busy queue <<< "$(disk_busy "$before" "$(disk_stat)" "$(calc "$(seconds) - $t0")")"
      read -r user sys rss_kb < "$timed"
      add "$what" "$(calc "int($per_s * $record_bytes)")" "$(calc "$user + $sys")" "$rss_kb" \
        "$paired" "$busy" "$queue"
    done
  done
done

# The same samples as JPEG files: the loader decodes them, reading a tenth of the bytes.
if [ -n "${ENCODED:-}" ]; then
  enc="${dir%/}-jpeg$ENCODED"
  if [ ! -f "$enc/manifest.json" ]; then
    rm -rf "$enc"
    # The stored size again (a crop to it is the identity): a fixed-size dataset, as the
    # raw one.
    size=$(python3 -c "import json; i = json.load(open('$dir/manifest.json'))['image']; print(f\"{i['width']}x{i['height']}\")")
    build/tools/shardpack convert "$dir" "$enc" --input tfrecord --size "$size" --fit crop \
      --encoding jpeg --quality "$ENCODED" --quiet > /dev/null
  fi
  enc_bytes=$(cat "$enc"/shard-* | wc -c)
  for shuffle in $shuffles; do
    for threads in $threads_list; do
      drop
      line=$(in_cgroup /usr/bin/time -f '%U %S %M' -o "$timed" build/tools/shardpack bench "$enc" \
        --threads "$threads" --shuffle "$shuffle" --epochs 3 --no-baseline ${BENCH_FLAGS:-} |
        grep "^| $shuffle |") || true
      what="shardpack, JPEG q$ENCODED ($(calc "'%.0f' % ($enc_bytes / $samples)") B/sample, auto), --shuffle $shuffle, $threads threads"
      if [ -z "$line" ]; then
        rows+=("$what|failed|-|-")
        continue
      fi
      # Columns: loader samples/s (the epochs after the first), first epoch GB/s of pixels.
      per_s=$(echo "$line" | awk -F'|' '{gsub(/ /, "", $4); print $4}')
      first_gbs=$(echo "$line" | awk -F'|' '{gsub(/ /, "", $8); print $8}')
      read -r user sys rss_kb < "$timed"
      add "$what, epoch 1 (from the disk)" "$(calc "int($first_gbs * 1e9 / (256 * 256 * 3) * $record_bytes)")" \
        - "$rss_kb"
      add "$what, epochs 2-3" "$(calc "int($per_s * $record_bytes)")" "$(calc "$user + $sys")" \
        "$rss_kb"
    done
  done
fi

ffcv_py=out/venv-peers-ffcv/bin/python
if [ "${FFCV:-1}" != 0 ] && [ -x "$ffcv_py" ]; then
  for page in 8388608 2097152; do
    beton="$dir.ffcv-$page.beton"
    [ -f "$beton" ] || "$ffcv_py" bench/peers/ffcv_out_of_core.py write "$dir" "$beton" \
      --page-size "$page" --threads 2 > /dev/null
  done
  for setting in "quasi_random 256 8388608" "random 256 8388608" "quasi_random 256 2097152" \
    "quasi_random 64 2097152"; do
    read -r order batch page <<< "$setting"
    threads=${threads_list##* }
    drop
    before=$(disk_stat)
    t0=$(seconds)
    rc=0
    out=$(in_cgroup /usr/bin/time -f '%U %S %M' -o "$timed" "$ffcv_py" \
      bench/peers/ffcv_out_of_core.py read "$dir.ffcv-$page.beton" --order "$order" \
      --os-cache 0 --batch-size "$batch" --threads "$threads" 2> /dev/null) || rc=$?
    what="FFCV os_cache=False, $order, batch $batch, $((page >> 20)) MiB pages, $threads threads"
    if [ "$rc" -ne 0 ]; then
      rows+=("$what|killed (exit $rc: out of memory in the cgroup)|-|-")
      continue
    fi
    per_s=$(echo "$out" | python3 -c "import json,sys; print(json.loads(sys.stdin.read().splitlines()[-1])['samples_per_s'])")
    read -r busy queue <<< "$(disk_busy "$before" "$(disk_stat)" "$(calc "$(seconds) - $t0")")"
    read -r user sys rss_kb < "$timed"
    add "$what" "$(calc "int($per_s * $record_bytes)")" "$(calc "$user + $sys")" "$rss_kb" - \
      "$busy" "$queue"
  done
fi
rm -f "$timed"

printf '| what | samples/s | GB/s | share of the best random read | share of sequential | share of the disk just before (global: fio random depth 32; block, none: fio sequential) | disk busy %% | disk queue | CPU s per GB | peak RSS (MB) |\n'
printf '|---|---|---|---|---|---|---|---|---|---|\n'
for r in "${rows[@]}"; do
  IFS='|' read -r what rate cpu rss paired busy queue <<< "$r"
  if ! [[ "$rate" =~ ^[0-9]+$ ]]; then
    printf '| %s | %s | | | | | | | | |\n' "$what" "$rate"
    continue
  fi
  share_paired=$([ "$paired" != - ] && calc "'%.2f' % ($rate / $paired)" || echo -)
  share_random=$(calc "'%.2f' % ($rate / $best_random)")
  share_seq=$([ "$sequential" -gt 0 ] && calc "'%.2f' % ($rate / $sequential)" || echo -)
  cpu_gb=$([ "$cpu" != - ] && calc "'%.1f' % ($cpu / ($data_bytes / 1e9))" || echo -)
  rss_mb=$([ "$rss" != - ] && calc "'%.0f' % ($rss / 1024)" || echo -)
  printf '| %s | %.0f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n' "$what" \
    "$(calc "$rate / $record_bytes")" "$(calc "$rate / 1e9")" "$share_random" "$share_seq" \
    "$share_paired" "$busy" "$queue" "$cpu_gb" "$rss_mb"
done
rmdir "$cg" 2> /dev/null || true
[ -z "$bcg" ] || rmdir "$bcg" 2> /dev/null || true
