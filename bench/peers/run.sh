#!/usr/bin/env bash
# The peer benchmark of issue 6: shardpack against the tools people use instead, on the same
# images, with the same output (256x256x3 uint8; batches of 256 when reading), on the same
# cores, in one run, medians of REPS repetitions interleaved round by round, each ratio
# against shardpack measured in that run.
#
#   conversion  shardpack convert (C++); bench/pillow_convert.py (Pillow + the `tfrecord`
#               package's writer, processes); bench/peers/tf_convert.py (TensorFlow decode +
#               resize + TFRecordWriter, the build_image_data.py way)
#   reading     shardpack's Loader, C++ (`shardpack bench`) and through the Python binding
#               (the reference); the JPEG folder through torchvision ImageFolder +
#               DataLoader; DALI's TFRecord reader (CPU) and tf.data on our TFRecord shards
#               and .idx files; python-lmdb on our LMDB shards; FFCV and MosaicML Streaming
#               on the same pixels written in their own formats, where they install
#               (bench/peers/readers.py has each reader)
#
# Every method gets THREADS cores (taskset) and THREADS threads or processes. Before each
# timed run the script waits while a compiler runs on this machine (at most QUIET_CAP s;
# a run that had to go on anyway is named in the notes).
#
# Sizes (issue 23: on 3,000 samples an epoch is 11 batches, and a reader's per-epoch
# start-up weighs as much as its reading): the readers are measured on datasets of each of
# SIZES samples (default 30,000, Caltech-256's size, and 3,000), each the images of the
# corpus evenly spread, converted once (untimed) into every reader's format. Each reader
# reports its first epoch, its steady state (epochs 2..) and its first-batch latency apart
# (bench/peers/readers.py says how). The datasets live on disk (DATA_DIR: at 30,000 samples
# each format is 6 GB, and the four do not fit in memory at once); each is read into the
# page cache right before its reader runs, so the disk is not what is measured. The
# conversion rounds time CONVERT_N images (default 3,000: a converter's rate per image does
# not depend on the dataset's size), from memory (SHM), the JPEGs read once before timing.
#
# Which Python runs what (each installed here, idempotently, stamp files as in
# scripts/install-interop.sh):
#   pyenv python3 (scripts/install-python.sh: shardpack binding, torch, torchvision, psutil)
#       readers.py shardpack-py and torch-jpeg
#   out/venv-interop (scripts/install-interop.sh + bench/peers/requirements.txt:
#       TensorFlow, DALI, python-lmdb, crc32c, psutil, matplotlib)
#       tf_convert.py, readers.py dali, tfdata and lmdb, report.py
#   out/bench/venv (bench/requirements-pillow.txt, shared with bench/convert_bench.sh)
#       pillow_convert.py
#   out/venv-peers-ffcv, out/venv-peers-mosaic (bench/peers/requirements-ffcv.txt,
#       requirements-mosaic.txt; venvs of pyenv's python3 that reuse its torch)
#       write_formats.py and readers.py ffcv / mosaic
#
# Writes out/bench/peers.md (the table, also printed), docs/peers.png (the chart), and the
# raw runs in out/bench/peers-runs.jsonl.
# Usage: bash bench/peers/run.sh      (about 35 minutes on 2 cores, installs and the
#   30,000-image corpus apart)
# Environment: SIZES (samples of the read datasets, default "30000 3000"), CONVERT_N
#   (images converted in the timed conversion rounds, default 3000), REPS (default 3),
#   IMAGES (corpus of bench/make-bench-images.sh, default out/bench-images, made
#   with the largest size if it holds fewer images), DATA_DIR (default out/bench/peers-data),
#   SHARDPACK_BIN (default build-peers/tools/shardpack, a Release build made and kept up to
#   date here), THREADS (default 2), READ_SECONDS (least time of a reader's steady epochs,
#   default 8), READ_EPOCHS (fewest epochs, default 3), READ_MAX_SECONDS (a reader's cap,
#   default 60), CPP_EPOCHS (default 30), QUIET_CAP (default 600), SHM (default /dev/shm),
#   PEERS_EXTRA=0 to leave FFCV and MosaicML Streaming out.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.."
sizes=${SIZES:-30000 3000}
convert_n=${CONVERT_N:-3000}
n=$(tr ' ' '\n' <<< "$sizes $convert_n" | sort -n | tail -1)  # the corpus: the largest
reps=${REPS:-3}
images=${IMAGES:-out/bench-images}
shardpack=${SHARDPACK_BIN:-build-peers/tools/shardpack}
threads=${THREADS:-2}
read_seconds=${READ_SECONDS:-8}
read_epochs=${READ_EPOCHS:-3}
read_max_seconds=${READ_MAX_SECONDS:-60}
data=${DATA_DIR:-out/bench/peers-data}
cpp_epochs=${CPP_EPOCHS:-30}
quiet_cap=${QUIET_CAP:-600}
extra=${PEERS_EXTRA:-1}
batch=256
size=256
out=out/bench
work=${SHM:-/dev/shm}/shardpack-peers.$$
runs=$out/peers-runs.jsonl
mkdir -p "$out" docs
trap 'rm -rf "$work"' EXIT
mkdir -p "$work" "$data"
say() { echo "peers: $*" >&2; }
die() { say "$*"; exit 2; }
[ "$(nproc)" -ge "$threads" ] || die "THREADS=$threads but this machine has $(nproc) cores"
pin=(taskset -c "0-$((threads - 1))")  # the same cores for every method
notes=()
declare -A unavailable=()

