#!/usr/bin/env bash
# `mpirun -np N moesim search` (label mpi): every file it writes is byte-identical to one process's
# `moesim search --jobs 1` (both rungs' points spread over the ranks, rank 0 choosing the finalists
# and writing); a bad list exits 2, said once, nothing written. Local ranks only, as sweep_mpi.sh.
#
#   search_mpi.sh MOESIM SCENARIO WORK
set -uo pipefail
moesim=$1 scenario=$2 work=$3

. "$(dirname "$0")/local_mpirun.sh"
grid=(--pp 1,2 --ep 4,8,16 --finalists 3 --jobs 1 --quiet)

rm -rf "$work" && mkdir -p "$work"
"$moesim" search "$scenario" --out "$work/ref" "${grid[@]}" || { echo "FAIL: the one-process search exited $?"; exit 1; }
"${mpi[@]}" -np 3 "$moesim" search "$scenario" --out "$work/ranks3" "${grid[@]}" ||
  { echo "FAIL: mpirun -np 3 exited $?"; exit 1; }
diff -r "$work/ref" "$work/ranks3" >/dev/null || { diff -r "$work/ref" "$work/ranks3" | head -c 2000; echo "FAIL: -np 3 differs"; exit 1; }

"${mpi[@]}" -np 3 "$moesim" search "$scenario" --out "$work/bad" --tp 0 >"$work/bad.out" 2>"$work/bad.err"
code=$?
[ "$code" -eq 2 ] || { cat "$work/bad.err"; echo "FAIL: --tp 0 exited $code, not 2"; exit 1; }
[ "$(grep -c 'moesim: error: --tp' "$work/bad.err")" -eq 1 ] || { cat "$work/bad.err"; echo "FAIL: the error was not said once"; exit 1; }
[ ! -e "$work/bad" ] || { echo "FAIL: $work/bad was written"; exit 1; }
echo "ok: -np 3 byte-identical to one process; a bad list exits 2, said once"
