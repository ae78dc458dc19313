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
# A suite newer than this debootstrap (Debian 14, forky, on Debian 12's) is made by sid's
# script, as debootstrap makes every suite after trixie.
script=""
[ -e "/usr/share/debootstrap/scripts/$suite" ] || script=/usr/share/debootstrap/scripts/sid
# A suite that has left the main mirror (Debian 11 once its LTS ends) is on the archive.
made=""
for mirror in http://deb.debian.org/debian http://archive.debian.org/debian; do
  rm -rf "$root"
  if debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      "$suite" "$root" "$mirror" $script > "$cache/chroot-$suite.log" 2>&1; then
    made=$mirror
    break
  fi
  echo "make_chroot: $suite from $mirror failed: $(tail -1 "$cache/chroot-$suite.log")" >&2
done
[ -n "$made" ] || { tail -30 "$cache/chroot-$suite.log" >&2; exit 1; }
chroot "$root" apt-get clean
touch "$root/.done"
echo "$root"
