#!/usr/bin/env bash
# The GPU check of shardpack (docs/GPU.md), run from the kit that scripts/device-kit.sh
# builds, on a bare GPU machine: nothing is installed, nothing is downloaded. Each step
# runs on its own (one failing does not stop the others) under a time limit. REPORT gets
# three files (the device tool brings back at most eight): report.md and report.json,
# which sum the steps up, and logs.tar.gz, each step's log (logs/<step>.log) and the CUDA
# gtests' JSON.
#
#   gpu          nvidia-smi: the device, driver and memory
#   libraries    every program of the kit resolves its libraries from the kit (or glibc)
#   cuda-tests   the CUDA gtests: ring, streams and events, H2D, kernels against the CPU
#                reference, CUDA errors as Status
#   dataset      make_images + shardpack convert (224x224) + verify
#   python-install  the binary wheel of the kit (cp312-abi3, scripts/build-wheels.sh, the
#                wheel users install) pip-installed into a folder of its own, beside the
#                machine's torch: the package and CLI that the later steps use
#   bench        shardpack bench --device 0: H2D against a bare pinned cudaMemcpyAsync,
#                the overlap of batch k+1's copy with work on batch k; on the dataset and
#                on 10,000 synthetic samples of 256x256 (longer epochs); and the wheel's
#                CLI on the dataset beside the CMake build's
#   python-tests the package's tests (torch on cuda among them), against the wheel
#   loader       the Python loader: host, cuda (uint8) and cuda + the normalise kernel,
#                samples/s each, and the kernel's batches against the CPU normaliser's
#   train        samples/train_torch.py on the GPU against torchvision ImageFolder +
#                DataLoader (pin_memory, num_workers = cores) on the same images:
#                images/s, data wait, GPU utilisation sampled by nvidia-smi
#   convert-scaling  shardpack convert of the kit's set A photos of at most 128 KiB (else
#                the dataset's JPEGs), and of set A in its proportions (those with all of
#                set A's larger photos, photos/LARGE), about 1,500 images a thread, at 1, 2,
#                4, 8, 16 threads against libjpeg-turbo's bare decode of the same files
#                (decode_floor), set A's proportions at the last count in three rounds
#                (issue 17's target: the medians), where the conversion's time went
#                (decode, resize, write, idle per image),
#                the last list as two --parts side by side (the one-file write bound),
#                the last list with --write-method write and map, in memory and on disk,
#                and where the CPU has AVX-512 VNNI the resize's kernels against the AVX2
#                ones (SHARDPACK_RESIZE_KERNELS=avx2) at 1 thread and the last count
#   write-scaling  bench/write_scaling: records written into one file by threads (1 to 16),
#                by pwrite and through the file's mapping, and a file a thread, in memory
#                and on the disk: the one-file write bound of a conversion
#   memcheck, racecheck   the CUDA gtests under compute-sanitizer, less those that provoke
#                CUDA errors on purpose (skipped where it is missing or refuses the
#                device, "Device not supported")
#   first-epoch  no GPU needed, last so that it takes only what time is left: the loader's
#                first epoch over shards in the page cache against its later ones, with the
#                shards written in record-sized writes (as convert --write-chunk 0 does) and copied in
#                2 MiB writes (2 MiB folios), what each way of writing costs, and whether the
#                machine hands new memory out slowly (free page reporting, first_touch);
#                the cold epoch from the disk with huge pages off and on, and the next
#                process's first epoch after each; also the kit's photos converted with
#                --write-chunk 0 and 2097152 and with --write-method map:
#                docs/LOADER.md, "The first epoch from the page cache"
#
# The whole check keeps within BUDGET seconds (default 540, under the device tool's 600 s
# a command): a step gets at most what is left, one with under 20 s left is skipped, and
# the report is rewritten after every step.
#
# Usage: bash gpu-check.sh [REPORT]   (default ./gpu-report; WORK=/tmp/shardpack-gpu-check,
#        PYTHON=python3, BUDGET=540, PER_CLASS=300 images in each of the dataset's 10
#        classes, STEPS="gpu libraries ..." to run some)
# Exit: 0 every step passed or was skipped with its reason; 1 a step failed; 3 no GPU
# (nothing else is run).
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
report=$(mkdir -p "${1:-gpu-report}" && cd "${1:-gpu-report}" && pwd)
work=${WORK:-/tmp/shardpack-gpu-check}
py=${PYTHON:-python3}
per_class=${PER_CLASS:-300}
cores=$(nproc)
budget=${BUDGET:-540}
all_steps="gpu libraries cuda-tests dataset python-install bench python-tests loader train convert-scaling write-scaling memcheck racecheck first-epoch"
steps=${STEPS:-$all_steps}
rm -rf "$work" && mkdir -p "$work/logs"
: > "$work/results"
# The kit's programs and libraries travel packed (scripts/device-kit.sh): unpacked next to
# this script (bin/ and lib/, where the Python extension's build also finds lib/) once, by
# tar (xz), else by Python's tarfile. A kit so unpacked is 1.7 times its size: build a fresh
# one before carrying it again.
if [ ! -e "$kit/bin/shardpack" ] && [ -f "$kit/programs.tar.xz" ]; then
  tar -C "$kit" -xJf "$kit/programs.tar.xz" 2> "$work/unpack.err" ||
    "$py" -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "tar_filter") else {}))' \
      "$kit/programs.tar.xz" "$kit" 2>> "$work/unpack.err" ||
    { printf '# shardpack GPU check\n\nThe kit'"'"'s programs could not be unpacked from %s: %s\n' \
        "$kit/programs.tar.xz" "$(cat "$work/unpack.err")" | tee "$report/report.md" >&2
      exit 1; }
