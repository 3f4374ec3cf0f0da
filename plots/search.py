#!/usr/bin/python3
"""Plot a moesim layout search (its ranked.csv): throughput per GPU against peak GPU memory, one
point per layout, and the Pareto front (no other layout is both faster and smaller). Layouts run
in full are filled, those whose figures were extrapolated from the screening hollow; the
scenario's own layout is a star, the fastest three are labelled. Reads only what `moesim search`
writes.

    plots/search.py out/deepseek-v3-gb200-search/ranked.csv --capacity 186 -o search.png

--capacity GIB draws the GPU's memory as a vertical line (the search keeps only layouts the
memory model fits under it). --check exits 1 unless the CSV is fastest first, with exactly one
layout marked as the scenario's own where it ran.
"""
import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def label(row):
    text = "TP{tp} PP{pp} VP{vp}".format(**row)
    if row.get("cp", "1") != "1":
        text += " CP" + row["cp"]
    text += " EP" + row["ep"]
    if row.get("etp", "1") != "1":
        text += " ETP" + row["etp"]
    text += " mbs" + row["micro_batch_size"]
    for key, plain in (("sharding", "none"), ("ep_backend", "nccl")):
        if row.get(key, plain) != plain:
            text += " " + row[key]
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="ranked.csv of `moesim search`")
    ap.add_argument("-o", "--out", required=True, help="image to write (.png, .pdf, .svg)")
    ap.add_argument("--capacity", type=float, help="the GPU's memory in GiB, drawn as a line")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the ranking is fastest first")
    args = ap.parse_args()
    try:
        with open(args.csv, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"search.py: error: {args.csv}: {e.strerror}", file=sys.stderr)
        return 2
    need = {"tokens_per_second_per_gpu", "peak_memory_gib", "simulated", "own", "tp", "pp", "vp", "ep", "micro_batch_size"}
    if not rows or not need <= set(rows[0]):
        print(f"search.py: error: {args.csv}: not a ranked.csv of moesim search (columns {sorted(need)})", file=sys.stderr)
        return 2
    tps = [float(r["tokens_per_second_per_gpu"]) for r in rows]
    mem = [float(r["peak_memory_gib"]) for r in rows]
    if args.check:
        if any(a < b for a, b in zip(tps, tps[1:])):
            print("search.py: check failed: ranked.csv is not fastest first", file=sys.stderr)
            return 1
        if sum(r["own"] == "yes" for r in rows) > 1:
            print("search.py: check failed: more than one layout is the scenario's own", file=sys.stderr)
            return 1
    fig, ax = plt.subplots(figsize=(7, 4.5))
    full = [i for i, r in enumerate(rows) if r["simulated"] == "in full"]
    extrapolated = [i for i, r in enumerate(rows) if r["simulated"] != "in full"]
    ax.scatter([mem[i] for i in extrapolated], [tps[i] for i in extrapolated], s=18, facecolors="none", edgecolors="tab:blue",
               label="extrapolated from the screening")
    ax.scatter([mem[i] for i in full], [tps[i] for i in full], s=22, color="tab:blue", label="simulated in full")
    # The Pareto front: by memory, each layout faster than every smaller one.
    front, best = [], -1.0
    for i in sorted(range(len(rows)), key=lambda i: (mem[i], -tps[i])):
        if tps[i] > best:
            front.append(i)
            best = tps[i]
    ax.step([mem[i] for i in front], [tps[i] for i in front], where="post", color="tab:orange", label="Pareto front")
    own = [i for i, r in enumerate(rows) if r["own"] == "yes"]
    if own:
        ax.scatter([mem[own[0]]], [tps[own[0]]], marker="*", s=160, color="tab:red", zorder=3,
                   label=f"the scenario's own (rank {own[0] + 1})")
    top = min(3, len(rows))
    for i in range(top):
        ax.annotate(str(i + 1), (mem[i], tps[i]), textcoords="offset points", xytext=(3, 3), fontsize=7)
    ax.text(0.02, 0.98, "\n".join(f"{i + 1}. {label(rows[i])}" for i in range(top)), transform=ax.transAxes, va="top",
            fontsize=7, bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none"})
    if args.capacity:
        ax.axvline(args.capacity, color="grey", linestyle="--", linewidth=1, label=f"GPU memory {args.capacity:g} GiB")
    ax.set_xlabel("peak GPU memory (GiB, the fullest GPU)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(f"{len(rows)} layouts ({len(full)} in full)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=130)
    print(f"search.py: {len(rows)} layouts, {len(front)} on the Pareto front -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