# ---- shardpack: the CLI, a Release build of its own unless SHARDPACK_BIN names one --------
if [ -z "${SHARDPACK_BIN:-}" ]; then
  if [ ! -f build-peers/CMakeCache.txt ]; then
    say "configuring build-peers (Release, no CUDA)"
    cmake -S . -B build-peers -DCMAKE_BUILD_TYPE=Release -DSHARDPACK_WITH_CUDA=OFF \
      -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_SAMPLES=OFF -DSHARDPACK_BUILD_BENCH=OFF \
      > "$out/peers-build.log" 2>&1 || { cat "$out/peers-build.log"; die "cmake failed"; }
  fi
  cmake --build build-peers -j "$(nproc)" --target shardpack_cli >> "$out/peers-build.log" 2>&1 ||
    { tail -30 "$out/peers-build.log"; die "building build-peers failed"; }
fi
[ -x "$shardpack" ] || die "$shardpack is missing"

# ---- Python environments -----------------------------------------------------------------
python3 -c 'import shardpack, torch, torchvision, psutil' 2> /dev/null ||
  bash scripts/install-python.sh
bash scripts/install-interop.sh > "$out/peers-install.log" 2>&1 ||
  { cat "$out/peers-install.log"; die "scripts/install-interop.sh failed"; }
interop=out/venv-interop/bin/python
stamp=out/venv-interop/.peers-$(sha256sum bench/peers/requirements.txt | cut -c1-16)
if [ ! -f "$stamp" ]; then
  say "installing bench/peers/requirements.txt into out/venv-interop"
  "$interop" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
    -r bench/peers/requirements.txt
  touch "$stamp"
fi

# Pillow 13 + tfrecord + crc32c, the venv and stamp of bench/convert_bench.sh.
pillow_venv=$out/venv
pillow_stamp=$pillow_venv/.installed-$(cksum < bench/requirements-pillow.txt | cut -d' ' -f1)
if [ ! -f "$pillow_stamp" ]; then
  rm -rf "$pillow_venv"
  say "making $pillow_venv and installing bench/requirements-pillow.txt"
  python3 -m venv "$pillow_venv"
  "$pillow_venv/bin/pip" install -q -r bench/requirements-pillow.txt
  touch "$pillow_stamp"
fi
pillow_py=$pillow_venv/bin/python

