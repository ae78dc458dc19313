#!/usr/bin/env bash
# Conversion benchmark: `shardpack convert --size 256x256 --fit crop` against the floor a
# naive converter pays (libjpeg-turbo's full-size decode alone, bench/decode_floor.cc) and
# against the Pillow converter a user writes (bench/pillow_convert.py, writing a TFRecord
# file), side by side in one run, at 1 and 2 threads/processes, medians of REPS runs
# interleaved round by round; then the resize quality against Pillow on real photos
# (bench/resize_quality.py). Prints a markdown table and writes it to out/bench/convert.md
# (raw timings: out/bench/convert-times.tsv, stage times: convert-stages.tsv; quality:
# out/bench/convert-quality.json).
#
# On set A it also times FFCV 1.0.2's DatasetWriter (bench/ffcv_convert.py: raw pixels,
# and its JPEG mode against `shardpack convert --encoding jpeg --quality 90`) where
# out/venv-peers-ffcv exists (bench/peers/run.sh installs it; FFCV=0 leaves it out), and
# records shardpack's own stage times (`convert --json`'s "stages") for the report.
#
# Inputs (from the corpus of bench/make-bench-images.sh, built on first use):
#   A  scale/: 3,000 Caltech-sized real-photo JPEGs (median about 332x280)
#   B  photos/: the multi-megapixel JPEGs (long side >= 2000 px and >= 2 MP, from
#      manifest-photos.tsv), where shardpack decodes with DCT scaling
# Outputs go to memory (/dev/shm) so that the disk is not what is measured.
#
# Python: the Pillow rows and the quality reference use Pillow 13 from PyPI, in a venv of
# the python3 on PATH made under out/bench/venv (bench/requirements-pillow.txt: pillow,
# tfrecord, crc32c); the "Debian Pillow" rows use /usr/bin/python3 with python3-pil, as
# the earlier version of this benchmark did. Without PyPI the venv rows fall back to
# Debian's Pillow and a pure-Python TFRecord writer, and the table says so.
#
# Usage: bash bench/convert_bench.sh [IMAGES_DIR]
# Environment: BUILD_DIR (default build; binaries are brought up to date there),
#   REPS (default 3), SHM (default /dev/shm), QUALITY_SCALE_EVERY (default 10: every 10th
#   scale/ image, 300, plus all of photos/), PILLOW_DEBIAN=0 to leave out the Debian rows.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
repo=$PWD
images=${1:-out/bench-images}
build=${BUILD_DIR:-build}
reps=${REPS:-3}
every=${QUALITY_SCALE_EVERY:-10}
debian_rows=${PILLOW_DEBIAN:-1}
size=256
out=out/bench
work=${SHM:-/dev/shm}/shardpack-convert-bench.$$
mkdir -p "$out"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
say() { echo "convert_bench: $*" >&2; }
die() { say "$*"; exit 2; }

# ---- binaries: shardpack and decode_floor, up to date with the sources --------------------
. bench/build_targets.sh
build_targets shardpack_cli decode_floor
shardpack=$build/tools/shardpack
floor=$build/bench/decode_floor
[ -x "$shardpack" ] && [ -x "$floor" ] || die "$shardpack or $floor is missing after the build"

# ---- the corpus --------------------------------------------------------------------------
if [ ! -d "$images/scale" ] || [ ! -d "$images/photos" ]; then
  tool=bench/make-bench-images.sh
  [ -f "$tool" ] || die "$images/scale or $images/photos is missing and $tool is not here to make them"
  bash "$tool" "$images" 3000
fi
for f in manifest-scale.tsv manifest-photos.tsv; do
  [ -f "$images/$f" ] || die "$images/$f is missing: not a corpus of make-bench-images.sh"
done

