#!/usr/bin/env bash
# The wheels as a user installs them (docs/WHEELS.md): in a minimal Debian root that is not
# this build machine (no compiler, no -dev package, no shardpack build tree, its own glibc
# and Python), `pip install` of the wheel into a venv, then:
#   - `shardpack --version`; convert (TFRecord, LMDB, JPEG-encoded) -> verify -> info ->
#     bench on the JPEG/PNG images that build/samples/make_images writes;
#   - the shard bytes equal those of the CMake build (build/tools/shardpack) on the same images;
#   - the Loader's batches (framework="numpy", NumPy alone in the venv) equal those of the
#     CMake build's extension (pyenv's python3, scripts/install-python.sh) on the same dataset;
#   - a dataset served over https:// by nginx on loopback: verify and the Loader, with
#     CURL_CA_BUNDLE and then with the certificate in the system's store only;
#   - the CUDA layer without a driver, and with the CUDA toolkit's stub as the driver;
#   - beside PyTorch (from PyPI in the Debian 13 root; this machine's python3 and its torch),
#     imported in both orders;
#   - the wheel's CLI under this machine's MPI launchers (tests/scale/mpi_test.sh).
# Roots: Debian 11 (glibc 2.31, Python 3.9: the cp39 wheel), Debian 13 (glibc 2.41, Python
# 3.13: the cp312-abi3 wheel; PyTorch from PyPI beside it) and Debian 14, testing (Python
# 3.14: the abi3 wheel again), made once by tests/wheel/make_chroot.sh. The cp310 wheel with
# this machine's Python 3.10.
# Usage: bash tests/wheel/wheel_test.sh [SUITE...]   (root; after scripts/build-wheels.sh,
#        scripts/build.sh and scripts/install-python.sh; default suites: bullseye trixie forky)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
suites=${*:-bullseye trixie forky}
cache=${SHARDPACK_WHEEL_CACHE:-$HOME/.cache/shardpack-wheel}
host_cli=$repo/build/tools/shardpack
[ -x "$host_cli" ] || { echo "wheel_test: $host_cli missing: run scripts/build.sh" >&2; exit 1; }
python3 -c "import shardpack" 2>/dev/null ||
  { echo "wheel_test: python3 lacks shardpack: run scripts/install-python.sh" >&2; exit 1; }
version=$(sed -n 's/^project(shardpack VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
# The CUDA toolkit's stub of the driver library (the wheels are built with the toolkit).
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
cuda_stub=""
for f in "$cuda_root"/lib64/stubs/libcuda.so "$cuda_root"/targets/x86_64-linux/lib/stubs/libcuda.so; do
  [ -f "$f" ] && { cuda_stub=$f; break; }
done
[ -n "$cuda_stub" ] || { echo "wheel_test: no libcuda.so stub under $cuda_root (the CUDA toolkit)" >&2; exit 1; }

work=$(mktemp -d)
nginx_pid=""
cleanup() {
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The images and the CMake build's shards, made once for every suite.
"$repo/build/samples/make_images" "$work/images" --classes 4 --per-class 24 > /dev/null
convert_args() {  # convert_args NAME: the convert options of dataset NAME
  case $1 in
    tfrecord) echo "--format tfrecord --size 64x64 --fit crop --shuffle --seed 1 --shard-size 200000" ;;
    lmdb) echo "--format lmdb --size 64x64 --fit crop --shuffle --seed 1" ;;
    jpeg) echo "--format tfrecord --encoding jpeg --quality 90 --size 72x60 --fit pad --seed 2" ;;
  esac
}
digest() {  # digest DIR: the sha256 of every file in DIR but rejects.tsv, by name
  (cd "$1" && find . -type f ! -name rejects.tsv | LC_ALL=C sort | xargs sha256sum)
}
for name in tfrecord lmdb jpeg; do
  # shellcheck disable=SC2046
  # From the folder, as in the root: the manifest records the source as given ("images").
  (cd "$work" && "$host_cli" convert images "host-$name" $(convert_args "$name") --threads 2 > /dev/null 2>&1)
done

# The Loader's batches, as .npz, of a dataset (a path or URL): run by both Pythons.
cat > "$work/batches.py" <<'PY'
import sys

import numpy as np
import shardpack

path, out = sys.argv[1], sys.argv[2]
loader = shardpack.Loader(path, batch_size=16, seed=7, framework="numpy", output_size=48,
                          random_crop=True, flip=True, normalize="imagenet", num_threads=2)
