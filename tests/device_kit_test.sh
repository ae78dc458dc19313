#!/usr/bin/env bash
# Tests of the GPU check kit (scripts/device-kit.sh, tools/gpu-check/), here, without a GPU:
#   - the kit builds and stays under its 60 MiB (the script checks and fails over it), its
#     programs packed, and the check unpacks them;
#   - its programs resolve every library from the kit, glibc and the C++ runtime aside,
#     and convert, verify and read a small dataset with an empty environment;
#   - the kit's wheel installs with pip (step python-install), its extension exports its
#     initialiser only, and the package imports and opens a dataset;
#   - gpu-check.sh without a GPU says so and exits with 3, with its report written; a
#     failing step makes it exit with 1 and the steps after it still run.
# Run by scripts/test.sh after the wheels' tests (the kit's wheel reuses their build cache).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d /tmp/shardpack-kit-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_kit_test: FAILED: $*" >&2; exit 1; }

# The kit carries GPU code: without the CUDA toolkit (nvcc) there is none to carry.
if [ ! -f build/lib/shardpack_kernels.fatbin ]; then
  echo "device_kit_test: skipped: build/ was made without the CUDA toolkit (no nvcc)"
  exit 0
fi
bash scripts/device-kit.sh "$tmp/kit"
kit=$tmp/kit
# The programs travel packed; the check unpacks them next to itself first (the libraries
# step needs no GPU).
[ -f "$kit/programs.tar.xz" ] && [ ! -e "$kit/bin" ] && [ ! -e "$kit/lib" ] ||
  fail "the kit's bin/ and lib/ are not packed into programs.tar.xz: $(ls "$kit")"
STEPS=libraries WORK="$tmp/work" bash "$kit/gpu-check.sh" "$tmp/report-libraries" ||
  fail "the libraries step failed: $(cat "$tmp/report-libraries/report.md" 2> /dev/null)"
grep -q '^| libraries | passed | [0-9]* | every program resolves its libraries' "$tmp/report-libraries/report.md" ||
  fail "the unpacked programs do not resolve their libraries: $(cat "$tmp/report-libraries/report.md")"
echo "device_kit_test: the kit's programs unpack and resolve their libraries"
for f in bin/shardpack bin/shardpack_tests bin/make_images bin/decode_floor bin/write_synthetic \
         bin/first_touch bin/write_scaling bin/micro_bench gpu-check.sh python/tests/conftest.py \
         samples/train_torch.py gpu-check/imagefolder_reference.py \
         gpu-check/loader_throughput.py REVISION; do
  [ -e "$kit/$f" ] || fail "the kit has no $f"
done
ls "$kit"/shardpack-wheel/shardpack-*-cp312-abi3-manylinux_2_28_x86_64.whl > /dev/null 2>&1 ||
  fail "the kit has no cp312-abi3 wheel: $(ls "$kit/shardpack-wheel" 2>&1)"

