#!/usr/bin/env bash
# Installs the dependencies (Debian 12 packages) and builds shardpack into build/.
# Usage: bash scripts/build.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" > build.cmake.log 2>&1 ||
  { cat build.cmake.log; exit 1; }
cmake --build build -j "$(nproc)"
