#!/usr/bin/env bash
# Builds shardpack's binary wheels, shardpack-<version>-<python>-manylinux_2_28_x86_64.whl,
# into out/wheels/: one per CPython 3.9, 3.10 and 3.11, and one cp312-abi3 wheel (Python's
# stable ABI) for 3.12 and every later CPython. Each holds the Python package, its
# extension, the `shardpack` CLI and the licences of what is linked into them; nothing but
# glibc (2.28 or newer) is needed at run time. Beside them, the source distribution
# shardpack-<version>.tar.gz (scripts/wheel/sdist.py). docs/WHEELS.md describes the design.
#
# How: Zig's clang from PyPI (`ziglang`) compiles for glibc 2.28 with its own libc++,
# linked statically; the libraries shardpack uses are built the same way from Debian 12's
# source packages (scripts/wheel/deps.sh); the library and CLI are compiled once and an
# extension per Python links them (python/CMakeLists.txt, SHARDPACK_INSTALLED_LIBRARY).
# `auditwheel show` then checks every wheel against the manylinux_2_28 rules.
#
# What is built once is kept under SHARDPACK_WHEEL_CACHE (default ~/.cache/shardpack-wheel),
# in folders keyed by the versions that went into them: the tools, the Debian sources and
# the built libraries. A machine that built them once builds only shardpack itself again.
#
# Usage: bash scripts/build-wheels.sh [--python "3.9 3.10 3.11 3.12"] [--out DIR] [--skip-missing]
# Each Python X.Y is found as pythonX.Y on PATH or in ~/.pyenv/versions/X.Y.*; set
# SHARDPACK_PYTHON_X_Y (e.g. SHARDPACK_PYTHON_3_9=/opt/py39/bin/python3.9) to choose one.
# A Python not found is an error, or with --skip-missing a warning and no wheel for it.
# Runs as root on Debian 12 (apt-get source, and build tools from scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
pythons="3.9 3.10 3.11 3.12"
out=$repo/out/wheels
skip_missing=0
while [ $# -gt 0 ]; do
  case $1 in
    --python) pythons=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --skip-missing) skip_missing=1; shift ;;
    *) echo "build-wheels: unknown argument $1" >&2; exit 2 ;;
  esac
done
cache=${SHARDPACK_WHEEL_CACHE:-$HOME/.cache/shardpack-wheel}
work=$repo/out/wheel-build
mkdir -p "$cache" "$work"
started=$SECONDS
jobs=$(nproc)
key() { sha256sum | cut -c1-12; }

# --- the tools: pyenv's python3 (3.11; pack.py reads pyproject.toml with tomllib) -------
tools=$cache/tools-$(cat python/requirements-wheel.txt | key)
if [ ! -f "$tools/.done" ]; then
  echo "build-wheels: tools into $tools"
  rm -rf "$tools"
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check -r python/requirements-wheel.txt
  touch "$tools/.done"
fi
export PATH="$tools/bin:$PATH"  # its cmake and ninja
echo "build-wheels: tools ready ($((SECONDS - started)) s)"
# nanobind 3 needs Python 3.10: the 3.9 extension is built with nanobind 2.12, the last
# release for 3.9, whose API the bindings keep to.
nanobind_39=$cache/nanobind-2.12.0
if [ ! -d "$nanobind_39/nanobind" ]; then
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check --target "$nanobind_39.tmp" nanobind==2.12.0
  mv "$nanobind_39.tmp" "$nanobind_39"