fi
cuda_filter='Cuda*:LoaderGpu*:*NormalizeAsync*'
# Under compute-sanitizer, less the tests that provoke CUDA errors on purpose (an invalid
# device, an untimed event, an allocation bigger than the device): the sanitizer reports
# each such API error, which those tests check is returned as a Status.
sanitizer_filter="$cuda_filter-CudaTest.DeviceThatDoesNotExistIsUnavailable:CudaTest.NegativeDeviceIsUnavailable:CudaDeviceTest.DeviceThatDoesNotExistNamesTheCudaError:CudaDeviceTest.ElapsedTimeNeedsTimedEvents:CudaDeviceTest.HugeDeviceBufferIsResourceExhausted"
# A crash in Python prints its Python stack; prints reach the logs as they happen.
export PYTHONFAULTHANDLER=1 PYTHONUNBUFFERED=1
sp="$kit/bin/shardpack"
# Where step python-install puts the wheel's package and CLI (bin/).
pkg_site=$work/wheel-site

# summary TEXT: the one line a step's report row shows.
summary() { echo "$*" > "$work/summary"; }
skip() { summary "$*"; return 77; }

# jpeg_list DIR: the JPEGs under DIR, by their first bytes (decode_floor decodes JPEGs
# only; make_images names one PNG .JPEG), as convert --list takes them ("path 0").
jpeg_list() {
  local f
  [ -d "$1" ] || return 0
  (cd "$1" && find . -type f | sed 's|^\./||' | sort | while read -r f; do
    [ "$(head -c 2 "$f" | od -An -tx1 | tr -d ' \n')" = ffd8 ] && echo "$f 0"
  done)
}
# small_jpeg_list DIR: jpeg_list DIR less the large photos the kit lists in DIR/LARGE
# (scripts/device-kit.sh).
small_jpeg_list() {
  if [ -s "$1/LARGE" ]; then
    jpeg_list "$1" | grep -v -x -F -f "$1/LARGE" || true
  else
    jpeg_list "$1"
  fi
}
# repeat FILE COPIES: FILE's lines, COPIES times over.
repeat() { for _ in $(seq "$2"); do cat "$1"; done; }

step_gpu() {
  command -v nvidia-smi >/dev/null || { summary "no nvidia-smi"; return 3; }
  nvidia-smi || { summary "nvidia-smi failed"; return 3; }
  local gpus
  gpus=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader)
  [ -n "$gpus" ] || { summary "nvidia-smi lists no GPU"; return 3; }
  summary "$gpus"
}

