#!/usr/bin/env bash
# LMDB read speed of two builds of shardpack, side by side: `shardpack bench` (page cache,
# global shuffle, 3 epochs) of the same LMDB datasets, the builds alternating round by
# round. Made to compare the LMDB reader (format::LmdbFile) with liblmdb's, which the
# readers used before commit d56f4e2: build that commit's parent in a worktree,
#   git worktree add /tmp/before d56f4e2~1 && cmake -S /tmp/before -B /tmp/before/build \
#     -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/before/build --target shardpack_cli
# then: bash bench/lmdb_read_compare.sh /tmp/before/build/tools/shardpack build/tools/shardpack
# Builds 200,000 samples of 32x32, 60,000 of 64x64 and 8,000 of 256x256 (LMDB, 3.2 GB in
# all) under DIR (default out/bench-lmdb) unless they exist. Prints one line per run.
# Usage: bash bench/lmdb_read_compare.sh BEFORE AFTER [DIR] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
before=$1
after=$2
dir=${3:-out/bench-lmdb}
rounds=${4:-3}
[ -x build/samples/write_synthetic ] || bash scripts/build.sh
for spec in 32:200000 64:60000 256:8000; do
  side=${spec%%:*}
  if [ ! -f "$dir/lmdb$side/manifest.json" ]; then
    rm -rf "${dir:?}/lmdb$side"
    build/samples/write_synthetic "$dir/lmdb$side" --samples "${spec##*:}" \
      --size "${side}x${side}" --classes 10 --backend lmdb
  fi
done
echo "| size | threads | round | build | samples/s | GB/s |"
echo "|---|---|---|---|---|---|"
for side in 32 64 256; do
  for threads in 1 2; do
    for round in $(seq 1 "$rounds"); do
      for which in before after; do
        bin=$before
        [ "$which" = after ] && bin=$after
        line=$("$bin" bench "$dir/lmdb$side" --threads "$threads" --shuffle global --epochs 3 \
                 --no-baseline | grep '^| global')
        sps=$(echo "$line" | awk -F'|' '{gsub(/ /, "", $4); print $4}')
        gbs=$(echo "$line" | awk -F'|' '{gsub(/ /, "", $5); print $5}')
        echo "| ${side}x${side} | $threads | $round | $which | $sps | $gbs |"
      done
    done
  done
done
