#!/usr/bin/env bash
# PyTorch's usual input pipeline (ImageFolder + DataLoader) against shardpack.Loader on the
# same real JPEGs, in one run: samples/s, CPU time per sample, peak memory, ratios.
# Usage: bash bench/python_loader_bench.sh [N_IMAGES (default 2000)] [extra arguments]
# Needs: bash scripts/install-python.sh (shardpack, torch, torchvision, psutil).
# Writes out/bench/python_loader.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
shift || true
images=out/bench/images-$n
# Real photos from Debian packages, Caltech-256-like sizes (deterministic).
[ -d "$images/scale" ] || bash bench/make-bench-images.sh "$images" "$n"
mkdir -p out/bench
python3 bench/python_loader_bench.py "$images/scale" "out/bench/python-loader-$n" \
  --output out/bench/python_loader.md "$@"
