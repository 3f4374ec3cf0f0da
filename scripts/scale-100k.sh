#!/usr/bin/env bash
# Times one EP iteration at 100,000 GPUs (issue 21's scale check): scenarios/ep-1000dc.json with
# 12,500 DCs × 8 GPUs, 50,000 experts and two EP groups of 50,000 (per-source sampled routing,
# the flow model: the defaults); prints wall time and peak memory, and the run's iteration time
# and dropped share. `--layers N` runs N of the 12 layers (1: about a twelfth of the time).
#   scripts/scale-100k.sh [--layers N] [build/release/moesim]
set -euo pipefail
layers=""
if [ "${1:-}" = "--layers" ]; then
  layers=", \"layers\": $2"
  shift 2
fi
bin=${1:-build/release/moesim}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=$(cd "$(dirname "$0")/.." && pwd)
sed -e "s/\"experts\": 8000/\"experts\": 50000$layers/" \
    -e 's/"strategy": {"name": "ep"}/"strategy": {"name": "ep", "ep_size": 50000}/' \
    -e 's/"cluster": {"preset": "hybridep-1000dc"}/"cluster": {"preset": "hybridep-1000dc", "levels": [{"name": "dc", "count": 12500, "bandwidth": "10Gbps", "latency": "100us"}, {"name": "gpu", "count": 8, "bandwidth": "128Gbps", "latency": "5us"}]}/' \
    "$root/scenarios/ep-1000dc.json" > "$dir/ep-100k.json"
grep -q '"count": 12500' "$dir/ep-100k.json" && grep -q '"ep_size": 50000' "$dir/ep-100k.json" ||
  { echo "scale-100k.sh: scenarios/ep-1000dc.json changed shape; update the sed lines" >&2; exit 1; }
"$bin" validate "$dir/ep-100k.json"
/usr/bin/time -f "100,000 GPUs: %e s wall, %U s user, %M KB peak" "$bin" run "$dir/ep-100k.json" --quiet --out "$dir/out"
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(f\"iteration {r['iteration_time_ms'] / 1000:.3f} s, dropped {100 * r['tokens']['dropped_fraction']:.2f} % of token copies, {r['engine']['tasks']} tasks\")
" "$dir/out/results.json"
