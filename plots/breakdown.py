#!/usr/bin/python3
"""Per-GPU time breakdown of one moesim run (results.json): compute, exposed communication and idle
time stacked to the iteration time, with the communication hidden behind compute as a thin bar (GPUs on the x axis; with many
GPUs, every n-th). Reads only results.json.

    plots/breakdown.py out/quickstart/results.json -o breakdown.png
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--max-gpus", type=int, default=64, help="bars at most (GPUs are sampled evenly)")
    ap.add_argument("-o", "--output", default="breakdown.png")
    args = ap.parse_args(argv)
    with open(args.results) as f:
        r = json.load(f)
    per = r["per_gpu"]
    n = len(per["compute_ms"])
    step = max(1, -(-n // args.max_gpus))
    gpus = list(range(0, n, step))
    compute = [per["compute_ms"][g] for g in gpus]
    exposed = [per["exposed_communication_ms"][g] for g in gpus]
    hidden = [max(0.0, per["communication_ms"][g] - per["exposed_communication_ms"][g]) for g in gpus]
    # What is left of the iteration: the GPU waits (for the slowest member of a collective).
    idle = [max(0.0, r["iteration_time_ms"] - c - e) for c, e in zip(compute, exposed)]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.15 * len(gpus)), 4.2))
    ax.bar(gpus, compute, width=step * 0.8, label="compute")
    ax.bar(gpus, exposed, width=step * 0.8, bottom=compute, label="exposed communication")
    ax.bar(gpus, idle, width=step * 0.8, bottom=[c + e for c, e in zip(compute, exposed)], label="idle (waiting)",
           color="lightgrey")
    ax.bar(gpus, hidden, width=step * 0.3, bottom=[0.0] * len(gpus), label="communication hidden behind compute",
           color="tab:green", alpha=0.6)
    ax.axhline(r["iteration_time_ms"], color="k", lw=1, ls="--", label="iteration time")
    ax.set_xlabel("GPU")
    ax.set_ylabel("ms per iteration")
    ax.set_title(f'{r["scenario"]}: {r["strategy"]["name"]} on {r["cluster"]["gpus"]} GPUs')
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(args.output)


if __name__ == "__main__":
    main()