# FFCV and MosaicML Streaming, each in a venv of pyenv's python3 that sees its torch
# (--system-site-packages). The requirement files say why some lines go in with --no-deps.
# A failed install is remembered with its reason (delete the venv to try again).
install_extra() {  # name -> 0 when usable; else its reason in unavailable[name]
  local name=$1 venv=out/venv-peers-$1 req=bench/peers/requirements-$1.txt sum log
  sum=$(sha256sum "$req" | cut -c1-16)
  log=$out/peers-install-$name.log
  if [ -f "$venv/.failed-$sum" ]; then
    unavailable[$name]="$(cat "$venv/.failed-$sum") (recorded earlier; rm -rf $venv to retry)"
    return 1
  fi
  [ -f "$venv/.installed-$sum" ] && return 0
  say "installing $name into $venv (log: $log)"
  rm -rf "$venv"
  python3 -m venv --system-site-packages "$venv"
  local pip=("$venv/bin/python" -m pip install --disable-pip-version-check
             --root-user-action=ignore)
  if timeout 900 "${pip[@]}" -r <(grep -v 'no-deps' "$req") > "$log" 2>&1 &&
     timeout 900 "${pip[@]}" --no-deps \
       -r <(grep 'no-deps' "$req" | sed 's/ *#.*//') >> "$log" 2>&1 &&
     "$venv/bin/python" -c "import ${2}" >> "$log" 2>&1; then
    touch "$venv/.installed-$sum"
    return 0
  fi
  local why
  why=$(grep -E 'Error|error:|Could not|No matching' "$log" | grep -v '^ *note:' | tail -1 |
        sed 's/^ *//; s/|/\\|/g')
  unavailable[$name]="pip install from PyPI failed: ${why:-see $log}"
  echo "${unavailable[$name]}" > "$venv/.failed-$sum"
  return 1
}
if [ "$extra" = 1 ]; then
  # FFCV's sdist compiles against these (found by pkg-config).
  for pkg in libopencv-dev libturbojpeg0-dev pkg-config; do
    dpkg-query -W -f='${Status}' "$pkg" 2> /dev/null | grep -q "install ok installed" ||
      { say "apt-get install $pkg (for FFCV)"; apt-get install -y -qq --no-install-recommends \
          "$pkg" > /dev/null 2>&1 || say "apt-get install $pkg failed"; }
  done
  install_extra ffcv 'ffcv.loader, ffcv.writer' || say "FFCV: ${unavailable[ffcv]}"
  install_extra mosaic 'streaming' || say "MosaicML Streaming: ${unavailable[mosaic]}"
else
  unavailable[ffcv]="left out (PEERS_EXTRA=0)"
  unavailable[mosaic]="left out (PEERS_EXTRA=0)"
fi

# ---- the images: each size's share of the corpus, evenly spread, as a class-folder tree ----
total=0
[ -f "$images/manifest-scale.tsv" ] && total=$(($(wc -l < "$images/manifest-scale.tsv") - 1))
if [ "$total" -lt "$n" ]; then
  say "making $n corpus images in $images (bench/make-bench-images.sh)"
  bash bench/make-bench-images.sh "$images" "$n"
  total=$(($(wc -l < "$images/manifest-scale.tsv") - 1))
