#!/usr/bin/python3
"""HeterMoE Fig. 10 from a moesim sweep: HeterMoE's throughput over EP(Ideal)'s against the
A40:V100 ratio of one ZP group (4 A40, 2-8 V100, experts = 4 x V100 count), one line per
sequence length.

    build/release/moesim sweep scenarios/hetermoe-fig10.json --out out/hetermoe-fig10 --jobs 2 --quiet
    plots/hetermoe_fig10.py out/hetermoe-fig10/results.csv -o fig10.png [--check]

The CSV needs the axes of scenarios/hetermoe-fig10.json (training.sequence_length, cluster,
strategy, strategy.pipelining_degree). A row on the two-kind cluster is HeterMoE (zebra), a row on
one kind is half of EP(Ideal) (ep on the 4 A40 or on the k V100, §6.4.1 compares with EP(Ideal) at
each ratio): EP(Ideal) at 4:k = the two halves' tokens/s added. Each method keeps its best all-to-all
degree (§6.1 tunes it). The table prints HeterMoE/EP(Ideal) per ratio and length, then the
paper's claims (spec 002 C6) beside moesim's values.

--check (ctest plots.hetermoe_fig10) exits 1 naming every claim that fails. It holds only what
moesim reproduces (moesim's values when the check was last revised in brackets):
- the best ratio depends on the sequence length [4:4 at 4K, 4:5 at 12K, 4:3 at 20K and 32K];
- the best ratio at 12K is the paper's 4:5, and HeterMoE/EP(Ideal) there within 15 % of its 1.22x
  [1.24x];
- Asym-EA's divisibility shows at 4K: HeterMoE/EP(Ideal) at 4:3 (no Asym-EA) is below that at 4:2
  and at 4:4 (Asym-EA on) [0.84 vs 1.10 and 1.17], within 15 % of the paper's 0.76 at 4:3 and of
  its 1.03 at 4:2.
Not held (the table shows by how much):
- the best ratio at 4K is 4:4 [1.17x], not the paper's 4:7 [1.13x there; paper 1.10x];
- HeterMoE at 4:4 within 2 % of EP(Ideal) at 4:8 at 20K and 32K [0.93 and 0.85]: EP on 8 V100
  stays closer to EP on 4 A40 in moesim than the paper's claim needs.
History: until the zebra memory bounds counted an expert's marginal bytes (the layer being
recomputed once per GPU, not per expert), Algorithm 1 was forced to offload experts the V100s
could hold, and HeterMoE stayed below EP(Ideal) everywhere (0.96x at most). Until the memory
model counted the LM head's fp32 logits, EP(Ideal)'s halves ran 3 sequences as one micro-batch
(now 3 micro-batches of one: the logits of 3 at 32K do not fit a V100), and the values in
brackets were 1.22x at 12K, 0.79/1.03/1.09 at 4K, 1.09x (4:4) and 1.05x (4:7) at 4K, 0.92/0.84.
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import paper_check  # noqa: E402  (plots/, beside this script)

SEQ = "training.sequence_length"
CLUSTER = "cluster"
STRATEGY = "strategy"

# HeterMoE §6.4.1 (spec 002 claim C6).
PAPER = {"best_12k": (5, 1.22), "best_4k": (7, 1.10), "4k_4to3": 0.76, "4k_4to2": 1.03, "match_4to4_vs_ideal_4to8": 1.0}


def fail(msg):
    sys.exit(f"hetermoe_fig10.py: {msg}")


def load(path):
    """{seq: {v100s: tokens/s}} for HeterMoE and for EP(Ideal)."""
    rows = paper_check.read_sweep(path, (SEQ, CLUSTER, STRATEGY), "scenarios/hetermoe-fig10.json")
    zebra = defaultdict(dict)
    halves = defaultdict(dict)  # (kind, count) -> {seq: best}
    ratio_of_half = {}
    for r in rows:
        c, s = json.loads(r[CLUSTER]), json.loads(r[STRATEGY])
        seq = int(r[SEQ])
        if r["status"] != "ok":
            fail(f"{path}: point {r['point']} ({c.get('name')}, {s.get('name')}, {seq}) is {r['status']}: {r['note']}")
        tps = float(r["tokens_per_second"])
        if "groups" in c:
            counts = {g["gpu"]: g["count"] for g in c["groups"]}
            if s.get("name") != "zebra" or set(counts) != {"a40-48gb", "v100-sxm2-16gb"}:
                fail(f"{path}: point {r['point']}: the two-kind rows must be zebra on A40 + V100")
            k = counts["v100-sxm2-16gb"]
            zebra[seq][k] = max(zebra[seq].get(k, 0.0), tps)
        else:
            if s.get("name") != "ep":
                fail(f"{path}: point {r['point']}: a one-kind row must run ep (half of EP(Ideal))")
            experts = int(r["model.experts"]) if r.get("model.experts") else None
            if experts is None or experts % 4:
                fail(f"{path}: point {r['point']}: EP(Ideal)'s rows need model.experts = 4 x V100 count")
            key = (c["gpu"], experts // 4)  # the ratio 4:k this half belongs to
            halves[key][seq] = max(halves[key].get(seq, 0.0), tps)
            ratio_of_half[key] = experts // 4
    ideal = defaultdict(dict)
    for seq, by_k in zebra.items():
        for k in by_k:
            a, v = halves.get(("a40-48gb", k), {}), halves.get(("v100-sxm2-16gb", k), {})
            if seq not in a or seq not in v:
                fail(f"{path}: EP(Ideal) at 4:{k} and {seq} lacks the A40 or the V100 half")
            ideal[seq][k] = a[seq] + v[seq]
    return zebra, ideal


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the claims moesim meets hold (see above)")
    args = ap.parse_args()

    zebra, ideal = load(args.csv)
    seqs = sorted(zebra)
    ks = sorted(zebra[seqs[0]])
    rel = {s: {k: zebra[s][k] / ideal[s][k] for k in ks} for s in seqs}
    print("HeterMoE / EP(Ideal) per A40:V100 ratio (HeterMoE, EP(Ideal) in thousands of tokens/s)")
    print(f"{'seq':>5} " + " ".join(f"{'4:' + str(k):>17}" for k in ks))
    for s in seqs:
        print(f"{s // 1024:>4}K " + " ".join(f"{rel[s][k]:5.2f} ({zebra[s][k] / 1e3:4.0f},{ideal[s][k] / 1e3:4.0f})" for k in ks))
    best = {s: max(ks, key=lambda k: rel[s][k]) for s in seqs}
    print("\nbest ratio: " + ", ".join(f"{s // 1024}K 4:{best[s]} ({rel[s][best[s]]:.2f}x)" for s in seqs))

    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)

    print(f"\n{'':52} {'moesim':>8} {'paper':>8}")
    if 12288 in rel:
        print(f"{'best ratio at 12K (HeterMoE/EP(Ideal) there)':52} {'4:%d %.2f' % (best[12288], rel[12288][best[12288]]):>8} "
              f"{'4:%d %.2f' % PAPER['best_12k']:>8}")
    if 4096 in rel:
        print(f"{'best ratio at 4K':52} {'4:%d %.2f' % (best[4096], rel[4096][best[4096]]):>8} {'4:%d %.2f' % PAPER['best_4k']:>8}")
        print(f"{'HeterMoE/EP(Ideal) at 4K, 4:3 (no Asym-EA)':52} {rel[4096][3]:8.2f} {PAPER['4k_4to3']:8.2f}")
        print(f"{'HeterMoE/EP(Ideal) at 4K, 4:2 (Asym-EA)':52} {rel[4096][2]:8.2f} {PAPER['4k_4to2']:8.2f}")
    for s in (20480, 32768):
        if s in zebra and 4 in zebra[s] and 8 in ideal[s]:
            print(f"{f'HeterMoE 4:4 / EP(Ideal) 4:8 at {s // 1024}K':52} {zebra[s][4] / ideal[s][8]:8.2f} "
                  f"{PAPER['match_4to4_vs_ideal_4to8']:8.2f}")

    if args.check:
        check(len({best[s] for s in seqs}) > 1, f"the best ratio is 4:{best[seqs[0]]} at every length")
        if 4096 in rel:
            check(rel[4096][3] < rel[4096][2] and rel[4096][3] < rel[4096][4],
                  f"at 4K, 4:3 ({rel[4096][3]:.2f}) is not below 4:2 ({rel[4096][2]:.2f}) and 4:4 ({rel[4096][4]:.2f})")
            check(abs(rel[4096][3] / PAPER["4k_4to3"] - 1) <= 0.15,
                  f"at 4K, 4:3 gives {rel[4096][3]:.2f}x EP(Ideal), not within 15 % of the paper's {PAPER['4k_4to3']}")
        if 12288 in rel:
            check(best[12288] == PAPER["best_12k"][0], f"the best ratio at 12K is 4:{best[12288]}, not 4:{PAPER['best_12k'][0]}")
        if 12288 in rel:
            check(abs(rel[12288][best[12288]] / PAPER["best_12k"][1] - 1) <= 0.15,
                  f"at 12K the best ratio gives {rel[12288][best[12288]]:.2f}x EP(Ideal), not within 15 % of the paper's "
                  f"{PAPER['best_12k'][1]}")
        if 4096 in rel:
            check(abs(rel[4096][2] / PAPER["4k_4to2"] - 1) <= 0.15,
                  f"at 4K, 4:2 gives {rel[4096][2]:.2f}x EP(Ideal), not within 15 % of the paper's {PAPER['4k_4to2']}")

    if args.output:
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for s in seqs:
            ax.plot(ks, [rel[s][k] for k in ks], marker="o", label=f"{s // 1024}K")
        ax.axhline(1.0, color="k", linewidth=0.8, linestyle="--")
        ax.set_xticks(ks)
        ax.set_xticklabels([f"4:{k}" for k in ks])
        ax.set_xlabel("A40 : V100 in the ZP group (experts = 4 x V100)")
        ax.set_ylabel("HeterMoE / EP(Ideal)")
        ax.set_title("HeterMoE Fig. 10 in moesim (Mixtral-D1 architecture)", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, title="sequence", title_fontsize=8)
    paper_check.finish(fig if args.output else None, args.output, failures, args.check)

if __name__ == "__main__":
    main()
