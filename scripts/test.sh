#!/usr/bin/env bash
# Installs, builds and runs every test. Run as root on a fresh Debian 12 machine:
# bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