fi
[ "$total" -ge "$n" ] || die "$images holds $total images, fewer than $n (IMAGES=another folder)"
# "relative/path label" lines (label: class folder index), as `shardpack convert --list`
# takes them; every converter gets the same files in the same order, and ImageFolder a tree
# of links to exactly those files.
make_list() {  # COUNT -> $work/list-COUNT and the link tree $work/jpeg-COUNT
  local count=$1 tree=$work/jpeg-$1
  awk -F'\t' -v OFS=' ' -v n="$count" -v t="$total" 'NR > 1 {
      i = NR - 1
      if (int(i * n / t) == int((i - 1) * n / t)) next
      if (!($2 in label)) label[$2] = k++
      print $1, label[$2] }' "$images/manifest-scale.tsv" > "$work/list-$count"
  cut -d' ' -f1 "$work/list-$count" | sed 's|/[^/]*$||' | sort -u | sed "s|^|$tree/|" |
    xargs mkdir -p
  while read -r path _; do ln -s "$PWD/$images/scale/$path" "$tree/$path"; done \
    < "$work/list-$count"
}
for count in $sizes $convert_n; do [ -f "$work/list-$count" ] || make_list "$count"; done
jpeg=$work/jpeg-$convert_n  # what the conversion rounds convert
list=$work/list-$convert_n
cat "$images/scale"/*/* > /dev/null  # into the page cache

# ---- a quiet machine: no compiler running, three checks in a row ------------------------
compiling() {
  local name
  for name in cc1plus cc1 collect2 ld lto1 nvcc rustc; do
    pgrep -x "$name" > /dev/null && return 0
  done
  return 1
}
round=0
wait_quiet() {  # what (for the notes)
  local waited=0 quiet=0
  while [ "$quiet" -lt 3 ]; do
    if compiling; then
      quiet=0
      if [ "$waited" -ge "$quiet_cap" ]; then
        notes+=("round $round: $1 started while a compiler was still running (after the \
${quiet_cap} s cap)")
        return
      fi
      [ "$waited" -gt 0 ] || say "waiting for a compiler to finish before $1"
      sleep 5
      waited=$((waited + 5))
    else
      quiet=$((quiet + 1))
      sleep 1
    fi
  done
}

# ---- the datasets every reader reads, one set per size (untimed) --------------------------
declare -A samples_of=()
declare -A write_failed=()
for ns in $sizes; do
  d=$data/$ns
  rm -rf "$d"
  mkdir -p "$d"
  say "converting $ns images once for the readers ($d)"
  for fmt in tfrecord lmdb; do
    "$shardpack" convert "$work/jpeg-$ns" "$d/sp-$fmt" --list "$work/list-$ns" \
      --size ${size}x${size} --fit crop --threads "$threads" --format "$fmt" --quiet --json \
      > "$d/sp-$fmt.json" || die "shardpack convert ($fmt) failed"
  done
  samples_of[$ns]=$(sed -n 's/.*"written": *\([0-9]*\).*/\1/p' "$d/sp-tfrecord.json")
  [ "${samples_of[$ns]}" -ge "$batch" ] ||
    die "only ${samples_of[$ns]} samples: each size must give at least one batch"
  for name in ffcv mosaic; do
    [ -z "${unavailable[$name]:-}" ] || continue
    target=$d/$name; [ "$name" = ffcv ] && target=$d/ffcv.beton
    if ! out/venv-peers-$name/bin/python bench/peers/write_formats.py "$name" "$d/sp-tfrecord" \
        "$target" --threads "$threads" > "$d/write-$name.log" 2>&1; then
      write_failed[$name/$ns]="installed, but writing its format failed: $(grep -E 'Error' \
        "$d/write-$name.log" | tail -1)"
      say "$name ($ns samples): ${write_failed[$name/$ns]}"
    fi
  done
done

# ---- timed rounds ------------------------------------------------------------------------
: > "$runs"
tool_value() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<< "$2"; }

convert_round() {  # rep
  local rep=$1 line secs conv
  # shardpack: its own JSON gives the seconds (from the first file to the published dataset).
  wait_quiet "shardpack convert"
  rm -rf "$work/c-sp"
  /usr/bin/time -f '%e %U %S' -o "$work/time" "${pin[@]}" "$shardpack" convert "$jpeg" \
    "$work/c-sp" --list "$list" --size ${size}x${size} --fit crop --threads "$threads" \
    --quiet --json > "$work/c-sp.json" || die "shardpack convert failed"
  secs=$(sed -n 's/.*"seconds": *\([0-9.]*\).*/\1/p' "$work/c-sp.json")
  conv=$(sed -n 's/.*"written": *\([0-9]*\).*/\1/p' "$work/c-sp.json")
  record_convert shardpack "$rep" "$conv" "$secs" "$(awk '{ print $2 + $3 }' "$work/time")" \
    "$("$shardpack" --version)"
  rm -rf "$work/c-sp"
  # Pillow: its seconds from before the pool to the closed file; CPU of it and its pool.
  wait_quiet "the Pillow converter"
  /usr/bin/time -f '%e %U %S' -o "$work/time" "${pin[@]}" "$pillow_py" bench/pillow_convert.py \
    "$jpeg" "$list" $size $size "$threads" tfrecord --out "$work/c-pil.tfrecord" \
    > "$work/c-pil.out" || die "bench/pillow_convert.py failed"
  line=$(tail -1 "$work/c-pil.out")
  grep -q 'writer=tfrecord' <<< "$line" || die "pillow_convert.py used its fallback writer: $line"
  record_convert pillow "$rep" "$(tool_value converted "$line")" "$(tool_value seconds "$line")" \
    "$(awk '{ print $2 + $3 }' "$work/time")" \
    "Pillow $("$pillow_py" -c 'import PIL; print(PIL.__version__)')"
  rm -f "$work/c-pil.tfrecord"
  # TensorFlow: seconds and CPU from its first image to the closed file (import left out).
  wait_quiet "the TensorFlow converter"
  "${pin[@]}" "$interop" bench/peers/tf_convert.py "$jpeg" "$list" $size $size "$threads" \
    --out "$work/c-tf.tfrecord" > "$work/c-tf.out" 2> "$work/c-tf.err" ||
    { tail -5 "$work/c-tf.err"; die "bench/peers/tf_convert.py failed"; }
  line=$(tail -1 "$work/c-tf.out")
  record_convert tf "$rep" "$(tool_value converted "$line")" "$(tool_value seconds "$line")" \
    "$(tool_value cpu_seconds "$line")" \
    "tensorflow $("$interop" -c 'import importlib.metadata as m; print(m.version("tensorflow-cpu"))')"
  rm -f "$work/c-tf.tfrecord"
}

