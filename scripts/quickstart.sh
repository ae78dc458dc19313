#!/usr/bin/env bash
# The main job end to end on a small dataset generated here: build, write a dataset
# (TFRecord and LMDB), verify it, describe it, read every sample back.
# Run as root on a fresh Debian 12 machine: bash scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
out=out/quickstart
rm -rf "$out"
for backend in tfrecord lmdb; do
  echo "== $backend: write"
  build/samples/write_synthetic "$out/$backend" --samples 2000 --size 64x64 --classes 10 \
    --backend "$backend" --shard-size 8000000
  echo "== $backend: verify"
  build/tools/shardpack verify "$out/$backend"
  echo "== $backend: info"
  build/tools/shardpack info "$out/$backend" --classes 3
  echo "== $backend: read"
  build/samples/read_dataset "$out/$backend"
done
echo "quickstart: OK (datasets in $out)"