assert loader.framework == "numpy", loader.framework
images, labels = [], []
for epoch in range(2):
    for x, y in loader:
        images.append(np.array(x))
        labels.append(np.array(y))
dataset = shardpack.Dataset(path)
first = dataset[0]
np.savez(out, images=np.concatenate(images), labels=np.concatenate(labels),
         first=np.array(first.pixels), first_label=np.array(first.label))
print(f"batches: {path}: {sum(len(y) for y in labels)} samples in 2 epochs")
PY
for name in tfrecord lmdb jpeg; do
  python3 "$work/batches.py" "$work/host-$name" "$work/host-$name.npz" > /dev/null
done

# The wheel beside PyTorch (ARGS: DATASET NPZ ORDER): imported in ORDER ("shardpack, torch"
# or "torch, shardpack"), the batches as torch tensors equal the NumPy ones of NPZ, a
# backward pass runs on them, and without a GPU Loader(device="cuda:0") says why.
cat > "$work/torch_check.py" <<'PY'
import sys
exec(f"import {sys.argv[3]}")
import numpy as np
import shardpack
import torch

assert shardpack.__file__.startswith(sys.prefix), f"not the wheel's shardpack: {shardpack.__file__}"
loader = shardpack.Loader(sys.argv[1], batch_size=16, seed=7, framework="torch", output_size=48,
                          random_crop=True, flip=True, normalize="imagenet", num_threads=2)
images = torch.cat([x.clone() for x, _ in loader])
expected = np.load(sys.argv[2])["images"][: len(images)]
assert np.array_equal(images.numpy(), expected), "torch batches differ from the numpy ones"
model = torch.nn.Conv2d(3, 4, 3)
model(images[:4]).sum().backward()
if not torch.cuda.is_available():
    # The wheel's CUDA layer, on a machine without a driver: a clear error, not a crash.
    try:
        shardpack.Loader(sys.argv[1], batch_size=16, framework="torch", device="cuda:0")
        sys.exit("wheel_test: Loader(device='cuda:0') worked without a GPU")
    except shardpack.UnavailableError as error:
        assert "no CUDA device: no NVIDIA driver is installed" in str(error), str(error)
print(f"wheel_test: import {sys.argv[3]}: torch {torch.__version__} batches equal, a backward pass ran")
PY
torch_pin=$(grep '^torch==' python/requirements-torch.txt)

# nginx over TLS on an ephemeral loopback port, serving folder $1: sets port and nginx_pid.
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$work/key.pem" -out "$work/cert.pem" \
  > "$work/openssl.log" 2>&1 || { cat "$work/openssl.log"; exit 1; }
start_nginx() {
  local root=$1
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$work/nginx"
  cat > "$work/nginx/nginx.conf" <<CONF
error_log $work/nginx/error.log warn;
pid $work/nginx/nginx.pid;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path $work/nginx/client_body; proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi; uwsgi_temp_path $work/nginx/uwsgi; scgi_temp_path $work/nginx/scgi;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$port ssl;
    ssl_certificate $work/cert.pem; ssl_certificate_key $work/key.pem;
    root $root;
  }
}
CONF
  /usr/sbin/nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -g "daemon off; master_process off;" \
    > "$work/nginx/out.log" 2>&1 &
  nginx_pid=$!
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return
    sleep 0.05
  done
  echo "wheel_test: nginx did not listen: $(cat "$work/nginx/error.log")" >&2
  exit 1
}

# in_root ROOT COMMAND...: COMMAND in ROOT with /proc, /dev and the pip cache mounted in a
# mount namespace of its own (nothing stays mounted), and a clean environment.
in_root() {
  local root=$1; shift
  mkdir -p "$cache/pip" "$root/root/.cache/pip"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  unshare --mount --propagation private -- sh -c '
    root=$1 pip=$2; shift 2
    mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" &&
      mount --bind "$pip" "$root/root/.cache/pip" &&
      exec chroot "$root" /usr/bin/env -i PATH=/work/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root LANG=C.UTF-8 "$@"' sh "$root" "$cache/pip" "$@"
}

