#!/usr/bin/env bash
# Builds the GPU check kit (docs/GPU.md): everything the check of the CUDA path needs on a
# bare GPU machine (no Debian libraries, no network), in one folder of at most 60 MiB.
#   programs.tar.xz  bin/ and lib/, packed (gpu-check.sh unpacks them into the kit):
#             bin/ the CLI, the test binary, make_images, decode_floor, write_synthetic,
#             first_touch, write_scaling and micro_bench (stripped), with an $ORIGIN/../lib
#             rpath; lib/ their shared libraries (the ldd closure minus glibc and the C++
#             runtime).
#   python/tests/  the package's tests, run there against the wheel.
#   samples/  the Python samples (train_torch.py); gpu-check/ the ImageFolder + DataLoader
#             reference and the loader's throughput on the GPU.
#   photos/   set A's photos (bench/convert_bench.sh) for convert-scaling: every tenth of
#             those of at most 128 KiB and all the larger ones (LARGE, SET_A_COUNTS), where
#             out/bench-images is here (PHOTOS=DIR names another corpus's scale/).
#   shardpack-wheel/  the cp312-abi3 wheel of scripts/build-wheels.sh (step wheel).
#   gpu-check.sh, which runs the check and writes report.md and report.json.
# Runs here (no GPU needed). Uses the CUDA build of scripts/build.sh (build/), brought up
# to date first, or made when missing, and scripts/build-wheels.sh (its cache makes a
# second build take about a minute).
# Usage: bash scripts/device-kit.sh OUT      (OUT must not exist, or be an empty folder)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/device-kit.sh OUT}
limit_mib=60

if [ -e "$out" ] && [ -n "$(ls -A "$out")" ]; then
  echo "device-kit: $out exists and is not empty" >&2
  exit 2
fi
command -v patchelf >/dev/null || bash scripts/install-deps.sh
# The programs and the PIC library, brought up to date with the sources (incremental).
if [ -f build/CMakeCache.txt ]; then
  cmake --build build -j "$(nproc)" --target shardpack_cli shardpack_tests make_images \
    decode_floor write_synthetic first_touch write_scaling micro_bench
else
  bash scripts/build.sh
fi
if [ ! -f build/lib/shardpack_kernels.fatbin ]; then
  echo "device-kit: build/ has no CUDA (no nvcc found by CMake): the kit would have no GPU code" >&2
  exit 2
fi
mkdir -p "$out"/{bin,lib,python,samples,gpu-check}
for program in build/tools/shardpack build/tests/shardpack_tests build/samples/make_images \
               build/bench/decode_floor build/samples/write_synthetic build/bench/first_touch \
               build/bench/write_scaling build/bench/micro_bench; do
  strip -o "$out/bin/$(basename "$program")" "$program"
done

