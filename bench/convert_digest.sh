#!/usr/bin/env bash
# Output bytes across a change of the converter: converts the real bench photos with the
# CLI of REV (built in a worktree of its own, Release, CLI only) and with this checkout's
# build, in three configurations that cover the decode and resize paths (centre crop
# with the default Lanczos filter; pad with bilinear and a seeded shuffle; max side with
# area into LMDB, shuffled), and compares every shard's and index's xxh3-128 digest in
# the two manifests. Exit 0 when all are identical, 1 otherwise (the differing lines
# printed). A refactor of Convert() must leave them identical (issue 24).
# Usage: bash bench/convert_digest.sh REV [IMAGES]   IMAGES: a class-folder tree (default
#   out/bench-images/scale; bench/make-bench-images.sh makes it).
# Environment: THREADS (default 2), OUT (scratch space, default /dev/shm).
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: bash bench/convert_digest.sh REV [IMAGES]}
images=${2:-out/bench-images/scale}
threads=${THREADS:-2}
scratch=${OUT:-/dev/shm}/shardpack-digest.$$
[ -d "$images" ] || { echo "convert_digest: $images is missing (bench/make-bench-images.sh makes it)" >&2; exit 2; }
[ -x build/tools/shardpack ] || bash scripts/build.sh
old=out/digest-$(git rev-parse --short "$rev")
if [ ! -x "$old/build/tools/shardpack" ]; then
  rm -rf "$old"
  git worktree prune
  git worktree add -q --detach "$old" "$rev"
  cmake -S "$old" -B "$old/build" -DCMAKE_BUILD_TYPE=Release -DSHARDPACK_WITH_CUDA=OFF \
    -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_SAMPLES=OFF -DSHARDPACK_BUILD_BENCH=OFF \
    > "$old.log" 2>&1
  cmake --build "$old/build" -j "$(nproc)" --target shardpack_cli >> "$old.log" 2>&1 ||
    { tail -20 "$old.log"; echo "convert_digest: building $rev failed" >&2; exit 2; }
fi
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch"
digests() {  # manifest.json -> "file xxh3 index-xxh3" lines and the sample count
  python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
for s in m['shards']:
    print(s['file'], s['xxh3_128'], (s.get('index') or {}).get('xxh3_128', ''))
print('samples', m['num_samples'])" "$1"
}
status=0
for cfg in "crop --size 256x256 --fit crop" \
           "pad --size 224x160 --fit pad --filter bilinear --shuffle --seed 3" \
           "max-side --max-side 200 --filter area --shuffle --seed 11 --format lmdb"; do
  name=${cfg%% *}
  read -r -a args <<< "${cfg#* }"
  for side in old new; do
    bin=build/tools/shardpack
    [ "$side" = old ] && bin=$old/build/tools/shardpack
    "$bin" convert "$images" "$scratch/$side" "${args[@]}" --threads "$threads" --quiet > /dev/null
    digests "$scratch/$side/manifest.json" > "$scratch/$name-$side.txt"
    rm -rf "${scratch:?}/$side"
  done
  if cmp -s "$scratch/$name-old.txt" "$scratch/$name-new.txt"; then
    echo "$name: identical ($(($(wc -l < "$scratch/$name-new.txt") - 1)) shards, $(tail -1 "$scratch/$name-new.txt"))"
  else
    echo "$name: DIFFERENT"
    diff "$scratch/$name-old.txt" "$scratch/$name-new.txt" | head -20
    status=1
  fi
done
exit $status
