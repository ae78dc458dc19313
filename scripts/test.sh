#!/usr/bin/env bash
# Installs, builds and runs every test: the C++ suite (ctest), then the Python package's
# (pytest, after scripts/install-python.sh installs it into pyenv's python3).
# Run as root on a fresh Debian 12 machine: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
bash scripts/install-python.sh
python3 -m pytest python/tests -q
