#!/usr/bin/env bash
# Memory stays flat over long runs: the quickstart for 10 and for 1000 iterations, the peak
# resident memory moesim reports for each, and a failure if 1000 iterations need more than 10
# iterations' plus 10 % (the engine retires finished tasks; the run loop holds two iterations).
#   scripts/long-run-memory.sh [build/release/moesim]
set -euo pipefail
bin=${1:-build/release/moesim}
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
peak() {  # iterations -> peak memory in bytes
  sed -e "s/\"iterations\": 2/\"iterations\": $1/" "$root/scenarios/quickstart.json" > "$dir/q$1.json"
  local line
  line=$(MOESIM_DATA="$root" "$bin" run "$dir/q$1.json" --out "$dir/out$1" | grep "peak RSS [0-9]")
  echo "$1 iterations: ${line#*simulated}" >&2
  python3 -c "
import re,sys
m = re.search(r'peak RSS ([0-9.]+) (B|KiB|MiB|GiB)', sys.argv[1])
print(float(m.group(1)) * {'B': 1, 'KiB': 1024, 'MiB': 1024**2, 'GiB': 1024**3}[m.group(2)])" "$line"
}
ten=$(peak 10)
thousand=$(peak 1000)
python3 -c "
import sys
ten, thousand = float(sys.argv[1]), float(sys.argv[2])
print(f'1000 iterations: {thousand / 2**20:.2f} MiB, 10 iterations: {ten / 2**20:.2f} MiB, ratio {thousand / ten:.3f}')
sys.exit(0 if thousand <= 1.1 * ten else 1)" "$ten" "$thousand"
