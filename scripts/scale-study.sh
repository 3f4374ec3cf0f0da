#!/usr/bin/env bash
# Times one iteration of the EP scenario of scenarios/ep-1000dc.json at 10, 100 and 1000 DCs
# (8 GPUs each, one expert per GPU, expected-share routing so that every size takes the same code
# path) with both network models; prints wall time and peak memory of each run.
#   scripts/scale-study.sh [build/release/moesim]
set -euo pipefail
bin=${1:-build/release/moesim}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for dcs in 10 100 1000; do
  for model in flow analytic; do
    sed -e "s/\"experts\": 8000/\"experts\": $((dcs * 8))/" \
        -e "s/\"network\": {\"all_reduce\": \"hierarchical\"}/\"network\": {\"all_reduce\": \"hierarchical\", \"model\": \"$model\"}/" \
        -e "s/\"routing\": {\"kind\": \"zipf\", \"zipf_exponent\": 0.6}/\"routing\": {\"kind\": \"zipf\", \"zipf_exponent\": 0.6, \"sampling\": \"expected\"}/" \
        -e "s/\"cluster\": {\"preset\": \"hybridep-1000dc\"}/\"cluster\": {\"preset\": \"hybridep-1000dc\", \"levels\": [{\"name\": \"dc\", \"count\": $dcs, \"bandwidth\": \"10Gbps\", \"latency\": \"100us\"}, {\"name\": \"gpu\", \"count\": 8, \"bandwidth\": \"128Gbps\", \"latency\": \"5us\"}]}/" \
        scenarios/ep-1000dc.json > "$dir/s.json"
    /usr/bin/time -f "$dcs DCs ($((dcs * 8)) GPUs), $model: %e s wall, %M KB peak" "$bin" run "$dir/s.json" --quiet --out "$dir/out"
  done
done
