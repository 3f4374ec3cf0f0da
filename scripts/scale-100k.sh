#!/usr/bin/env bash
# Times one EP iteration at 100,000 GPUs (issue 21's scale check): scenarios/ep-1000dc.json with
# 12,500 DCs × 8 GPUs (the preset's levels and links, scripts/ep_at_scale.py), 50,000 experts and
# two EP groups of 50,000 (per-source sampled routing, the flow model: the defaults); prints wall
# time and peak memory, and the run's iteration time and dropped share. `--layers N` runs N of the 12 layers (1: about a twelfth of the time).
#   scripts/scale-100k.sh [--layers N] [build/release/moesim]
set -euo pipefail
layers=()
if [ "${1:-}" = "--layers" ]; then
  layers=(--layers "$2")
  shift 2
fi
bin=${1:-build/release/moesim}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
python3 "$root/scripts/ep_at_scale.py" 12500 --experts 50000 --ep-size 50000 "${layers[@]}" > "$dir/ep-100k.json"
"$bin" validate "$dir/ep-100k.json"
/usr/bin/time -f "100,000 GPUs: %e s wall, %U s user, %M KB peak" "$bin" run "$dir/ep-100k.json" --quiet --out "$dir/out"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(f\"iteration {r['iteration_time_ms'] / 1000:.3f} s, dropped {100 * r['tokens']['dropped_fraction']:.2f} % of token copies, {r['engine']['tasks']} tasks\")
" "$dir/out/results.json"