tested=""
for suite in $suites; do
  root=$(bash tests/wheel/make_chroot.sh "$suite" "$cache")
  py=$(chroot "$root" python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  tag=cp${py/./}-cp${py/./}
  [ "${py#3.}" -ge 12 ] && tag=cp312-abi3
  wheel=$repo/out/wheels/shardpack-$version-$tag-manylinux_2_28_x86_64.whl
  if [ ! -f "$wheel" ]; then
    # scripts/test.sh builds with --skip-missing: a machine without that Python tests the rest
    echo "wheel_test: WARNING: $suite not tested: $wheel missing (scripts/build-wheels.sh --python $py)" >&2
    continue
  fi
  tested="$tested $suite"
  glibc=$(chroot "$root" ldd --version | awk 'NR == 1 {print $NF}')  # reads all: no SIGPIPE
  echo "wheel_test: $suite (glibc $glibc, Python $py): $(basename "$wheel")"

  rm -rf "$root/work" && mkdir -p "$root/work"
  cp "$wheel" "$root/work/"
  cp -r "$work/images" "$work/batches.py" "$work/cert.pem" "$root/work/"
  # pip reaches PyPI as this machine's pip does: through the CA bundle it is given, if any
  # (a network whose proxy signs with its own CA). Only pip is given it.
  pip_cert=${PIP_CERT:-$(pip config get global.cert 2>/dev/null || true)}
  pip_env=""
  if [ -n "$pip_cert" ] && [ -f "$pip_cert" ]; then
    cp "$pip_cert" "$root/work/pip-ca.pem"
    pip_env="PIP_CERT=/work/pip-ca.pem"
  fi
  rm -f "$root/usr/local/share/ca-certificates/shardpack-test.crt"
  in_root "$root" update-ca-certificates --fresh > /dev/null 2>&1
  cat > "$root/work/run.sh" <<EOF
set -eu
cd /work
for compiler in cc gcc g++ c++ clang; do
  ! command -v \$compiler > /dev/null || { echo "a compiler (\$compiler) is installed here" >&2; exit 1; }
done
python3 -m venv /work/venv
t0=\$(date +%s%N)
env $pip_env pip install --quiet --disable-pip-version-check /work/$(basename "$wheel")
echo "pip install: \$(( (\$(date +%s%N) - t0) / 1000000 )) ms"
pip list --disable-pip-version-check 2>/dev/null | grep -i -E "^(numpy|shardpack|torch) " | tr -s ' ' | tr '\n' ' '; echo
shardpack --version
for name in tfrecord lmdb jpeg; do
  case \$name in
    tfrecord) args="$(convert_args tfrecord)" ;;
    lmdb) args="$(convert_args lmdb)" ;;
    jpeg) args="$(convert_args jpeg)" ;;
  esac
  # make_images writes two files convert must reject (a truncated JPEG, a text file)
  shardpack convert images ds-\$name \$args --threads 2 > convert-\$name.log 2>&1
  grep -q "96 written, 2 rejected" convert-\$name.log || { cat convert-\$name.log; exit 1; }
  shardpack verify ds-\$name
  shardpack info ds-\$name > /dev/null
  shardpack bench ds-\$name --batch-size 16 --epochs 2 > bench-\$name.log
  python3 batches.py ds-\$name wheel-\$name.npz
done
# The CUDA layer, which loads the driver at run time: none here, so the GPU half of bench
# says what is missing; then the CUDA toolkit's stub as libcuda.so.1, which has every
# function of the driver and no device: each one the wheel calls is found and cuInit answered.
if shardpack bench ds-tfrecord --device 0 --batch-size 16 --epochs 1 > cuda.log 2>&1; then
  echo "bench --device 0 passed where there is no GPU" >&2; exit 1
fi
grep -q "CUDA device 0: no CUDA device: no NVIDIA driver is installed (dlopen: libcuda.so.1" cuda.log ||
  { cat cuda.log; exit 1; }
if LD_LIBRARY_PATH=/work/cuda-stub shardpack bench ds-tfrecord --device 0 --batch-size 16 --epochs 1 > cuda-stub.log 2>&1; then
  echo "bench --device 0 passed on the stub driver" >&2; exit 1
fi
grep -q "the libcuda.so.1 found is the CUDA toolkit's stub, not an NVIDIA driver (cuInit: CUDA_ERROR_STUB_LIBRARY)" cuda-stub.log ||
  { cat cuda-stub.log; exit 1; }