step_libraries() {
  local missing=0 program
  for program in "$kit"/bin/*; do
    echo "== $program"
    env -u LD_LIBRARY_PATH ldd "$program" | tee "$work/ldd"
    if grep -q "not found" "$work/ldd"; then missing=1; fi
  done
  [ $missing -eq 0 ] || { summary "a library is not found (see logs/libraries.log)"; return 1; }
  summary "every program resolves its libraries"
}

gtest_counts() {  # the gtest log's tallies: the lines that end a test, "(N ms)"
  local passed skipped failed
  passed=$(grep -c '^\[       OK \] .* ([0-9]* ms)$' "$1")
  skipped=$(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$1")
  failed=$(grep -c '^\[  FAILED  \] .* ([0-9]* ms)$' "$1")
  echo "$passed passed, $skipped skipped, $failed failed"
}

step_cuda_tests() {
  "$kit/bin/shardpack_tests" --gtest_filter="$cuda_filter" --gtest_brief=0 \
    --gtest_output="json:$work/logs/cuda-tests.json" 2>&1 | tee "$work/gtest"
  local rc=${PIPESTATUS[0]}
  summary "$(gtest_counts "$work/gtest")"
  return "$rc"
}

sanitizer() {
  local tool=$1 cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  [ -n "$cs" ] || { skip "compute-sanitizer not on this machine"; return; }
  "$cs" --tool "$tool" --error-exitcode 9 "$kit/bin/shardpack_tests" \
    --gtest_filter="$sanitizer_filter" 2>&1 | tee "$work/cs"
  local rc=${PIPESTATUS[0]}
  if grep -q "Device not supported" "$work/cs"; then
    skip "compute-sanitizer: Device not supported"
    return
  fi
  summary "$(grep -o -E '(ERROR|RACECHECK) SUMMARY: .*' "$work/cs" | tail -1); $(gtest_counts "$work/cs")"
  # A filter that matches nothing would pass with no error to report.
  grep -q '^\[       OK \] ' "$work/cs" || { summary "no test ran under $tool: $(cat "$work/summary")"; return 1; }
  return "$rc"
}
step_memcheck() { sanitizer memcheck; }
step_racecheck() { sanitizer racecheck; }

step_dataset() {
  "$kit/bin/make_images" "$work/images" --classes 10 --per-class "$per_class" || return 1
  "$sp" convert "$work/images" "$work/ds" --size 224x224 || return 1
  "$sp" verify "$work/ds" || return 1
  # The files convert rejected (a truncated JPEG and a text file, on purpose) would stop
  # ImageFolder: the reference reads what the dataset holds.
  tail -n +2 "$work/ds/rejects.tsv" | cut -f1 | while read -r f; do rm -f "$work/images/$f"; done
  summary "$(find "$work/images" -type f | wc -l) images converted and verified"
}

step_bench() {
  [ -f "$work/ds/manifest.json" ] || { skip "no dataset (step dataset)"; return; }
  "$sp" bench --device 0 --threads "$cores" --epochs 3 "$work/ds" | tee "$work/bench"
  local rc=${PIPESTATUS[0]} large=""
  # The dataset's epochs are 12 batches (0.02 s): the first batch's assembly and the last
  # copy weigh on the ratio. Also 10,000 synthetic samples of 256x256 (2 GB, 40 batches).
  if "$kit/bin/write_synthetic" "$work/bench-synthetic" --samples "${BENCH_SAMPLES:-10000}" \
      --size 256x256 --classes 100 --backend tfrecord > /dev/null; then
    "$sp" bench --device 0 --threads "$cores" --epochs 5 "$work/bench-synthetic" |
      tee "$work/bench-large"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    large="; ${BENCH_SAMPLES:-10000} samples of 256x256: $(grep -E 'cudaMemcpyAsync' "$work/bench-large" | sed 's/^GPU 0, [0-9]* threads, global shuffle: //')"
    rm -rf "$work/bench-synthetic"
  else
    rc=1
  fi
  # The wheel's CLI on the same dataset, right after (step python-install).
  local wheel=""
  if [ -x "$pkg_site/bin/shardpack" ]; then
    "$pkg_site/bin/shardpack" bench --device 0 --threads "$cores" --epochs 3 "$work/ds" |
      tee "$work/bench-wheel"
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
    wheel="; the wheel's CLI: $(grep -E 'cudaMemcpyAsync' "$work/bench-wheel" | tr '\n' ' ' | cut -c1-200)"
  fi
  summary "$(grep -i -E 'cudaMemcpyAsync|overlap' "$work/bench" | tr '\n' ' ' | cut -c1-400)$large$wheel"
  return "$rc"
}

step_convert_scaling() {
  unset SHARDPACK_RESIZE_KERNELS  # the best kernels, but where the step names them
  # Set A's photos where the kit has them (photos/, scripts/device-kit.sh), else the
  # dataset's synthetic pictures: their JPEGs (jpeg_list). The shards go to memory where it
  # can, as bench/convert_bench.sh does: the converter is measured, not the
  # disk. The list repeats the files so that each thread has about 1,500 images (at least
  # SCALING_REPEAT copies, default 4): 16 threads then run for about two seconds, and the
  # process's start and the pipeline's ramp weigh little.
  local root=$kit/photos what="the kit's photos"
  [ -f "$root/SOURCE" ] && what="set A photos"
  [ -d "$root" ] || { root=$work/images; what="synthetic pictures (make_images)"; }
  [ -d "$root" ] || { skip "no photos in the kit and no images (step dataset)"; return; }
  local out=/dev/shm/shardpack-gpu-check-scaling files n t last=0 copies floor line t0 t1 rate inside
  local ratios=""
  [ -d /dev/shm ] && [ -w /dev/shm ] || out=$work/scaling
  # list_for T [ONCE MIN]: ONCE's files (default $work/jpegs.once) repeated to about 1,500
  # images a thread for T threads (at least MIN copies, default SCALING_REPEAT, 4) into
  # $work/jpegs.list, and their number in n.
  list_for() {
    local once=${2:-$work/jpegs.once} min=${3:-${SCALING_REPEAT:-4}} count
    count=$(wc -l < "$once")
    copies=$(( (1500 * $1 + count - 1) / count ))
    [ "$copies" -ge "$min" ] || copies=$min
    repeat "$once" "$copies" > "$work/jpegs.list"
    n=$(wc -l < "$work/jpegs.list")
  }
  # measure T ONCE MIN LABEL: the bare decode and the conversion of ONCE's list (list_for,
  # at least MIN copies) at T threads; one line, LABEL first, added to $ratios.
  measure() {
    local t=$1 label=$4
    list_for "$t" "$2" "$3"
    floor=$("$kit/bin/decode_floor" --root "$root" --list "$work/jpegs.list" --threads "$t" \
      --reps 1 | grep '^decode_floor threads=') || return 1
    rm -rf "$out"
    t0=$EPOCHREALTIME
    "$sp" convert "$root" "$out" --list "$work/jpegs.list" --size 256x256 \
      --fit crop --threads "$t" --json > "$work/scaling.json" || return 1
    t1=$EPOCHREALTIME
    rate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
    # The conversion's own seconds (--json), without the process's start and exit.
    inside=$(sed -n 's/^  "seconds": *\([0-9.e-]*\).*/\1/p' "$work/scaling.json")
    line=$(awk -v t="$t" -v r="$rate" -v n="$n" -v s="$inside" '{for (i = 2; i <= NF; i++) {split($i, kv, "="); f[kv[1]] = kv[2]}}
      END {d = f["images"] / f["seconds"];
           printf "%d threads (%d images): convert %d images/s, bare decode %.0f, ratio %.2f (%.2f in-process)",
                  t, n, r, d, r / d, (s > 0 ? n / s / d : 0)}' <<< "$floor")
    # Where the conversion's time went (--json "stages"), thread-milliseconds an image.
    line="$label$line, thread-ms an image:$(for k in decode resize write idle; do
      sed -n "s/^ *\"$k\": *\([0-9.e-]*\).*/\1/p" "$work/scaling.json" |
        awk -v k="$k" -v n="$n" '{printf " %s %.3f", k, 1000 * $1 / n}'; done)"
    echo "$line"
    ratios="$ratios${ratios:+; }$line"
  }
  # The photos of at most 128 KiB (jpegs.once; every tenth of set A's, in the kit), and,
  # where the kit carries set A's larger ones (photos/LARGE, with SET_A_COUNTS: how many
  # of each set A has), set A in its proportions (seta.once): the small ones as many times
  # over as set A has of them for each one here, with the large ones spread evenly among
  # them. Issue 17's target is stated on set A; the small ones alone are the harder set
  # that earlier checks measured (bench/results/kit-photos-vs-set-a-2026-11-28-zen4.md).
  small_jpeg_list "$root" > "$work/jpegs.once"
  files=$(wc -l < "$work/jpegs.once")
  [ "$files" -gt 0 ] || { summary "no JPEG in $root"; return 1; }
  local seta="" small_total large_total
  if [ -s "$root/LARGE" ] && [ -s "$root/SET_A_COUNTS" ] &&
     read -r small_total large_total < "$root/SET_A_COUNTS" &&
     [ "${small_total:-0}" -gt 0 ] && [ "${large_total:-0}" -gt 0 ]; then
    seta=$work/seta.once
    awk -v k=$(( (small_total + files / 2) / files )) 'NR == FNR {large[nl++] = $0; next}
      {small[ns++] = $0}
      END {total = (k > 0 ? k : 1) * ns; j = 0
           for (i = 0; i < total; i++) {
             print small[i % ns]
             while (j < nl && (i + 1) * nl >= (j + 1) * total) print large[j++]
           }}' "$root/LARGE" "$work/jpegs.once" > "$seta"
    echo "set A's proportions: $(wc -l < "$seta") entries, $(grep -c -x -F -f "$root/LARGE" "$seta") of them the $(wc -l < "$root/LARGE") large photos (set A: $small_total and $large_total)"
  fi
  local also=""
  [ -z "$seta" ] ||
    also=" of at most 128 KiB (and with the $(wc -l < "$root/LARGE") larger ones in set A's proportions, $small_total : $large_total)"
  local parts="" methods="" kernels="" rounds=""
  # The report's row so far, rewritten as each measurement ends: a step stopped at its time
  # limit keeps what it measured.
  so_far() { summary "$files JPEGs of $what$also to 256x256 crop: $ratios$rounds$parts$methods$kernels"; }
  for t in 1 2 4 8 16; do
    [ "$t" -le "$cores" ] || break
    last=$t
    measure "$t" "$work/jpegs.once" "${SCALING_REPEAT:-4}" "" || return 1
    so_far
    # Set A's list is ten times the small one's: once is enough at 1 thread.
    if [ -n "$seta" ]; then
      measure "$t" "$seta" 1 "set A's proportions, " || return 1
      so_far
    fi
  done
  # Issue 17's target, set A's proportions at the last count, in three rounds (the loop's
  # was the first): one round is one sample, and these machines are noisy (docs/DESIGN.md,
  # "Scaling model"). The ratios round by round and their median, on the whole process's
  # seconds and in-process.
  if [ -n "$seta" ]; then
    # The last measure's two ratios, whole and in-process.
    ratios_of_line() { sed -n 's/.*, ratio \([0-9.]*\) (\([0-9.]*\) in-process).*/\1 \2/p' <<< "$line"; }
    local r pairs
    pairs=$(ratios_of_line)
    for r in 2 3; do
      measure "$last" "$seta" 1 "set A's proportions, round $r, " || return 1
      pairs="$pairs"$'\n'"$(ratios_of_line)"
    done
    # round_ratios K: the rounds' K-th ratios, "a / b / c"; middle_ratio K: their median.
    round_ratios() { cut -d' ' -f"$1" <<< "$pairs" | paste -sd/ | sed 's|/| / |g'; }
    middle_ratio() { cut -d' ' -f"$1" <<< "$pairs" | sort -n | sed -n 2p; }
    local read_ok
    read_ok=$(grep -c -x '[0-9.]* [0-9.]*' <<< "$pairs")
    rounds="; set A's proportions at $last threads, 3 rounds: "
    if [ "$read_ok" -eq 3 ]; then
      rounds="${rounds}ratio $(round_ratios 1), median $(middle_ratio 1) (in-process $(round_ratios 2), median $(middle_ratio 2))"
    else
      rounds="${rounds}FAILED: $read_ok ratios read"
    fi
    echo "${rounds#; }"
    so_far
    [[ "$rounds" != *FAILED* ]] || return 1
  fi
  # The last list again as two parts side by side (--part 0/2 and 1/2, half the last
  # count's threads each, shard files of their own; skipped at 1 thread): where one
  # conversion's writes queue on one file (docs/DESIGN.md, "Scaling model"), the parts are
  # faster. Both are waited for whatever happens, and a failure keeps the ratios above.
  local half=$(( last / 2 )) i written rc=0 pids=()
  if [ "$half" -ge 1 ]; then
    list_for "$last"  # the small photos' list at the last count (the loop ended on set A's)
    rm -rf "$out"
    t0=$EPOCHREALTIME
    for i in 0 1; do
      "$sp" convert "$root" "$out" --list "$work/jpegs.list" --size 256x256 --fit crop \
        --threads "$half" --part "$i/2" --json > "$work/part-$i.json" &
      pids+=($!)
    done
    wait "${pids[0]}" || rc=1
    wait "${pids[1]}" || rc=1
    t1=$EPOCHREALTIME
    # What the parts wrote, from their --json: every image of the list, once.
    written=$(sed -n 's/^  "written": *\([0-9]*\).*/\1/p' "$work/part-0.json" "$work/part-1.json" |
      awk '{s += $1} END {print s + 0}')
    if [ "$rc" -ne 0 ] || [ "$written" -ne "$n" ]; then
      parts="; the last list as 2 parts of $half threads: FAILED (exit $rc, $written of $n images written)"
      rc=1
    else
      parts="; the last list as 2 parts of $half threads side by side: $(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}') images/s"
    fi
    echo "$parts"
    so_far
  fi
  # convert_list T DEST JSON [ARGS...]: the list (list_for) at T threads into DEST, with
  # ARGS, --json into JSON; prints images/s on the conversion's own seconds and the resize's
  # and the write's thread-ms an image, then "|" and the shards' digest. Run in $(...): fails
  # printing the reason instead.
  convert_list() {
    local t=$1 dest=$2 json=$3
    shift 3
    rm -rf "$dest"
    if ! "$sp" convert "$root" "$dest" --list "$work/jpegs.list" --size 256x256 --fit crop \
         --threads "$t" --json "$@" > "$json"; then
      echo "the conversion at $t threads with '$*' failed"
      return 1
    fi
    if ! ls "$dest"/*.tfrecord > /dev/null 2>&1; then
      echo "the conversion at $t threads with '$*' wrote no shard"
      return 1
    fi
    local figures
    figures=$(sed -n 's/^  "seconds": *\([0-9.e-]*\).*/\1/p; s/^ *"resize": *\([0-9.e-]*\).*/\1/p
                     s/^ *"write": *\([0-9.e-]*\).*/\1/p' "$json" | paste -sd' ' |
      awk -v n="$n" 'NF == 3 && $1 > 0 {printf "%.0f images/s in-process, resize %.3f, write %.3f", n / $1, 1000 * $2 / n, 1000 * $3 / n}')
    if [ -z "$figures" ]; then
      echo "the conversion at $t threads with '$*' left no seconds and stages in its --json"
      return 1
    fi
    echo "$figures|$(cat "$dest"/*.tfrecord | sha256sum | cut -c1-16)"
  }
  # same_bytes WHAT: fails (the reason in $failed) where the shards differ from the first
  # conversion of the same list since $digest was emptied.
  same_bytes() {
    [ -z "$digest" ] || [ "$digest" = "$digest_now" ] || { failed="$1 changed the shards' bytes"; return 1; }
    digest=$digest_now
  }
  local once round digest digest_now failed=""
  # The last list with each write method (--write-method write: pwrite, which a file system
  # takes one at a time per file; map: copies into the file's mapping, side by side;
  # docs/DESIGN.md, "Scaling model"), into memory ($out) and onto this machine's disk
  # ($work), two rounds in turn: images/s on the conversion's own seconds, the write's
  # thread-ms an image; the same bytes. Skipped at 1 thread.
  local m where dest
  if [ "$last" -ge 2 ]; then
    list_for "$last"
    for where in memory disk; do
      dest=$out
      [ "$where" = disk ] && dest=$work/scaling-disk
      digest=""
      for round in 1 2; do
        for m in $([ "$round" = 1 ] && echo write map || echo map write); do
          once=$(convert_list "$last" "$dest" "$work/method.json" --write-method "$m") ||
            { failed="$where: $once"; break 3; }
          digest_now=${once##*|}
          same_bytes "--write-method $m ($where)" || break 3
          methods="$methods${methods:+; }$where ($(df --output=fstype "$(dirname "$dest")" | tail -1)) $m: ${once%|*}"
        done
      done
      rm -rf "$dest"
    done
    rm -rf "$out" "$work/scaling-disk"  # also where a failure broke out of the loops
    if [ -n "$failed" ]; then
      methods="$methods${methods:+; }FAILED: $failed"
      rc=1
      failed=""
    fi
    echo "write methods: $methods"
    methods="; write methods at $last threads (round by round): $methods"
    so_far
  fi
  # The resize's kernels side by side where this CPU has AVX-512 VNNI (the quads of taps,
  # lib/image/resize_avx512.cc, and where it has VBMI the transposes of
  # lib/image/resize_avx512vbmi.cc) against the AVX2 ones (SHARDPACK_RESIZE_KERNELS=avx2 and
  # avx512), at 1 thread and at the last count, two rounds in turn: images/s on the
  # conversion's own seconds (--json) and the resize's thread-ms an image; the shards must
  # be the same bytes. A failure is reported with what was measured before it.
  if grep -qw avx512_vnni /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo &&
     grep -qw avx512vl /proc/cpuinfo; then
    local k
    for t in $(printf '%s\n' 1 "$last" | sort -un); do
      list_for "$t"
      digest=""  # the same list, so the same shards whatever the kernels
      for round in 1 2; do
        for k in $([ "$round" = 1 ] && echo avx2 avx512 || echo avx512 avx2); do
          once=$(SHARDPACK_RESIZE_KERNELS=$k convert_list "$t" "$out" "$work/kernels.json") ||
            { failed="the $k kernels: $once"; break 3; }
          digest_now=${once##*|}
          same_bytes "the $k kernels at $t threads" || break 3
          kernels="$kernels${kernels:+; }$t threads $k: ${once%|*}"
        done
      done
    done
    if [ -n "$failed" ]; then
      kernels="$kernels${kernels:+; }FAILED: $failed"
      rc=1
    fi
    # The four ways of the resize alone, in one process (bench/micro_bench, medians of three,
    # µs): 1 quads of taps and VBMI transposes (the best), 2 AVX2, 3 quads with the AVX2
    # transposes, 4 the AVX2 sums with the VBMI transposes (without VBMI, 3 and 4 are 1 and 2).
    local micro
    if micro=$(timeout 90 "$kit/bin/micro_bench" \
         --benchmark_filter='BM_Resize(Crop|RandomCrop)/[1-4]$' --benchmark_repetitions=3 \
         --benchmark_report_aggregates_only=true 2>&1); then
      micro=$(awk '/_median/ {sub(/_median/, "", $1); printf "%s%s %.1f", (n++ ? ", " : ""), $1, $2 / 1000}' <<< "$micro")
    else
      micro="FAILED: micro_bench: $(tail -1 <<< "$micro")"
      rc=1
    fi
    kernels="$kernels; micro_bench (1 quads + VBMI transposes, 2 AVX2, 3 quads + AVX2 transposes, 4 AVX2 sums + VBMI transposes; medians of three, µs): $micro"
    echo "resize kernels: $kernels"
    kernels="; resize kernels (round by round): $kernels"
    so_far
  fi
  rm -rf "$out"
  so_far
  return "$rc"
}

# bench/write_scaling: threads writing records into one file by each write method (write:
# pwrite in 2 MiB chunks; map: copies into the file's mapping), and each thread into a file
# of its own (files: what parts get), into memory and onto this machine's disk, at 1, 2, 4,
# 8 and 16 threads (up to the cores): GB/s and CPU ms a MiB (docs/DESIGN.md, "Scaling
# model"). WRITE_SCALING_MIB a case, default 256.
step_write_scaling() {
  local counts="" t dir rows=""
  for t in 1 2 4 8 16; do
    [ "$t" -le "$cores" ] && counts="$counts${counts:+,}$t"
  done
  for dir in /dev/shm "$work"; do
    [ -d "$dir" ] && [ -w "$dir" ] || continue
    "$kit/bin/write_scaling" "$dir" "$counts" "${WRITE_SCALING_MIB:-256}" 1 \
      > "$work/write-scaling.txt" 2>&1 ||
      { summary "write_scaling $dir failed: $(tail -1 "$work/write-scaling.txt")"; return 1; }
    cat "$work/write-scaling.txt"
    rows="$rows${rows:+; }$(df --output=fstype "$dir" | tail -1) $dir:$(awk 'NR > 2 {printf "%s %s threads %s %s GB/s %s ms/MiB", (NR > 3 ? "," : ""), $2, $3, $4, $5}' "$work/write-scaling.txt")"
  done
  summary "records of 196,928 bytes into one file by method, or a file a thread (files), GB/s and CPU ms a MiB: $rows"
}

step_first_epoch() {
  local d=$work/first-epoch n=${FIRST_EPOCH_SAMPLES:-30000} order f how t0 bytes line
  local copies="" ratios=""
  # Free page reporting needs a virtio balloon (device 0x0005) that negotiated it (feature
  # bit 5), at a page_reporting_order no higher than the largest free block the kernel
  # keeps (the last column of /proc/buddyinfo), as io::HostReclaimsFreeMemory decides;
  # page_reporting_order alone exists on kernels with no such device.
  local reporting max_order
  order="none (no virtio balloon)"
  for f in /sys/bus/virtio/devices/*; do
    [ "$(cat "$f/device" 2>/dev/null)" = 0x0005 ] || continue
    if [ "$(cut -c6 "$f/features" 2>/dev/null)" = 1 ]; then
      reporting=$(cat /sys/module/page_reporting/parameters/page_reporting_order 2>/dev/null)
      max_order=$(awk '{print NF - 5}' /proc/buddyinfo 2>/dev/null | sort -n | tail -1)
      if [ -n "$reporting" ] && [ -n "$max_order" ] && [ "$reporting" -gt "$max_order" ]; then
        order="none (page_reporting_order $reporting above the largest block, order $max_order)"
      else
        order="on, order $reporting"
      fi
    else
      order="none (a virtio balloon without it)"
    fi
  done
  echo "free page reporting: $order"
  "$kit/bin/first_touch" 1024 1 3 3 | tee "$work/first-touch"
  rm -rf "$d" && mkdir -p "$d"
  # rate: GB/s of the dataset's bytes since t0.
  rate() { awk -v a="$t0" -v b="$EPOCHREALTIME" -v s="$bytes" 'BEGIN {printf "%.2f GB/s", s / (b - a) / 1e9}'; }
  t0=$EPOCHREALTIME
  "$kit/bin/write_synthetic" "$d/written" --samples "$n" --size 256x256 --classes 100 \
    --backend tfrecord > /dev/null || return 1
  bytes=$(du -sb "$d/written" | cut -f1)
  copies="written $(rate)"
  # The same bytes copied from the page cache in record-sized and in 2 MiB writes.
  for how in 196928 2097152; do
    mkdir -p "$d/$how"
    t0=$EPOCHREALTIME
    for f in "$d/written"/*; do dd if="$f" of="$d/$how/${f##*/}" bs="$how" status=none || return 1; done
    copies="$copies, copied in $how-byte writes $(rate)"
  done
  # The kit's photos converted (listed again and again to about as many samples) by pwrite
  # record by record and in 2 MiB chunks (convert --write-method write --write-chunk), and
  # through the files' mappings (--write-method map): the same bytes, and what each way of
  # writing costs the conversion.
  local kinds="written 196928 2097152" list=$work/first-epoch.list files chunk write_args
  small_jpeg_list "$kit/photos" > "$list.once"
  files=$(wc -l < "$list.once")
  if [ "$files" -gt 0 ]; then
    repeat "$list.once" $(( (n + files - 1) / files )) > "$list"
    for chunk in 0 2097152 map; do
      write_args=(--write-method write --write-chunk "$chunk")
      [ "$chunk" = map ] && write_args=(--write-method map)
      t0=$EPOCHREALTIME
      "$sp" convert "$kit/photos" "$d/converted-$chunk" --list "$list" --size 256x256 \
        --fit crop --threads "$cores" "${write_args[@]}" --quiet > /dev/null || return 1
      bytes=$(du -sb "$d/converted-$chunk" | cut -f1)
      copies="$copies, converted ($(wc -l < "$list") photos) with ${write_args[*]} $(rate)"
      kinds="$kinds converted-$chunk"
    done
    for chunk in 2097152 map; do
      cmp <(cat "$d/converted-0"/*.tfrecord) <(cat "$d/converted-$chunk"/*.tfrecord) ||
        { summary "convert ($chunk) changed the shards' bytes"; return 1; }
    done
  fi
  # Two processes over each: the first after the writes, and the next.
  for how in $kinds; do
    for run in 1 2; do
      line=$("$sp" bench "$d/$how" --epochs 4 --no-baseline --shuffle global --threads "$cores" |
        grep '^| global') || return 1
      echo "$how, process $run: $line"
      ratios="$ratios${ratios:+; }$how #$run $(awk -F'|' '{gsub(/ /, ""); printf "%.2f (%s of %s GB/s)", $8 / $5, $8, $5}' <<< "$line")"
    done
  done
  # The cold epoch with huge pages off and on (LoaderOptions::huge_pages): the written
  # shards dropped from the page cache (dd iflag=nocache), a process's first epoch from the
  # disk, then the next process's first epoch against its later ones (what the cold epoch
  # left: 4 KiB or 2 MiB folios). Two rounds, the ways alternating. First, which way auto
  # chooses here: the I/O path column of a bench run with the defaults.
  local mode round cold="" auto
  auto=$("$sp" bench "$d/written" --epochs 1 --no-baseline --shuffle global --threads "$cores" |
    grep '^| global' | awk -F'|' '{print $11}' | sed 's/^ *//; s/ *$//')
  [ -n "$auto" ] || auto="unknown (the bench run failed)"
  sync
  for round in 1 2; do
    for mode in off on; do
      for f in "$d/written"/*; do dd if="$f" iflag=nocache count=0 status=none; done
      line=$("$sp" bench "$d/written" --epochs 2 --no-baseline --shuffle global \
        --threads "$cores" --huge-pages "$mode" | grep '^| global') || return 1
      echo "cold, huge pages $mode, round $round: $line"
      cold="$cold${cold:+; }$mode #$round cold $(awk -F'|' '{gsub(/ /, ""); print $8}' <<< "$line")"
      line=$("$sp" bench "$d/written" --epochs 4 --no-baseline --shuffle global \
        --threads "$cores" --huge-pages "$mode" | grep '^| global') || return 1
      echo "next process, huge pages $mode, round $round: $line"
      cold="$cold next $(awk -F'|' '{gsub(/ /, ""); printf "%.2f", $8 / $5}' <<< "$line")"
    done
  done
  grep FilePmdMapped /proc/meminfo
  rm -rf "$d"
  summary "free page reporting $order; first touch $(awk '{print $5}' "$work/first-touch" | tr '\n' ' ')GB/s; $copies; first/later epoch: $ratios; huge pages auto: $auto; cold GB/s and next process's first/later: $cold"
}

step_python_install() {
  local whl
  whl=$(ls "$kit"/shardpack-wheel/shardpack-*.whl 2>/dev/null | head -1)
  [ -n "$whl" ] || { echo "the kit has no wheel (shardpack-wheel/)"; return 1; }
  command -v "$py" >/dev/null || { skip "no $py"; return; }
  rm -rf "$pkg_site"
  "$py" -m pip install -q --no-index --no-deps --no-compile --target "$pkg_site" "$whl" || return 1
  PYTHONPATH="$pkg_site" "$py" -c 'import sys, shardpack
assert shardpack.__file__.startswith(sys.argv[1]), shardpack.__file__
print(shardpack.__file__, shardpack.__version__)' "$pkg_site" || return 1
  "$pkg_site/bin/shardpack" --version || return 1
  summary "$(basename "$whl"), pip-installed for $("$py" --version 2>&1)"
}

step_python_tests() {
  [ -d "$pkg_site/shardpack" ] || { skip "no package (step python-install)"; return; }
  # pytest from the kit's wheels, into a folder of its own (the machine's packages stay).
  # conftest.py takes the tests' parent folder (the kit's python/) off sys.path; the
  # package and its distribution's metadata (the tests check the version) are the wheel's.
  local site="$work/site"
  if ls "$kit"/wheels/*.whl >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$kit"/wheels/*.whl ||
      return 1
  fi
  PYTHONPATH="$site" "$py" -c "import pytest" 2>/dev/null || { skip "no pytest for $py"; return; }
  (cd "$kit/python" && PYTHONPATH="$pkg_site:$site" "$py" -m pytest -q -p no:cacheprovider tests) |
    tee "$work/pytest"
  local rc=${PIPESTATUS[0]}
  summary "$(tail -1 "$work/pytest")"
  return "$rc"
}

step_loader() {
  [ -d "$pkg_site/shardpack" ] || { skip "no package (step python-install)"; return; }
  [ -f "$work/ds/manifest.json" ] || { skip "no dataset (step dataset)"; return; }
  PYTHONPATH="$pkg_site" "$py" "$kit/gpu-check/loader_throughput.py" "$work/ds" \
    --threads "$cores" | tee "$work/loader"
  local rc=${PIPESTATUS[0]}
  summary "$(tr '\n' ';' < "$work/loader" | cut -c1-400)"
  return "$rc"
}

# Samples GPU utilisation every 250 ms while "$@" runs; prints the mean (percent).
with_utilisation() {
  nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 250 \
    > "$work/util" 2>/dev/null &
  local sampler=$!
  "$@"
  local rc=$?
  kill "$sampler" 2>/dev/null
  wait "$sampler" 2>/dev/null
  awk '{s += $1; n++} END {printf "GPU utilisation (nvidia-smi, mean of %d samples): %.0f%%\n", n, n ? s / n : 0}' "$work/util"
  return $rc
}

step_train() {
  [ -d "$pkg_site/shardpack" ] || { skip "no package (step python-install)"; return; }
  [ -f "$work/ds/manifest.json" ] || { skip "no dataset (step dataset)"; return; }
  echo "== shardpack.Loader, samples/train_torch.py"
  PYTHONPATH="$pkg_site" with_utilisation "$py" "$kit/samples/train_torch.py" "$work/ds" \
    --device cuda --epochs 3 --batch-size 256 --size 224 --threads "$cores" | tee "$work/train"
  local rc=${PIPESTATUS[0]}
  echo "== torchvision ImageFolder + DataLoader"
  with_utilisation "$py" "$kit/gpu-check/imagefolder_reference.py" "$work/images" \
    --epochs 2 --batch-size 256 --size 224 --workers "$cores" | tee "$work/reference"
  local rc2=${PIPESTATUS[0]}
  summary "shardpack: $(grep 'images/s' "$work/train" | tail -1 | cut -c1-120); ImageFolder: $(grep 'images/s' "$work/reference" | tail -1 | cut -c1-120)"
  [ "$rc" -eq 0 ] && [ "$rc2" -eq 0 ]
}

# The report, Markdown for people and JSON for tools, from the results so far.
write_report() {
  local name status seconds text
  {
    echo "# shardpack GPU check"
    echo
    echo "Kit revision $(cat "$kit/REVISION" 2>/dev/null), $(date -u +%Y-%m-%dT%H:%M:%SZ), $(hostname), $cores cores."
    echo
    echo "| step | status | seconds | result |"
    echo "|---|---|---|---|"
    while IFS=$'\t' read -r name status seconds text; do
      echo "| $name | $status | $seconds | ${text//|//} |"
    done < "$work/results"
  } > "$report/report.md"
  write_logs
  "$py" - "$work/results" "$report/report.json" "$(cat "$kit/REVISION" 2>/dev/null)" \
    2>/dev/null <<'PY' && return
import json, sys
rows = [line.rstrip("\n").split("\t", 3) for line in open(sys.argv[1]) if line.strip()]
steps = [{"step": r[0], "status": r[1], "seconds": int(r[2]), "result": r[3]} for r in rows]
json.dump({"revision": sys.argv[3], "steps": steps}, open(sys.argv[2], "w"), indent=2)
PY
  # No Python: the same without the result texts.
  awk -F'\t' 'BEGIN {printf "{\"steps\": ["} {printf "%s{\"step\": \"%s\", \"status\": \"%s\", \"seconds\": %s}", NR > 1 ? ", " : "", $1, $2, $3} END {print "]}"}' \
    "$work/results" > "$report/report.json"
}

# The logs so far, in one file.
write_logs() { tar -C "$work" -czf "$report/logs.tar.gz" logs; }

declare -A limits=([gpu]=60 [libraries]=60 [cuda-tests]=300 [memcheck]=480 [racecheck]=480
                   [dataset]=300 [bench]=300 [python-install]=120 [python-tests]=400 [loader]=300 [train]=600 [convert-scaling]=360 [write-scaling]=90
                   [first-epoch]=240)
# What the steps' subshells (bash -c, below) see.
export -f $(declare -F | awk '{print $3}')
export kit report work py cores pkg_site cuda_filter sanitizer_filter sp per_class
failed=0
for name in $steps; do
  fn=step_${name//-/_}
  declare -F "$fn" >/dev/null || { echo "gpu-check: no step $name" >&2; exit 2; }
  : > "$work/summary"
  start=$SECONDS
  left=$((budget - SECONDS))
  limit=${limits[$name]}
  [ "$left" -lt "$limit" ] && limit=$left
  # The time limit: the step runs in a subshell that timeout can stop with all it started.
  if [ "$limit" -lt 20 ]; then
    echo "only $left s left of the check's $budget s" > "$work/summary"
    rc=77
  else
    timeout --kill-after=10 "$limit" bash -c "$fn" > "$work/logs/$name.log" 2>&1
    rc=$?
  fi
  seconds=$((SECONDS - start))
  text=$(cat "$work/summary")
  case $rc in
    0) status=passed ;;
    77) status=skipped ;;
    124 | 137) status=failed; text="over its $limit s limit. $text" ;;
    *) status=failed ;;
  esac
  [ -n "$text" ] || text="exit status $rc (see logs/$name.log)"
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$seconds" "$text" >> "$work/results"
  printf 'gpu-check: %-13s %-8s %4d s  %s\n' "$name" "$status" "$seconds" "$text"
  write_report
  if [ "$name" = gpu ] && [ $rc -ne 0 ]; then
    echo "gpu-check: no GPU here ($text): nothing else is run" >&2
    failed=3
    break
  fi
  [ "$status" = failed ] && failed=1
done

echo "gpu-check: report in $report/report.md"
exit $failed
