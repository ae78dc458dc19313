#!/usr/bin/env bash
# Installs shardpack into a temporary prefix, builds tests/package against it with
# find_package(shardpack), and runs the result on a dataset written by the samples.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/tests/package" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/consumer" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$build/samples/write_synthetic" "$work/data" --samples 20 --size 8x6 --classes 2 > /dev/null
"$work/consumer/consumer" "$work/data"
