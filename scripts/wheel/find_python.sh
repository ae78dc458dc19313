#!/usr/bin/env bash
# Prints the path of a CPython X.Y with its headers (Python.h), for building its wheel or
# installing one into a venv of it: SHARDPACK_PYTHON_X_Y where set (e.g.
# SHARDPACK_PYTHON_3_9=/opt/py39/bin/python3.9), else pythonX.Y on PATH, else pyenv's.
# With --venv the interpreter must also have its venv module. Exit 1, saying so, when none.
# Usage: bash scripts/wheel/find_python.sh X.Y [--venv]
set -euo pipefail
v=${1:?usage: find_python.sh X.Y [--venv]}
var="SHARDPACK_PYTHON_${v//./_}"
check='import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'
[ "${2:-}" = --venv ] && check="import venv; $check"
if [ -n "${!var:-}" ]; then
  [ -x "${!var}" ] || { echo "find_python: $var=${!var} is not an executable" >&2; exit 1; }
  echo "${!var}"
  exit 0
fi
# A pyenv shim on PATH that has no such version fails the check and is passed over.
for p in $(command -v "python$v" 2>/dev/null) "$HOME"/.pyenv/versions/"$v".*/bin/python"$v"; do
  if [ -x "$p" ] && "$p" -c "$check" 2>/dev/null; then
    echo "$p"
    exit 0
  fi
done
echo "find_python: no Python $v with its headers (Python.h)${2:+ and its venv module}: set $var to one" >&2
exit 1
