#!/usr/bin/env python3
"""moesim-calibrate-torch: time on your GPU what the C++ calibration binaries cannot reach without
extra libraries, through PyTorch, and write moesim-measurements/1 JSON for `moesim calibrate fit`.

  attention   fused scaled-dot-product attention, forward and backward, through
              torch.nn.functional.scaled_dot_product_attention with one backend forced: cuDNN's
              fused attention (what Transformer Engine runs in Megatron-Core) and FlashAttention-2
              (PyTorch's flash backend); entries say which in "implementation".
  gemm        dense GeMMs through torch.mm (cuBLASLt) on the same shapes, in --gemm-dtypes: the table
              moesim-calibrate-gemm makes, where that binary is not built.
  fp8         FP8 GeMMs, e4m3 x e4m3 -> bf16 with per-tensor scales, through torch._scaled_mm
              (cuBLASLt), on the shapes of moesim-calibrate-gemm (--grid moe|generic|all).
  memory      memory-bound kernels of the MoE layer (copy, RMSNorm, SwiGLU, row gather/scatter of
              the permutation, router softmax and top-k) and back-to-back tiny kernels: achieved
              bytes per second and the fixed cost per kernel. Written under "kernels" in a file of
              its own (--memory-out), which `scripts/validate.py` reads.
  grouped     the local experts' fc1/fc2 as one grouped GeMM (torch._grouped_mm), forward and the
              backward's data and weight gradients, into --memory-out.
  optimizer   the optimizer step's multi-tensor kernels (gradient norm, clip scale, fused AdamW,
              master-to-bf16 copy, gradient zeroing) over 0.25-2 B fp32 parameters, into --memory-out.
  hostsync    the GPU idle time (bubble) a blocking device-to-host read of the per-expert token
              counts inserts between the router and the kernels after it, as an MoE dispatcher
              that sizes its buffers on the host does (moesim's parallel.ep_host_sync), with
              pageable and pinned copies and without a read: median and spread, into --hostsync-out.
  layer       one training step (forward and backward) of a small stack of MoE transformer layers
              on one GPU (--layer-shapes), whole and part by part, with and without that host
              read, and the fused AdamW step over the same parameters, into --layer-out.
  launch      what the host spends driving the GPU (moesim's software.host): the CPU time per
              eager PyTorch op that launches one kernel, per CUDA graph replay of 1 to 1000 kernels,
              per device-to-host read on an idle GPU, and per kernel of a whole MoE layer step's
              forward and backward (launches counted with torch.profiler), all timed on the host
              while the GPU sits behind a long spin, into --launch-out.

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


GROUPED_MODELS = [(4096, 14336, "Mixtral-8x7B"), (7168, 2048, "DeepSeek-V3"), (2048, 768, "Qwen3-30B-A3B"),
                  (5120, 1536, "DeepSeek-V2")]
GROUPED_GROUPS = (1, 4, 8, 16, 20, 32, 64)  # 20: DeepSeek-V2's 160 experts at EP 8


def measure_grouped(torch, run, log, passes=("forward", "dgrad", "wgrad")):
    """The local experts' GeMMs as one grouped GeMM (torch._grouped_mm, CUTLASS on sm_90): rows R
    split over G experts, evenly and skewed (expert g gets a share proportional to g + 1), fc1
    [rows, H] x [H, 2F] (SwiGLU's two projections) and fc2 [rows, F] x [F, H], in bf16. With
    "dgrad" and "wgrad" also the backward's two grouped GeMMs, called as autograd calls them: the
    input's gradient [rows, N] x [N, K] and the experts' weight gradients [K, rows_g] x [rows_g, N]
    (K-grouped, one [K, N] output per group)."""
    out = []
    bf = torch.bfloat16
    for h, f, model in GROUPED_MODELS:
        for groups in GROUPED_GROUPS:
            for rows in (4096, 16384, 65536):
                for split in ("even", "skewed"):
                    if split == "skewed" and groups == 1:
                        continue
                    if groups == 20 and model != "DeepSeek-V2":
                        continue
                    w = [1.0] * groups if split == "even" else [g + 1.0 for g in range(groups)]
                    sizes = [int(rows * x / sum(w)) // 16 * 16 for x in w]
                    sizes[-1] += rows - sum(sizes)
                    offs = torch.tensor(sizes, device="cuda", dtype=torch.int32).cumsum(0, dtype=torch.int32)
                    for name, k, n in (("fc1", h, 2 * f), ("fc2", f, h)):
                        for pass_ in passes:
                            try:
                                a = torch.randn(rows, k, device="cuda", dtype=bf)
                                b = torch.randn(groups, n, k, device="cuda", dtype=bf).transpose(-2, -1)
                                if pass_ == "forward":
                                    t = run(lambda: torch._grouped_mm(a, b, offs=offs, out_dtype=bf))
                                else:
                                    # The kernel autograd runs, called directly: through autograd.grad
                                    # the host's ~100-250 us a call outlasts small kernels.
                                    gy = torch.randn(rows, n, device="cuda", dtype=bf)
                                    bt, at = b.detach().transpose(-2, -1), a.detach().transpose(-2, -1)
                                    via = "direct"
                                    try:
                                        if pass_ == "dgrad":
                                            t = run(lambda: torch._grouped_mm(gy, bt, offs=offs, out_dtype=bf))
                                        else:
                                            t = run(lambda: torch._grouped_mm(at, gy, offs=offs, out_dtype=bf))
                                    except Exception as e:  # a layout this PyTorch does not take: autograd's
                                        log(f"grouped {pass_}: direct call failed ({str(e).splitlines()[0][:120]}); "
                                            "timing through autograd")
                                        via = "autograd"
                                        a_, b_ = a.detach().requires_grad_(pass_ == "dgrad"), b.detach().requires_grad_(pass_ == "wgrad")
                                        wrt = a_ if pass_ == "dgrad" else b_
                                        y = torch._grouped_mm(a_, b_, offs=offs, out_dtype=bf)
                                        t = run(lambda: torch.autograd.grad(y, wrt, gy, retain_graph=True))
                                        y = wrt = a_ = b_ = None
                            except Exception as e:
                                log(f"grouped {model} {name} {pass_} G={groups} rows={rows}: skipped "
                                    f"({str(e).splitlines()[0][:160]})")
                                continue
                            entry = {"model": model, "gemm": name, "dtype": "bf16", "groups": groups, "rows": sizes,
                                     "n": n, "k": k, "split": split, "time": round(t, 3)}
                            if pass_ != "forward":
                                entry["pass"], entry["call"] = pass_, via
                            out.append(entry)
                            log(f"grouped {model} {name} {pass_} G={groups} rows={rows} {split}: {t:.1f} us, "
                                f"{2 * rows * n * k / t / 1e6:.0f} TFLOP/s")
                            a = b = gy = bt = at = None
    return out


def measure_gemm(torch, run, grid, dtypes, log):
    """Dense GeMMs C[M x N] = A[M x K] . B[K x N] through torch.mm (cuBLASLt on sm_90), on the shapes of
    moesim-calibrate-gemm (--grid), where the C++ binary cannot be built: row-major A, B stored as
    [N, K] and transposed (as nn.Linear's weight), fp32 accumulation; tf32 is fp32 data with
    torch.backends.cuda.matmul.allow_tf32."""
    out = []
    types = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "tf32": torch.float32}
    for name in dtypes:
        torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
        for m, n, k, tag in gemm_shapes(grid):
            try:
                a = torch.randn(m, k, device="cuda", dtype=types[name])
                b = torch.randn(n, k, device="cuda", dtype=types[name]).t()
                t = run(lambda: torch.mm(a, b))
            except Exception as e:
                log(f"gemm {name} {m}x{n}x{k} {tag}: skipped ({str(e).splitlines()[0][:120]})")
                continue
            out.append({"dtype": name, "m": m, "n": n, "k": k, "time": round(t, 3),
                        "tflops": round(2 * m * n * k / t / 1e6, 2), "tag": tag})
            log(f"gemm {name} {m}x{n}x{k} {tag}: {t:.2f} us, {2 * m * n * k / t / 1e6:.1f} TFLOP/s")
            a = b = None
    torch.backends.cuda.matmul.allow_tf32 = False
    return out


def measure_optimizer(torch, run, log):
    """The optimizer step's multi-tensor kernels over many parameters, as a data-parallel trainer
    runs them after its gradient reduction: the gradient norm (torch._foreach_norm, clipping's
    reduction), the clip's scale (_foreach_mul_), fused AdamW over fp32 master weights, moments and
    gradients, the cast of the master weights into the bf16 weights (_foreach_copy_) and the
    gradient buffers' zeroing (_foreach_zero_); tensors of 4096 x 4096 (and 4096 x 1024) elements."""
    out = []
    for total in (0.25e9, 1e9, 2e9):
        shapes = []
        n = 0
        while n < total:
            s = (4096, 4096) if len(shapes) % 2 == 0 else (4096, 1024)
            shapes.append(s)
            n += s[0] * s[1]
        try:
            master = [torch.randn(s, device="cuda", dtype=torch.float32).mul_(0.02).requires_grad_() for s in shapes]
            for p in master:
                p.grad = torch.randn_like(p).mul_(1e-3)
            grads = [p.grad for p in master]
            opt = torch.optim.AdamW(master, lr=1e-4, fused=True)
            opt.step()
            model = [torch.empty(s, device="cuda", dtype=torch.bfloat16) for s in shapes]
            parts = {"grad_norm_fp32": lambda: torch._foreach_norm(grads),
                     "clip_scale_fp32": lambda: torch._foreach_mul_(grads, 1.0),
                     "adamw_fused_fp32": opt.step,
                     "copy_to_bf16": lambda: torch._foreach_copy_(model, master),
                     "zero_grads_fp32": lambda: torch._foreach_zero_(grads)}
            entry = {"parameters": n, "tensors": len(shapes),
                     "implementation": "torch._foreach_norm/_foreach_mul_/_foreach_copy_/_foreach_zero_ and "
                                       "torch.optim.AdamW(fused=True) over fp32 master weights"}
            for part, fn in parts.items():
                entry[part] = round(run(fn), 3)
            out.append(entry)
            log(f"optimizer {n / 1e9:.2f} B parameters in {len(shapes)} tensors: " +
                ", ".join(f"{p} {entry[p] / 1e3:.3f} ms" for p in parts))
        except Exception as e:
            log(f"optimizer {total / 1e9:.2f} B: failed ({str(e).splitlines()[0][:160]})")
        master = grads = opt = model = parts = None
        torch.cuda.empty_cache()
    return out


def spread(values):
    """Median and spread of a list of times (us)."""
    v = sorted(values)
    q = lambda f: v[min(len(v) - 1, int(round(f * (len(v) - 1))))]
    return {"median": round(statistics.median(v), 3), "p10": round(q(0.1), 3), "p90": round(q(0.9), 3),
            "min": round(v[0], 3), "max": round(v[-1], 3), "n": len(v)}


HOSTSYNC_SHAPES = [(4096, 64), (4096, 128), (4096, 256), (16384, 64), (16384, 128), (16384, 256)]


def measure_hostsync(torch, warmup, reps, log, hidden=2048, top_k=8):
    """The GPU idle time a blocking device-to-host read of the per-expert token counts inserts
    between two kernels of an MoE layer, as Megatron-Core's all-to-all token dispatcher (and DeepEP's
    normal mode) does before it sizes the receive buffers. Kernel A: the router (a [T, H] x [H, E]
    GeMM, fp32 softmax, top-k, the per-expert counts by scatter-add); then the host reads the counts
    ("tolist": counts.tolist(), a pageable copy that blocks; "pinned": a non_blocking copy into
    pinned memory and a stream synchronize, then .tolist(); "none": no read); then kernel B: the
    permute (row gather), one GeMM and the un-permute's scatter-add. Events right after A and right
    before B time the bubble on the GPU; events before A and after B the whole sequence. Without a
    read the launches run ahead behind a spin, so "none" is the GPU's own gap. With a read the host
    waits for A alone, or ("spin_cycles" > 0) for a spin of that many GPU cycles queued before A as
    well (about 5 ms: the host far ahead of the GPU, as in a training step), since how long the host
    waits may change how fast it wakes up."""
    F = torch.nn.functional
    bf = torch.bfloat16
    out = []
    for tokens, experts in HOSTSYNC_SHAPES:
        x = torch.randn(tokens, hidden, device="cuda", dtype=bf)
        wr = torch.randn(experts, hidden, device="cuda", dtype=bf) * 0.02
        w = torch.randn(hidden, hidden, device="cuda", dtype=bf) * 0.02
        ones = torch.ones(tokens * top_k, device="cuda", dtype=torch.int64)
        pinned = torch.empty(experts, dtype=torch.int64, pin_memory=True)
        state = {}

        def kernel_a():
            probs = torch.softmax((x @ wr.t()).float(), dim=-1)
            top, idx = torch.topk(probs, top_k, dim=-1)
            flat = idx.reshape(-1)
            counts = torch.zeros(experts, device="cuda", dtype=torch.int64).scatter_add_(0, flat, ones)
            state["idx"], state["counts"] = flat, counts

        def kernel_b():
            order = torch.argsort(state["idx"], stable=True)
            rows = order // top_k
            y = x.index_select(0, rows) @ w
            torch.zeros_like(x).index_add_(0, rows, y)

        def read(mode):
            if mode == "tolist":
                return state["counts"].tolist()
            if mode == "pinned":
                pinned.copy_(state["counts"], non_blocking=True)
                torch.cuda.current_stream().synchronize()
                return pinned.tolist()
            return None

        for mode, spin in (("none", 0), ("tolist", 0), ("pinned", 0), ("tolist", 10 ** 7), ("pinned", 10 ** 7)):
            for _ in range(warmup):
                if spin:
                    torch.cuda._sleep(spin)
                kernel_a()
                read(mode)
                kernel_b()
            torch.cuda.synchronize()
            ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(reps)]
            torch.cuda._sleep(int(2e6) * (reps if mode == "none" else 1))  # "none": every launch queues behind it
            for e in ev:
                if spin:
                    torch.cuda._sleep(spin)
                e[0].record()
                kernel_a()
                e[1].record()
                read(mode)
                e[2].record()
                kernel_b()
                e[3].record()
            torch.cuda.synchronize()
            bubble = spread([e[1].elapsed_time(e[2]) * 1e3 for e in ev])
            seq = spread([e[0].elapsed_time(e[3]) * 1e3 for e in ev])
            a = spread([e[0].elapsed_time(e[1]) * 1e3 for e in ev])
            b = spread([e[2].elapsed_time(e[3]) * 1e3 for e in ev])
            out.append({"tokens": tokens, "experts": experts, "top_k": top_k, "hidden": hidden, "read": mode,
                        "spin_cycles": spin, "bubble": bubble, "sequence": seq, "kernel_a": a, "kernel_b": b})
            log(f"hostsync T={tokens} E={experts} {mode} spin={spin}: bubble {bubble['median']:.1f} us "
                f"(p10 {bubble['p10']:.1f}, p90 {bubble['p90']:.1f}), A {a['median']:.1f} us, B {b['median']:.1f} us, "
                f"A..B {seq['median']:.1f} us")
        del x, wr, w, ones, pinned, state
    return out


# Layer-step shapes: (name, hidden, heads, kv_heads, head_dim, experts, ffn_hidden, top_k, layers, seq, micro_batch)
LAYER_SHAPES = {
    "qwen3-30b-a3b-4l-mbs1": (2048, 32, 4, 128, 128, 768, 8, 4, 4096, 1),
    "qwen3-30b-a3b-4l-mbs2": (2048, 32, 4, 128, 128, 768, 8, 4, 4096, 2),
    "mixtral-8x7b-2l-mbs1": (4096, 32, 8, 128, 8, 14336, 2, 2, 4096, 1),
}


def layer_tools(torch, log):
    """The attention backend and the experts' GeMM this PyTorch runs, each checked once on a small
    problem (forward and backward) before any timing."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    bf = torch.bfloat16

    def make_attention(backend, gqa):
        def attention(q, k, v):
            rep = q.shape[1] // k.shape[1]
            with sdpa_kernel([backend]):
                if gqa:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=rep > 1)
                if rep > 1:
                    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return attention

    attention = None
    for backend, name, gqa in ((SDPBackend.CUDNN_ATTENTION, "cudnn-fused-sdpa", True),
                               (SDPBackend.FLASH_ATTENTION, "flash-attention-2-sdpa", True),
                               (SDPBackend.CUDNN_ATTENTION, "cudnn-fused-sdpa (K/V heads repeated)", False),
                               (SDPBackend.FLASH_ATTENTION, "flash-attention-2-sdpa (K/V heads repeated)", False)):
        try:
            fn = make_attention(backend, gqa)
            qkv = torch.randn(2, 512, 12, 128, device="cuda", dtype=bf, requires_grad=True)
            q, k, v = qkv.split([8, 2, 2], dim=2)
            o = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            o.backward(torch.randn_like(o))
            torch.cuda.synchronize()
            attention = (fn, name)
            break
        except Exception as e:
            log(f"layer: attention {name}: not usable ({str(e).splitlines()[0][:160]})")
    if attention is None:
        raise RuntimeError("no fused SDPA backend (cuDNN or flash) runs GQA attention here")

    # Experts: torch._grouped_mm with uneven groups (one empty, none a multiple of 16), checked
    # against a loop of matmuls, forward and gradients; else groups padded to 16 rows; else a loop.
    def grouped_ok(pad):
        g, k, n = 4, 256, 384
        sizes = [37, 5, 90, 29] if not pad else [48, 16, 96, 32]
        a = torch.randn(sum(sizes), k, device="cuda", dtype=bf, requires_grad=True)
        w = torch.randn(g, n, k, device="cuda", dtype=bf, requires_grad=True)
        offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
        y = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs, out_dtype=bf)
        gy = torch.randn_like(y)
        ga, gw = torch.autograd.grad(y, (a, w), gy)
        ref = torch.cat([p.float() @ w[i].float().t() for i, p in enumerate(a.split(sizes))])
        ra, rw = torch.autograd.grad(ref, (a, w), gy.float())
        close = lambda u, r: bool(((u.float() - r.float()).abs().max() <= 0.05 * r.float().abs().max() + 1e-3).item())
        return close(y, ref) and close(ga, ra) and close(gw, rw)

    experts = "loop"
    for pad, name in ((False, "grouped"), (True, "grouped_padded")):
        try:
            if grouped_ok(pad):
                experts = name
                break
            log(f"layer: torch._grouped_mm {'padded ' if pad else ''}groups: results differ from a loop of matmuls")
        except Exception as e:
            log(f"layer: torch._grouped_mm {'padded ' if pad else ''}groups: not usable ({str(e).splitlines()[0][:160]})")
    return attention, experts


EXPERT_IMPL = {"grouped": "torch._grouped_mm over the expert-sorted rows (CUTLASS grouped GeMM), groups unpadded",
               "grouped_padded": "torch._grouped_mm, each expert's rows padded to a multiple of 16 (zero rows)",
               "loop": "one matmul per expert (torch._grouped_mm not usable here), split sizes read by the host"}


def make_layer(torch, shape, attention, experts_impl):
    """Parameters and forward of an MoE transformer layer stack in bf16 (Megatron-Core's layer without
    bias or dropout): RMSNorm, QKV projection, causal GQA attention (fused SDPA), output projection,
    residual; RMSNorm, router (linear, fp32 softmax, top-k, probabilities renormalised over the k),
    permute (rows gathered by expert), the experts' SwiGLU fc1 / fc2 (grouped GeMM), un-permute
    (probability-weighted scatter-add), residual. `mark(name)` records an event at a point of the
    forward; `hook(tensor, name)` one when that tensor's gradient is ready in the backward. The
    forward's `unpermute` "scatter": as Megatron-Core's unfused permute/unpermute, index_select of each token's
    k copies and index_add_ of the weighted copies back, so the un-permute and the permute's
    backward add k rows into each token's row with atomics; "gather": without atomics, as fused
    permute kernels do (a row map): the copies gathered back by the inverse permutation and summed
    per token, and the permute's backward the same gather and sum."""
    F = torch.nn.functional
    bf = torch.bfloat16
    h, nh, nkv, d, E, f, k, L, S, B = shape
    T = S * B

    class GatherPermute(torch.autograd.Function):
        """Rows `rows` of x (each token k times); backward: the gradient rows gathered back by the
        inverse permutation and summed over each token's k copies (no atomics)."""
        @staticmethod
        def forward(ctx, x, rows, inverse):
            ctx.save_for_backward(inverse)
            return x.index_select(0, rows)

        @staticmethod
        def backward(ctx, g):
            inverse, = ctx.saved_tensors
            return g.index_select(0, inverse).view(T, k, -1).sum(1), None, None

    def param(*size, scale=0.02):
        return (torch.randn(*size, device="cuda", dtype=torch.float32) * scale).to(bf).requires_grad_()

    layers = [{"ln1": torch.ones(h, device="cuda", dtype=bf, requires_grad=True),
               "wqkv": param((nh + 2 * nkv) * d, h), "wo": param(h, nh * d),
               "ln2": torch.ones(h, device="cuda", dtype=bf, requires_grad=True),
               "wr": param(E, h), "w1": param(E, 2 * f, h), "w2": param(E, h, f)} for _ in range(L)]
    attn = attention[0]

    def experts(xs, p, counts, offs):
        if experts_impl == "loop":
            sizes = counts.tolist()
            parts = [F.linear(F.silu(z[:, :f]) * z[:, f:], p["w2"][i]) for i, part in enumerate(xs.split(sizes))
                     for z in (F.linear(part, p["w1"][i]),)]
            return torch.cat(parts)
        y1 = torch._grouped_mm(xs, p["w1"].transpose(-2, -1), offs=offs, out_dtype=bf)
        a = F.silu(y1[:, :f]) * y1[:, f:]
        return torch._grouped_mm(a, p["w2"].transpose(-2, -1), offs=offs, out_dtype=bf)

    def forward(x, mark, hook, host_sync=False, loads=None, unpermute="scatter"):
        x = x.view(x.shape)  # a new (non-leaf) tensor per step: a hook on the leaf would stay for every later step
        for l, p in enumerate(layers):
            pre = f"L{l}."
            hook(x, pre + "bwd.qkv")  # layer l's backward ends when its input's gradient is ready
            mark(pre + "fwd.start")
            y = F.rms_norm(x, (h,), p["ln1"])
            qkv = F.linear(y, p["wqkv"])
            hook(qkv, pre + "bwd.core")
            q, kk, v = qkv.view(B, S, nh + 2 * nkv, d).split([nh, nkv, nkv], dim=2)
            mark(pre + "fwd.qkv")
            o = attn(q.transpose(1, 2), kk.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2).reshape(T, nh * d)
            hook(o, pre + "bwd.out")
            mark(pre + "fwd.core")
            x = x + F.linear(o, p["wo"])
            hook(x, pre + "bwd.norm2")
            mark(pre + "fwd.out")
            h2 = F.rms_norm(x, (h,), p["ln2"])
            hook(h2, pre + "bwd.router_permute")
            probs = torch.softmax(F.linear(h2, p["wr"]).float(), dim=-1)
            top, idx = torch.topk(probs, k, dim=-1)
            top = (top / top.sum(dim=-1, keepdim=True)).to(bf)
            flat = idx.reshape(-1)
            order = torch.argsort(flat, stable=True)
            rows = order // k
            counts = torch.zeros(E, device="cuda", dtype=torch.int64).scatter_add_(0, flat, torch.ones_like(flat))
            if host_sync:
                counts.tolist()  # the dispatcher's device-to-host read of the split sizes
            if loads is not None:
                loads.append(counts)
            mark(pre + "fwd.router")
            if unpermute == "gather":
                inverse = torch.empty_like(order).scatter_(0, order, torch.arange(T * k, device="cuda"))
            if experts_impl == "grouped_padded":
                padded = (counts + 15) // 16 * 16
                end = padded.cumsum(0)
                start = (counts.cumsum(0) - counts)[flat[order]]
                pos = torch.arange(T * k, device="cuda") - start + (end - padded)[flat[order]]
                src = torch.full((T * k + 16 * E,), T, device="cuda", dtype=torch.int64).index_copy_(0, pos, rows)
                xs = torch.cat([h2, h2.new_zeros(1, h)]).index_select(0, src)
                offs = end.to(torch.int32)
            else:
                xs = GatherPermute.apply(h2, rows, inverse) if unpermute == "gather" else h2.index_select(0, rows)
                offs = counts.cumsum(0).to(torch.int32)
            hook(xs, pre + "bwd.experts")
            mark(pre + "fwd.permute")
            y2 = experts(xs, p, counts, offs)
            hook(y2, pre + "bwd.combine")
            mark(pre + "fwd.experts")
            if experts_impl == "grouped_padded":
                y2 = y2.index_select(0, pos)
            if unpermute == "gather":
                x = x + (y2.index_select(0, inverse).view(T, k, h) * top.unsqueeze(-1)).sum(1)
            else:
                weighted = y2 * top.reshape(-1)[order].unsqueeze(-1)
                x = x + torch.zeros(T, h, device="cuda", dtype=bf).index_add_(0, rows, weighted)
            mark(pre + "fwd.combine")
        return x

    params = [t for p in layers for t in p.values()]
    return forward, params, T


LAYER_PARTS = {  # name: (from marker, to marker), per layer; moesim's tasks in brackets
    "fwd.attention_qkv": ("fwd.start", "fwd.qkv"), "fwd.attention_core": ("fwd.qkv", "fwd.core"),
    "fwd.attention_out": ("fwd.core", "fwd.out"),  # the three: moesim's "fwd attention"
    "fwd.router": ("fwd.out", "fwd.router"), "fwd.permute": ("fwd.router", "fwd.permute"),  # "fwd gate"
    "fwd.experts": ("fwd.permute", "fwd.experts"), "fwd.combine": ("fwd.experts", "fwd.combine"),
    "bwd.combine": ("bwd.start", "bwd.combine"), "bwd.experts": ("bwd.combine", "bwd.experts"),
    "bwd.router_permute": ("bwd.experts", "bwd.router_permute"), "bwd.norm2": ("bwd.router_permute", "bwd.norm2"),
    "bwd.attention_out": ("bwd.norm2", "bwd.out"), "bwd.attention_core": ("bwd.out", "bwd.core"),
    "bwd.attention_qkv": ("bwd.core", "bwd.qkv"),
}


def measure_layer(torch, warmup, reps, shapes, log):
    """One training step (forward and backward, no optimizer) of a stack of MoE layers on one GPU
    (no expert parallelism, no communication), bf16, as make_layer builds it; the step queued behind
    a spin, parameter gradients set to None before each step (no accumulation kernels). Each shape
    three times: as it is ("none": no host sync, un-permute "scatter"), with the dispatcher's
    counts.tolist() after the router in every layer ("tolist"), and with the un-permute "gather".
    The whole step between two events, then again with events at every part boundary (forward)
    and gradient hooks (backward) for the per-part times. Then the optimizer
    alone: fused AdamW over fp32 master copies of the same parameters and their fp32 gradients, and
    the copy of the master weights back into the bf16 parameters."""
    attention, experts_impl = layer_tools(torch, log)
    log(f"layer: attention {attention[1]}; experts {EXPERT_IMPL[experts_impl]}")
    bf = torch.bfloat16
    steps, optim = [], []
    for name in shapes:
        shape = LAYER_SHAPES[name]
        h, nh, nkv, d, E, f, k, L, S, B = shape
        try:
            forward, params, T = make_layer(torch, shape, attention, experts_impl)
            x = torch.randn(T, h, device="cuda", dtype=bf, requires_grad=True)
            gy = torch.randn(T, h, device="cuda", dtype=bf)
            nparams = sum(p.numel() for p in params)
            param_shapes = [p.shape for p in params]
            for sync, unpermute in ((False, "scatter"), (True, "scatter"), (False, "gather")):
                fwd = lambda *a: forward(*a, unpermute=unpermute)
                events = {}
                noop = lambda *a: None

                def mark(n):
                    e = torch.cuda.Event(enable_timing=True)
                    e.record()
                    events.setdefault(n, []).append(e)

                def hook(t, n):
                    t.register_hook(lambda g: mark(n))

                def step(mk, hk, loads=None):
                    for p in params:
                        p.grad = None
                    x.grad = None
                    mk("step.start")
                    y = fwd(x, mk, hk, sync, loads)
                    mk("L%d.bwd.start" % (L - 1))
                    y.backward(gy)
                    mk("step.end")

                loads = []
                step(noop, noop, loads)  # one step for the expert loads
                loads = torch.stack(loads).float()
                per_expert = loads.long().tolist()
                for _ in range(warmup):
                    step(noop, noop)
                torch.cuda.synchronize()
                # The whole step, then the step with part markers.
                whole = []
                for markers in (False, True):
                    events.clear()
                    torch.cuda._sleep(int(2e6))
                    for _ in range(reps):
                        if markers:
                            step(mark, hook)
                        else:
                            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                            for p in params:
                                p.grad = None
                            x.grad = None
                            e0.record()
                            fwd(x, noop, noop, sync, None).backward(gy)
                            e1.record()
                            whole.append((e0, e1))
                    torch.cuda.synchronize()
                el = lambda a, b: [u.elapsed_time(v) * 1e3 for u, v in zip(events[a], events[b])]
                entry = {"shape": name, "layers": L, "hidden": h, "heads": nh, "kv_heads": nkv, "head_dim": d,
                         "experts": E, "ffn_hidden": f, "top_k": k, "sequence_length": S, "micro_batch_size": B,
                         "tokens": T, "dtype": "bf16", "parameters": nparams, "attention": attention[1],
                         "experts_gemm": EXPERT_IMPL[experts_impl], "host_sync": "tolist" if sync else "none",
                         "unpermute": unpermute,
                         "expert_load": {"mean": round(loads.mean().item(), 1), "max": round(loads.max().item(), 1),
                                         "min": round(loads.min().item(), 1), "per_layer": per_expert},
                         "step": spread([a.elapsed_time(b) * 1e3 for a, b in whole]),
                         "step_with_markers": spread(el("step.start", "step.end")),
                         "forward": spread(el("step.start", "L%d.bwd.start" % (L - 1))),
                         "backward": spread(el("L%d.bwd.start" % (L - 1), "step.end")), "parts": {}}
                for part, (a, b) in LAYER_PARTS.items():
                    per_layer = []
                    for l in range(L):
                        a_n = f"L{l}.{a}"
                        if a == "bwd.start" and l < L - 1:
                            a_n = f"L{l + 1}.bwd.qkv"  # the layer above hands its input's gradient down
                        per_layer.append(round(statistics.median(el(a_n, f"L{l}.{b}")), 3))
                    entry["parts"][part] = per_layer
                steps.append(entry)
                log(f"layer {name} host_sync={entry['host_sync']} unpermute={unpermute}: step {entry['step']['median'] / 1e3:.3f} ms "
                    f"(p10 {entry['step']['p10'] / 1e3:.3f}, p90 {entry['step']['p90'] / 1e3:.3f}), forward "
                    f"{entry['forward']['median'] / 1e3:.3f} ms, backward {entry['backward']['median'] / 1e3:.3f} ms; "
                    f"loads {entry['expert_load']}")
                log("  parts (us, per layer): " + "; ".join(f"{p} {v}" for p, v in entry["parts"].items()))
            del forward, fwd, params, x, gy
            torch.cuda.empty_cache()
            # The optimizer step on fp32 master weights of the same shapes.
            shapes_ = param_shapes
            master = [torch.randn(s, device="cuda", dtype=torch.float32).mul_(0.02).requires_grad_() for s in shapes_]
            for m in master:
                m.grad = torch.randn_like(m).mul_(1e-3)
            opt = torch.optim.AdamW(master, lr=1e-4, fused=True)
            model = [torch.empty(s, device="cuda", dtype=bf) for s in shapes_]
            run = timer(torch, warmup, reps)
            t_adam = run(opt.step)
            t_copy = run(lambda: torch._foreach_copy_(model, master))
            optim.append({"shape": name, "parameters": nparams, "adamw_fused_fp32": round(t_adam, 3),
                          "copy_to_bf16": round(t_copy, 3), "implementation": "torch.optim.AdamW(fused=True), fp32 "
                          "master weights, moments and gradients; torch._foreach_copy_ to the bf16 weights"})
            log(f"optimizer {name}: {nparams / 1e9:.3f} B parameters, AdamW {t_adam / 1e3:.3f} ms, "
                f"copy to bf16 {t_copy / 1e3:.3f} ms")
            del master, opt, model
            torch.cuda.empty_cache()
        except Exception as e:
            import traceback
            log(f"layer {name}: failed ({traceback.format_exc()[-1500:]})")
            torch.cuda.empty_cache()
    return steps, optim


def host_seconds(torch, fn, n, spin_cycles=int(4e8)):
    """The host's time per call of `fn` while the GPU is busy behind a spin (so no call waits for
    the GPU; n stays well below the launch queue's ~1000 entries)."""
    import time
    torch.cuda.synchronize()
    torch.cuda._sleep(spin_cycles)
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n


def measure_launch(torch, reps, log):
    """Host costs of driving the GPU: eager ops, graph replays, reads, and an MoE layer step."""
    F = torch.nn.functional
    bf = torch.bfloat16
    out = {"eager_ops": [], "graph_replays": [], "reads": [], "layer_steps": []}
    one = torch.zeros(1, device="cuda")
    a = torch.randn(4096, 2048, device="cuda", dtype=bf)
    w = torch.randn(2048, 2048, device="cuda", dtype=bf)
    ops = {"add_ (in place, 1 element)": lambda: one.add_(1),
           "add (allocating, 4096x2048 bf16)": lambda: torch.add(a, a),
           "zeros (1 element)": lambda: torch.zeros(1, device="cuda"),
           "linear (4096x2048 by 2048x2048 bf16, cuBLAS)": lambda: F.linear(a, w),
           "empty (no kernel)": lambda: torch.empty(4096, 2048, device="cuda", dtype=bf)}
    for name, fn in ops.items():
        for _ in range(3):
            fn()
        per = [host_seconds(torch, fn, 200) * 1e6 for _ in range(reps)]
        out["eager_ops"].append({"op": name, "host_us": spread(per)})
        log(f"launch: {name}: {statistics.median(per):.2f} us of host time")
    for kernels in (1, 10, 100, 1000):
        g = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            for _ in range(3):
                one.add_(1)
            with torch.cuda.graph(g):
                for _ in range(kernels):
                    one.add_(1)
        torch.cuda.synchronize()
        per = [host_seconds(torch, g.replay, 100) * 1e6 for _ in range(reps)]
        out["graph_replays"].append({"kernels": kernels, "host_us": spread(per)})
        log(f"launch: graph of {kernels} kernels: {statistics.median(per):.2f} us of host time per replay")
        del g
    import time
    for name, fn in (("item", lambda: one.item()), ("tolist of 128 int64", lambda: counts.tolist())):
        counts = torch.zeros(128, device="cuda", dtype=torch.int64)
        per = []
        for _ in range(reps * 10):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            per.append((time.perf_counter() - t0) * 1e6)
        out["reads"].append({"read": name, "idle_gpu_us": spread(per)})
        log(f"launch: {name} on an idle GPU: {statistics.median(per):.2f} us")
    attention, experts_impl = layer_tools(torch, log)
    for name in ("qwen3-30b-a3b-4l-mbs1",):
        shape = LAYER_SHAPES[name]
        h, nh, nkv, d, E, f, k, L, S, B = shape
        forward, params, T = make_layer(torch, shape, attention, experts_impl)
        x = torch.randn(T, h, device="cuda", dtype=bf, requires_grad=True)
        gy = torch.randn(T, h, device="cuda", dtype=bf)
        noop = lambda *args: None
        state = {}

        def fwd():
            state["y"] = forward(x, noop, noop)

        def bwd():
            state["y"].backward(gy)

        for _ in range(3):
            fwd()
            bwd()
        for p in params:
            p.grad = None
        from torch.profiler import ProfilerActivity, profile
        launches = {}
        for part, fn in (("forward", fwd), ("backward", bwd)):
            if part == "backward":
                fwd()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                fn()
            torch.cuda.synchronize()
            launches[part] = sum(1 for e in prof.events() if e.name in (
                "cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx", "cudaMemsetAsync",
                "cudaMemcpyAsync"))
            for p in params:
                p.grad = None
        fw, bw = [], []
        for _ in range(reps):
            fw.append(host_seconds(torch, fwd, 1) * 1e6)
            bw.append(host_seconds(torch, bwd, 1) * 1e6)
            for p in params:
                p.grad = None
        out["layer_steps"].append({"shape": name, "layers": L, "tokens": T, "experts": E, "top_k": k,
                                   "forward_host_us": spread(fw), "backward_host_us": spread(bw),
                                   "forward_launches": launches["forward"], "backward_launches": launches["backward"],
                                   "implementation": f"attention {attention[1]}; experts {EXPERT_IMPL[experts_impl]}; "
                                                     "eager PyTorch, no host read"})
        log(f"launch: {name}: forward {statistics.median(fw):.0f} us of host for {launches['forward']} launches, "
            f"backward {statistics.median(bw):.0f} us for {launches['backward']}")
        del forward, params, x, gy, state
        torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--what", default="attention,fp8,memory",
                    help="comma list of attention, gemm, fp8, memory, grouped, optimizer, hostsync, layer, launch")
    ap.add_argument("--out", help="measurements JSON (attention and fp8 GeMM entries); needed unless --what is only "
                                  "hostsync and layer")
    ap.add_argument("--memory-out", help="JSON of the memory-bound kernels (with --what memory)")
    ap.add_argument("--hostsync-out", help="JSON of the host-sync bubbles (with --what hostsync)")
    ap.add_argument("--layer-out", help="JSON of the MoE layer steps (with --what layer)")
    ap.add_argument("--launch-out", help="JSON of the host's launch costs (with --what launch)")
    ap.add_argument("--layer-shapes", default=",".join(LAYER_SHAPES), help="comma list of " + ", ".join(LAYER_SHAPES))
    ap.add_argument("--grid", default="all", choices=["moe", "generic", "all"])
    ap.add_argument("--gemm-dtypes", default="bf16", help="dense GeMM dtypes (with --what gemm): bf16,fp16,fp32,tf32")
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
    known = {"attention", "gemm", "fp8", "memory", "grouped", "optimizer", "hostsync", "layer", "launch"}
    if what - known:
        ap.error(f"--what: unknown {sorted(what - known)}; use {', '.join(sorted(known))}")
    own = {"hostsync": args.hostsync_out, "layer": args.layer_out, "launch": args.launch_out}
    if not args.out and (what - set(own) or any(what_ in what and not out for what_, out in own.items())):
        ap.error("--out is needed (or --hostsync-out / --layer-out / --launch-out for each of hostsync, layer and "
                 "launch)")
    shapes = args.layer_shapes.split(",")
    if set(shapes) - set(LAYER_SHAPES):
        ap.error(f"--layer-shapes: unknown {sorted(set(shapes) - set(LAYER_SHAPES))}; use {', '.join(LAYER_SHAPES)}")
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
    if "gemm" in what:
        doc["gemm"] += measure_gemm(torch, run, args.grid, args.gemm_dtypes.split(","), log)
    if "fp8" in what:
        doc["gemm"] += measure_fp8(torch, run, args.grid, log)
    if what - set(own):
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    base = {key: value for key, value in doc.items() if key not in ("gemm", "attention")}
    if "hostsync" in what:
        hs = dict(base, tool="moesim-calibrate-torch (host-sync bubble)")
        hs["host_sync"] = measure_hostsync(torch, args.warmup, args.reps, log)
        with open(args.hostsync_out or args.out.replace(".json", "-hostsync.json"), "w") as f:
            json.dump(hs, f, indent=1)
    if "layer" in what:
        ly = dict(base, tool="moesim-calibrate-torch (MoE layer step)")
        ly["layer_step"], ly["optimizer"] = measure_layer(torch, args.warmup, args.reps, shapes, log)
        with open(args.layer_out or args.out.replace(".json", "-layer.json"), "w") as f:
            json.dump(ly, f, indent=1)
    if "launch" in what:
        la = dict(base, tool="moesim-calibrate-torch (host launch costs)")
        la["launch"] = measure_launch(torch, args.reps, log)
        with open(args.launch_out or args.out.replace(".json", "-launch.json"), "w") as f:
            json.dump(la, f, indent=1)
    if what & {"memory", "grouped", "optimizer"}:
        mem = {key: value for key, value in doc.items() if key not in ("gemm", "attention")}
        mem["tool"] = "moesim-calibrate-torch (memory-bound kernels, grouped GeMMs)"
        if "memory" in what:
            mem["kernels"] = measure_memory(torch, run, log)
        if "grouped" in what:
            mem["grouped_gemm"] = measure_grouped(torch, run, log)
        if "optimizer" in what:
            mem["optimizer"] = measure_optimizer(torch, run, log)
        with open(args.memory_out or args.out.replace(".json", "-memory.json"), "w") as f:
            json.dump(mem, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
