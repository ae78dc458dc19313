#!/usr/bin/env bash
# A source build on a machine without some of shardpack's libraries stops at configure
# with one message naming each missing library and the packages that have it (root
# CMakeLists.txt). TBB and libcurl are hidden from CMake here; the rest are present.
# Usage: missing_deps_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if cmake -S "$src" -B "$work/build" -DCMAKE_DISABLE_FIND_PACKAGE_TBB=ON \
     -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_BENCH=OFF \
     -DSHARDPACK_BUILD_SAMPLES=OFF -DSHARDPACK_WITH_CUDA=OFF > "$work/log" 2>&1; then
  echo "missing_deps_test: configure succeeded without TBB and libcurl"; exit 1
fi
for line in "oneTBB  (Debian/Ubuntu: libtbb-dev; RHEL/Fedora: tbb-devel)" \
            "libcurl 7.85+  (Debian/Ubuntu: libcurl4-openssl-dev; RHEL/Fedora: libcurl-devel)"; do
  grep -qF "$line" "$work/log" || { echo "missing_deps_test: no line \"$line\" in:"; cat "$work/log"; exit 1; }
done
# Only those two: the libraries that are present are not named.
[ "$(grep -c "(Debian/Ubuntu:" "$work/log")" -eq 2 ] || { cat "$work/log"; exit 1; }
echo "missing_deps_test: passed"