# The shared libraries: the ldd closure of the programs, minus glibc's own (the loader,
# libc, libm, libpthread, libdl, librt, libresolv) and the C++ runtime (libstdc++,
# libgcc_s), which every Linux machine with Python has: the machine's own, newer, serve
# these programs, and a kit's older libstdc++ loaded first into Python would refuse
# PyTorch.
glibc='^(ld-linux.*|libc|libm|libpthread|libdl|librt|libresolv|libutil|libmvec|libstdc\+\+|libgcc_s)\.so'
for program in "$out"/bin/*; do
  ldd "$program" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r so; do
  name=$(basename "$so")
  [[ "$name" =~ $glibc ]] && continue
  cp -L "$so" "$out/lib/$name"
done
for program in "$out"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$program"; done
for so in "$out"/lib/*; do patchelf --set-rpath '$ORIGIN' "$so"; done

# The Python package reaches the GPU machine as the wheel (below); its tests travel here.
mkdir -p "$out/python/tests"
cp python/tests/*.py "$out/python/tests/"
find "$out/python" -name __pycache__ -prune -exec rm -rf {} +
cp samples/*.py "$out/samples/"
cp tools/gpu-check/imagefolder_reference.py tools/gpu-check/loader_throughput.py "$out/gpu-check/"
cp tools/gpu-check/gpu-check.sh "$out/gpu-check.sh"
chmod +x "$out/gpu-check.sh"
# The test runner for the Python tests, as wheels for the machine's Python 3.12 (pytest
# is not among its packages). Not fatal: without them the check skips that step.
mkdir -p "$out/wheels"
python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$out/wheels" \
  pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.19.2 \
  psutil==7.2.2 ||
  echo "device-kit: no wheels (PyPI unreachable?): the check will skip the Python tests" >&2
# Real photos for the convert-scaling step: issue 17's 16-thread target is stated on set A
# of bench/convert_bench.sh (scale/ of bench/make-bench-images.sh, Caltech-sized
# photo JPEGs). Of its files in sorted order, every tenth where it is a JPEG of at most 128
# KiB (up to 8 MiB), and all the JPEGs over 128 KiB (up to 32 MiB), listed in photos/LARGE: set A's ratio turns on them (the
# converter decodes them with DCT scaling, the bare decode whole; a sample of them does not
# stand for them, bench/results/kit-photos-vs-set-a-2026-11-28-zen4.md). photos/SET_A_COUNTS
# holds how many of each set A has, so that the check can list them in set A's proportions.
# Where the corpus is not here, the step converts make_images' synthetic pictures instead.
photos=${PHOTOS:-out/bench-images/scale}
if [ -d "$photos" ]; then
  mkdir -p "$out/photos"
  : > "$out/photos/LARGE"
  taken=0 count=0 index=0 small=0 large=0 large_bytes=0 full=0
  while read -r f; do
    index=$((index + 1))  # over every file, so that the sample stays the one it was
    [ "$(head -c 2 "$photos/$f" | od -An -tx1 | tr -d ' \n')" = ffd8 ] || continue
    size=$(stat -c %s "$photos/$f")
    if [ "$size" -gt 131072 ]; then
      large=$((large + 1))
      [ $((large_bytes + size)) -le $((32 << 20)) ] || { echo "device-kit: set A's large photos pass 32 MiB" >&2; exit 1; }
      mkdir -p "$out/photos/$(dirname "$f")"
      cp "$photos/$f" "$out/photos/$f"
      echo "$f 0" >> "$out/photos/LARGE"
      large_bytes=$((large_bytes + size))
      continue
    fi
    small=$((small + 1))
    [ $((index % 10)) -eq 1 ] && [ "$full" -eq 0 ] || continue
    [ $((taken + size)) -le $((8 << 20)) ] || { full=1; continue; }
    mkdir -p "$out/photos/$(dirname "$f")"
    cp "$photos/$f" "$out/photos/$f"
    taken=$((taken + size)) count=$((count + 1))
  done < <(cd "$photos" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
  echo "$small $large" > "$out/photos/SET_A_COUNTS"
  echo "every tenth JPEG of at most 128 KiB of $photos: $count files, $taken bytes; the $large over 128 KiB (photos/LARGE): $large_bytes bytes; $photos has $small and $large (SET_A_COUNTS)" > "$out/photos/SOURCE"
  cat "$out/photos/SOURCE"
else
  echo "device-kit: no $photos (bench/make-bench-images.sh): convert-scaling will use synthetic pictures" >&2
fi
# The binary wheel for the machine's Python 3.12 (and later: cp312-abi3), which the check
# pip-installs beside that machine's torch (step wheel).
bash scripts/build-wheels.sh --python 3.12 --out "$out/shardpack-wheel" > "$out/wheel.log" 2>&1 ||
  { tail -30 "$out/wheel.log" >&2; echo "device-kit: the wheel did not build" >&2; exit 1; }
rm -f "$out"/shardpack-wheel/*.tar.gz "$out/wheel.log"
git rev-parse --short HEAD > "$out/REVISION" 2>/dev/null || echo unknown > "$out/REVISION"
# The version of the library and the package (the root project() line, as python/pyproject.toml
# reads it).
sed -n 's/^project(shardpack VERSION \([0-9]*\.[0-9]*\.[0-9]*\).*/\1/p' CMakeLists.txt > "$out/VERSION"
[ -s "$out/VERSION" ] || { echo "device-kit: no version in CMakeLists.txt's project() line" >&2; exit 2; }

# bin/ and lib/ travel packed (xz: their 36 MiB in about 10), which leaves the photos room
# under the limit; gpu-check.sh unpacks them next to itself before anything else.
XZ_OPT="-6 -T0" tar -C "$out" -cJf "$out/programs.tar.xz" bin lib
rm -rf "$out/bin" "$out/lib"

bytes=$(du -sb "$out" | cut -f1)
echo "device-kit: $out, $((bytes >> 20)) MiB ($bytes bytes; limit $limit_mib MiB)"
if [ "$bytes" -gt $((limit_mib << 20)) ]; then
  echo "device-kit: over $limit_mib MiB" >&2
  exit 1
fi
