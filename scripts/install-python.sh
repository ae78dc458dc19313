#!/usr/bin/env bash
# Installs the Python package shardpack (python/) and what its tests, samples and benchmark
# need, into the python3 on PATH: on this project's machines pyenv's Python 3.11, whose pip
# reaches PyPI (no virtual environment: the package goes into that interpreter). Set PYTHON
# to use another interpreter. Idempotent: what is installed already is kept, and the
# extension is rebuilt incrementally in python/build/.
# Usage: bash scripts/install-python.sh   (after scripts/install-deps.sh, which build.sh runs)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
pip=("$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore)
echo "install-python: $("$py" --version) ($(command -v "$py"))"

"${pip[@]}" -r python/requirements-build.txt -r python/requirements-test.txt

# PyTorch: a CPU training step must work. First the light install (requirements-torch.txt,
# --no-deps: about 0.9 GB instead of 4 GB, the CUDA libraries coming from the toolkit);
# where that does not import (no CUDA 13 toolkit), torch's own full dependency set.
torch_works() {
  "$py" - <<'PY' 2>/dev/null
import torch, torchvision
assert (torch.__version__.split("+")[0], torchvision.__version__.split("+")[0]) == ("2.14.1", "0.29.2")
model = torchvision.models.resnet18(num_classes=4)
loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 3, 32, 32)), torch.tensor([0, 3]))
loss.backward()
PY
}
if torch_works; then
  echo "install-python: torch present"
else
  echo "install-python: installing torch (light: --no-deps, CUDA libraries from the toolkit)"
  # pip warns that torch's declared nvidia-*/triton dependencies are missing: on purpose.
  "${pip[@]}" --no-deps -r python/requirements-torch.txt
  if ! torch_works; then
    echo "install-python: the light torch does not import here; installing torch with its dependencies"
    "${pip[@]}" "$(grep '^torch==' python/requirements-torch.txt)" \
      "$(grep '^torchvision==' python/requirements-torch.txt)"
    torch_works || { echo "install-python: torch does not work" >&2; exit 1; }
  fi
fi

# The package itself: scikit-build-core runs python/CMakeLists.txt, which builds the C++
# library from this checkout and links it statically into the extension.
# Built as a wheel kept in out/python-wheel, which scripts/install-interop.sh installs
# into the interop tests' environment too (tests/interop/test_keras.py).
echo "install-python: building and installing python/ (shardpack)"
rm -rf out/python-wheel
"$py" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps \
  -w out/python-wheel ./python
"${pip[@]}" --force-reinstall --no-deps out/python-wheel/shardpack-*.whl
"$py" -c "import shardpack; print('install-python: shardpack', shardpack.__version__)"