# Lists of "relative/path label" (label: class folder index), as `shardpack convert --list`
# takes them: every converter gets exactly the same files in the same order.
# Manifest columns: path class sniffed bytes sha256 coding mode width height ...
make_list() {  # manifest awk-filter > list
  awk -F'\t' -v OFS=' ' "NR > 1 && ($2) {
      if (!(\$2 in label)) label[\$2] = n++
      print \$1, label[\$2] }" "$1"
}
make_list "$images/manifest-scale.tsv" '1' > "$work/list-A"
make_list "$images/manifest-photos.tsv" \
  '$3 == "jpeg" && ($8 >= 2000 || $9 >= 2000) && $8 * $9 >= 2000000' > "$work/list-B"
# B split by JPEG coding, for the floor and shardpack only: DCT scaling cuts the work of a
# baseline file, hardly that of a progressive one (its entropy decoding dominates).
make_list "$images/manifest-photos.tsv" \
  '$3 == "jpeg" && ($8 >= 2000 || $9 >= 2000) && $8 * $9 >= 2000000 && $6 == "baseline"' \
  > "$work/list-B-baseline"
make_list "$images/manifest-photos.tsv" \
  '$3 == "jpeg" && ($8 >= 2000 || $9 >= 2000) && $8 * $9 >= 2000000 && $6 == "progressive"' \
  > "$work/list-B-progressive"
make_list "$images/manifest-photos.tsv" '1' > "$work/list-photos"
awk -v e="$every" 'NR % e == 1' "$work/list-A" > "$work/list-A-quality"
declare -A root=([A]="$images/scale" [B]="$images/photos" [B-baseline]="$images/photos"
                 [B-progressive]="$images/photos")
declare -A mp
for s in A B B-baseline B-progressive; do
  n=$(wc -l < "$work/list-$s")
  [ "$n" -gt 0 ] || [[ $s == B-* ]] || die "no input for set $s in $images"
  while read -r path _; do
    [ -f "${root[$s]}/$path" ] || die "${root[$s]}/$path is in the manifest but missing"
  done < "$work/list-$s"
done

# ---- Python: Pillow 13 + tfrecord + crc32c from PyPI in a venv; Debian's Pillow beside it -
venv=$out/venv
py=$venv/bin/python
stamp=$venv/.installed-$(cksum < bench/requirements-pillow.txt | cut -d' ' -f1)
pypi_note=""
if [ ! -f "$stamp" ]; then
  rm -rf "$venv"
  say "making $venv (python3 on PATH: $(command -v python3)) and installing bench/requirements-pillow.txt"
  if python3 -m venv "$venv" > "$out/venv.log" 2>&1 &&
     "$venv/bin/pip" install -q -r bench/requirements-pillow.txt >> "$out/venv.log" 2>&1; then
    touch "$stamp"
  else
    say "could not install from PyPI (see $out/venv.log): falling back to Debian's Pillow"
    rm -rf "$venv"
  fi
fi
if [ ! -f "$stamp" ]; then
  dpkg-query -W -f='${Status}' python3-pil 2>/dev/null | grep -q "install ok installed" ||
    apt-get install -y -qq python3-pil python3-numpy > /dev/null
  py=/usr/bin/python3
  pypi_note="PyPI unreachable: the Pillow rows and the quality reference use Debian's Pillow, and the TFRecord writer is the pure-Python fallback (slow CRC32C), not comparable"
fi
if [ "$debian_rows" = 1 ]; then
  dpkg-query -W -f='${Status}' python3-pil 2>/dev/null | grep -q "install ok installed" ||
    apt-get install -y -qq python3-pil > /dev/null
fi
pil_version=$("$py" -c 'import PIL; print(PIL.__version__)')
deb_pil_version=$(/usr/bin/python3 -c 'import PIL; print(PIL.__version__)' 2>/dev/null || echo none)