echo "CUDA: no driver and the stub driver named"
EOF
  mkdir -p "$root/work/cuda-stub"
  cp "$cuda_stub" "$root/work/cuda-stub/libcuda.so.1"
  in_root "$root" sh /work/run.sh
  # PyTorch in the root, installed from PyPI as a user does (its CUDA build and the nvidia-*
  # wheels, about 5 GB, from the shared pip cache after the first time) in a venv beside
  # the wheel, where PyPI has it for the root's Python: imported before and after shardpack.
  if [ "$suite" = trixie ]; then
    cp "$work/torch_check.py" "$root/work/torch_check.py"
    in_root "$root" sh -c "cd /work && rm -rf /work/torch-venv && python3 -m venv /work/torch-venv &&
      env $pip_env /work/torch-venv/bin/pip install --quiet --disable-pip-version-check \
        $torch_pin /work/$(basename "$wheel") &&
      /work/torch-venv/bin/python torch_check.py ds-tfrecord wheel-tfrecord.npz 'shardpack, torch' &&
      /work/torch-venv/bin/python torch_check.py ds-tfrecord wheel-tfrecord.npz 'torch, shardpack';
      rc=\$?; rm -rf /work/torch-venv; exit \$rc" 2>&1 |
      sed "s/^/  $suite: /"
    [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "wheel_test: $suite: the wheel beside torch failed" >&2; exit 1; }
  fi
  for name in tfrecord lmdb jpeg; do
    diff <(digest "$work/host-$name") <(digest "$root/work/ds-$name") > /dev/null ||
      { echo "wheel_test: $suite: the wheel's $name shards differ from the CMake build's:" >&2
        diff <(digest "$work/host-$name") <(digest "$root/work/ds-$name") >&2; exit 1; }
  done
  echo "wheel_test: $suite: shard bytes equal the CMake build's (tfrecord, lmdb, jpeg)"
  # The wheel dispatches to the same SIMD kernels as the CMake build on this CPU.
  features() { grep "^CPU features the kernels use:" "$1" || echo "no CPU features line in $1"; }
  "$host_cli" bench "$work/host-tfrecord" --batch-size 16 --epochs 2 > "$work/bench-host.log"
  [ "$(features "$work/bench-host.log")" = "$(features "$root/work/bench-tfrecord.log")" ] ||
    { echo "wheel_test: $suite: the wheel's kernels differ: $(features "$root/work/bench-tfrecord.log")," \
        "the CMake build's: $(features "$work/bench-host.log")" >&2; exit 1; }
  echo "wheel_test: $suite: $(features "$work/bench-host.log"), as the CMake build"
  python3 - "$work" "$root/work" <<'PY'
import sys
import numpy as np
host, wheel = sys.argv[1], sys.argv[2]
for name in ("tfrecord", "lmdb", "jpeg"):
    a, b = np.load(f"{host}/host-{name}.npz"), np.load(f"{wheel}/wheel-{name}.npz")
    for key in a.files:
        if not np.array_equal(a[key], b[key]):
            diff = np.abs(a[key].astype(np.float64) - b[key].astype(np.float64))
            sys.exit(f"wheel_test: {name}: {key} differs from the CMake build's "
                     f"(max |diff| {diff.max()}, {np.count_nonzero(diff)} values)")
print("wheel_test: the Loader's batches equal the CMake build's (tfrecord, lmdb, jpeg)")
PY

  # Over https: the wheel's libcurl (mbedTLS) against nginx, with the certificate named by
  # CURL_CA_BUNDLE, then refused without it, then found in the system's store alone.
  start_nginx "$root/work"
  url=https://127.0.0.1:$port/ds-tfrecord
  in_root "$root" sh -c "cd /work && CURL_CA_BUNDLE=/work/cert.pem shardpack verify $url > /dev/null &&
    CURL_CA_BUNDLE=/work/cert.pem python3 batches.py $url https.npz > /dev/null"
  cmp <(python3 -c "import numpy as np, sys; d = np.load(sys.argv[1]); sys.stdout.buffer.write(d['images'].tobytes())" "$root/work/https.npz") \
      <(python3 -c "import numpy as np, sys; d = np.load(sys.argv[1]); sys.stdout.buffer.write(d['images'].tobytes())" "$work/host-tfrecord.npz") ||
    { echo "wheel_test: $suite: the batches over https differ" >&2; exit 1; }
  if in_root "$root" sh -c "rm -rf /root/.cache/shardpack; shardpack verify $url" > "$work/untrusted.log" 2>&1; then
    echo "wheel_test: $suite: an untrusted certificate was accepted" >&2; exit 1
  fi
  grep -q "self-signed certificate.*private CA.*curl error 60" "$work/untrusted.log" ||
    { echo "wheel_test: $suite: unexpected error:" >&2; cat "$work/untrusted.log" >&2; exit 1; }
  cp "$work/cert.pem" "$root/usr/local/share/ca-certificates/shardpack-test.crt"
  in_root "$root" update-ca-certificates > /dev/null 2>&1
  in_root "$root" sh -c "rm -rf /root/.cache/shardpack; shardpack verify $url > /dev/null"
  rm -f "$root/usr/local/share/ca-certificates/shardpack-test.crt"
  in_root "$root" update-ca-certificates --fresh > /dev/null 2>&1
  kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true; nginx_pid=""
  echo "wheel_test: $suite: https:// read with CURL_CA_BUNDLE and with the system's store; refused untrusted"
