#!/usr/bin/env bash
# Makes (once) a minimal Debian SUITE root for the wheel test: debootstrap's minbase plus
# Python 3, its venv module and the CA certificates; no compiler, no -dev package, nothing of
# shardpack. Kept under CACHE/chroot-SUITE; a finished one is reused.
# Usage: make_chroot.sh SUITE CACHE      (root; debootstrap from scripts/install-deps.sh)
set -euo pipefail
suite=$1 cache=$2
root=$cache/chroot-$suite
[ -f "$root/.done" ] && { echo "$root"; exit 0; }
rm -rf "$root" && mkdir -p "$cache"
debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
  "$suite" "$root" http://deb.debian.org/debian > "$cache/chroot-$suite.log" 2>&1 ||
  { tail -30 "$cache/chroot-$suite.log" >&2; exit 1; }
chroot "$root" apt-get clean
touch "$root/.done"
echo "$root"
