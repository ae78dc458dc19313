#!/usr/bin/env bash
# Installs, builds and runs every test: the C++ suite (ctest, with the fuzz corpus
# replayed), the Python package's (pytest, after scripts/install-python.sh installs it into
# pyenv's python3), the wheels' (scripts/build-wheels.sh, then tests/wheel/wheel_test.sh
# installs them in Debian 11 and 13 roots) and the sdist's (tests/wheel/sdist_test.sh), the GPU check kit's (tests/device_kit_test.sh: it builds, its programs
# and extension stand alone; docs/GPU.md), and the interoperability tests against
# TensorFlow, DALI and python-lmdb (scripts/test-interop.sh, in the venv out/venv-interop).
# Run as root on a fresh Debian 12 machine: bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
echo "test: C++ suite passed ($((SECONDS - start)) s)"
bash scripts/install-python.sh
python3 -m pytest python/tests -q
echo "test: Python package passed ($((SECONDS - start)) s)"
# The wheels (docs/WHEELS.md) of the test roots' Pythons (3.9, 3.12+) and of python3 (3.11),
# installed as a user installs them
bash scripts/build-wheels.sh --python "3.9 3.10 3.11 3.12" --skip-missing
bash tests/wheel/wheel_test.sh
bash tests/wheel/sdist_test.sh
echo "test: wheels and sdist passed ($((SECONDS - start)) s)"
bash tests/device_kit_test.sh
echo "test: GPU check kit passed ($((SECONDS - start)) s)"
bash scripts/test-interop.sh
echo "test: everything passed in $((SECONDS - start)) s"
