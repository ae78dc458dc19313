#!/usr/bin/env bash
# Installs what the interoperability tests (tests/interop) need: TensorFlow (CPU), NVIDIA
# DALI, python-lmdb and pytest, pinned in tests/interop/requirements.txt, into a virtual
# environment of their own, out/venv-interop (INTEROP_VENV to move it), made from pyenv's
# python3 (PYTHON to use another). A virtual environment keeps TensorFlow's pins (numpy,
# protobuf) away from the interpreter that scripts/install-python.sh fills for the Python
# binding, and `rm -rf out/venv-interop` undoes it all. The tests use the CLI and the C++
# samples, except test_keras.py (shardpack.tf), which uses the binding: the wheel that
# scripts/install-python.sh leaves in out/python-wheel is installed here when it exists.
# Idempotent: an environment that already satisfies the requirements is left as it is.
# Usage: bash scripts/install-interop.sh      (about 35 s and 2.2 GB the first time)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
venv=${INTEROP_VENV:-out/venv-interop}
requirements=tests/interop/requirements.txt
stamp="$venv/.requirements.sha256"

if [ ! -x "$venv/bin/python" ]; then
  echo "install-interop: creating $venv with $("$py" --version) ($(command -v "$py"))"
  "$py" -m venv "$venv"
fi
want=$(sha256sum "$requirements" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "install-interop: $venv is up to date with $requirements"
else
  echo "install-interop: installing $requirements into $venv"
  start=$(date +%s)
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore -r "$requirements"
  echo "$want" > "$stamp"
  echo "install-interop: installed in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
fi

# TensorFlow logs to stderr on import; that is shown only if an import fails.
versions=$("$venv/bin/python" - 2>&1 <<'PY'
import importlib
for name, module in (("tensorflow-cpu", "tensorflow"), ("lmdb", "lmdb"), ("pytest", "pytest")):
    print(f"install-interop: {name} {importlib.import_module(module).__version__}")
try:
    import nvidia.dali
    print(f"install-interop: nvidia-dali {nvidia.dali.__version__}")
except Exception as e:  # the DALI tests skip and say why
    print(f"install-interop: nvidia-dali does not import here: {type(e).__name__}: {e}")
PY
) || { echo "$versions" >&2; echo "install-interop: an import failed" >&2; exit 1; }
grep '^install-interop: ' <<< "$versions"

# The Python binding, for test_keras.py: the wheel of this checkout that
# scripts/install-python.sh built. Without it those tests skip, saying so.
wheel=$(ls out/python-wheel/shardpack-*.whl 2> /dev/null | head -1 || true)
if [ -n "$wheel" ]; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore --force-reinstall --no-deps "$wheel"
  echo "install-interop: $(basename "$wheel") (the binding, for test_keras.py)"
else
  echo "install-interop: no out/python-wheel (bash scripts/install-python.sh builds it): test_keras.py will skip"
fi
