#!/usr/bin/env bash
# Crash safety of `shardpack convert` under SIGKILL, many times over (issue 7): a
# conversion is killed at random moments, again and again, each run resuming the last
# (--resume), until KILLS runs (default 100) were killed mid-way; then it is finished. The
# result must equal an uninterrupted conversion byte for byte and pass verify. After every
# kill, a published manifest must name a complete dataset (verify passes). The
# runs alternate between 1 and 2 threads (output bytes do not depend on the thread count).
# Runs that finish before their kill are checked against the reference and wiped, so every
# counted kill lands in a conversion in progress.
# Then the same for `shardpack merge` (MERGE_KILLS kills, default KILLS / 4).
# Needs a build (scripts/build.sh). Usage: bash scripts/crash-test.sh [KILLS]
set -euo pipefail
cd "$(dirname "$0")/.."
kills_wanted=${1:-100}
shardpack=${SHARDPACK_BIN:-build/tools/shardpack}
make_images=${SHARDPACK_SAMPLES:-build/samples}/make_images
[ -x "$shardpack" ] && [ -x "$make_images" ] || { echo "crash-test: build first" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/shardpack-crash.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$SECONDS

"$make_images" "$work/src" --classes 6 --per-class 20 --seed 7 > /dev/null
args=(--size 48x48 --shard-records 4 --shuffle --seed 11 --quiet)
# The fastest of three runs: the kills land within it, and a run slowed by another load on
# the machine (940 ms once against the usual 155) made most later runs end before their
# kill (98 kills in 500 attempts).
full_us=0
for _ in 1 2 3; do
  rm -rf "$work/ref"
  t0=$(date +%s%N)
  "$shardpack" convert "$work/src" "$work/ref" "${args[@]}" --threads 1 > /dev/null 2>&1 || true
  run_us=$(( ($(date +%s%N) - t0) / 1000 ))
  [ -f "$work/ref/manifest.json" ] || continue  # a failed run times nothing
  if [ "$full_us" -eq 0 ] || [ "$run_us" -lt "$full_us" ]; then full_us=$run_us; fi
done
[ -f "$work/ref/manifest.json" ] || { echo "crash-test: the reference conversion failed" >&2; exit 1; }
echo "crash-test: reference conversion in $((full_us / 1000)) ms; killing until $kills_wanted kills"

RANDOM=2026
kills=0
finished=0
attempts=0
max_attempts=$((kills_wanted * 5))
while [ "$kills" -lt "$kills_wanted" ]; do
  attempts=$((attempts + 1))
  if [ "$attempts" -gt "$max_attempts" ]; then
    echo "crash-test: only $kills kills in $max_attempts attempts: runs end too fast" >&2
    exit 1
  fi
  threads=$((1 + attempts % 2))
  "$shardpack" convert "$work/src" "$work/out" "${args[@]}" --threads "$threads" --resume \
    > /dev/null 2>&1 &
  pid=$!
  # A moment within the first 90% of a full run.
  delay_us=$(( (RANDOM * 32768 + RANDOM) % (full_us * 9 / 10 + 1) ))
  sleep "$(printf '%d.%06d' $((delay_us / 1000000)) $((delay_us % 1000000)))"
  kill -KILL "$pid" 2> /dev/null || true
  status=0
  { wait "$pid"; } 2> /dev/null || status=$?
  if [ "$status" -eq 137 ]; then
    kills=$((kills + 1))
    # The manifest is the commit point: once it is there, whatever the kill interrupted
    # (removing the progress record), the dataset it names is complete and intact.
    if [ -f "$work/out/manifest.json" ] &&
      ! "$shardpack" verify "$work/out" > /dev/null 2>&1; then
      echo "crash-test: kill $kills: a manifest was published before its dataset was" \
        "complete" >&2
      exit 1
    fi
  elif [ "$status" -eq 0 ]; then
    finished=$((finished + 1))
    if ! diff -r "$work/ref" "$work/out" > /dev/null; then
      echo "crash-test: attempt $attempts (after $kills kills): the finished dataset differs" \
        "from the reference" >&2
      diff -r "$work/ref" "$work/out" | head >&2
      exit 1
    fi
    rm -rf "$work/out"
  else
    echo "crash-test: attempt $attempts: convert exited $status" >&2
    exit 1
  fi
done
"$shardpack" convert "$work/src" "$work/out" "${args[@]}" --threads 2 --resume > /dev/null 2>&1
diff -r "$work/ref" "$work/out" > /dev/null ||
  { echo "crash-test: the resumed dataset differs from the reference" >&2; exit 1; }
"$shardpack" verify "$work/out" > /dev/null
echo "crash-test: $kills kills ($finished runs finished first, compared and wiped)," \
  "resumed to a byte-identical, verified dataset in $((SECONDS - start)) s"

# shardpack merge under SIGKILL: the parts of a 3-way partitioned conversion are merged
# in a hard-linked copy (merge only renames, writes new files and unlinks), killed at a
# random moment, then merged again: the result must equal an uninterrupted merge.
merge_kills_wanted=${MERGE_KILLS:-$((kills_wanted / 4))}
for i in 0 1 2; do
  "$shardpack" convert "$work/src" "$work/parts" "${args[@]}" --part "$i/3" > /dev/null 2>&1
done
cp -al "$work/parts" "$work/merge-ref"
t0=$(date +%s%N)
"$shardpack" merge "$work/merge-ref" > /dev/null
merge_us=$(( ($(date +%s%N) - t0) / 1000 ))
merge_kills=0
attempts=0
while [ "$merge_kills" -lt "$merge_kills_wanted" ]; do
  attempts=$((attempts + 1))
  if [ "$attempts" -gt $((merge_kills_wanted * 10)) ]; then
    echo "crash-test: only $merge_kills merge kills in $((attempts - 1)) attempts" >&2
    exit 1
  fi
  rm -rf "$work/merge"
  cp -al "$work/parts" "$work/merge"
  "$shardpack" merge "$work/merge" > /dev/null 2>&1 &
  pid=$!
  delay_us=$(( (RANDOM * 32768 + RANDOM) % (merge_us + 1) ))
  sleep "$(printf '%d.%06d' $((delay_us / 1000000)) $((delay_us % 1000000)))"
  kill -KILL "$pid" 2> /dev/null || true
  status=0
  { wait "$pid"; } 2> /dev/null || status=$?
  [ "$status" -eq 137 ] && merge_kills=$((merge_kills + 1))
  if ! "$shardpack" merge "$work/merge" > /dev/null 2>&1 ||
    ! diff -r "$work/merge-ref" "$work/merge" > /dev/null; then
    echo "crash-test: merge attempt $attempts (exit $status): the merge run again did not" \
      "give the uninterrupted merge's dataset" >&2
    diff -r "$work/merge-ref" "$work/merge" | head >&2 || true
    exit 1
  fi
done
echo "crash-test: $merge_kills merges killed ($attempts attempts, $((merge_us / 1000)) ms" \
  "each uninterrupted), each finished by merging again, in $((SECONDS - start)) s"
