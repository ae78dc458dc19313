#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz/ (clang, ASan + UBSan, into build-fuzz/),
# replays every committed input (tests/fuzz/corpus/<harness>/ and the inputs that once
# crashed, tests/fuzz/crashes/<harness>/), then fuzzes each harness for SECONDS.
#
#   bash scripts/fuzz.sh [SECONDS] [HARNESS...]    SECONDS default 30 (CI: 20-30);
#                                                  harnesses: record example manifest
#                                                  index lmdb jpeg png dataset (default:
#                                                  all)
#
# New inputs go to build-fuzz/corpus/<harness>/ (kept between runs, not committed). A crash
# leaves its input in build-fuzz/artifacts/<harness>/ and fails the script: fix the bug,
# then commit the input under tests/fuzz/crashes/<harness>/ so that every later run (and
# every ctest run, through fuzz_replay) replays it. Limits per input: 25 s, 2560 MB; the
# dataset harness also fails on any single allocation above 1024 MB (-malloc_limit_mb: a
# size a manifest or a record claims must be checked before it is allocated) and takes
# inputs of up to 64 KiB (its LMDB seeds are 25 to 30 KB).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
[ $# -gt 0 ] && shift
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(record example manifest index lmdb jpeg png dataset)
start=$SECONDS
cores=$(nproc)

if ! command -v clang++ > /dev/null; then
  echo "fuzz: clang++ not found; bash scripts/install-deps.sh installs it" >&2
  exit 2
fi
mkdir -p build-fuzz
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" \
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" -DSHARDPACK_BUILD_FUZZERS=ON \
  -DSHARDPACK_SANITIZE=address,undefined -DSHARDPACK_WITH_CUDA=OFF \
  -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_BENCH=OFF -DSHARDPACK_BUILD_SAMPLES=OFF \
  > build-fuzz/configure.log 2>&1 || { cat build-fuzz/configure.log; exit 1; }
cmake --build build-fuzz -j "$cores" --target "${harnesses[@]/%/_fuzzer}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "== replaying tests/fuzz/corpus and tests/fuzz/crashes"
for h in "${harnesses[@]}"; do
  mapfile -t inputs < <(find "tests/fuzz/corpus/$h" "tests/fuzz/crashes/$h" -type f \
                          ! -name '.*' 2>/dev/null | sort)
  [ ${#inputs[@]} -gt 0 ] || continue
  if ! "build-fuzz/tests/fuzz/${h}_fuzzer" "${inputs[@]}" > "build-fuzz/replay-$h.log" 2>&1; then
    tail -n 40 "build-fuzz/replay-$h.log"
    echo "fuzz: $h: a committed input fails (log: build-fuzz/replay-$h.log)" >&2
    exit 1
  fi
  echo "$h: ${#inputs[@]} inputs, no crash"
done

# One harness per core at a time: each still gets SECONDS of fuzzing, on a core of its own.
fuzz_one() {  # harness; exit status: the fuzzer's
  local h=$1 extra=()
  mkdir -p "build-fuzz/corpus/$h" "build-fuzz/artifacts/$h"
  [ -f "tests/fuzz/$h.dict" ] && extra=("-dict=tests/fuzz/$h.dict")
  [ "$h" = dataset ] && extra+=(-malloc_limit_mb=1024 -max_len=65536)
  "build-fuzz/tests/fuzz/${h}_fuzzer" -max_total_time="$seconds" -timeout=25 \
    -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$h/" \
    "${extra[@]}" "build-fuzz/corpus/$h" "tests/fuzz/corpus/$h" > "build-fuzz/fuzz-$h.log" 2>&1
}
echo "== fuzzing each harness for $seconds s, $cores at a time"
declare -A pid_of=()
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$cores" ]; do wait -n || true; done
  fuzz_one "$h" &
  pid_of[$h]=$!
done
failed=()
for h in "${harnesses[@]}"; do
  if wait "${pid_of[$h]}"; then
    echo "$h: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "build-fuzz/fuzz-$h.log" |
                 grep -o '[0-9]*$') runs, no crash"
  else
    grep -E -A30 'ERROR: |runtime error|invariant failed' "build-fuzz/fuzz-$h.log" | head -n 60
    grep 'Test unit written to' "build-fuzz/fuzz-$h.log" || true
    echo "fuzz: $h FAILED (log: build-fuzz/fuzz-$h.log)" >&2
    failed+=("$h")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in: ${failed[*]}; fix, then copy the inputs from build-fuzz/artifacts/<harness>/ to tests/fuzz/crashes/<harness>/" >&2
  exit 1
fi
echo "fuzz: all clean in $((SECONDS - start)) s"
