#!/usr/bin/python3
"""Plot a metric of a moesim sweep (results.csv) against one swept axis, one line per value of
another axis. Reads only the CSV that `moesim sweep` writes.

    plots/sweep.py out/sweep-interdc/results.csv --x "cluster.levels[0].count" \
        --y iteration_time_ms --group "cluster.levels[0].bandwidth" --where model.experts=64 -o interdc.png

Every other swept axis with more than one value must be fixed with --where PATH=VALUE (exit 2
naming it otherwise: a line must not average points the reader cannot see). Rows whose status is
not "ok" (infeasible or invalid points) have no value to plot: each is marked with a red x on the
lower edge at its x, and counted on stderr.
"""
import argparse
import csv
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def number(text):
    """Sorts "10Gbps" by its number, plain numbers by value, other strings as text."""
    m = re.match(r"^\s*([-+0-9.eE]+)", text)
    units = {"bps": 1e-9, "Kbps": 1e-6, "Mbps": 1e-3, "Gbps": 1, "Tbps": 1e3, "MB/s": 8e-3, "GB/s": 8, "TB/s": 8e3}
    if m:
        try:
            value = float(m.group(1))
        except ValueError:
            return (1, text)
        rest = text[m.end():].strip()
        return (0, value * units.get(rest, 1))
    return (1, text)


# Units of the CSV's metric columns (docs/results.md), for the axis labels.
UNITS = {"_ms": "ms", "tokens_per_second": "tokens/s", "_bytes": "bytes", "dropped_fraction": "fraction of copies"}


def label(column, values=()):
    """A column name with its unit: "iteration_time_ms (ms)", "cluster.levels[0].bandwidth (Gbps)"."""
    for suffix, unit in UNITS.items():
        if column.endswith(suffix) or column.startswith("bytes_level") and unit == "bytes":
            return f"{column} ({unit})"
    if values and all(re.search(r"(bps|B/s)\s*$", v) for v in values):
        return f"{column} (Gbps)"
    return column


def scenario_name(csv_path):
    """The sweep's scenario name, from the scenario.effective.json written beside its CSV."""
    import json
    import os
    try:
        with open(os.path.join(os.path.dirname(csv_path) or ".", "scenario.effective.json")) as f:
            return json.load(f).get("name", "")
    except (OSError, ValueError):
        return ""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--x", required=True, help="swept axis on the x axis (a column of the CSV)")
    ap.add_argument("--y", default="iteration_time_ms", help="metric column (default iteration_time_ms)")
    ap.add_argument("--group", help="axis giving one line per value")
    ap.add_argument("--where", action="append", default=[], help="PATH=VALUE: keep only these rows")
    ap.add_argument("--log-x", action="store_true")
    ap.add_argument("--log-y", action="store_true")
    ap.add_argument("-o", "--output", default="sweep.png")
    args = ap.parse_args(argv)

    with open(args.csv, newline="") as f:
        rows = list(csv.DictReader(f))
    for col in [args.x, args.y] + ([args.group] if args.group else []):
        if rows and col not in rows[0]:
            sys.exit(f"{args.csv}: no column {col!r}; columns: {', '.join(rows[0].keys())}")
    filters = [w.split("=", 1) for w in args.where]
    # The swept axes are the columns between "point" and "status" (docs/results.md).
    header = list(rows[0].keys()) if rows else []
    axes = header[1:header.index("status")] if "status" in header else []
    fixed = {k for k, _ in filters} | {args.x} | ({args.group} if args.group else set())
    for axis in axes:
        values = sorted({r[axis] for r in rows}, key=number)
        if axis not in fixed and len(values) > 1:
            print(f"{args.csv}: axis {axis} has {len(values)} values ({', '.join(values)}) and would be averaged; "
                  f"fix it with --where {axis}=VALUE or plot it with --group {axis}", file=sys.stderr)
            sys.exit(2)
    series = defaultdict(lambda: defaultdict(list))
    refused = defaultdict(list)  # per line: the x of each point that could not run
    for r in rows:
        if any(r.get(k) != v for k, v in filters):
            continue
        name = r[args.group] if args.group else args.y
        if r["status"] != "ok":
            refused[name].append(r[args.x])
            continue
        series[name][r[args.x]].append(float(r[args.y]))
    if not series:
        sys.exit(f"{args.csv}: no row with status ok matches")

    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for name in sorted(series, key=number):
        xs = sorted(series[name], key=number)
        ys = [sum(series[name][x]) / len(series[name][x]) for x in xs]
        numeric = all(number(x)[0] == 0 for x in xs)
        ax.plot([number(x)[1] for x in xs] if numeric else xs, ys, marker="o", label=name)
    marked = [x for name in refused for x in refused[name]]
    if marked:
        numeric = all(number(x)[0] == 0 for x in marked)
        low = ax.get_ylim()[0]
        ax.plot([number(x)[1] for x in marked] if numeric else marked, [low] * len(marked), "x", color="red",
                markersize=9, clip_on=False, label="refused (the CSV's note says why)")
        print(f"{args.csv}: {len(marked)} point(s) refused, marked x", file=sys.stderr)
    all_x = sorted({x for name in series for x in series[name]})
    ax.set_xlabel(label(args.x, all_x))
    ax.set_ylabel(label(args.y))
    name = scenario_name(args.csv)
    ax.set_title(f"{name + ': ' if name else ''}{args.y} against {args.x}", fontsize="medium")
    if args.log_x:
        ax.set_xscale("log")
    if args.log_y:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    # Below the axes: a legend inside can hide a line whatever corner it takes.
    ax.legend(fontsize="small", title=args.group, title_fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.16),
              ncol=min(4, len(series) + bool(marked)))
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(args.output)


if __name__ == "__main__":
    main()
