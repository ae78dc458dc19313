#!/usr/bin/env bash
# The loader from the page cache into its ring, against a plain memcpy of the same bytes by
# the same number of threads in the same run (`shardpack bench`), for both backends and
# both shuffle modes, at 1 and 2 threads, with the resident set over 5 epochs. Builds two
# datasets of 12,000 samples of 256x256x3 (2.4 GB each: TFRecord in 64 MiB shards, LMDB)
# unless they exist. With a GPU, pass --device 0 to add the host-to-device figures.
# Usage: bash bench/loader_bench.sh [DIR] [SAMPLES] [extra shardpack bench flags]
# Environment: EPOCHS (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-out/bench-loader}
samples=${2:-12000}
shift $(( $# > 2 ? 2 : $# ))
[ -x build/tools/shardpack ] || bash scripts/build.sh
for backend in tfrecord lmdb; do
  if [ ! -f "$dir/$backend/manifest.json" ]; then
    rm -rf "${dir:?}/$backend"
    build/samples/write_synthetic "$dir/$backend" --samples "$samples" --size 256x256 \
      --classes 100 --backend "$backend"
  fi
  # Into the page cache first: the benchmark measures the loader, not the disk.
  cat "$dir/$backend"/* > /dev/null
  build/tools/shardpack bench "$dir/$backend" --threads 1,2 --shuffle global,block --epochs "${EPOCHS:-5}" "$@"
done
