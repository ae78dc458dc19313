#!/usr/bin/env bash
# Datasets on a read-only file system: verify, info and the loader (train_loop) read a
# TFRecord and an LMDB dataset through a read-only bind mount, and nothing tries to write
# (LMDB is opened MDB_RDONLY | MDB_NOLOCK: no lock file). Needs a private mount namespace
# (root, or unprivileged user namespaces): exits 77, which ctest reports as skipped,
# where neither is allowed.
# Usage: readonly_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for backend in tfrecord lmdb; do
  "$build/samples/write_synthetic" "$work/data/$backend" --samples 40 --size 16x12 --classes 3 \
    --backend "$backend" --shard-size 20000 > /dev/null
done
probe='mount --bind "$0" "$0" && mount -o remount,ro,bind "$0"'
if ! unshare --mount sh -c "$probe" "$work/data" 2> /dev/null &&
  ! unshare --user --map-root-user --mount sh -c "$probe" "$work/data" 2> /dev/null; then
  echo "readonly_test: no private mount namespace here (not root, no user namespaces): skipped"
  exit 77
fi
ns=(unshare --mount)
unshare --mount true 2> /dev/null || ns=(unshare --user --map-root-user --mount)
"${ns[@]}" bash -euo pipefail -c '
  data=$1 build=$2
  mount --bind "$data" "$data"
  mount -o remount,ro,bind "$data"
  if touch "$data/probe" 2> /dev/null; then echo "the mount is writable" >&2; exit 1; fi
  for backend in tfrecord lmdb; do
    "$build/tools/shardpack" verify "$data/$backend" > /dev/null
    "$build/tools/shardpack" info "$data/$backend" > /dev/null
    "$build/samples/train_loop" "$data/$backend" --epochs 2 --batch-size 8 > /dev/null
    "$build/samples/read_dataset" "$data/$backend" > /dev/null
  done
  echo "readonly_test: verify, info, the loader and random reads work on a read-only mount"
' _ "$work/data" "$build"
