#!/usr/bin/env bash
# Encoded shards (convert --encoding, docs/FORMAT.md §2.5) against raw ones, on real photos:
#   - bytes per sample and PSNR against the raw conversion, JPEG at quality 75, 90 and 95
#     (4:2:0) and PNG at zlib levels 6 (the default) and 1 (--png-compression), with each
#     conversion's rate (images/s on all cores);
#   - the loader's decode rate (shardpack bench, no transform, in the page cache) against
#     libjpeg-turbo decoding the same JPEG files bare (bench/decode_floor), at 1 and 2
#     threads, in ROUNDS (default 5) alternating rounds: the loader's cost over the decode;
#   - DCT-scaled decoding (the Python Loader's decode_scaled) on and off with transforms
#     to SCALED_OUT x SCALED_OUT (default 112): speed, and PSNR against the raw shards.
#
# Usage: bash bench/encoded_bench.sh [IMAGES]
#   IMAGES: a corpus of bench/make-bench-images.sh (default out/bench-images,
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

. bench/build_targets.sh
build_targets shardpack_cli decode_floor
shardpack=$build/tools/shardpack
floor=$build/bench/decode_floor
python3 -c "import shardpack, numpy" 2>/dev/null ||
  die "python3 lacks the shardpack package or NumPy: bash scripts/install-python.sh"

if [ ! -d "$images/scale" ]; then
  tool=bench/make-bench-images.sh
  [ -f "$tool" ] || die "$images/scale is missing and $tool is not here to make it"
  bash "$tool" "$images" 3000
fi

# ---- conversions ---------------------------------------------------------------------------
convert() {  # NAME FLAGS...: the summary (with its seconds) in $work/NAME.json
  local name=$1
  shift
  "$shardpack" convert "$images/scale" "$work/$name" --size "${size}x${size}" --fit crop \
    --quiet --json "$@" > "$work/$name.json"
}
say "converting $images/scale: raw, jpeg q75/q90/q95, png at levels 6 and 1"
convert raw
for q in 75 90 95; do convert "jpeg$q" --encoding jpeg --quality "$q"; done
convert png --encoding png
convert png1 --encoding png --png-compression 1

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
def rate(name):
    summary = json.load(open(f"{work}/{name}.json"))
    return summary["written"] / summary["seconds"]

print(f"| encoding | bytes per sample | / raw | PSNR, mean of samples (dB) | PSNR, lowest sample (dB) | convert images/s |")
print(f"|---|---|---|---|---|---|")
print(f"| raw | {raw_bytes:,.0f} | 1.000 | | | {rate('raw'):,.0f} |")
labels = {"png": "png (zlib level 6, the default)", "png1": "png, --png-compression 1"}
for name in ("jpeg75", "jpeg90", "jpeg95", "png", "png1"):
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
    label = labels.get(name, f"jpeg, quality {name[4:]}")
    print(f"| {label} | {b:,.0f} | {b / raw_bytes:.3f} | {mean} | {low} | {rate(name):,.0f} |")
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
echo "| threads | bare libjpeg-turbo (decode_floor) images/s | loader (shardpack bench) samples/s | loader / bare, median of rounds (range) |" >> "$work/decode.md"
echo "|---|---|---|---|" >> "$work/decode.md"
cat "$work/jpeg90"/*.tfrecord > /dev/null
# The machine is shared: the two are measured in ROUNDS alternating rounds, and the table
# gives each one's median and the median (and range) of the rounds' ratios.
rounds=${ROUNDS:-5}
for t in 1 2; do
  : > "$work/rounds-$t"
  for r in $(seq "$rounds"); do
    bare=$("$floor" --root "$work/files" --list "$work/list" --threads "$t" --reps 3 2>/dev/null |
      awk '/^decode_floor threads=/ { for (i = 1; i <= NF; i++) if ($i ~ /^images_per_s=/) { sub("images_per_s=", "", $i); print $i } }' | tail -1)
    loader=$("$shardpack" bench "$work/jpeg90" --threads "$t" --shuffle global --epochs 3 |
      awk -F'|' '/^\| global/ { gsub(/ /, "", $4); print $4 }')
    echo "$bare $loader" >> "$work/rounds-$t"
  done
  python3 - "$work/rounds-$t" "$t" >> "$work/decode.md" <<'EOF2'
import statistics, sys
rows = [tuple(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
bare = statistics.median(b for b, _ in rows)
loader = statistics.median(l for _, l in rows)
ratios = [l / b for b, l in rows]
print(f"| {sys.argv[2]} | {bare:,.0f} | {loader:,.0f} | {statistics.median(ratios):.2f} "
      f"({min(ratios):.2f}-{max(ratios):.2f}, {len(rows)} rounds) |")
EOF2
done

# ---- DCT-scaled decoding: a transform that shrinks, decode_scaled on and off ------------------
# The Python Loader (2 threads, no shuffle) on the quality-90 shards, out to OUT x OUT (112
# by default, from 256): a centre crop from the shorter side resized to OUT * 8 / 7 (its
# source box is 256 / 128 = 2x the output: decoded at 1/2), one from the shorter side
# resized to 2 * OUT (1.14x: never scaled, the control), and a random-resized crop (scaled
# where the crop is at least twice the output); PSNR of each against the raw shards through
# the same transform (same keys, same crops).
python3 - "$work" "${SCALED_OUT:-112}" "$rounds" > "$work/scaled.md" <<'EOF2'
import statistics, sys, time
import numpy as np
import shardpack

work, out, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cases = [("center_crop, shorter side to 8/7 of the output", dict(transform="center_crop")),
         ("center_crop, shorter side to 2x the output",
          dict(transform="center_crop", resize_shorter=2 * out)),
         ("random_resized_crop", dict(transform="random_resized_crop"))]

def epoch(path, scaled, kw, keep):
    loader = shardpack.Loader(path, batch_size=256, shuffle="none", num_threads=2,
                              output_size=out, decode_scaled=scaled, framework="numpy", **kw)
    t = time.perf_counter()
    n, kept = 0, []
    for images, _ in loader:
        n += len(images)
        if keep:
            kept.append(np.array(images, dtype=np.float64))
    return n / (time.perf_counter() - t), (np.concatenate(kept) if keep else None)

def psnr(a, b):
    mse = ((a - b) ** 2).reshape(len(a), -1).mean(axis=1)
    p = 10 * np.log10(255.0 ** 2 / np.maximum(mse, 1e-12))
    return f"{p.mean():.2f} (lowest {p.min():.2f})"

print(f"| transform ({out}x{out}) | full-size decode samples/s | decode_scaled samples/s | "
      f"scaled / full | PSNR vs raw, full-size decode (dB) | PSNR vs raw, decode_scaled (dB) |")
print("|---|---|---|---|---|---|")
for name, kw in cases:
    _, raw = epoch(f"{work}/raw", True, kw, True)
    _, full_px = epoch(f"{work}/jpeg90", False, kw, True)
    _, scaled_px = epoch(f"{work}/jpeg90", True, kw, True)
    rates = {False: [], True: []}
    for _ in range(rounds):
        for scaled in (False, True):
            rates[scaled].append(epoch(f"{work}/jpeg90", scaled, kw, False)[0])
    full, fast = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"| {name} | {full:,.0f} | {fast:,.0f} | {fast / full:.2f} | {psnr(full_px, raw)} | "
          f"{psnr(scaled_px, raw)} |")
EOF2

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
  echo
  echo "## DCT-scaled decoding where the transform shrinks (LoaderOptions::decode_scaled), 2 threads"
  echo
  cat "$work/scaled.md"
} > "$out/encoded.md"
cat "$out/encoded.md"