# ---- the machine must be quiet: CPU busy (in cores) over 2 s, before and after ------------
busy_cores() {
  local a b
  a=($(head -1 /proc/stat)); sleep 2; b=($(head -1 /proc/stat))
  awk -v u1="${a[1]}" -v n1="${a[2]}" -v s1="${a[3]}" -v i1="${a[4]}" -v w1="${a[5]}" \
      -v q1="${a[6]}" -v r1="${a[7]}" -v t1="${a[8]}" \
      -v u2="${b[1]}" -v n2="${b[2]}" -v s2="${b[3]}" -v i2="${b[4]}" -v w2="${b[5]}" \
      -v q2="${b[6]}" -v r2="${b[7]}" -v t2="${b[8]}" -v c="$(nproc)" 'BEGIN {
    busy = (u2 - u1) + (n2 - n1) + (s2 - s1) + (q2 - q1) + (r2 - r1) + (t2 - t1)
    idle = (i2 - i1) + (w2 - w1)
    printf "%.2f", c * busy / (busy + idle) }'
}
busy_before=$(busy_cores)
awk -v b="$busy_before" 'BEGIN { exit !(b > 0.15) }' &&
  say "WARNING: $busy_before cores busy before the run: the figures will be disturbed"

# Page cache warm for every side, right before each timed run: this machine's kernel
# reclaims cold page cache within minutes (DAMON), and a converter that waited for the
# disk would be measured on I/O, not on its work. (decode_floor reads its files into
# memory itself.) The list's label, after the last space, is dropped.
warm() {  # set
  sed 's/ [^ ]*$//' "$work/list-$1" | (cd "${root[$1]}" && xargs -d '\n' cat) > /dev/null
}

# ---- timed rounds ------------------------------------------------------------------------
times=$out/convert-times.tsv
printf 'set\tconverter\tthreads\trep\tseconds\tinputs\tconverted\tmegapixels\n' > "$times"
record() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >> "$times"; }
# shardpack's stage seconds (convert --json "stages"), one line per run.
stages=$out/convert-stages.tsv
printf 'set\tconverter\tthreads\trep\tinputs\tpipeline\tread\tdecode\tresize\tencode\twrite\tidle\n' > "$stages"
record_stages() {  # set converter threads rep inputs json
  python3 -c "
import json, sys
t = json.load(open(sys.argv[1]))['stages']
print('\t'.join(sys.argv[2:] + ['%.4f' % t[k] for k in
      ('pipeline', 'read', 'decode', 'resize', 'encode', 'write', 'idle')]))" "$6" "$1" "$2" "$3" "$4" "$5" \
    >> "$stages"
}
ffcv_py=out/venv-peers-ffcv/bin/python
ffcv=${FFCV:-1}
if [ "$ffcv" = 1 ] && [ ! -x "$ffcv_py" ]; then
  say "no $ffcv_py (bench/peers/run.sh installs it): the FFCV writer rows are left out"
  ffcv=0
fi
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
cores=$(nproc)
threads_list="1 2"
[ "$cores" -ge 2 ] || { threads_list=1; say "only one core: 2-thread figures are left out"; }

pillow_run() {  # set rep name python mode threads [extra args]
  local s=$1 rep=$2 name=$3 python=$4 mode=$5 t=$6 t0 t1 line
  rm -f "$work/pillow.tfrecord"
  warm "$s"
  t0=$EPOCHREALTIME
  line=$("$python" bench/pillow_convert.py "${root[$s]}" "$work/list-$s" $size $size "$t" "$mode" \
           --out "$work/pillow.tfrecord" | tail -1)
  t1=$EPOCHREALTIME
  record "$s" "$name" "$t" "$rep" "$(elapsed "$t0" "$t1")" "$(wc -l < "$work/list-$s")" \
    "$(sed -n 's/.* converted=\([0-9]*\).*/\1/p' <<< "$line")" ""
  writer=$(sed -n 's/.* writer=\([^ ]*\).*/\1/p' <<< "$line")
  [ "$mode" != tfrecord ] || echo "$writer" > "$work/writer"
}

