#!/usr/bin/env bash
# The main job end to end on a small image folder generated here: build, convert JPEG/PNG
# class folders to TFRecord and LMDB shards, verify them, describe them, draw a contact
# sheet of them (PNG), read every sample, and stream epochs through the Loader.
# Run as root on a fresh Debian 12 machine: bash scripts/quickstart.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
out=out/quickstart
rm -rf "$out"
echo "== make a Caltech-style folder of JPEG/PNG images (with two broken files)"
build/samples/make_images "$out/images" --classes 5 --per-class 40
for format in tfrecord lmdb; do
  echo "== convert to $format: 224x224, centre crop, shuffled"
  build/tools/shardpack convert "$out/images" "$out/$format" --size 224x224 --fit crop \
    --format "$format" --shuffle --seed 1 --shard-size 4000000
  echo "== verify"
  build/tools/shardpack verify "$out/$format"
  echo "== info"
  build/tools/shardpack info "$out/$format" --classes 3
  echo "== preview: a contact sheet, one row per class"
  build/tools/shardpack preview "$out/$format" -o "$out/$format-preview.png" --per-class
  echo "== read every sample back (random order, checksums checked)"
  build/samples/read_dataset "$out/$format"
  echo "== train-loop data side: 2 epochs through the Loader, 224x224 random-resized-crop"
  build/samples/train_loop "$out/$format" --epochs 2 --batch-size 32 --size 224x224
done
echo "quickstart: OK (images, datasets, rejects.tsv and preview PNGs in $out)"