system='^(linux-vdso|ld-linux.*|libc|libm|libpthread|libdl|librt|libresolv|libutil|libmvec|libstdc\+\+|libgcc_s)\.so'
for program in "$kit"/bin/*; do
  readelf -d "$program" | grep -q 'R.*PATH.*\$ORIGIN/../lib' || fail "$program has no \$ORIGIN rpath"
  env -i ldd "$program" > "$tmp/ldd"
  ! grep -q "not found" "$tmp/ldd" || fail "$program: $(grep 'not found' "$tmp/ldd")"
  while read -r name _ path _; do
    [[ "$name" =~ $system ]] && continue
    [[ "$(realpath "$path")" == "$(realpath "$kit/lib")/"* ]] ||
      fail "$program takes $name from $path, not from the kit"
  done < <(awk '$2 == "=>" {print $1, $2, $3}' "$tmp/ldd")
done
echo "device_kit_test: every program resolves its libraries from the kit"

# quietly CMD...: runs CMD with an empty environment; its output only when it fails.
quietly() { env -i "$@" > "$tmp/log" 2>&1 || fail "$* exited with $?: $(tail -5 "$tmp/log")"; }
quietly "$kit/bin/make_images" "$tmp/images" --classes 2 --per-class 6
quietly "$kit/bin/shardpack" convert "$tmp/images" "$tmp/ds" --size 32x32
quietly "$kit/bin/shardpack" verify "$tmp/ds"
quietly "$kit/bin/shardpack" bench --threads 1 --epochs 2 --batch-size 4 "$tmp/ds"
quietly "$kit/bin/shardpack_tests" --gtest_filter='CudaTest.*'
echo "device_kit_test: the kit's programs convert, verify and read a dataset"

# The kit's wheel is the cp312-abi3 one (the GPU machine's Python is 3.12): installed with
# a Python 3.12 (as scripts/build-wheels.sh finds it) in a venv with NumPy.
py312=$(bash scripts/wheel/find_python.sh 3.12 --venv) ||
  fail "no Python 3.12 (the kit's wheel could not have been built either)"
"$py312" -m venv "$tmp/venv312"
"$tmp/venv312/bin/pip" install --quiet --disable-pip-version-check numpy ||
  fail "NumPy did not install into a Python 3.12 venv"
PYTHON="$tmp/venv312/bin/python" STEPS="python-install" WORK="$tmp/work" bash "$kit/gpu-check.sh" "$tmp/report-python" ||
  fail "the wheel did not install from the kit: $(tail -20 "$tmp/work/logs/python-install.log")"
PYTHONPATH="$tmp/work/wheel-site" "$tmp/venv312/bin/python" -c "import shardpack; print(shardpack.Dataset('$tmp/ds'))" > /dev/null
# It exports its initialiser only (python/src/exports.map): on the GPU machine, whose
# toolchain links libstdc++ into it, the exported std::locale crashed torch's import.
exported=$(nm -D --defined-only "$tmp"/work/wheel-site/shardpack/_shardpack*.so | awk '{print $3}' | sort -u)
[ "$exported" = PyInit__shardpack ] ||
  fail "the wheel's extension exports more than PyInit__shardpack: $(echo "$exported" | head -5)"
echo "device_kit_test: the kit's wheel installs, exports its initialiser only and imports"

# run_step STEP: runs one step of the check (no GPU needed) into $tmp/report-STEP, or fails
# with its log. expect STEP WHAT PATTERN: its report row matches PATTERN, or the test fails
# saying what is missing.
run_step() {
  STEPS="$1" WORK="$tmp/work" bash "$kit/gpu-check.sh" "$tmp/report-$1" ||
    fail "the $1 step failed: $(tail -20 "$tmp/work/logs/$1.log")"
}
expect() {
  grep -q "| $1 | passed |.*$3" "$tmp/report-$1/report.md" ||
    fail "the $1 step's report lacks $2: $(cat "$tmp/report-$1/report.md")"
}
num='[0-9][0-9.]*'

# The first-epoch step, small.
FIRST_EPOCH_SAMPLES=300 run_step first-epoch
expect first-epoch "its ratios" "first/later epoch: written #1 $num .*2097152 #2 $num"
expect first-epoch "the cold epochs" \
  "huge pages auto: mapped .*cold GB/s and next process.s first/later: off #1 cold $num next $num; on #1 cold $num next $num"
echo "device_kit_test: the first-epoch step runs and reports"

# convert-scaling on the kit's photos (at 1, 2, ... threads, up to this machine's cores).
# A kit built where set A's photos are missing (a fresh CI machine) has none: it gets
# make_images' pictures, less those convert rejects (made bad on purpose).
# There it also lists four of them as set A's large photos (photos/LARGE, SET_A_COUNTS), as
# a kit made with set A's photos does, so that set A's proportions are converted too.
if [ ! -d "$kit/photos" ]; then
  "$kit/bin/make_images" "$tmp/pictures" --classes 2 --per-class 40 > /dev/null
  "$kit/bin/shardpack" convert "$tmp/pictures" "$tmp/pictures-ds" --size 32x32 --quiet > /dev/null
  tail -n +2 "$tmp/pictures-ds/rejects.tsv" | cut -f1 | while read -r f; do rm -f "$tmp/pictures/$f"; done
  (cd "$tmp/pictures" && find . -type f | sed 's|^\./||' | sort | while read -r f; do
    if [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' \n')" = ffd8 ]; then echo "$f 0"; fi
  done) > "$tmp/pictures.list"
  awk 'NR % 15 == 0 && ++k <= 4' "$tmp/pictures.list" > "$tmp/pictures/LARGE"
  [ "$(wc -l < "$tmp/pictures/LARGE")" -eq 4 ] || fail "make_images gave fewer JPEGs than expected"
  echo "600 4" > "$tmp/pictures/SET_A_COUNTS"
  mv "$tmp/pictures" "$kit/photos"
fi
[ -s "$kit/photos/LARGE" ] && [ -s "$kit/photos/SET_A_COUNTS" ] ||
  fail "the kit's photos have no LARGE and SET_A_COUNTS: $(ls "$kit/photos" | head)"
run_step convert-scaling
expect convert-scaling "its ratios and stage times" \
  "1 threads ([0-9]* images): convert [0-9]* images/s, bare decode [0-9]*, ratio $num ($num in-process), thread-ms an image: decode $num resize $num write $num idle $num"
expect convert-scaling "the ratios of set A's proportions" \
  "; set A's proportions, 1 threads ([0-9]* images): convert [0-9]* images/s, bare decode [0-9]*, ratio $num ($num in-process), thread-ms an image: decode $num"
# Issue 17's target line: set A's proportions at the last count in three rounds, with medians.
expect convert-scaling "set A's proportions in three rounds" \
  "; set A's proportions at [0-9]* threads, 3 rounds: ratio $num / $num / $num, median $num (in-process $num / $num / $num, median $num)"
# Set A's proportions: the small photos as many times over as SET_A_COUNTS says for each one
# here, with every large one among them.
grep -q "^set A's proportions: [0-9]* entries, $(wc -l < "$kit/photos/LARGE") of them the $(wc -l < "$kit/photos/LARGE") large photos" \
  "$tmp/work/logs/convert-scaling.log" ||
  fail "set A's proportions were not listed with every large photo: $(grep "set A" "$tmp/work/logs/convert-scaling.log" | head -3)"
# The parts run from 2 threads on (half the last count's threads each).
if [ "$(nproc)" -ge 2 ]; then
  expect convert-scaling "the parts" "; the last list as 2 parts of [0-9]* threads side by side: $num images/s"
fi
# The write methods side by side, from 2 threads on: memory then disk, two rounds each.
if [ "$(nproc)" -ge 2 ]; then
  expect convert-scaling "the write methods side by side" \
    "; write methods at [0-9]* threads (round by round): memory ([a-z0-9/]*) write: $num images/s in-process, resize $num, write $num; memory ([a-z0-9/]*) map: .*; disk ([a-z0-9/]*) map: $num images/s in-process, resize $num, write $num; disk ([a-z0-9/]*) write: $num images/s"
fi
# The resize kernels side by side, where this CPU has AVX-512 VNNI.
if grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
   grep -qw avx512vl /proc/cpuinfo; then
  expect convert-scaling "the resize kernels side by side" \
    "; resize kernels (round by round): 1 threads avx2: $num images/s in-process, resize $num, write $num; 1 threads avx512: $num images/s in-process, resize $num"
  expect convert-scaling "the resize's four ways in micro_bench" \
    "; micro_bench ([^)]*): BM_ResizeCrop/1 $num, BM_ResizeCrop/2 $num, BM_ResizeCrop/3 $num, BM_ResizeCrop/4 $num, BM_ResizeRandomCrop/1 $num"
fi
echo "device_kit_test: the convert-scaling step runs and reports where the time went"

# write-scaling, small: every method at 1 thread, in memory and on the disk.
WRITE_SCALING_MIB=16 run_step write-scaling
expect write-scaling "its rates" \
  "GB/s and CPU ms a MiB: tmpfs /dev/shm: 1 threads write $num GB/s $num ms/MiB, 1 threads map $num GB/s $num ms/MiB.*; [a-z0-9/]* $tmp/work: 1 threads write $num GB/s"
echo "device_kit_test: the write-scaling step runs and reports"

if command -v nvidia-smi > /dev/null && nvidia-smi -L 2> /dev/null | grep -q GPU; then
  echo "device_kit_test: this machine has a GPU: the no-GPU exit is not tested here"
else
  set +e
  WORK="$tmp/work" bash "$kit/gpu-check.sh" "$tmp/report" > "$tmp/out" 2>&1
  rc=$?
  set -e
  [ $rc -eq 3 ] || fail "gpu-check.sh without a GPU exited with $rc, not 3: $(cat "$tmp/out")"
  grep -q "no GPU here" "$tmp/out" || fail "gpu-check.sh did not say there is no GPU: $(cat "$tmp/out")"
  [ -s "$tmp/report/report.md" ] && [ -s "$tmp/report/report.json" ] || fail "no report written"
  [ "$(ls "$tmp/report" | wc -l)" -eq 3 ] && tar -tzf "$tmp/report/logs.tar.gz" | grep -q '^logs/gpu.log$' ||
    fail "the report is not report.md, report.json and logs.tar.gz with the logs: $(ls "$tmp/report")"
  echo "device_kit_test: gpu-check.sh without a GPU exits with 3 and says why"
  # A failing step (bench --device 0 without a GPU) fails the check, and the steps after
  # it still run; a skipped one does not fail it.
  set +e
  STEPS="dataset bench memcheck libraries" PER_CLASS=2 WORK="$tmp/work" \
    bash "$kit/gpu-check.sh" "$tmp/report2" \
    > "$tmp/out" 2>&1
  rc=$?
  set -e
  [ $rc -eq 1 ] || fail "a failed step: gpu-check.sh exited with $rc, not 1: $(cat "$tmp/out")"
  grep -q '^| bench | failed |' "$tmp/report2/report.md" &&
    grep -q '^| libraries | passed |' "$tmp/report2/report.md" ||
    fail "the report does not show the failed step and the one after: $(cat "$tmp/report2/report.md")"
  echo "device_kit_test: a failed step fails the check, and the others still run"
fi
echo "device_kit_test: passed"
