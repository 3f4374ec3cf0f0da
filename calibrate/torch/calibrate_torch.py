#!/usr/bin/env python3
"""moesim-calibrate-torch: time on your GPU what the C++ calibration binaries cannot reach without
extra libraries, through PyTorch, and write moesim-measurements/1 JSON for `moesim calibrate fit`.

  attention   fused scaled-dot-product attention, forward and backward, through
              torch.nn.functional.scaled_dot_product_attention with one backend forced: cuDNN's
              fused attention (what Transformer Engine runs in Megatron-Core) and FlashAttention-2
              (PyTorch's flash backend); entries say which in "implementation".
  fp8         FP8 GeMMs, e4m3 x e4m3 -> bf16 with per-tensor scales, through torch._scaled_mm
              (cuBLASLt), on the shapes of moesim-calibrate-gemm (--grid moe|generic|all).
  memory      memory-bound kernels of the MoE layer (copy, RMSNorm, SwiGLU, row gather/scatter of
              the permutation, router softmax and top-k) and back-to-back tiny kernels: achieved
              bytes per second and the fixed cost per kernel. Written under "kernels" in a file of
              its own (--memory-out), which `scripts/validate.py` reads.

Timing as moesim-calibrate-gemm: --warmup launches, then --reps launches each between its own pair
of CUDA events, queued behind a spin (torch.cuda._sleep) so the events time the GPU and not the
host's launch gaps; the median is reported in microseconds. Requires PyTorch with CUDA.
"""
import argparse
import datetime
import json
import os
import re
import socket
import statistics
import sys

MODELS = [(4096, 14336), (7168, 2048), (2048, 1408)]  # as calibrate/gpu/gemm.cpp: Mixtral, DSv3, DSv2-Lite
TOKENS = [128, 256, 512, 1024, 2048, 4096, 8192, 16384]
EXPERTS = [8, 64, 256]
GENERIC = [256, 512, 1024, 2048, 4096, 8192, 16384]


def gemm_shapes(grid):
    shapes = []
    if grid != "generic":
        for t in TOKENS:
            for h, f in MODELS:
                shapes += [(t, f, h, "expert_ffn_up"), (t, h, f, "expert_ffn_down"), (t, 3 * h, h, "attention_qkv"),
                           (t, h, h, "attention_out")]
                shapes += [(t, e, h, "gate") for e in EXPERTS]
    if grid != "moe":
        shapes += [(m, n, k, "generic") for m in GENERIC for n in GENERIC for k in GENERIC]
    seen, out = set(), []
    for s in shapes:
        if s[:3] not in seen:
            seen.add(s[:3])
            out.append(s)
    return out


def timer(torch, warmup, reps):
    def run(fn):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        torch.cuda._sleep(int(2e6))  # ~1 ms of spinning: the launches below queue behind it
        for a, b in ev:
            a.record()
            fn()
            b.record()
        torch.cuda.synchronize()
        return statistics.median(a.elapsed_time(b) * 1e3 for a, b in ev)  # us
    return run


def provenance(torch, command):
    p = torch.cuda.get_device_properties(0)
    driver = "unknown"
    try:
        with open("/proc/driver/nvidia/version") as f:
            driver = re.search(r"\d+\.\d+(\.\d+)?", f.readline()).group(0)
    except Exception:
        pass
    return {"gpu": p.name, "gpu_count": 1, "hosts": [socket.gethostname()], "nodes": 1, "driver": driver,
            "cuda_runtime": torch.version.cuda, "torch": torch.__version__,
            "cudnn": str(torch.backends.cudnn.version()), "nccl": "n/a",
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "command": command}


