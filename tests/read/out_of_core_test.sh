#!/usr/bin/env bash
# The loader inside a memory cgroup whose limit (page cache included) is a third of the
# dataset: it completes (no OOM kill), delivers the batches it delivers outside the cgroup
# with the mapping, chooses the read-ahead path by itself (io auto, from the cgroup's
# limit), and its peak RSS stays within the ring + the read-ahead buffers + 100 MB.
# Asserts no speed (bench/out_of_core.sh measures that). Skipped (77), saying why, where
# the machine does not allow it: not root, or no writable memory cgroup.
# Usage: out_of_core_test.sh WRITE_SYNTHETIC EPOCH_DIGEST
set -euo pipefail
write_synthetic=$1
epoch_digest=$2
skip() { echo "out_of_core_test: skipped: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (a memory cgroup and drop_caches need it)"
if [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/shardpack-ooc-test.$$
  limit_file=memory.limit_in_bytes
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
  cg=/sys/fs/cgroup/shardpack-ooc-test.$$
  limit_file=memory.max
else
  skip "no memory cgroup controller mounted"
fi
mkdir "$cg" 2> /dev/null || skip "cannot create a cgroup under $(dirname "$cg")"
work=$(mktemp -d)
cleanup() {
  rm -rf "$work"
  rmdir "$cg" 2> /dev/null || true
}
trap cleanup EXIT

# 4,000 samples of 96x96x3 (27 KiB records): 111 MB of TFRecord.
"$write_synthetic" "$work/ds" --samples 4000 --size 96x96 --classes 10 > /dev/null
data_bytes=$(cat "$work"/ds/shard-*.tfrecord | wc -c)
limit=$((data_bytes / 3))
echo "$limit" > "$cg/$limit_file" || skip "cannot set $limit_file of $cg"
batch=32
buffer=$((8 << 20))
ring=$((batch * 96 * 96 * 3 * 4))  # prefetch 2: 4 slots

args=(--batch-size "$batch" --io-buffer "$buffer" --epochs 2)
outside=$("$epoch_digest" "$work/ds" --io mapped "${args[@]}")
sync
echo 3 > /proc/sys/vm/drop_caches 2> /dev/null || true
inside=$(sh -c "echo \$\$ > $cg/cgroup.procs && exec \"\$@\"" sh \
  "$epoch_digest" "$work/ds" --io auto "${args[@]}") || {
  echo "out_of_core_test: FAILED: the loader in a cgroup of $limit bytes exited with $?"
  exit 1
}
echo "outside, mapped: $outside"
echo "inside the cgroup of $limit bytes, auto: $inside"
digest() { echo "$1" | awk '{print $2}'; }
[ "$(digest "$outside")" = "$(digest "$inside")" ] || {
  echo "out_of_core_test: FAILED: the batches differ"
  exit 1
}
case "$inside" in
  *"io read-ahead: "*"cgroup"*) ;;
  *)
    echo "out_of_core_test: FAILED: auto did not choose read-ahead from the cgroup's limit"
    exit 1
    ;;
esac
rss_kb=$(echo "$inside" | awk '{print $6}')
bound_kb=$(((ring + buffer) / 1024 + 100 * 1024))
[ "$rss_kb" -le "$bound_kb" ] || {
  echo "out_of_core_test: FAILED: peak RSS $rss_kb KiB above ring + buffers + 100 MB = $bound_kb KiB"
  exit 1
}
echo "out_of_core_test: passed: same batches, read-ahead chosen, peak RSS $rss_kb KiB <= $bound_kb KiB"