record_convert() {  # method rep converted seconds cpu_seconds version
  awk -v m="$1" -v r="$2" -v n="$3" -v s="$4" -v c="$5" -v v="$6" 'BEGIN {
    printf "{\"kind\": \"convert\", \"method\": \"%s\", \"rep\": %d, \"samples\": %d, ", m, r, n
    printf "\"seconds\": %s, \"samples_per_s\": %.3f, \"cpu_seconds\": %s, ", s, n / s, c
    printf "\"cpu_cores\": %.3f, \"samples_per_cpu_s\": %.3f, \"version\": \"%s\"}\n", c / s, n / c, v
  }' >> "$runs"
}

warm() {  # PATH...: into the page cache, the one a reader then reads from
  find "$@" -type f -exec cat {} + > /dev/null
}

read_one() {  # rep size method python data [threads [row id]]
  local rep=$1 ns=$2 reader=$3 python=$4 path=$5 t=${6:-$threads} method=${7:-$3} json
  [ -z "${unavailable[$method]:-}" ] || return 0
  if [ -n "${write_failed[$reader/$ns]:-}" ]; then
    notes+=("$method at $ns samples: ${write_failed[$reader/$ns]}")
    return 0
  fi
  warm "$path"
  wait_quiet "$method"
  if json=$("${pin[@]}" "$python" bench/peers/readers.py "$reader" "$path" \
        --samples "${samples_of[$ns]}" --batch-size $batch --size $size --threads "$t" \
        --epochs "$read_epochs" --seconds "$read_seconds" --max-seconds "$read_max_seconds" \
        2> "$work/read-$method.err" | tail -1) && [[ $json == "{"* ]]; then
    json=${json/\"method\": \"$reader\"/\"method\": \"$method\"}
    echo "${json%\}}, \"kind\": \"read\", \"rep\": $rep, \"size\": $ns}" >> "$runs"
  else
    unavailable[$method]="the reader failed: $(grep -E 'Error|error' "$work/read-$method.err" |
      tail -1 | cut -c1-200)"
    say "$method: ${unavailable[$method]} (stderr: $work/read-$method.err)"
    cp "$work/read-$method.err" "$out/peers-read-$method.err"
  fi
}

read_cpp() {  # rep size backend method: shardpack bench's first epoch and later median
  local rep=$1 ns=$2 backend=$3 method=$4 row sps first
  warm "$data/$ns/sp-$backend"
  wait_quiet "shardpack bench ($backend)"
  row=$("${pin[@]}" "$shardpack" bench "$data/$ns/sp-$backend" --threads "$threads" \
        --shuffle global --epochs "$cpp_epochs" --batch-size $batch | grep '^| global |') ||
    die "shardpack bench failed on $backend"
  sps=$(awk -F'|' '{ gsub(/ /, "", $4); print $4 }' <<< "$row")
  # The first epoch's rate, from its GB/s against the later epochs' (same bytes per sample).
  first=$(awk -F'|' '{ for (i = 4; i <= 8; i++) gsub(/ /, "", $i); printf "%.0f", $4 * $8 / $5 }' \
    <<< "$row")
  printf '{"kind": "read", "method": "%s", "rep": %d, "size": %d, "samples_per_s": %s, "epoch1_per_s": %s, "cpu_cores": null, "samples_per_cpu_s": null, "version": "%s"}\n' \
    "$method" "$rep" "$ns" "$sps" "$first" "$("$shardpack" --version)" >> "$runs"
}

