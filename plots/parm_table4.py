#!/usr/bin/python3
"""Parm Table IV from moesim sweeps of the Table III grid: average speed-up of S1, S2 and Parm
(Algorithm 1's choice) over DeepSpeed-MoE's baseline per (P, N_MP, N_ESP), next to the paper's;
how often the automatic choice was the faster schedule (the run's choice_was_fastest: its time
against both simulated schedules); whether a schedule was slower than the baseline where the
paper proves it never is (Eq. 6: S1 and S2 with N_MP = 1; Eq. 10: S2 with N_MP > 1; S1 with
N_MP > 1 has no such theorem, only the paper's observation, so its losses are counted apart); and
what was refused and why. Optionally a Fig. 7-like histogram of Parm's speed-ups.

    build/release/moesim sweep scenarios/parm-table3-a.json --out out/parm-a
    build/release/moesim sweep scenarios/parm-table3-b.json --out out/parm-b
    plots/parm_table4.py out/parm-a/results.csv out/parm-b/results.csv [-o fig7.png]
        [--min-auto-fastest 0.9] [--table4-tolerance 0.5]

A configuration counts as valid (as the paper's 1296 cases) when all four schedules ran; the
others are counted with the reason of their refusals. Exit status 1 if Eq. 6 or Eq. 10 is broken
anywhere, if the automatic choice was the faster schedule in fewer than --min-auto-fastest of a
testbed's valid configurations, or if a Table IV cell is further than --table4-tolerance (in ×)
from the paper's.
"""
import argparse
import csv
import re
import sys
from collections import Counter, defaultdict

SCHEDULE = "strategy.schedule"
NODES = "cluster.levels[0].count"
# Table IV: (testbed, P) → {(N_MP, N_ESP): (S1, S2, Parm)}.
PAPER = {
    ("A", 8): {(2, 2): (2.10, 1.99, 2.10), (2, 4): (2.24, 2.41, 2.41), (4, 2): (3.72, 3.21, 3.70), (4, 4): (4.19, 4.12, 4.20)},
    ("B", 8): {(2, 2): (2.62, 2.42, 2.62), (2, 4): (3.37, 3.05, 3.37), (4, 2): (4.18, 3.58, 4.18), (4, 4): (5.77, 5.38, 5.77)},
    ("B", 16): {(2, 2): (2.46, 2.20, 2.46), (2, 4): (2.85, 2.44, 2.85), (4, 2): (4.12, 3.81, 4.12), (4, 4): (5.08, 4.82, 5.08)},
    ("B", 32): {(2, 2): (2.72, 2.57, 2.57), (2, 4): (2.85, 2.75, 2.85), (4, 2): (3.92, 4.10, 4.06), (4, 4): (4.57, 4.91, 4.91)},
}


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or SCHEDULE not in rows[0]:
        sys.exit(f"parm_table4.py: {path} has no '{SCHEDULE}' column: run a sweep of scenarios/parm-table3-*.json")
    return rows


