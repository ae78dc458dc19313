#!/usr/bin/env bash
# Builds a dataset of about 3 GB (16,000 samples of 256x256x3 in 64 MiB TFRecord shards)
# unless it exists, then measures verify against a plain sequential read of the same bytes
# (bench/verify_bench.cc). Usage: bash bench/verify_throughput.sh [DIR] [SAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-out/bench-verify}
samples=${2:-16000}
[ -x build/bench/verify_bench ] || bash scripts/build.sh
if [ ! -f "$dir/manifest.json" ]; then
  rm -rf "$dir"
  build/samples/write_synthetic "$dir" --samples "$samples" --size 256x256 --classes 100
fi
build/bench/verify_bench "$dir" --reps 5