fi
zig_pkg=$("$tools/bin/python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')
zig=$zig_pkg/zig
zig_version=$("$zig" version)

# --- the toolchain: compilers for x86_64 glibc 2.28, static libc++ ----------------------
tc=$tools/toolchain
if [ ! -f "$tc/toolchain.cmake" ]; then
  mkdir -p "$tc/bin"
  # -fno-sanitize=all: zig cc turns UBSan traps on where no -O is given (CMake's
  # configure checks); the project's own sanitizer builds are scripts/test-sanitizers.sh.
  for tool in cc c++; do
    printf '#!/bin/sh\nexec "%s" %s -target x86_64-linux-gnu.2.28 -fno-sanitize=all "$@"\n' "$zig" "$tool" > "$tc/bin/$tool"
  done
  for tool in ar ranlib; do
    printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$zig" "$tool" > "$tc/bin/$tool"
  done
  chmod +x "$tc/bin/"*
  cat > "$tc/toolchain.cmake" <<CMAKE
# Written by scripts/build-wheels.sh: x86_64 Linux, glibc 2.28, Zig $zig_version.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER $tc/bin/cc)
set(CMAKE_CXX_COMPILER $tc/bin/c++)
set(CMAKE_AR $tc/bin/ar)
set(CMAKE_RANLIB $tc/bin/ranlib)
# Libraries, headers and packages come from the roots the build names (the wheel's own
# prefix, the staged library, a Python), never from the build machine's /usr.
list(APPEND CMAKE_FIND_ROOT_PATH \$ENV{SHARDPACK_WHEEL_ROOTS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
CMAKE
fi

# --- the sources: Debian 12's source packages ------------------------------------------
packages="zlib libpng1.6 libjpeg-turbo lmdb xxhash liburing openssl curl onetbb nlohmann-json3 cli11"
if ! grep -rqs "^Types: deb-src" /etc/apt/sources.list.d/ && ! grep -qs "^deb-src" /etc/apt/sources.list; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "build-wheels: adding Debian 12's source packages to apt (shardpack-wheel-src.sources)"
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb-src\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
    $SUDO tee /etc/apt/sources.list.d/shardpack-wheel-src.sources > /dev/null
  $SUDO apt-get update -qq
fi
src=$cache/src
mkdir -p "$src"
versions=""
for pkg in $packages; do
  got=""
  # The newest version the archive still serves (a mirror may lack the newest upload).
  for version in $(apt-cache showsrc "$pkg" | awk '/^Version:/ {print $2}' | sort -rVu); do
    if [ -f "$src/$pkg=$version/.done" ]; then got=$version; break; fi
    rm -rf "$src/$pkg=$version" && mkdir -p "$src/$pkg=$version"
    if (cd "$src/$pkg=$version" && apt-get source -qq "$pkg=$version" > source.log 2>&1); then
      touch "$src/$pkg=$version/.done"; got=$version; break
    fi
    rm -rf "$src/$pkg=$version"
  done
  [ -n "$got" ] || { echo "build-wheels: apt-get source $pkg failed for every version apt knows" >&2; exit 1; }
  versions="$versions $pkg=$got"
done
echo "build-wheels: sources ($((SECONDS - started)) s):$versions"

# --- the libraries, built once per (zig, sources, deps.sh) -----------------------------
deps=$cache/deps-$( (echo "$zig_version$versions"; cat scripts/wheel/deps.sh) | key)
if [ ! -f "$deps/.done" ]; then
  rm -rf "$deps" "$deps.src" && mkdir -p "$deps.src"
  for v in $versions; do
    find "$src/$v" -mindepth 1 -maxdepth 1 -type d -exec ln -s {} "$deps.src/" \;
  done
  t0=$SECONDS
  SHARDPACK_WHEEL_ROOTS=$deps bash scripts/wheel/deps.sh "$tc" "$deps.src" "$deps"
  rm -rf "$deps.src"
  echo "build-wheels: libraries built in $((SECONDS - t0)) s"
  touch "$deps/.done"
fi

# --- shardpack: the library and CLI once ---------------------------------------------
export SHARDPACK_WHEEL_ROOTS="$deps" PKG_CONFIG_LIBDIR="$deps/lib/pkgconfig" PKG_CONFIG_PATH=""
release=(-G Ninja -DCMAKE_TOOLCHAIN_FILE="$tc/toolchain.cmake" -DCMAKE_BUILD_TYPE=Release
         -DCMAKE_C_FLAGS_RELEASE="-O2 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG")
echo "build-wheels: the library and CLI (out/wheel-build/library)"
# Build folders made with another toolchain or other libraries (CMake caches where it found
# them) start again.
if [ "$(cat "$work/made-with" 2>/dev/null)" != "$tc $deps" ]; then
  rm -rf "$work" && mkdir -p "$work" && echo "$tc $deps" > "$work/made-with"
fi
# The CUDA layer: nvcc compiles the kernels (device code only) and the library reads cuda.h's
# declarations; it links nothing of CUDA's and loads the driver at run time (docs/WHEELS.md).
# The toolkit's folder joins the roots the toolchain file searches, for cuda.h alone.
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { echo "build-wheels: no nvcc (the CUDA toolkit): the wheels carry the CUDA kernels" >&2; exit 1; }
cuda_root=$(cd "$(dirname "$(readlink -f "$nvcc")")/.." && pwd)
SHARDPACK_WHEEL_ROOTS="$deps;$cuda_root" cmake -S . -B "$work/library" "${release[@]}" \
  -DCMAKE_PREFIX_PATH="$deps" -DCUDAToolkit_ROOT="$cuda_root" \
  -DSHARDPACK_BUILD_TESTS=OFF -DSHARDPACK_BUILD_BENCH=OFF -DSHARDPACK_BUILD_SAMPLES=OFF \
  -DSHARDPACK_WITH_CUDA=ON > "$work/library.log" 2>&1 ||
  { cat "$work/library.log"; exit 1; }
grep -q "shardpack: CUDA toolkit ON" "$work/library.log" ||
  { grep -i cuda "$work/library.log"; echo "build-wheels: CMake did not find the CUDA toolkit at $cuda_root" >&2; exit 1; }
cmake --build "$work/library" -j "$jobs" >> "$work/library.log" 2>&1 || { tail -50 "$work/library.log"; exit 1; }
rm -rf "$work/stage"
cmake --install "$work/library" --prefix "$work/stage" >> "$work/library.log" 2>&1
strip -o "$work/shardpack" "$work/stage/bin/shardpack"
echo "build-wheels: library and CLI built ($((SECONDS - started)) s)"

# --- the licences of everything linked in --------------------------------------------
licences=$work/licences
rm -rf "$licences" && mkdir -p "$licences"
cp -r "$deps/share/licenses/." "$licences/"
mkdir -p "$licences/llvm-libc++" "$licences/zig" "$licences/nanobind"
cp "$zig_pkg/lib/libcxx/LICENSE.TXT" "$licences/llvm-libc++/LICENSE.TXT"
cp "$zig_pkg/LICENSE" "$licences/zig/LICENSE"  # compiler-rt and the glibc start files
cp "$tools"/lib/python3*/site-packages/nanobind-*.dist-info/licenses/LICENSE "$licences/nanobind/LICENSE"

# --- an extension and a wheel per Python ----------------------------------------------
rm -f "$out"/shardpack-*.whl "$out"/shardpack-*.tar.gz
mkdir -p "$out"
for v in $pythons; do
  case $v in
    3.9|3.10|3.11|3.12) ;;
    *) echo "build-wheels: Python $v: the wheels are cp39, cp310, cp311 and cp312-abi3 (3.12 and later)" >&2; exit 2 ;;
  esac
  if ! py=$(bash scripts/wheel/find_python.sh "$v"); then
    [ "$skip_missing" = 1 ] || { echo "build-wheels: or leave $v out with --python" >&2; exit 1; }
    echo "build-wheels: WARNING: no wheel for Python $v (--skip-missing)" >&2
    continue
  fi
  tag=cp${v/./}
  nanobind=$("$tools/bin/python" -m nanobind --cmake_dir)
  stable=OFF
  abi=$tag
  extra_flags=""
  [ "$v" = 3.9 ] && nanobind=$nanobind_39/nanobind/cmake
  if [ "$v" = 3.12 ]; then
    stable=ON abi=abi3
    # Python.h under Py_LIMITED_API includes no <stdio.h>, and nanobind's headers use
    # stderr, which libc++'s headers do not bring in on their own.
    extra_flags="-include cstdio"
  fi
  include=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  prefix=$("$py" -c 'import sys; print(sys.prefix)')
  echo "build-wheels: the extension for $("$py" --version) ($abi)"
  SHARDPACK_WHEEL_ROOTS="$deps;$work/stage;$prefix" \
    cmake -S python -B "$work/ext-$tag" "${release[@]}" -DCMAKE_PREFIX_PATH="$deps;$work/stage" \
      -DSHARDPACK_INSTALLED_LIBRARY=ON -DSHARDPACK_STABLE_ABI=$stable -DPython_EXECUTABLE="$py" \
      -DPython_INCLUDE_DIR="$include" -Dnanobind_DIR="$nanobind" -DCMAKE_CXX_FLAGS="$extra_flags" \
      > "$work/ext-$tag.log" 2>&1 ||
    { cat "$work/ext-$tag.log"; exit 1; }
  cmake --build "$work/ext-$tag" -j "$jobs" >> "$work/ext-$tag.log" 2>&1 || { tail -50 "$work/ext-$tag.log"; exit 1; }
  extension=$(find "$work/ext-$tag" -maxdepth 1 -name "_shardpack*.so")
  mkdir -p "$work/strip-$tag"
  strip -o "$work/strip-$tag/$(basename "$extension")" "$extension"
  "$tools/bin/python" scripts/wheel/pack.py --repo . --extension "$work/strip-$tag/$(basename "$extension")" \
    --cli "$work/shardpack" --tag "$tag-$abi-manylinux_2_28_x86_64" --licenses "$licences" --out "$out"
done

# --- the manylinux check: auditwheel must give each wheel the tag it carries -----------
for wheel in "$out"/shardpack-*.whl; do
  report=$("$tools/bin/python" -m auditwheel show "$wheel" 2>&1)
  flat=$(tr -s ' \n' '  ' <<< "$report")  # auditwheel wraps its lines
  if [[ "$flat" != *'consistent with the following platform tag: "manylinux_2_28_x86_64"'* ]]; then
    echo "build-wheels: auditwheel does not give $(basename "$wheel") manylinux_2_28_x86_64:" >&2
    echo "$report" >&2
    exit 1
  fi
done
echo "build-wheels: $(ls "$out"/*.whl | wc -l) wheels in $out, checked by auditwheel ($((SECONDS - started)) s)"

# --- the source distribution, beside them: pip builds it where no wheel fits ------------
"$tools/bin/python" scripts/wheel/sdist.py --repo . --out "$out"
