#!/usr/bin/env bash
# Scale-out under a real launcher (issue 8, docs/SCALE.md), run by ctest:
#   1. `mpirun -np 2 shardpack convert --mpi` gives the same bytes, every file, as one
#      process (shard boundaries included: --shard-records, no rejects), and passes verify;
#      so does `mpiexec.mpich -n 2` (the MPICH ABI, where Debian's mpich is installed); an
#      MPI library that is not the launcher's, and none at all, are refused with the reason;
#   2. a job-array style run (--part I/3 as separate processes, then shardpack merge) too;
#   3. the loader's ranks under `mpirun -np 4`, and as 4 processes with the variables
#      torchrun sets: every sample read exactly once per epoch, equal batches per rank.
# Usage: mpi_test.sh SHARDPACK SCALE_TOOL     (exit 77, a skip, when mpirun is missing)
set -euo pipefail
shardpack=$1
tool=$2
if ! command -v mpirun > /dev/null; then
  echo "mpi_test: SKIP: mpirun not found (Debian: openmpi-bin; scripts/install-deps.sh)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Root is refused by Open MPI unless confirmed; 4 ranks on fewer cores need --oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
mpi=(mpirun -np)

"$tool" images "$tmp/src" 60
opts=(--size 32x32 --shard-records 5 --shuffle --seed 7 --quiet --threads 1)
"$shardpack" convert "$tmp/src" "$tmp/single" "${opts[@]}" > /dev/null

echo "== mpirun -np 2 shardpack convert --mpi"
"${mpi[@]}" 2 "$shardpack" convert "$tmp/src" "$tmp/mpi" "${opts[@]}" --mpi
diff -r "$tmp/single" "$tmp/mpi"
"$shardpack" verify "$tmp/mpi"

# The MPI library is loaded at run time (tools/mpi_session.h): under MPICH's launcher the
# same binary takes MPICH's library (the other ABI). Debian: the mpich package.
if command -v mpiexec.mpich > /dev/null; then
  echo "== mpiexec.mpich -n 2 shardpack convert --mpi (the MPICH ABI)"
  mpiexec.mpich -n 2 "$shardpack" convert "$tmp/src" "$tmp/mpich" "${opts[@]}" --mpi
  diff -r "$tmp/single" "$tmp/mpich"
else
  echo "== no mpiexec.mpich (Debian: mpich): the MPICH ABI is not tested here"
fi
echo "== the launcher's rank count and the library's disagree: refused, nothing written"
rc=0
OMPI_COMM_WORLD_SIZE=3 SHARDPACK_MPI_LIBRARY=libmpi.so.40 "$shardpack" convert "$tmp/src" \
  "$tmp/wrong" "${opts[@]}" --mpi > "$tmp/wrong.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "sees 1 rank(s) where the launcher started 3" "$tmp/wrong.log" &&
  [ ! -e "$tmp/wrong" ] || { echo "mpi_test: a mismatched MPI gave exit $rc:"; cat "$tmp/wrong.log"; exit 1; }
echo "== no MPI library: named, with the way without MPI"
rc=0
SHARDPACK_MPI_LIBRARY=/nonexistent/libmpi.so "$shardpack" convert "$tmp/src" "$tmp/none" \
  "${opts[@]}" --mpi > "$tmp/none.log" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "no MPI library found.*--part I/N.*/nonexistent/libmpi.so" "$tmp/none.log" ||
  { echo "mpi_test: without MPI, exit $rc:"; cat "$tmp/none.log"; exit 1; }

echo "== a rank that fails: nothing merged, every rank exits 2; --resume redoes only it"
mkdir -p "$tmp/fail/parts"
touch "$tmp/fail/parts/part-00001-of-00002"  # a file where rank 1's directory goes
rc=0
"${mpi[@]}" 2 "$shardpack" convert "$tmp/src" "$tmp/fail" "${opts[@]}" --mpi || rc=$?
[ "$rc" -eq 2 ] || { echo "mpi_test: a failed rank gave exit $rc, expected 2"; exit 1; }
[ ! -e "$tmp/fail/manifest.json" ] || { echo "mpi_test: merged despite a failed rank"; exit 1; }
rm "$tmp/fail/parts/part-00001-of-00002"
"${mpi[@]}" 2 "$shardpack" convert "$tmp/src" "$tmp/fail" "${opts[@]}" --mpi --resume
diff -r "$tmp/single" "$tmp/fail"

echo "== --part I/3 as separate tasks, then shardpack merge"
for i in 0 2 1; do
  "$shardpack" convert "$tmp/src" "$tmp/array" "${opts[@]}" --part "$i/3" > /dev/null
done
"$shardpack" merge "$tmp/array"
diff -r "$tmp/single" "$tmp/array"

echo "== the loader's ranks under mpirun -np 4 (Open MPI's variables)"
"${mpi[@]}" 4 "$tool" read "$tmp/single" "$tmp/read-mpi" 2 4
"$tool" check "$tmp/read-mpi" 60 2

echo "== the loader's ranks as 4 processes with torchrun's variables"
pids=()
for r in 0 1 2 3; do
  RANK=$r WORLD_SIZE=4 LOCAL_RANK=$r "$tool" read "$tmp/single" "$tmp/read-torchrun" 2 4 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$tool" check "$tmp/read-torchrun" 60 2
echo "mpi_test: passed"
