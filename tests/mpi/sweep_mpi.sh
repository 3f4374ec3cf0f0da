#!/usr/bin/env bash
# `mpirun -np N moesim sweep` (label mpi): the files it writes are byte-identical to a single
# process's `moesim sweep --jobs 1`, also after a rank was killed with SIGKILL mid-way and the
# sweep resumed with another number of ranks (or none); a bad scenario exits 2, said once, nothing
# written. Local ranks only; runs as root in CI (Open MPI refuses that unless told) and without ssh.
#
#   sweep_mpi.sh MOESIM SCENARIO WORK reference       the --jobs 1 run, WORK/ref (the others compare with it)
#   sweep_mpi.sh MOESIM SCENARIO WORK ranks N         mpirun -np N, each rank --jobs 1
#   sweep_mpi.sh MOESIM SCENARIO WORK kill-worker     -np 3, rank 2 killed; resumed with -np 2
#   sweep_mpi.sh MOESIM SCENARIO WORK kill-lead       -np 2, rank 0 (the CSV's writer) killed; resumed without mpirun
#   sweep_mpi.sh MOESIM SCENARIO WORK bad-input       -np 3 on the scenario with a field broken
set -uo pipefail
moesim=$1 scenario=$2 work=$3 mode=$4
ref=$work/ref

. "$(dirname "$0")/local_mpirun.sh"

fail() {
  echo "FAIL: $*"
  exit 1
}
# The processes whose parent is $1 (from /proc: procps may not be installed).
children_of() {
  local stat
  for stat in /proc/[0-9]*/stat; do
    # Fields after the command name, which is in parentheses and may hold spaces: state, ppid.
    awk -v parent="$1" '{ sub(/^.*\) /, ""); if ($2 == parent) print FILENAME }' "$stat" 2>/dev/null
  done | sed 's|^/proc/\([0-9]*\)/stat$|\1|'
}
rows() { if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi; }
# Every file of folder $1 is the reference's, byte for byte, and no other file is there.
same_as_reference() {
  diff -r "$ref" "$1" >/dev/null || {
    diff -r "$ref" "$1" | head -c 2000
    fail "$1 differs from the --jobs 1 run $ref"
  }
}
# $1 holds a prefix of the reference CSV (a partial last row at most) and its effective scenario.
prefix_of_reference() {
  local n
  n=$(wc -c <"$1/results.csv")
  cmp -s -n "$n" "$1/results.csv" "$ref/results.csv" || fail "$1/results.csv is not a prefix of $ref/results.csv"
  cmp -s "$1/scenario.effective.json" "$ref/scenario.effective.json" || fail "$1/scenario.effective.json differs"
}
# Starts `mpirun -np $1` on the sweep into $2, waits until the CSV holds $3 rows, kills rank $4
# with SIGKILL; mpirun must then end the job and exit non-zero.
kill_rank_midway() {
  local np=$1 out=$2 after=$3 victim=$4 pid child rank killed=""
  # The ranks at the lowest priority: the loop below must see the CSV grow while they run on every
  # core (starved, it saw the rows it waits for only once the sweep had all but finished).
  nice -n 19 "${mpi[@]}" -np "$np" "$moesim" sweep "$scenario" --out "$out" --jobs 1 --quiet >"$work/killed.log" 2>&1 &
  pid=$!
  # Until the CSV holds $after rows or the sweep ends, however long a loaded machine takes (ctest's
  # TIMEOUT bounds it): a fixed wait killed the victim early under load, and the check after the
  # resume then blamed the CSV for rows it never held.
  while [ "$(rows "$out/results.csv")" -lt "$after" ] && kill -0 "$pid" 2>/dev/null; do
    sleep 0.05
  done
  kill -0 "$pid" 2>/dev/null || fail "the sweep ended with $(rows "$out/results.csv") CSV lines, before rank $victim could be killed at $after"
  for child in $(children_of "$pid"); do
    rank=$(tr '\0' '\n' <"/proc/$child/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
    if [ "$rank" = "$victim" ]; then kill -9 "$child" && killed=$child; fi
  done
  wait "$pid"
  local code=$?
  [ -n "$killed" ] || fail "rank $victim was not found running once the CSV had $after rows"
  [ "$code" -ne 0 ] || fail "mpirun exited 0 although rank $victim was killed"
  echo "rank $victim (pid $killed) killed at $(rows "$out/results.csv") CSV lines; mpirun exited $code"
}

# The sweep into out=$work/$1 under mpirun -np $2, rank $3 killed once the CSV holds 100 rows: what
# is left is a prefix of the reference (rank 0 may have died inside a row: the resume drops it)
# and short of it.
killed_midway() {
  out=$work/$1
  rm -rf "$out"
  kill_rank_midway "$2" "$out" 100 "$3"
  prefix_of_reference "$out"
  [ "$(rows "$out/results.csv")" -lt "$(rows "$ref/results.csv")" ] || fail "the sweep finished before rank $3 was killed"
}

case $mode in
  reference)
    rm -rf "$work"
    mkdir -p "$work"
    "$moesim" sweep "$scenario" --out "$ref" --jobs 1 --quiet || fail "moesim sweep --jobs 1 exited $?"
    ;;
  ranks)
    np=$5
    out=$work/np$np
    rm -rf "$out"
    "${mpi[@]}" -np "$np" "$moesim" sweep "$scenario" --out "$out" --jobs 1 || fail "mpirun -np $np exited $?"
    same_as_reference "$out"
    ;;
  kill-worker)
    killed_midway kill-worker 3 2
    [ "$(rows "$out/results.csv")" -ge 100 ] || fail "the CSV lost rows it held when rank 2 was killed"
    "${mpi[@]}" -np 2 "$moesim" sweep "$scenario" --out "$out" --jobs 1 || fail "the resume with -np 2 exited $?"
    same_as_reference "$out"
    ;;
  kill-lead)
    killed_midway kill-lead 2 0
    "$moesim" sweep "$scenario" --out "$out" --jobs 2 --quiet || fail "the resume without mpirun exited $?"
    same_as_reference "$out"
    ;;
  bad-input)
    bad=$work/bad.json
    out=$work/bad-out
    rm -rf "$out"
    sed 's/"capacity_factor": *[0-9.]*/"capacity_factor": "1.2x"/' "$scenario" >"$bad"
    grep -q '"capacity_factor": "1.2x"' "$bad" || fail "could not break $scenario"
    "${mpi[@]}" -np 3 "$moesim" sweep "$bad" --out "$out" >"$work/bad.out" 2>"$work/bad.err"
    code=$?
    cat "$work/bad.err"
    [ "$code" -eq 2 ] || fail "exit code $code, expected 2"
    [ "$(grep -c '^moesim: error: ' "$work/bad.err")" -eq 1 ] || fail "the error is not said exactly once"
    grep -q "^moesim: error: $bad: \$.training.capacity_factor: " "$work/bad.err" || fail "the error names no file and field"
    [ ! -e "$out" ] || fail "$out was created"
    ;;
  *)
    fail "unknown mode $mode"
    ;;
esac
echo "ok: $mode ${5:-}"
