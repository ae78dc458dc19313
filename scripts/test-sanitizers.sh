#!/usr/bin/env bash
# Sanitizer runs of the C++ tests, for CI (issue 7). Two builds, CUDA off, only the targets
# the tests need:
#   build-asan  ASan + UBSan (-fno-sanitize-recover=all, LeakSanitizer on): the whole
#               GoogleTest suite (shardpack_tests) and the fuzz regression inputs
#               (fuzz_replay over tests/fuzz/corpus and tests/fuzz/crashes), through ctest.
#               loader_alloc_test is not built: it replaces malloc and operator new to count
#               allocations, and so do the sanitizers (tests/CMakeLists.txt).
#   build-tsan  TSan: the loader, dataset, shard writer's threaded-write, chunked-file and
#               mapped-file tests with no suppression at all, then the converter, resume,
#               partition, verify and remote tests (oneTBB in verify; parallel downloads
#               over libcurl) with tests/tsan.supp, which says why.
# Any sanitizer report fails the run.
# Usage: bash scripts/test-sanitizers.sh [asan|tsan]   (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
jobs=$(nproc)
start=$SECONDS

# Line tables only (-g1: reports still name files and lines), and the tests' own code at
# -O0: its speed does not matter, and under the sanitizers -O1 compiled it three times as
# slowly. The library: -O0 for ASan + UBSan (nothing optimised away from the checks; the
# build took 355 s instead of 684 with -O1 -g, the tests 106 s instead of 68), -O1 for TSan,
# whose threads must run at a useful speed.
configure() {  # DIR SANITIZERS LIBRARY_OPTIMISATION
  mkdir -p "$1"
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$3 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=$3 -g1" \
    "-DSHARDPACK_TEST_CODE_OPTIONS=-O0;-g1" \
    -DSHARDPACK_SANITIZE="$2" -DSHARDPACK_WITH_CUDA=OFF \
    -DSHARDPACK_BUILD_BENCH=OFF -DSHARDPACK_BUILD_SAMPLES=OFF \
    -DCMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST > "$1/configure.log" 2>&1 ||
    { cat "$1/configure.log"; exit 1; }
}

asan() {
  echo "== ASan + UBSan: build"
  configure build-asan address,undefined -O0
  cmake --build build-asan -j "$jobs" --target shardpack_tests fuzz_replay
  echo "== ASan + UBSan: every test ($((SECONDS - start)) s so far)"
  ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs"
}

tsan() {
  echo "== TSan: build ($((SECONDS - start)) s so far)"
  configure build-tsan thread -O1
  cmake --build build-tsan -j "$jobs" --target concurrency_tests
  echo "== TSan: loader, dataset and the shard writer's threaded writes, no suppressions"
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    build-tsan/tests/concurrency_tests --gtest_filter='*Loader*:*ReadAhead*:DatasetTest.*:ShardWriterReserveTest.*:ChunkedFileTest.*:MappedWritableFileTest.*' --gtest_brief=1
  echo "== TSan: converter, resume, verify and remote downloads, with tests/tsan.supp"
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=7:suppressions=$PWD/tests/tsan.supp" \
    build-tsan/tests/concurrency_tests \
    --gtest_filter='ConvertTest.*:InputScanTest.*:ResumeTest.*:PartitionTest.*:*PartitionBackendTest.*:VerifyTest.*:RemoteTest.*' --gtest_brief=1
}

case "$which" in
  asan) asan ;;
  tsan) tsan ;;
  all) asan; tsan ;;
  *) echo "usage: $0 [asan|tsan]" >&2; exit 2 ;;
esac
echo "test-sanitizers: $which clean in $((SECONDS - start)) s"