for rep in $(seq 1 "$reps"); do
  round=$rep
  say "round $rep/$reps: conversion"
  convert_round "$rep"
  for ns in $sizes; do
    say "round $rep/$reps: reading, $ns samples"
    d=$data/$ns
    read_cpp "$rep" "$ns" tfrecord shardpack-cpp
    read_cpp "$rep" "$ns" lmdb shardpack-cpp-lmdb
    read_one "$rep" "$ns" shardpack-py python3 "$d/sp-tfrecord"
    read_one "$rep" "$ns" dali "$interop" "$d/sp-tfrecord"
    read_one "$rep" "$ns" tfdata "$interop" "$d/sp-tfrecord"
    read_one "$rep" "$ns" lmdb "$interop" "$d/sp-lmdb"
    # Python threads share the GIL (the Example parse holds it): one thread may do better.
    [ "$threads" = 1 ] || read_one "$rep" "$ns" lmdb "$interop" "$d/sp-lmdb" 1 lmdb-1
    read_one "$rep" "$ns" ffcv out/venv-peers-ffcv/bin/python "$d/ffcv.beton"
    read_one "$rep" "$ns" mosaic out/venv-peers-mosaic/bin/python "$d/mosaic"
    read_one "$rep" "$ns" torch-jpeg python3 "$work/jpeg-$ns"
  done
done

# ---- the report ----------------------------------------------------------------------------
for m in "${!unavailable[@]}"; do
  # A method that failed after some repetitions keeps those; say so.
  grep -q "\"method\": \"$m\"" "$runs" &&
    notes+=("$m: some repetitions failed: ${unavailable[$m]}") && unset "unavailable[$m]"
done
{
  printf '{"cpu": "%s", "cores": %d, "date": "%s", ' \
    "$(lscpu | sed -n 's/^Model name: *//p' | head -1)" "$threads" "$(date -u +%Y-%m-%dT%H:%MZ)"
  printf '"commit": "%s", "n_images": %d, "sizes": [%s], "reps": %d, "batch": %d, ' \
    "$(git rev-parse --short HEAD 2> /dev/null || echo unknown)$(git diff --quiet HEAD 2> /dev/null || echo ' + uncommitted changes')" \
    "$convert_n" "$(for ns in $sizes; do printf '%s,' "${samples_of[$ns]}"; done | sed 's/,$//')" \
    "$reps" "$batch"
  printf '"seconds": %s, "epochs": %d, "max_seconds": %s, "cpp_epochs": %d, "quiet_cap": %d, ' \
    "$read_seconds" "$read_epochs" "$read_max_seconds" "$cpp_epochs" "$quiet_cap"
  printf '"note_args": {"pillow": "%s", "threads": %d}, "unavailable": {' \
    "$("$pillow_py" -c 'import PIL; print(PIL.__version__)')" "$threads"
  sep=""
  for m in "${!unavailable[@]}"; do
    printf '%s"%s": "%s"' "$sep" "$m" "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<< "${unavailable[$m]}")"
    sep=", "
  done
  printf '}, "notes": ['
  sep=""
  for note in "${notes[@]}"; do
    printf '%s"%s"' "$sep" "$(sed 's/\\/\\\\/g; s/"/\\"/g' <<< "$note")"
    sep=", "
  done
  printf ']}\n'
} > "$work/meta.json"
"$interop" bench/peers/report.py "$runs" "$work/meta.json" --md "$out/peers.md" \
  --png docs/peers.png
say "written: $out/peers.md, docs/peers.png (raw: $runs)"