done
[ -n "$tested" ] || { echo "wheel_test: no root was tested: no wheel of their Pythons" >&2; exit 1; }

# The cp310 wheel, which no root's Python takes (Ubuntu 22.04's 3.10): in a venv of this
# machine's Python 3.10 (pyenv), convert writes the CMake build's bytes and the Loader's
# batches equal its batches.
wheel310=$repo/out/wheels/shardpack-$version-cp310-cp310-manylinux_2_28_x86_64.whl
if [ -f "$wheel310" ]; then
  py310=$(bash scripts/wheel/find_python.sh 3.10 --venv) ||
    { echo "wheel_test: $wheel310 built, but no Python 3.10 to install it" >&2; exit 1; }
  "$py310" -m venv "$work/venv310"
  "$work/venv310/bin/pip" install --quiet --disable-pip-version-check "$wheel310"
  # shellcheck disable=SC2046
  (cd "$work" && venv310/bin/shardpack convert images cp310-tfrecord $(convert_args tfrecord) --threads 2 > /dev/null 2>&1)
  diff <(digest "$work/host-tfrecord") <(digest "$work/cp310-tfrecord") > /dev/null ||
    { echo "wheel_test: cp310: the shards differ from the CMake build's" >&2; exit 1; }
  "$work/venv310/bin/python" "$work/batches.py" "$work/cp310-tfrecord" "$work/cp310.npz" > /dev/null
  python3 - "$work/host-tfrecord.npz" "$work/cp310.npz" <<'PY'
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
for key in a.files:
    assert np.array_equal(a[key], b[key]), f"wheel_test: cp310: {key} differs from the CMake build's"
PY
  echo "wheel_test: cp310 ($("$py310" --version 2>&1), this machine): shard bytes and batches equal the CMake build's"
  tested="$tested cp310"
else
  echo "wheel_test: WARNING: cp310 not tested: $wheel310 missing (scripts/build-wheels.sh --python 3.10)" >&2
fi

# Beside PyTorch: the wheel of this machine's python3 in a venv that sees its site-packages
# (torch as scripts/install-python.sh installs it), imported before and after torch.
py=$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
tag=cp$py-cp$py
[ "$py" -ge 312 ] && tag=cp312-abi3
python3 -m venv --system-site-packages "$work/torch-venv"
"$work/torch-venv/bin/pip" install --quiet --disable-pip-version-check --no-deps --ignore-installed \
  "$repo/out/wheels/shardpack-$version-$tag-manylinux_2_28_x86_64.whl"
for order in "shardpack, torch" "torch, shardpack"; do
  (cd "$work" && "$work/torch-venv/bin/python" "$work/torch_check.py" "$work/host-tfrecord" "$work/host-tfrecord.npz" "$order")
done

# convert --mpi with the wheel's CLI, which loads the MPI library at run time: under Open
# MPI's mpirun and MPICH's mpiexec (scripts/install-deps.sh installs both).
[ -x "$repo/build/tests/scale_tool" ] || { echo "wheel_test: build/tests/scale_tool missing: run scripts/build.sh" >&2; exit 1; }
bash tests/scale/mpi_test.sh "$work/torch-venv/bin/shardpack" "$repo/build/tests/scale_tool" > "$work/mpi.log" 2>&1 ||
  { cat "$work/mpi.log" >&2; echo "wheel_test: the wheel's convert --mpi failed" >&2; exit 1; }
grep -q "mpiexec.mpich -n 2 shardpack convert --mpi" "$work/mpi.log" ||
  { echo "wheel_test: MPICH's launcher was not tested (Debian: mpich)" >&2; exit 1; }
echo "wheel_test: the wheel's convert --mpi under Open MPI and MPICH: $(grep -c '^==' "$work/mpi.log") checks of tests/scale/mpi_test.sh passed"
echo "wheel_test: passed ($tested; beside torch; MPI)"
