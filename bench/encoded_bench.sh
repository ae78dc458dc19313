#!/usr/bin/env bash
# Encoded shards (convert --encoding, docs/FORMAT.md §2.5) against raw ones, on real photos:
#   - bytes per sample and PSNR against the raw conversion, JPEG at quality 75, 90 and 95
#     (4:2:0) and PNG;
#   - the loader's decode rate (shardpack bench, no transform, in the page cache) against
#     libjpeg-turbo decoding the same JPEG files bare (bench/decode_floor), at 1 and 2
#     threads: the loader's cost over the decode itself.
#
# Usage: bash bench/encoded_bench.sh [IMAGES]
#   IMAGES: a corpus of ../shared/tools/make-bench-images.sh (default out/bench-images,
#   made with 3,000 images if missing); its scale/ folder (Caltech-sized photos) is used.
#   SIZE (default 256): the output is SIZE x SIZE, centre crop, Lanczos.
# Needs: pyenv's python3 with the shardpack package (bash scripts/install-python.sh) and
# NumPy, for the PSNR. Writes out/bench/encoded.md.
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
images=${1:-out/bench-images}
build=${BUILD_DIR:-build}
size=${SIZE:-256}
out=out/bench
work=out/bench/encoded-work
mkdir -p "$out"
rm -rf "$work"
mkdir -p "$work"
say() { echo "encoded_bench: $*" >&2; }
die() { say "$*"; exit 2; }

cmake --build "$build" -j "$(nproc)" --target shardpack_cli decode_floor > "$out/build.log" 2>&1 ||
  { cat "$out/build.log"; die "building in $build failed"; }
shardpack=$build/tools/shardpack
floor=$build/bench/decode_floor
python3 -c "import shardpack, numpy" 2>/dev/null ||
  die "python3 lacks the shardpack package or NumPy: bash scripts/install-python.sh"

if [ ! -d "$images/scale" ]; then
  tool=../shared/tools/make-bench-images.sh
  [ -f "$tool" ] || die "$images/scale is missing and $tool is not here to make it"
  bash "$tool" "$images" 3000
fi

# ---- conversions ---------------------------------------------------------------------------
convert() {  # NAME FLAGS...
  local name=$1
  shift
  "$shardpack" convert "$images/scale" "$work/$name" --size "${size}x${size}" --fit crop \
    --quiet "$@" > /dev/null
}
say "converting $images/scale: raw, jpeg q75/q90/q95, png"
convert raw
for q in 75 90 95; do convert "jpeg$q" --encoding jpeg --quality "$q"; done
convert png --encoding png

# ---- sizes and PSNR ------------------------------------------------------------------------
python3 - "$work" > "$work/sizes.md" <<'EOF'
import json, sys
import numpy as np
import shardpack

work = sys.argv[1]
def stored(name):
    m = json.load(open(f"{work}/{name}/manifest.json"))
    return sum(s["bytes"] for s in m["shards"]) / m["num_samples"], m["num_samples"]

raw = shardpack.Dataset(f"{work}/raw")
raw_bytes, n = stored("raw")
print(f"| encoding | bytes per sample | / raw | PSNR, mean of samples (dB) | PSNR, lowest sample (dB) |")
print(f"|---|---|---|---|---|")
print(f"| raw | {raw_bytes:,.0f} | 1.000 | | |")
for name in ("jpeg75", "jpeg90", "jpeg95", "png"):
    ds = shardpack.Dataset(f"{work}/{name}")
    b, m = stored(name)
    assert m == n
    psnr = []
    for i in range(n):
        x = raw[i].pixels.astype(np.float64)
        y = ds[i].pixels.astype(np.float64)
        mse = np.mean((x - y) ** 2)
        psnr.append(float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse))
    finite = [p for p in psnr if np.isfinite(p)]
    mean = f"{np.mean(finite):.2f}" if finite else "exact"
    low = f"{min(finite):.2f}" if finite else "exact"
    label = name if name == "png" else f"jpeg, quality {name[4:]}"
    print(f"| {label} | {b:,.0f} | {b / raw_bytes:.3f} | {mean} | {low} |")
print(f"\n{n} samples of {raw[0].pixels.shape}.")
EOF

# ---- decode: the loader against the bare decoder, on the quality-90 files --------------------
python3 - "$work/jpeg90" "$work/files" > "$work/list" <<'EOF'
import os, struct, sys, json
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
m = json.load(open(f"{src}/manifest.json"))
n = 0
for s in m["shards"]:
    data = open(f"{src}/{s['file']}", "rb").read()
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        payload = data[pos + 12: pos + 12 + length]
        pos += 12 + length + 4
        # image/encoded is the last feature (FORMAT.md 2.5): the JPEG runs from its SOI to
        # the end of the payload.
        start = payload.rfind(b"\xff\xd8\xff")
        with open(f"{dst}/{n:06d}.jpg", "wb") as f:
            f.write(payload[start:])
        print(f"{n:06d}.jpg 0")
        n += 1
EOF
: > "$work/decode.md"
echo "| threads | bare libjpeg-turbo (decode_floor) images/s | loader (shardpack bench) samples/s | loader / bare |" >> "$work/decode.md"
echo "|---|---|---|---|" >> "$work/decode.md"
cat "$work/jpeg90"/*.tfrecord > /dev/null
for t in 1 2; do
  bare=$("$floor" --root "$work/files" --list "$work/list" --threads "$t" --reps 3 2>/dev/null |
    awk '/^decode_floor threads=/ { for (i = 1; i <= NF; i++) if ($i ~ /^images_per_s=/) { sub("images_per_s=", "", $i); print $i } }' | tail -1)
  loader=$("$shardpack" bench "$work/jpeg90" --threads "$t" --shuffle global --epochs 3 |
    awk -F'|' '/^\| global/ { gsub(/ /, "", $4); print $4 }')
  ratio=$(python3 -c "print(f'{$loader / $bare:.2f}')")
  echo "| $t | ${bare%.*} | $loader | $ratio |" >> "$work/decode.md"
done

{
  echo "# Encoded shards (bash bench/encoded_bench.sh, $(date -u +%Y-%m-%d), $(nproc) cores)"
  echo
  echo "## Size and fidelity (${size}x${size} centre crop, Lanczos; PSNR against the raw conversion)"
  echo
  cat "$work/sizes.md"
  echo
  echo "## Decoding quality-90 JPEGs of ${size}x${size}, in the page cache"
  echo
  cat "$work/decode.md"
} > "$out/encoded.md"
cat "$out/encoded.md"
