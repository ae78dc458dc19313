#!/usr/bin/env bash
# The wheel's CLI against the CMake build's, side by side (docs/WHEELS.md, "Measured"):
#  1. convert: SRC (a folder of class folders, e.g. bench/make-bench-images.sh's
#     scale set) to 256x256 crops with 2 threads into /dev/shm, the two CLIs alternating
#     round by round; each run's wall seconds, the median ratio, and whether the shards
#     are the same bytes;
#  2. the loader: bench/lmdb_read_compare.sh with the wheel's CLI as BEFORE and the CMake
#     build's as AFTER (`shardpack bench` of LMDB datasets of 32x32, 64x64 and 256x256).
# Usage: bash bench/wheel_compare.sh SRC [ROUNDS]
#        (after scripts/build-wheels.sh and scripts/build.sh; ROUNDS default 9)
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(realpath "$1")
rounds=${2:-9}
wheel=$PWD/out/wheel-build/shardpack  # the CLI build-wheels.sh packs into every wheel
cmake=$PWD/build/tools/shardpack
for bin in "$wheel" "$cmake"; do
  [ -x "$bin" ] || { echo "wheel_compare: $bin missing (scripts/build-wheels.sh, scripts/build.sh)" >&2; exit 1; }
done
out=/dev/shm/wheel-compare
trap 'rm -rf "$out"' EXIT
echo "| round | build | convert wall s |"
echo "|---|---|---|"
times=$(mktemp)
for round in $(seq 1 "$rounds"); do
  for which in wheel cmake; do
    bin=$wheel
    [ "$which" = cmake ] && bin=$cmake
    rm -rf "${out:?}/$which"
    t0=$(date +%s%N)
    "$bin" convert "$src" "$out/$which" --size 256x256 --fit crop --threads 2 --quiet > /dev/null
    wall=$(( $(date +%s%N) - t0 ))
    echo "$round $which $wall" >> "$times"
    awk -v r="$round" -v w="$which" -v ns="$wall" 'BEGIN { printf "| %d | %s | %.3f |\n", r, w, ns / 1e9 }'
  done
done
python3 - "$times" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
by_round = {}
for r, which, ns in runs:
    by_round.setdefault(r, {})[which] = int(ns)
ratios = sorted(v["wheel"] / v["cmake"] for v in by_round.values())
print(f"convert: wheel / CMake wall, round by round: median {statistics.median(ratios):.3f} "
      f"(range {ratios[0]:.3f}-{ratios[-1]:.3f}, {len(ratios)} rounds)")
PY
rm -f "$times"
if diff <(cd "$out/wheel" && find . -type f | LC_ALL=C sort | xargs sha256sum) \
        <(cd "$out/cmake" && find . -type f | LC_ALL=C sort | xargs sha256sum) > /dev/null; then
  echo "convert: the same shard bytes"
else
  echo "convert: the shards DIFFER"
fi
bash bench/lmdb_read_compare.sh "$wheel" "$cmake"
