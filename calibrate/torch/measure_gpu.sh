#!/usr/bin/env bash
# Runs every calibrate_torch.py measurement of one GPU, most wanted first, into one folder, and
# packs that folder after each step so that a run stopped at a time limit still returns what it
# measured. Usage: calibrate/torch/measure_gpu.sh PREFIX OUTDIR [SECONDS_PER_STEP]
#   PREFIX names the files (e.g. h200 -> h200-grouped-gemm.json); OUTDIR gets results.tar.gz.
# The files are the ones tests/data/measured/SOURCES.md lists for the H100, plus the dense GeMMs
# through torch.mm (where moesim-calibrate-gemm is not built), the optimizer's multi-tensor kernels
# and the host's launch costs.
set -u
prefix=$1 out=$2 limit=${3:-300}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
py() { PYTHONUNBUFFERED=1 timeout "$limit" python3 "$here/calibrate_torch.py" "$@" 2>>"$work/$prefix-log.txt"; }
pack() { tar -czf "$out/results.tar.gz" -C "$work" . ; }
{ nvidia-smi; nvidia-smi -q -d CLOCK,POWER; python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'; } \
  >"$work/$prefix-nvidia-smi.txt" 2>&1
pack
step() { echo "== $(date -u +%T) $*" >>"$work/$prefix-log.txt"; "$@"; echo "== rc $?" >>"$work/$prefix-log.txt"; pack; }
step py --what grouped --out /dev/null --memory-out "$work/$prefix-grouped-gemm.json"
step py --what gemm --gemm-dtypes bf16 --out "$work/$prefix-cublas-gemm.json"
step py --what attention --dtypes bf16 --out "$work/$prefix-fused-attention.json"
step py --what attention --dtypes bf16 --head-dims 192 --v-head-dim 128 --heads 128 --seq 1024,2048,4096,8192 \
  --out "$work/$prefix-fused-attention-mla.json"
step py --what memory,optimizer --out /dev/null --memory-out "$work/$prefix-memory-bound-kernels.json"
step py --what fp8 --out "$work/$prefix-fp8-gemm.json"
step py --what hostsync,layer --warmup 5 --reps 50 --hostsync-out "$work/$prefix-host-sync.json" \
  --layer-out "$work/$prefix-moe-layer-step.json"
step py --what launch --reps 20 --launch-out "$work/$prefix-host-launch.json"
echo "== done $(date -u +%T)" >>"$work/$prefix-log.txt"
pack