def measure_fp8(torch, run, grid, log):
    out = []
    e4m3 = torch.float8_e4m3fn
    one = torch.ones((), device="cuda", dtype=torch.float32)
    for m, n, k, tag in gemm_shapes(grid):
        a = (torch.randn(m, k, device="cuda") * 0.5).to(e4m3)
        b = (torch.randn(n, k, device="cuda") * 0.5).to(e4m3).t()  # column-major K x N, as cuBLASLt FP8 needs
        try:
            t = run(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        except Exception as e:  # cuBLASLt FP8 needs N and K multiples of 16
            log(f"fp8 {m}x{n}x{k} {tag}: skipped ({str(e).splitlines()[0][:120]})")
            continue
        out.append({"dtype": "fp8", "m": m, "n": n, "k": k, "time": round(t, 3), "tflops": round(2 * m * n * k / t / 1e6, 2),
                    "tag": tag})
        log(f"fp8 {m}x{n}x{k} {tag}: {t:.2f} us, {2 * m * n * k / t / 1e6:.1f} TFLOP/s")
        del a, b
    return out


def measure_attention(torch, run, dtypes, seqs, head_dims, tokens, heads, log, v_dim=0):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    out = []
    backends = [(SDPBackend.CUDNN_ATTENTION, "cudnn-fused-sdpa"), (SDPBackend.FLASH_ATTENTION, "flash-attention-2-sdpa")]
    for name in dtypes:
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[name]
        for backend, impl in backends:
            for d in head_dims:
                for L in seqs:
                    B = max(1, tokens // L)
                    for causal in (True, False):
                        try:
                            q, k = (torch.randn(B, heads, L, d, device="cuda", dtype=dt, requires_grad=True) for _ in range(2))
                            v = torch.randn(B, heads, L, v_dim or d, device="cuda", dtype=dt, requires_grad=True)
                            with sdpa_kernel([backend]):
                                fwd = run(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
                                o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                                g = torch.randn_like(o)
                                bwd = run(lambda: torch.autograd.grad(o, (q, k, v), g, retain_graph=True))
                        except Exception as e:  # a backend that does not take this shape
                            log(f"attention {impl} {name} L={L} d={d}: skipped ({str(e).splitlines()[0][:120]})")
                            continue
                        flops = 4.0 * B * heads * L * L * d * (0.5 if causal else 1.0)
                        entry = {"dtype": name, "batch": B, "heads": heads, "seq": L, "head_dim": d, "causal": causal,
                                 "forward": round(fwd, 3), "backward": round(bwd, 3), "implementation": impl}
                        if v_dim:
                            entry["implementation"] += f" (V head dim {v_dim})"
                        out.append(entry)
                        log(f"attention {impl} {name} B={B} h={heads} L={L} d={d} {'causal' if causal else 'full'}: "
                            f"forward {fwd:.1f} us ({flops / fwd / 1e6:.0f} TFLOP/s), backward {bwd:.1f} us "
                            f"({2.5 * flops / bwd / 1e6:.0f} TFLOP/s at 2.5x)")
                        del q, k, v, o, g
    return out


def measure_memory(torch, run, log):
    F = torch.nn.functional
    bf = torch.bfloat16
    out = []

    def rec(kernel, shape, nbytes, fn, kernels=1):
        t = run(fn)
        out.append({"kernel": kernel, "shape": list(shape), "bytes": nbytes, "time": round(t, 3), "kernels": kernels,
                    "bytes_per_second": nbytes / (t * 1e-6)})
        log(f"{kernel} {shape}: {t:.2f} us, {nbytes / t / 1e3:.0f} GB/s")

    for tokens in (4096, 16384, 65536):
        for h in (2048, 4096, 7168):
            n = tokens * h
            x = torch.randn(tokens, h, device="cuda", dtype=bf)
            w = torch.ones(h, device="cuda", dtype=bf)
            rec("copy", (tokens, h), 4 * n, lambda: x.clone())
            rec("rms_norm", (tokens, h), 4 * n + 2 * h, lambda: F.rms_norm(x, (h,), w))
            idx = torch.randperm(tokens, device="cuda")
            rec("gather_rows", (tokens, h), 4 * n + 8 * tokens, lambda: x.index_select(0, idx))
            y = torch.empty_like(x)
            rec("scatter_rows", (tokens, h), 4 * n + 8 * tokens, lambda: y.index_copy_(0, idx, x))
            a = torch.randn(tokens, 2 * h, device="cuda", dtype=bf)
            # SwiGLU as two eager kernels (silu, then multiply): 2 reads + 1 write, then 2 reads + 1 write.
            rec("swiglu_eager", (tokens, h), 2 * (3 * n * 2), lambda: F.silu(a[:, :h]) * a[:, h:], kernels=2)
            del x, y, a, idx
        for e in (64, 256):
            logits = torch.randn(tokens, e, device="cuda", dtype=torch.float32)
            rec("softmax", (tokens, e), 8 * tokens * e, lambda: torch.softmax(logits, -1))
            rec("topk8", (tokens, e), 4 * tokens * e + 12 * tokens * 8, lambda: torch.topk(logits, 8, dim=-1))
    big = torch.empty(1 << 29, device="cuda", dtype=torch.uint8)  # 512 MiB
    rec("copy", (1 << 29,), 2 << 29, lambda: big.clone())
    del big
    # Back-to-back tiny kernels: 1000 launches of a one-element add in one CUDA graph; the time per
    # kernel is the GPU's fixed cost per kernel without host launch gaps.
    s = torch.zeros(1, device="cuda")
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            s.add_(1)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(1000):
                s.add_(1)
    t = run(graph.replay)
    out.append({"kernel": "tiny_in_cuda_graph", "shape": [1], "bytes": 8, "time": round(t / 1000, 4), "kernels": 1,
                "launches": 1000})
    log(f"tiny kernel in a CUDA graph: {t / 1000:.3f} us each")
    # The same kernel launched eagerly, back to back from the host (queued behind the spin).
    t = run(lambda: [s.add_(1) for _ in range(100)])
    out.append({"kernel": "tiny_eager_queued", "shape": [1], "bytes": 8, "time": round(t / 100, 4), "kernels": 1,
                "launches": 100})
    log(f"tiny kernel launched eagerly, queued: {t / 100:.3f} us each")
    return out


GROUPED_MODELS = [(4096, 14336, "Mixtral-8x7B"), (7168, 2048, "DeepSeek-V3"), (2048, 768, "Qwen3-30B-A3B")]


def measure_grouped(torch, run, log):
    """The local experts' GeMMs as one grouped GeMM (torch._grouped_mm, CUTLASS on sm_90): rows R
    split over G experts, evenly and skewed (expert g gets a share proportional to g + 1), fc1
    [rows, H] x [H, 2F] (SwiGLU's two projections) and fc2 [rows, F] x [F, H], in bf16."""
    out = []
    bf = torch.bfloat16
    for h, f, model in GROUPED_MODELS:
        for groups in (1, 4, 8, 16, 32, 64):
            for rows in (4096, 16384, 65536):
                for split in ("even", "skewed"):
                    if split == "skewed" and groups == 1:
                        continue
                    w = [1.0] * groups if split == "even" else [g + 1.0 for g in range(groups)]
                    sizes = [int(rows * x / sum(w)) // 16 * 16 for x in w]
                    sizes[-1] += rows - sum(sizes)
                    offs = torch.tensor(sizes, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
                    for name, k, n in (("fc1", h, 2 * f), ("fc2", f, h)):
                        try:
                            a = torch.randn(rows, k, device="cuda", dtype=bf)
                            b = torch.randn(groups, n, k, device="cuda", dtype=bf).transpose(-2, -1)
                            t = run(lambda: torch._grouped_mm(a, b, offs=offs, out_dtype=bf))
                        except Exception as e:
                            log(f"grouped {model} {name} G={groups} rows={rows}: skipped ({str(e).splitlines()[0][:160]})")
                            continue
                        out.append({"model": model, "gemm": name, "dtype": "bf16", "groups": groups, "rows": sizes,
                                    "n": n, "k": k, "split": split, "time": round(t, 3)})
                        log(f"grouped {model} {name} G={groups} rows={rows} {split}: {t:.1f} us, "
                            f"{2 * rows * n * k / t / 1e6:.0f} TFLOP/s")
                        del a, b
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="attention,fp8,memory", help="comma list of attention, fp8, memory, grouped")
    ap.add_argument("--out", required=True, help="measurements JSON (attention and fp8 GeMM entries)")
    ap.add_argument("--memory-out", help="JSON of the memory-bound kernels (with --what memory)")
    ap.add_argument("--grid", default="all", choices=["moe", "generic", "all"])
    ap.add_argument("--dtypes", default="bf16", help="attention dtypes: bf16,fp16")
    ap.add_argument("--seq", default="1024,2048,4096,8192,16384")
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--v-head-dim", type=int, default=0, help="V's head size when it differs from Q/K's (MLA: 192/128)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    what = set(args.what.split(","))
    known = {"attention", "fp8", "memory", "grouped"}
    if what - known:
        ap.error(f"--what: unknown {sorted(what - known)}; use {', '.join(sorted(known))}")
    try:
        import torch
    except ImportError:
        print("moesim-calibrate-torch: PyTorch is not installed (pip install torch, with CUDA)", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("moesim-calibrate-torch: no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 1
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    run = timer(torch, args.warmup, args.reps)
    command = " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])
    doc = {"format": "moesim-measurements/1", "tool": "moesim-calibrate-torch", "provenance": provenance(torch, command),
           "settings": {"warmup": args.warmup, "repetitions": args.reps, "statistic": "median", "timer": "cudaEvent"},
           "units": {"time": "us", "size": "bytes"}, "gemm": [], "attention": []}
    if "attention" in what:
        doc["attention"] = measure_attention(torch, run, args.dtypes.split(","), [int(s) for s in args.seq.split(",")],
                                             [int(s) for s in args.head_dims.split(",")], args.tokens, args.heads, log,
                                             args.v_head_dim)
    if "fp8" in what:
        doc["gemm"] = measure_fp8(torch, run, args.grid, log)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
    if what & {"memory", "grouped"}:
        mem = {key: value for key, value in doc.items() if key not in ("gemm", "attention")}
        mem["tool"] = "moesim-calibrate-torch (memory-bound kernels, grouped GeMMs)"
        if "memory" in what:
            mem["kernels"] = measure_memory(torch, run, log)
        if "grouped" in what:
            mem["grouped_gemm"] = measure_grouped(torch, run, log)
        with open(args.memory_out or args.out.replace(".json", "-memory.json"), "w") as f:
            json.dump(mem, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
