#!/usr/bin/env bash
# The source distribution as a user installs it (docs/WHEELS.md): `pip install` of
# out/wheels/shardpack-<version>.tar.gz into a fresh venv of python3 builds it against this
# machine's libraries (with pip's build isolation: scikit-build-core and nanobind from
# PyPI), then its CLI converts the images of build/samples/make_images to the same bytes
# as the CMake build's, and its package reads them.
# Usage: bash tests/wheel/sdist_test.sh   (after scripts/build-wheels.sh and scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
version=$(sed -n 's/^project(shardpack VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
sdist=$PWD/out/wheels/shardpack-$version.tar.gz
[ -f "$sdist" ] || { echo "sdist_test: $sdist missing: run scripts/build-wheels.sh" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
t0=$SECONDS
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$sdist" > "$work/pip.log" 2>&1 ||
  { cat "$work/pip.log"; exit 1; }
echo "sdist_test: pip install of $(basename "$sdist") built and installed it in $((SECONDS - t0)) s"
[ "$("$work/venv/bin/shardpack" --version)" = "shardpack $version" ]
build/samples/make_images "$work/images" --classes 3 --per-class 10 > /dev/null
args=(--size 48x48 --fit crop --shuffle --seed 1 --format lmdb)
(cd "$work" && venv/bin/shardpack convert images sdist "${args[@]}" > /dev/null 2>&1)
(cd "$work" && "$repo/build/tools/shardpack" convert images cmake "${args[@]}" > /dev/null 2>&1)
diff <(cd "$work/sdist" && find . -type f | LC_ALL=C sort | xargs sha256sum) \
     <(cd "$work/cmake" && find . -type f | LC_ALL=C sort | xargs sha256sum) ||
  { echo "sdist_test: the sdist's convert wrote other bytes than the CMake build's" >&2; exit 1; }
"$work/venv/bin/python" - "$work/sdist" <<'PY'
import sys

import shardpack

assert shardpack.__file__.startswith(sys.prefix), shardpack.__file__
dataset = shardpack.Dataset(sys.argv[1])
assert len(dataset) == 30, len(dataset)  # 3 classes x 10, the two broken files rejected
images, labels = next(iter(shardpack.Loader(sys.argv[1], batch_size=8, framework="numpy")))
assert images.shape == (8, 3, 48, 48), images.shape
PY
echo "sdist_test: passed (same shard bytes as the CMake build; the package reads them)"