def reason(note):
    if "does not fit in GPU memory" in note:
        return "out of GPU memory"
    return re.sub(r"^[^:]*: ", "", note)[:80]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="results.csv of parm-table3-a and/or parm-table3-b sweeps")
    ap.add_argument("-o", "--output", help="write a histogram of Parm's speed-ups (Fig. 7) to this image")
    ap.add_argument("--min-auto-fastest", type=float, metavar="FRACTION",
                    help="fail if auto picked the faster schedule in fewer than this share of a testbed's configurations")
    ap.add_argument("--table4-tolerance", type=float, metavar="X",
                    help="fail if a Table IV cell (S1, S2, Parm) is more than X (in x) from the paper's")
    args = ap.parse_args()

    violations = 0
    s1_losses = 0
    failures = []
    parm_speedups = []
    for path in args.csv:
        rows = read(path)
        testbed = "B" if NODES in rows[0] else "A"
        keys = [k for k in rows[0] if k not in ("point", SCHEDULE) and k == k.strip() and "." in k]
        configs = defaultdict(dict)
        for r in rows:
            configs[tuple(r[k] for k in keys)][r[SCHEDULE]] = r
        refused = Counter()
        groups = defaultdict(lambda: defaultdict(list))
        auto_right = auto_total = 0
        for cfg, by in configs.items():
            if any(by[s]["status"] != "ok" for s in ("baseline", "s1", "s2", "auto")):
                for s in ("baseline", "s1", "s2", "auto"):
                    if by[s]["status"] != "ok":
                        refused[(s, reason(by[s]["note"]))] += 1
                continue
            c = dict(zip(keys, cfg))
            p = 4 * int(c[NODES]) if testbed == "B" else 8
            t = {s: float(by[s]["iteration_time_ms"]) for s in ("baseline", "s1", "s2", "auto")}
            mp = int(c["strategy.mp_size"])
            for s in ("s1", "s2"):
                if t[s] > t["baseline"] * (1 + 1e-9):
                    if s == "s1" and mp > 1:
                        s1_losses += 1  # no theorem covers it (Eq. 10 is S2's)
                        continue
                    violations += 1
                    print(f"VIOLATION: {s} slower than the baseline at {c}: {t[s]} > {t['baseline']} ms "
                          f"(Eq. {6 if mp == 1 else 10})")
            g = groups[(p, int(c["strategy.mp_size"]), int(c["strategy.esp_size"]))]
            g["S1"].append(t["baseline"] / t["s1"])
            g["S2"].append(t["baseline"] / t["s2"])
            g["Parm"].append(t["baseline"] / t["auto"])
            if int(c["strategy.mp_size"]) > 1 or int(c["strategy.esp_size"]) > 1:
                parm_speedups.append(t["baseline"] / t["auto"])
            auto_total += 1
            auto_right += t["auto"] <= min(t["s1"], t["s2"]) * (1 + 1e-9)
        valid = sum(1 for by in configs.values() if all(by[s]["status"] == "ok" for s in by))
        print(f"\nTestbed {testbed} ({path}): {len(configs)} configurations, {valid} valid, {len(configs) - valid} refused")
        for (s, why), n in sorted(refused.items()):
            print(f"  refused: {s:8s} {why} ({n})")
        share = auto_right / max(auto_total, 1)
        print(f"  auto picked the faster of S1 and S2 in {auto_right} of {auto_total} valid configurations"
              f" ({100.0 * share:.1f} %)")
        if args.min_auto_fastest is not None and share < args.min_auto_fastest:
            failures.append(f"testbed {testbed}: auto picked the faster schedule in {100.0 * share:.1f} % "
                            f"< {100.0 * args.min_auto_fastest:.0f} %")
        print(f"  {'P':>3} {'N_MP':>4} {'N_ESP':>5} {'n':>4} | {'S1':>6} {'S2':>6} {'Parm':>6} | paper S1 / S2 / Parm")
        for (p, mp, esp), g in sorted(groups.items()):
            mean = {k: sum(v) / len(v) for k, v in g.items()}
            paper = PAPER.get((testbed, p), {}).get((mp, esp))
            ref = " / ".join(f"{x:.2f}" for x in paper) if paper else "-"
            off = ""
            if paper and args.table4_tolerance is not None:
                bad = [k for k, ref_x in zip(("S1", "S2", "Parm"), paper) if abs(mean[k] - ref_x) > args.table4_tolerance]
                if bad:
                    off = "  off: " + ", ".join(bad)
                    failures.append(f"testbed {testbed} P {p} N_MP {mp} N_ESP {esp}: {', '.join(bad)} more than "
                                    f"{args.table4_tolerance}x from the paper")
            print(f"  {p:>3} {mp:>4} {esp:>5} {len(g['S1']):>4} | {mean['S1']:6.2f} {mean['S2']:6.2f} {mean['Parm']:6.2f} | {ref}{off}")
    print(f"\nS1 or S2 slower than the baseline where Eq. 6 or Eq. 10 says never: {violations} times")
    print(f"S1 slower than the baseline with N_MP > 1 (no theorem; the paper observed none): {s1_losses} times")
    for f in failures:
        print(f"FAILED: {f}")
    if args.output and parm_speedups:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.hist(parm_speedups, bins=30, color="tab:blue")
        ax.set_xlabel("speed-up of Parm over the baseline")
        ax.set_ylabel("configurations")
        ax.set_title("Parm over DeepSpeed-MoE (N_MP or N_ESP > 1)")
        fig.tight_layout()
        fig.savefig(args.output, dpi=120)
    return 1 if violations or failures else 0


if __name__ == "__main__":
    sys.exit(main())
