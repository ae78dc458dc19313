#!/usr/bin/env bash
# Installs every build and test dependency of shardpack from Debian 12's packages.
# Idempotent: packages already present are left alone. Needs root (or sudo).
# The CUDA toolkit is optional and never installed here: CMake detects it.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  liblmdb-dev lmdb-utils
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev
  protobuf-compiler libprotobuf-dev
  libtbb-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libxxhash-dev
  clang-format clang-tidy
  # scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes, llvm-symbolizer
  clang libclang-rt-14-dev llvm
  # scale-out (docs/SCALE.md): the MPI launchers of the convert --mpi tests, Open MPI's and
  # MPICH's (the CLI loads either's library at run time: no MPI is needed to build); shards
  # over HTTP (libcurl) and the tests that serve a dataset with a real nginx on loopback
  # (openssl makes the HTTPS test's certificate)
  openmpi-bin mpich libcurl4-openssl-dev nginx-light openssl
  # the loader's read-ahead path (docs/LOADER.md): io_uring
  liburing-dev
  # scripts/device-kit.sh (docs/GPU.md): the kit's programs find their libraries beside them
  patchelf
  # tests/xfs_test.sh: the mapped shard writes on a real xfs (a loop device)
  xfsprogs
  # scripts/build-wheels.sh (docs/WHEELS.md): libjpeg-turbo's SIMD is assembled with nasm;
  # tests/wheel/wheel_test.sh installs the wheels in Debian roots made with debootstrap
  nasm debootstrap
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
