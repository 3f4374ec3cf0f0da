#!/usr/bin/python3
"""Seed 004's Fig. 8, 9 and 11 from moesim: the share of tokens each replication policy drops (a
sweep of scenarios/seed004-gpt-*.json: adaptive, FlexMoE-10/50/100, DeepSpeed's static replicas),
from one adaptive run a layer's expert popularity against its replicas over the iterations, and
each policy's average iteration latency on GPT-Small, -Medium and -Large.

    for m in small medium large; do
      build/release/moesim sweep scenarios/seed004-gpt-$m.json --out out/seed004-$m --jobs 2 --quiet
    done
    build/release/moesim run scenarios/seed004-gpt-small.json --out out/seed004-run --quiet
    plots/seed004.py out/seed004-small/results.csv [out/seed004-medium/results.csv ...] \\
        [--run out/seed004-run/results.json] -o seed004.png [--check]

The first CSV gives Fig. 8; every CSV a group of Fig. 11's bars (named by its folder).
--check (ctest plots.seed004*) exits 1 naming every claim that fails, for each CSV (moesim's values
on GPT-Small when the check was last revised in brackets, 200 iterations):
- the order of drops of spec 004 C5: adaptive < FlexMoE-10 < FlexMoE-50 < FlexMoE-100 < static
  [0.148, 0.280, 0.367, 0.435, 0.485 of the token copies];
- adaptive's reduction of drops against static within 10 points of the paper's 69 % [69.6 %]; the
  popularity process is fitted to this figure (sim/workload/popularity_process.hpp, target c);
- §3.4: adaptive drops 43 % fewer tokens than FlexMoE-10 and 64 % fewer than FlexMoE-100, each
  within 10 points [47.4 %, 66.1 %]; not fitted;
- §5.3 (C6): FlexMoE's average latency rises with its rebalancing frequency and stays above
  adaptive's (FlexMoE-10 > -50 > -100 > adaptive) [357.8 > 293.9 > 249.3 > 203.6 ms].
Not held (printed): adaptive −2.8 / −3.2 / −9.3 % against static on Small / Medium / Large (moesim
+6 to +8 %: it moves the bytes §3.3's model counts, +22 % of gradient and weight traffic on this
cluster by spec 004 C4, and not the paper's faster collectives), FlexMoE-10 +35 % over adaptive
(moesim +76 to +84 %).
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import paper_check  # noqa: E402  (plots/, beside this script)

PLACEMENT, EVERY = "strategy.placement", "strategy.rebalance_every"
ORDER = ["adaptive", "FlexMoE-10", "FlexMoE-50", "FlexMoE-100", "static"]
# Adaptive's reduction of drops against each policy: §5.2 (DeepSpeed, 69 %) and §3.4 ("43 %-64 %
# fewer tokens than systems that rebalance experts on 10-100 iteration intervals").
PAPER_REDUCTION = {"static": 0.69, "FlexMoE-10": 0.43, "FlexMoE-100": 0.64}
TOLERANCE = 0.10  # issue 19: within 10 points
# §5.3: adaptive's latency against static per model, FlexMoE-10's against adaptive (spec 004 C6).
PAPER_LATENCY = {"static": {"small": -0.028, "medium": -0.032, "large": -0.093}, "FlexMoE-10": 0.35}


def label(row):
    return f"FlexMoE-{row[EVERY]}" if row[PLACEMENT] == "flexmoe" else row[PLACEMENT]


def model_name(path):
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    for size in ("small", "medium", "large"):
        if folder.endswith(size):
            return size
    return folder


def read(path):
    """Drops and ms per iteration of each policy in one sweep CSV."""
    rows = paper_check.read_sweep(path, (PLACEMENT, EVERY, "dropped_fraction", "iteration_time_ms"),
                                  "scenarios/seed004-gpt-small.json")
    ok = [r for r in rows if r["status"] == "ok"]
    return ({label(r): float(r["dropped_fraction"]) for r in ok}, {label(r): float(r["iteration_time_ms"]) for r in ok})


def report(name, drops, ms, failures, check):
    """Prints one model's table and what it gives against the paper; appends the failed claims."""
    print(f"\n{name}\n{'policy':<14}{'dropped':>9}{'ms/iter':>10}")
    for n in drops:
        print(f"{n:<14}{drops[n]:>9.3f}{ms[n]:>10.1f}")
    missing = [n for n in ORDER if n not in drops]
    if missing:
        failures.append(f"{name}: the sweep lacks {', '.join(missing)}")
        return
    reduction = {other: 1 - drops["adaptive"] / drops[other] for other in PAPER_REDUCTION}
    for other, paper in PAPER_REDUCTION.items():
        print(f"adaptive drops {reduction[other]:.1%} fewer than {other} (paper {paper:.0%})")
    paper_static = PAPER_LATENCY["static"].get(name)
    print(f"adaptive's latency {ms['adaptive'] / ms['static'] - 1:+.1%} against static"
          + (f" (paper {paper_static:+.1%}, not held)" if paper_static is not None else ""))
    print(f"FlexMoE-10's latency {ms['FlexMoE-10'] / ms['adaptive'] - 1:+.1%} against adaptive "
          f"(paper {PAPER_LATENCY['FlexMoE-10']:+.0%}, not held)")
    if not check:
        return
    if any(drops[a] >= drops[b] for a, b in zip(ORDER, ORDER[1:])):
        failures.append(f"{name}: drops are not ordered " + " < ".join(f"{n} {drops[n]:.3f}" for n in ORDER))
    for other, paper in PAPER_REDUCTION.items():
        if abs(reduction[other] - paper) > TOLERANCE:
            failures.append(f"{name}: adaptive drops {reduction[other]:.1%} fewer than {other}, "
                            f"not within {TOLERANCE:.0%} of the paper's {paper:.0%}")
    latency_order = ["FlexMoE-10", "FlexMoE-50", "FlexMoE-100", "adaptive"]
    if any(ms[a] <= ms[b] for a, b in zip(latency_order, latency_order[1:])):
        failures.append(f"{name}: latencies are not ordered " + " > ".join(f"{n} {ms[n]:.1f}" for n in latency_order))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="results.csv of seed004-gpt-* sweeps (the first gives Fig. 8)")
    ap.add_argument("--run", help="results.json of one adaptive run (Fig. 9 panel)")
    ap.add_argument("--layer", type=int, default=0, help="the layer of the Fig. 9 panel")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the claims moesim meets hold (see above)")
    args = ap.parse_args()
    models = [(model_name(p), *read(p)) for p in args.csv]
    failures = []
    for name, drops, ms in models:
        report(name, drops, ms, failures, args.check)

    panels = 2 + (1 if args.run else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0][0]
    name, drops, _ = models[0]
    ax.bar(list(drops), [1 - d for d in drops.values()], color="tab:blue")
    ax.set_ylabel("token survival")
    ax.set_title(f"Fig. 8: survival per policy, GPT-{name} (capacity factor 1.0)")
    ax = axes[0][1]
    width = 0.8 / len(ORDER)
    for k, policy in enumerate(ORDER):
        ax.bar([i + k * width for i in range(len(models))], [ms.get(policy, 0) for _, _, ms in models], width, label=policy)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(models))], [f"GPT-{m[0]}" for m in models])
    ax.set_ylabel("average iteration latency (ms)")
    ax.set_title("Fig. 11: latency per policy and model")
    ax.legend(fontsize="small")
    if args.run:
        with open(args.run) as f:
            its = json.load(f)["iterations"]
        series = [next(x for x in it["layers"] if x["layer"] == args.layer) for it in its]
        hot = max(range(len(series[0]["routed"])), key=lambda c: sum(s["routed"][c] for s in series))
        ax2 = axes[0][2]
        ax2.plot([s["routed"][hot] / sum(s["routed"]) for s in series], label=f"popularity of class {hot}")
        ax3 = ax2.twinx()
        ax3.step(range(len(series)), [s["replicas"][hot] for s in series], color="tab:orange", label="replicas")
        ax2.set_xlabel("iteration")
        ax2.set_ylabel("share of tokens")
        ax3.set_ylabel("replicas (of 64 slots)")
        ax2.set_title(f"Fig. 9: layer {args.layer}, popularity vs replicas")
    paper_check.finish(fig, args.output, failures, args.check)


if __name__ == "__main__":
    main()
