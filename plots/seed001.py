#!/usr/bin/python3
"""Seed 001 from moesim: the MoE dispatch/combine bandwidth per GPU and the throughput as the EP
group grows, with NCCL's all-to-all against the fused HybridEP kernels (a sweep of
scenarios/seed001-torchtitan-nvl72.json: DeepSeek-V3 on 4 GB200 NVL72 racks of 64 GPUs, EP 8 to 64
inside a rack, 128 and 256 across racks).

    build/release/moesim sweep scenarios/seed001-torchtitan-nvl72.json --out out/seed001 --jobs 2 --quiet
    plots/seed001.py out/seed001/results.csv -o seed001.png [--check]

Bandwidth per GPU, over the time a GPU's all-to-alls are in flight (all_to_all_busy_ms):
- wire: the bytes the backend's all-to-alls put on the network (all_to_all_bytes; a fused
  exchange across racks counts its NVLink fan-out beside the RDMA hop);
- delivered: the token copies that must leave their GPU (NCCL's all_to_all_bytes at the same EP:
  it sends every copy), what the exchange achieves for the model.
--check (ctest plots.seed001) exits 1 naming every claim that fails (moesim's values when the check
was last revised in brackets):
- inside one NVLink domain (EP <= 64) hybridep is faster than nccl at every EP (it also spares
  NCCL's permute kernels, the regroup by local expert among them), and its gain shrinks as EP
  grows: with fewer local experts a rank receives fewer duplicate copies to drop
  [1.168, 1.132, 1.106, 1.092];
- across racks (EP 128) the fused dispatch sends a token once per remote rack instead of about
  four copies (half of its 8 experts are remote): its delivered bandwidth is at least twice NCCL's
  [3.9x];
- at EP 256 HybridEP's all-to-all buffer, N x EP x h x 2 B = 32,768 x 256 x 7168 x 2 = 120.3 GB
  per GPU (spec 001.A.4), does not fit beside the model: the point is refused for memory.
Not held (printed): the PR's 1.31x from nccl to hybridep at EP 64 (moesim 1.092x; the PR's absolute
269.11 and 352.18 tokens/s/GPU are 13.0x and 10.9x below moesim's: see the issue 20 notes).
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import paper_check  # noqa: E402  (plots/, beside this script)

SCENARIO = "scenarios/seed001-torchtitan-nvl72.json"
EP, BACKEND = "parallel.ep", "parallel.ep_backend"
COLUMNS = (EP, BACKEND, "tokens_per_second", "all_to_all_busy_ms", "all_to_all_bytes")
PR = {"nccl": 269.11, "hybridep": 352.18}  # tokens/s/GPU at EP 64 (spec 001.B)


def gpus_and_domain(path):
    """The scenario's GPU count and the GPUs of its innermost level (one NVLink domain here)."""
    with open(path) as f:
        levels = json.load(f)["cluster"]["levels"]
    gpus = 1
    for level in levels:
        gpus *= level["count"]
    return gpus, levels[-1]["count"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="results.csv of the seed001-torchtitan-nvl72 sweep")
    ap.add_argument("--scenario", default=SCENARIO, help="the swept scenario (its GPU count)")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the claims moesim meets hold (see above)")
    args = ap.parse_args()
    gpus, domain = gpus_and_domain(args.scenario)
    rows = paper_check.read_sweep(args.csv, COLUMNS, SCENARIO)
    ok = {(int(r[EP]), r[BACKEND]): r for r in rows if r["status"] == "ok"}
    refused = {(int(r[EP]), r[BACKEND]): r for r in rows if r["status"] != "ok"}
    eps = sorted({int(r[EP]) for r in rows})
    backends = [b for b in ("nccl", "deepep", "hybridep") if any(k[1] == b for k in ok)]

    def per_gpu(key):
        return float(ok[key]["tokens_per_second"]) / gpus

    def bandwidth(key, column):
        """GB/s per GPU: `column`'s bytes over the GPU's all-to-all busy time."""
        busy = float(ok[key]["all_to_all_busy_ms"]) / 1e3
        return float(column) / gpus / busy / 1e9 if busy > 0 else 0.0

    print(f"{'EP':>4} {'backend':<9}{'tok/s/GPU':>10}{'a2a ms':>9}{'wire GB/s':>10}{'delivered':>10}")
    for ep in eps:
        for b in backends:
            if (ep, b) in refused:
                print(f"{ep:>4} {b:<9}{'refused: ' + refused[(ep, b)]['status']:>30}")
                continue
            if (ep, b) not in ok:
                continue
            copies = ok[(ep, "nccl")]["all_to_all_bytes"] if (ep, "nccl") in ok else "0"
            print(f"{ep:>4} {b:<9}{per_gpu((ep, b)):>10.1f}{float(ok[(ep, b)]['all_to_all_busy_ms']):>9.1f}"
                  f"{bandwidth((ep, b), ok[(ep, b)]['all_to_all_bytes']):>10.1f}{bandwidth((ep, b), copies):>10.1f}")

    failures = []
    inside = [ep for ep in eps if ep <= domain and (ep, "nccl") in ok and (ep, "hybridep") in ok]
    ratios = [per_gpu((ep, "hybridep")) / per_gpu((ep, "nccl")) for ep in inside]
    print("\nhybridep / nccl inside one NVLink domain: " + ", ".join(f"EP {e}: {r:.3f}" for e, r in zip(inside, ratios)))
    if 64 in inside:
        print(f"EP 64: {per_gpu((64, 'nccl')):.1f} -> {per_gpu((64, 'hybridep')):.1f} tokens/s/GPU "
              f"({ratios[inside.index(64)]:.3f}x); the PR: {PR['nccl']} -> {PR['hybridep']} "
              f"({PR['hybridep'] / PR['nccl']:.2f}x), not held")
    if args.check:
        if not inside:
            failures.append(f"no EP size <= {domain} with both nccl and hybridep")
        if any(r <= 1 for r in ratios):
            failures.append("hybridep is not faster than nccl at every EP inside one domain: "
                            + ", ".join(f"EP {e} {r:.3f}" for e, r in zip(inside, ratios)))
        if any(a <= b for a, b in zip(ratios, ratios[1:])):
            failures.append("hybridep's gain does not shrink as EP grows inside one domain")
        across = [ep for ep in eps if ep > domain and (ep, "nccl") in ok and (ep, "hybridep") in ok]
        if not across:
            failures.append(f"no EP size above {domain} (across racks) with both backends")
        for ep in across:
            copies = ok[(ep, "nccl")]["all_to_all_bytes"]
            gain = bandwidth((ep, "hybridep"), copies) / bandwidth((ep, "nccl"), copies)
            print(f"EP {ep} across racks: hybridep delivers {gain:.2f}x nccl's bandwidth")
            if gain < 2:
                failures.append(f"EP {ep}: hybridep delivers only {gain:.2f}x nccl's bandwidth across racks (claim: >= 2x)")
        big = (256, "hybridep")
        if big not in refused or "memory" not in refused[big]["note"]:
            failures.append("EP 256 with hybridep is not refused for memory (its all-to-all buffer is 120.3 GB per GPU)")

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    colors = {"nccl": "tab:blue", "deepep": "tab:green", "hybridep": "tab:orange"}
    ax = axes[0]
    for b in backends:
        xs = [ep for ep in eps if (ep, b) in ok]
        ax.plot(xs, [bandwidth((ep, b), ok[(ep, b)]["all_to_all_bytes"]) for ep in xs], "o-", color=colors[b],
                label=f"{b}: wire")
        xd = [ep for ep in xs if (ep, "nccl") in ok]
        ax.plot(xd, [bandwidth((ep, b), ok[(ep, "nccl")]["all_to_all_bytes"]) for ep in xd], "s--", color=colors[b],
                label=f"{b}: token copies delivered")
    ax.set_ylabel("dispatch/combine GB/s per GPU")
    ax.set_title("MoE all-to-all bandwidth as the EP group grows")
    ax2 = axes[1]
    width = 0.8 / max(1, len(backends))
    for k, b in enumerate(backends):
        ax2.bar([i + k * width for i in range(len(eps))], [per_gpu((ep, b)) if (ep, b) in ok else 0 for ep in eps],
                width, color=colors[b], label=b)
        for i, ep in enumerate(eps):
            if (ep, b) in refused:
                ax2.text(i + k * width, 0, " refused (memory)" if "memory" in refused[(ep, b)]["note"] else " refused",
                         rotation=90, ha="center", va="bottom", fontsize="small")
    ax2.set_xticks([i + 0.4 - width / 2 for i in range(len(eps))], [str(ep) for ep in eps])
    ax2.set_ylabel("tokens/s per GPU")
    ax2.set_title("DeepSeek-V3 throughput (the PR at EP 64: 269 / 352)")
    for a in axes:
        a.set_xlabel("EP size")
    ax.set_xscale("log", base=2)
    ax.set_xticks(eps, [str(ep) for ep in eps])
    ax.axvline(domain * 1.4, color="grey", lw=0.8)
    ax.text(domain * 1.45, ax.get_ylim()[1] * 0.95, "beyond one NVL72 rack", fontsize="small", va="top")
    ax.legend(fontsize="small")
    ax2.legend(fontsize="small")
    paper_check.finish(fig, args.output, failures, args.check)


if __name__ == "__main__":
    main()
