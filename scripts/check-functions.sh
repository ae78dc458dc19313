#!/usr/bin/env bash
# Checks that no function in lib/ is longer than 120 lines or has a cyclomatic complexity
# above 30, as lizard counts them (docs/DESIGN.md, "Code shape"): past those, a function
# holds more than one idea, and its branches are more than a reader or a test can follow.
# Installs lizard (pinned) into python3 (pyenv's, on PATH) where it is missing. Exits 1
# naming every function past a bound.
# Usage: bash scripts/check-functions.sh   (run by the ctest FunctionsTest)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
version=1.24.3
if [ "$("$py" -m lizard --version 2>/dev/null || true)" != "$version" ]; then
  "$py" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    "lizard==$version"
fi
mapfile -t sources < <(find lib -name '*.cc' -o -name '*.h' | sort)
over=$("$py" -m lizard -l cpp --length 120 --CCN 30 --warnings_only "${sources[@]}" || true)
if [ -n "$over" ]; then
  echo "$over"
  echo "check-functions: $(echo "$over" | wc -l) functions in lib/ are past 120 lines or complexity 30"
  exit 1
fi
echo "check-functions: every function in lib/ is within 120 lines and complexity 30 (${#sources[@]} files)"
