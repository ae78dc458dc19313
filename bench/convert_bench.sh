#!/usr/bin/env bash
# Conversion throughput on real photos: shardpack convert against the Pillow script a user
# would write (bench/pillow_convert.py), same images, same output size, same core count,
# in one run; medians of 3. Output goes to memory (/dev/shm) so that the disk is not what
# is measured. The images: ../shared/tools/make-bench-images.sh (3,000 Caltech-sized
# JPEGs from photos in Debian packages), built on first use.
# Usage: bash bench/convert_bench.sh [IMAGES_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
images=${1:-out/bench-images}
[ -x build/tools/shardpack ] || bash scripts/build.sh
if [ ! -d "$images/scale" ]; then
  tool=../shared/tools/make-bench-images.sh
  [ -f "$tool" ] || { echo "convert_bench: $images/scale is missing and $tool is not here"; exit 2; }
  bash "$tool" "$images" 3000
fi
dpkg-query -W -f='${Status}' python3-pil 2>/dev/null | grep -q "install ok installed" ||
  apt-get install -y -qq python3-pil > /dev/null
src="$images/scale"
cat "$src"/*/* > /dev/null  # warm the page cache for both sides
out=/dev/shm/shardpack-convert-bench
cores=$(nproc)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for threads in 1 "$cores"; do
  times=$(for rep in 1 2 3; do
    rm -rf "$out"
    /usr/bin/time -f "%e" build/tools/shardpack convert "$src" "$out" --size 256x256 \
      --threads "$threads" 2>&1 >/dev/null | tail -1
  done | median)
  pil=$(for rep in 1 2 3; do
    /usr/bin/python3 bench/pillow_convert.py "$src" 256 256 "$threads" | awk '{print $(NF-3)}'
  done | median)
  draft=$(for rep in 1 2 3; do
    /usr/bin/python3 bench/pillow_convert.py "$src" 256 256 "$threads" draft | awk '{print $(NF-3)}'
  done | median)
  n=$(find "$src" -type f | wc -l)
  awk -v n="$n" -v s="$times" -v p="$pil" -v d="$draft" -v t="$threads" 'BEGIN {
    printf "%d thread(s): shardpack %.0f images/s; Pillow %.0f images/s (%.1fx slower); " \
           "Pillow with draft %.0f images/s (%.1fx slower)\n", t, n / s, n / p, p / s, n / d, d / s }'
done
rm -rf "$out"
