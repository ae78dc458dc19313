#!/usr/bin/env bash
# Runs the interoperability tests (tests/interop: TensorFlow, DALI, python-lmdb, Caffe
# LMDB) against the shardpack CLI and C++ samples of a build, after installing their
# Python packages (scripts/install-interop.sh). It builds nothing: run scripts/build.sh
# first, or point SHARDPACK_BIN (default build/tools/shardpack) and SHARDPACK_SAMPLES
# (default build/samples) at another build. Extra arguments go to pytest.
# Usage: bash scripts/test-interop.sh [-k dali]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-interop.sh
export SHARDPACK_BIN=${SHARDPACK_BIN:-$PWD/build/tools/shardpack}
export SHARDPACK_SAMPLES=${SHARDPACK_SAMPLES:-$(dirname "$(dirname "$SHARDPACK_BIN")")/samples}
if [ ! -x "$SHARDPACK_BIN" ]; then
  echo "test-interop: $SHARDPACK_BIN: no shardpack binary; run bash scripts/build.sh" >&2
  exit 2
fi
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
# -rs: every skip is listed with its reason.
exec "${INTEROP_VENV:-out/venv-interop}/bin/python" -m pytest tests/interop -q -rs \
  -p no:cacheprovider "$@"
