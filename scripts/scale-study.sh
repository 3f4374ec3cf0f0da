#!/usr/bin/env bash
# Times one iteration of the EP scenario of scenarios/ep-1000dc.json at 10, 100 and 1000 DCs
# (8 GPUs each, the preset's levels and links: scripts/ep_at_scale.py; one expert per GPU,
# expected-share routing so that every size takes the same code path) with both network models;
# prints wall time and peak memory of each run.
#   scripts/scale-study.sh [build/release/moesim]
set -euo pipefail
bin=${1:-build/release/moesim}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for dcs in 10 100 1000; do
  for model in flow analytic; do
    python3 "$(dirname "$0")/ep_at_scale.py" "$dcs" --model "$model" --sampling expected > "$dir/s.json"
    /usr/bin/time -f "$dcs DCs ($((dcs * 8)) GPUs), $model: %e s wall, %M KB peak" "$bin" run "$dir/s.json" --quiet --out "$dir/out"
  done
done
