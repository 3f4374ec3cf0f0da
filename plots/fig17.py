#!/usr/bin/python3
"""HybridEP Fig. 17 from a moesim sweep: speed-up of HybridEP over EP against the DC count, one
line per inter-DC bandwidth, (a) for a fixed expert-domain size and (b) for a fixed proportion p.

    build/release/moesim sweep scenarios/hybridep-fig17.json --out out/fig17
    plots/fig17.py out/fig17/results.csv -o fig17.png

The CSV needs the axes of scenarios/hybridep-fig17.json: the DC count (cluster.levels[0].count),
the bandwidth (cluster.levels[0].bandwidth) and the strategy object. Speed-up = EP's iteration
time / HybridEP's at the same DC count and bandwidth. The table is printed too.
"""
import argparse
import csv
import json
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DCS = "cluster.levels[0].count"
BANDWIDTH = "cluster.levels[0].bandwidth"
STRATEGY = "strategy"


def gbps(text):
    m = re.match(r"^\s*([0-9.eE+-]+)\s*([KMGT]?)bps\s*$", text)
    if not m:
        sys.exit(f"fig17.py: bandwidth {text!r} is not like '10Gbps'")
    return float(m.group(1)) * {"": 1e-9, "K": 1e-6, "M": 1e-3, "G": 1, "T": 1e3}[m.group(2)]


def mode(strategy):
    """'ep', 'fixed S_ED = …' or 'fixed p = …' from the strategy object of a row."""
    s = json.loads(strategy)
    if s["name"] == "ep":
        return "ep"
    domain = s.get("domain", "auto")
    if isinstance(domain, dict):
        return f"fixed p = {domain['p']}"
    if isinstance(domain, list):
        return f"fixed S_ED = {' x '.join(str(d) for d in domain)}"
    return f"domain {domain}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("-o", "--output", required=True, help="PNG to write")
    args = ap.parse_args()

    times = {}  # (mode, dcs, bandwidth) -> iteration ms
    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    for column in (DCS, BANDWIDTH, STRATEGY):
        if rows and column not in rows[0]:
            sys.exit(f"fig17.py: {args.csv} has no column {column!r}; sweep scenarios/hybridep-fig17.json")
    for r in rows:
        if r["status"] != "ok":
            continue
        times[(mode(r[STRATEGY]), int(r[DCS]), r[BANDWIDTH])] = float(r["iteration_time_ms"])
    modes = sorted({m for m, _, _ in times if m != "ep"})
    if not modes:
        sys.exit(f"fig17.py: {args.csv} has no HybridEP rows")

    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4), squeeze=False)
    print(f"{'mode':<24} {'bandwidth':>9} " + " ".join(f"{d:>7}" for d in sorted({d for _, d, _ in times})))
    for ax, m in zip(axes[0], modes):
        by_bw = defaultdict(list)
        for (mm, dcs, bw), t in times.items():
            if mm == m and ("ep", dcs, bw) in times:
                by_bw[bw].append((dcs, times[("ep", dcs, bw)] / t))
        for bw in sorted(by_bw, key=gbps):
            pts = sorted(by_bw[bw])
            ax.plot([d for d, _ in pts], [s for _, s in pts], marker="o", label=bw)
            ax.annotate(f"{pts[-1][1]:.2f}x", pts[-1], textcoords="offset points", xytext=(4, 4), fontsize=8)
            print(f"{m:<24} {bw:>9} " + " ".join(f"{s:7.2f}" for _, s in pts))
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xscale("log")
        ax.set_xlabel("data centres")
        ax.set_ylabel("speed-up over EP (x)")
        ax.set_title(m)
        ax.legend(title="inter-DC bandwidth")
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("HybridEP vs EP (moesim, after HybridEP Fig. 17)")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)


if __name__ == "__main__":
    main()
