#!/usr/bin/env bash
# The mapped shard writes on a real xfs (`auto` maps there as on ext4, io::MappedWritesPreferred),
# in a 320 MiB file system on a loop device:
#   - the mapped file's unit tests and the pinned output bytes (every write method), with
#     the test binary's temporary directory on the xfs (TMPDIR); the rule test then checks
#     that `auto` maps there unless the host takes free memory back;
#   - a conversion with each write method gives the bytes of a reference conversion made
#     elsewhere, and verifies;
#   - with about 3.5 MiB left (the dataset takes 6), each method fails with exit 2 and an error naming the shard
#     and ENOSPC, publishes no manifest, and once the room is back, --resume completes to
#     the same bytes.
# Needs root (a loop device and a mount), mkfs.xfs (xfsprogs, scripts/install-deps.sh) and a
# kernel with xfs: exits 77, which ctest reports as skipped, saying what is missing or what
# refused (a sandbox may refuse the mount even to root).
# Usage: xfs_test.sh BUILD_DIR
set -euo pipefail
build=$1
skip() { echo "xfs_test: $*: skipped"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root (a loop device and a mount need it)"
command -v mkfs.xfs > /dev/null || skip "no mkfs.xfs (xfsprogs)"
grep -qw xfs /proc/filesystems || modprobe xfs 2> /dev/null || skip "the kernel has no xfs"
unshare --mount true 2> /dev/null || skip "no private mount namespace"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
truncate -s 320M "$work/xfs.img"  # xfsprogs' smallest file system is 300 MB
mkfs.xfs -q -f "$work/xfs.img" 2> "$work/err" || skip "mkfs.xfs failed: $(cat "$work/err")"

"$build/samples/make_images" "$work/src" --classes 4 --per-class 30 --seed 3 > /dev/null
# 120 pictures of 128x128: 6 shards of 20 records, about 6 MiB in all.
args=(--size 128x128 --shard-records 20 --quiet)
"$build/tools/shardpack" convert "$work/src" "$work/ref" "${args[@]}" --write-method write > /dev/null
tests="MappedWritableFileTest.*:ConvertTest.OutputBytesArePinned"
listed=$("$build/tests/shardpack_tests" --gtest_list_tests --gtest_filter="$tests" | grep -c "^  ")

# The mount lives in a namespace of its own, and its loop device is mount's (-o loop, cleared
# when the file system is unmounted): both gone with the namespace, even after a SIGKILL.
unshare --mount --propagation private bash -euo pipefail -c '
  build=$1 work=$2 tests=$3 listed=$4
  shift 4
  mnt=$work/mnt
  mkdir -p "$mnt"
  mount -t xfs -o loop "$work/xfs.img" "$mnt" 2> "$work/err" ||
    { echo "xfs_test: cannot mount the xfs ($(cat "$work/err")): skipped"; exit 77; }
  [ "$(stat -f -c %T "$mnt")" = xfs ] || { echo "xfs_test: $mnt is not xfs"; exit 1; }

  # Every test of the filter passed, none skipped, the rule and the pinned bytes among them.
  mkdir -p "$mnt/tmp"
  TMPDIR=$mnt/tmp "$build/tests/shardpack_tests" --gtest_filter="$tests" > "$work/gtest" 2>&1 ||
    { cat "$work/gtest"; echo "xfs_test: the unit tests failed on xfs"; exit 1; }
  ok=$(grep -c "^\[       OK \]" "$work/gtest" || true)
  if [ "$ok" -ne "$listed" ] || [ "$listed" -lt 14 ] ||
     ! grep -q "OK \] ConvertTest.OutputBytesArePinned" "$work/gtest" ||
     ! grep -q "OK \] MappedWritableFileTest.MappedWritesArePreferredOnExt4AndXfs" "$work/gtest"
  then
    cat "$work/gtest"
    echo "xfs_test: $ok of $listed unit tests passed on xfs (expected all, at least 14)"
    exit 1
  fi
  echo "xfs_test: $ok unit tests passed with their files on xfs"

  # auto maps here unless the host takes free memory back (the rule test above checks which).
  for method in map write auto; do
    dst=$mnt/$method
    "$build/tools/shardpack" convert "$work/src" "$dst" "$@" --write-method "$method" --json \
      > "$work/json"
    used=$(sed -n "s/^ *\"write_method\": \"\([a-z]*\)\".*/\1/p" "$work/json")
    if [ "$method" = auto ] && { [ "$used" = map ] || [ "$used" = write ]; }; then
      echo "xfs_test: auto wrote by $used"
    elif [ "$used" != "$method" ]; then
      echo "xfs_test: $method: --json names another method:"; cat "$work/json"; exit 1
    fi
    diff -r "$work/ref" "$dst"
    "$build/tools/shardpack" verify "$dst" > /dev/null
    rm -rf "$dst"
  done

  # About 3.5 MiB left (three shards and half of a fourth): a file takes the rest (fallocate, so the space is really held). With
  # 1 MiB, creating a file (whose transaction sets aside room for a new chunk of inodes)
  # failed before any shard in runs of the whole suite after the machine was idle. xfs
  # frees removed files in the background (inodegc); unmounting finishes that first. Near
  # full, xfs may have no room for a new chunk of inodes, and the first file the converter
  # opens would fail instead of a shard: so 64 files are made and every other one removed
  # first, which leaves 32 free inodes in a chunk that stays.
  fill() {
    local free i
    mkdir "$mnt/inodes"
    for i in $(seq 64); do : > "$mnt/inodes/$i"; done
    for i in $(seq 2 2 64); do rm "$mnt/inodes/$i"; done
    umount "$mnt"
    mount -t xfs -o loop "$work/xfs.img" "$mnt"
    free=$(df --output=avail -B1 "$mnt" | tail -1)
    fallocate -l $((free - (7 << 19))) "$mnt/filler"
    free=$(df --output=avail -B1 "$mnt" | tail -1)
    [ "$free" -le $((4 << 20)) ] ||
      { echo "xfs_test: $free bytes free after filling, expected about 3.5 MiB"; return 1; }
  }
  for method in map write; do
    dst=$mnt/full-$method
    fill
    rc=0
    "$build/tools/shardpack" convert "$work/src" "$dst" "$@" --write-method "$method" \
      2> "$work/err" || rc=$?
    # The mapped file sets the space aside first: where a shard'"'"'s data meets the full disk,
    # the ENOSPC is fallocate'"'"'s, never a SIGBUS. Creating a file may fail first, a shard'"'"'s
    # or the progress record'"'"'s (a new inode'"'"'s transaction sets room aside: every
    # temporary is made anew, io::CreateNewFile), as cleanly.
    if [ "$rc" -ne 2 ] || ! grep -q "ENOSPC" "$work/err" || ! grep -q "$dst/" "$work/err" ||
       grep -q "SIGBUS" "$work/err" ||
       { [ "$method" = map ] && ! grep -q "(fallocate)\|: create: " "$work/err"; }
    then
      echo "xfs_test: $method: exit $rc, expected 2 and an error naming the file and ENOSPC:"
      cat "$work/err"
      exit 1
    fi
    if [ -e "$dst/manifest.json" ]; then
      echo "xfs_test: $method: a manifest was published on a full file system"; exit 1
    fi
    echo "xfs_test: $method on a full xfs: $(cat "$work/err")"
    rm -r "$mnt/filler" "$mnt/inodes"
    "$build/tools/shardpack" convert "$work/src" "$dst" "$@" --write-method "$method" \
      --resume > /dev/null 2>&1
    diff -r "$work/ref" "$dst"
    "$build/tools/shardpack" verify "$dst" > /dev/null
    rm -rf "$dst"
  done
  umount "$mnt"
  echo "xfs_test: mapped and written shards on xfs: the same bytes, and a full disk fails cleanly and resumes"
' _ "$build" "$work" "$tests" "$listed" "${args[@]}"
