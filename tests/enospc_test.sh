#!/usr/bin/env bash
# A full file system, for real (issue 7): conversions into a 1 MiB tmpfs, both backends (and
# TFRecord written through mappings), must fail with exit 2 and an error naming the file and
# ENOSPC, publish no manifest, and, once the file system has room again, go on with --resume
# to the bytes of an uninterrupted conversion. (io::MemEnv injects ENOSPC into the TFRecord
# writer in the unit tests; LMDB writes through its own file calls, so only a real full disk
# tests it.)
# Needs a private mount namespace (root, or unprivileged user namespaces): exits 77,
# which ctest reports as skipped, where neither is allowed.
# Usage: enospc_test.sh BUILD_DIR
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$build/samples/make_images" "$work/src" --classes 4 --per-class 30 --seed 3 > /dev/null
mkdir -p "$work/full"
ns=(unshare --mount)
if ! unshare --mount true 2> /dev/null; then
  ns=(unshare --user --map-root-user --mount)
  if ! "${ns[@]}" true 2> /dev/null; then
    echo "enospc_test: no private mount namespace here (not root, no user namespaces): skipped"
    exit 77
  fi
fi
args=(--size 64x64 --shard-records 20 --quiet)
for backend in tfrecord lmdb; do
  "$build/tools/shardpack" convert "$work/src" "$work/ref-$backend" "${args[@]}" \
    --format "$backend" > /dev/null
done
"${ns[@]}" bash -euo pipefail -c '
  work=$1 shardpack=$2
  shift 2
  mount -t tmpfs -o size=1m tmpfs "$work/full"
  # tfrecord-map: TFRecord written through mappings (--write-method map; auto writes with
  # pwrite on tmpfs), whose space is set aside window by window (fallocate).
  for backend in tfrecord lmdb tfrecord-map; do
    dst=$work/full/$backend
    how=(--format "${backend%-map}")
    [ "$backend" = tfrecord-map ] && how+=(--write-method map)
    rc=0
    "$shardpack" convert "$work/src" "$dst" "$@" "${how[@]}" 2> "$work/err" || rc=$?
    if [ "$rc" -ne 2 ] || ! grep -q "ENOSPC" "$work/err" || ! grep -q "$dst/shard-" "$work/err"
    then
      echo "enospc_test: $backend: exit $rc, expected 2 and an error naming the file and ENOSPC:"
      cat "$work/err"
      exit 1
    fi
    if [ -e "$dst/manifest.json" ]; then
      echo "enospc_test: $backend: a manifest was published on a full file system"; exit 1
    fi
    echo "enospc_test: $backend: $(cat "$work/err")"
    mount -o remount,size=64m "$work/full"
    "$shardpack" convert "$work/src" "$dst" "$@" "${how[@]}" --resume > /dev/null 2>&1
    diff -r "$work/ref-${backend%-map}" "$dst"
    "$shardpack" verify "$dst" > /dev/null
    rm -rf "$dst"
    mount -o remount,size=1m "$work/full"
  done
  echo "enospc_test: both backends, and mapped writes, fail cleanly on a full file system and resume to the same bytes"
' _ "$work" "$build/tools/shardpack" "${args[@]}"