for rep in $(seq 1 "$reps"); do
  for s in A B B-baseline B-progressive; do
    n=$(wc -l < "$work/list-$s")
    [ "$n" -gt 0 ] || continue
    say "round $rep/$reps, set $s ($n images)"
    # The floor: one call decodes everything once untimed (and names failures), then timed.
    args=(); for t in $threads_list; do args+=(--threads "$t"); done
    "$floor" --root "${root[$s]}" --list "$work/list-$s" "${args[@]}" --reps 1 \
      > "$work/floor.out" 2> "$work/floor.err" || { cat "$work/floor.err"; die "decode_floor failed"; }
    [ "$rep" != 1 ] || [ ! -s "$work/floor.err" ] || { say "decode_floor on set $s:"; cat "$work/floor.err" >&2; }
    while read -r _ kv; do
      declare -A f=()
      for x in $kv; do f[${x%%=*}]=${x#*=}; done
      record "$s" floor "${f[threads]}" "$rep" "${f[seconds]}" "$n" "${f[images]}" "${f[megapixels]}"
    done < <(grep '^decode_floor threads=' "$work/floor.out")
    for t in $threads_list; do
      rm -rf "$work/sp"
      warm "$s"
      t0=$EPOCHREALTIME
      "$shardpack" convert "${root[$s]}" "$work/sp" --list "$work/list-$s" --size ${size}x${size} \
        --fit crop --threads "$t" --json > "$work/sp.json" 2> "$work/sp.err" ||
        { cat "$work/sp.err"; die "shardpack convert failed"; }
      t1=$EPOCHREALTIME
      written=$(sed -n 's/.*"written": *\([0-9]*\).*/\1/p' "$work/sp.json")
      record "$s" shardpack "$t" "$rep" "$(elapsed "$t0" "$t1")" "$n" "$written" ""
      record_stages "$s" shardpack "$t" "$rep" "$n" "$work/sp.json"
      rm -rf "$work/sp"
      [[ $s != B-* ]] || continue  # the subsets: floor and shardpack only
      if [ "$s" = A ] && [ "$ffcv" = 1 ]; then
        # The JPEG mode of each: shardpack's encoded shards, FFCV's jpg field.
        warm "$s"
        t0=$EPOCHREALTIME
        "$shardpack" convert "${root[$s]}" "$work/sp" --list "$work/list-$s" --size ${size}x${size} \
          --fit crop --threads "$t" --encoding jpeg --quality 90 --json > "$work/sp.json" \
          2> "$work/sp.err" || { cat "$work/sp.err"; die "shardpack convert --encoding jpeg failed"; }
        t1=$EPOCHREALTIME
        written=$(sed -n 's/.*"written": *\([0-9]*\).*/\1/p' "$work/sp.json")
        record "$s" shardpack-jpeg "$t" "$rep" "$(elapsed "$t0" "$t1")" "$n" "$written" ""
        record_stages "$s" shardpack-jpeg "$t" "$rep" "$n" "$work/sp.json"
        rm -rf "$work/sp"
        for mode in raw jpg; do
          rm -f "$work/ffcv.beton"
          warm "$s"
          line=$("$ffcv_py" bench/ffcv_convert.py "${root[$s]}" "$work/list-$s" "$work/ffcv.beton" \
                   "$t" "$mode" --quality 90 2> "$work/ffcv.err" | tail -1) ||
            { cat "$work/ffcv.err"; die "bench/ffcv_convert.py $mode failed"; }
          record "$s" "ffcv-$mode" "$t" "$rep" "$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' <<< "$line")" \
            "$n" "$(sed -n 's/.* converted=\([0-9]*\).*/\1/p' <<< "$line")" ""
          rm -f "$work/ffcv.beton"
        done
      fi
      pillow_run "$s" "$rep" pillow-tfrecord "$py" tfrecord "$t"
      pillow_run "$s" "$rep" pillow-resize "$py" resize "$t"
      pillow_run "$s" "$rep" pillow-draft "$py" draft "$t"
      if [ "$debian_rows" = 1 ] && [ "$py" != /usr/bin/python3 ]; then
        pillow_run "$s" "$rep" debian-pillow-resize /usr/bin/python3 resize "$t"
        pillow_run "$s" "$rep" debian-pillow-draft /usr/bin/python3 draft "$t"
      fi
    done
  done
done
busy_after=$(busy_cores)

# ---- quality (untimed) -------------------------------------------------------------------
say "quality: converting $(wc -l < "$work/list-A-quality") scale/ images and all $(wc -l < "$work/list-photos") photos/"
for q in A-quality photos; do
  r=${root[A]}; [ "$q" = photos ] && r=$images/photos
  "$shardpack" convert "$r" "$work/q-$q" --list "$work/list-$q" --size ${size}x${size} --fit crop \
    > /dev/null 2>&1 || die "shardpack convert (quality, $q) failed"
  "$shardpack" convert "$r" "$work/k-$q" --list "$work/list-$q" --keep \
    > /dev/null 2>&1 || die "shardpack convert --keep (quality, $q) failed"
done
"$py" bench/resize_quality.py --size ${size}x${size} --json "$out/convert-quality.json" \
  --md "$work/quality.md" \
  --set "scale/ (every ${every}th)" "${root[A]}" "$work/list-A-quality" "$work/q-A-quality" "$work/k-A-quality" \
  --set "photos/" "$images/photos" "$work/list-photos" "$work/q-photos" "$work/k-photos" > /dev/null

# ---- the report --------------------------------------------------------------------------
for s in A B B-baseline B-progressive; do
  mp[$s]=$(awk -F'\t' -v s="$s" '$1 == s && $2 == "floor" { print $8; exit }' "$times")
done
cat > "$work/meta.json" <<EOF
{"cpu": "$(lscpu | sed -n 's/^Model name: *//p' | head -1)", "cores": $cores,
 "kernel": "$(uname -r)", "date": "$(date -u +%Y-%m-%dT%H:%MZ)",
 "commit": "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(changed=$(git status --porcelain 2>/dev/null | awk '{ sub(/\/.*/, "/", $2); print $2 }' | sort -u | tr '\n' ' '); [ -z "$changed" ] || echo " + uncommitted changes in ${changed% }")",
 "shardpack": "$("$shardpack" --version)", "binary": "$shardpack",
 "libjpeg": "$(dpkg-query -W -f='${Version}' libjpeg62-turbo 2>/dev/null || echo unknown)",
 "python": "$("$py" -c 'import sys; print(sys.executable, sys.version.split()[0])')",
 "pillow": "$pil_version", "debian_pillow": "$deb_pil_version",
 "ffcv": "$([ "$ffcv" = 1 ] && "$ffcv_py" -c 'import importlib.metadata as m; print(m.version("ffcv"))' 2>/dev/null || echo none)",
 "writer": "$(cat "$work/writer" 2>/dev/null || echo unknown)", "pypi_note": "$pypi_note",
 "reps": $reps, "busy_before": $busy_before, "busy_after": $busy_after,
 "images": "$images", "size": $size,
 "sets": {"A": {"name": "scale/ (Caltech-sized)", "n": $(wc -l < "$work/list-A"), "mp": ${mp[A]:-0}},
          "B": {"name": "photos/ multi-megapixel JPEGs", "n": $(wc -l < "$work/list-B"), "mp": ${mp[B]:-0}},
          "B-baseline": {"name": "the baseline JPEGs of B", "n": $(wc -l < "$work/list-B-baseline"), "mp": ${mp[B-baseline]:-0}, "subset": true},
          "B-progressive": {"name": "the progressive JPEGs of B", "n": $(wc -l < "$work/list-B-progressive"), "mp": ${mp[B-progressive]:-0}, "subset": true}}}
EOF
# Kept beside the timings, so that the report can be made again from them:
#   python3 bench/convert_report.py out/bench/convert-{times.tsv,meta.json,quality.md,stages.tsv}
cp "$work/meta.json" "$out/convert-meta.json"
cp "$work/quality.md" "$out/convert-quality.md"
"$py" bench/convert_report.py "$times" "$out/convert-meta.json" "$out/convert-quality.md" "$stages" \
  > "$out/convert.md"
cat "$out/convert.md"
say "written to $out/convert.md"
