#!/usr/bin/env python3
"""Fits the free figures of topologies/links.json to the nccl-tests logs of tests/data/realdata.

NCCL's own latencies (LL and the base latencies) stay as tuning.cc has them. What the logs decide,
per link technology, is the Simple protocol's efficiency (fraction of the line rate) and hop
latency, the all-to-all factor of InfiniBand, each NVSwitch generation's NVLS latency and
efficiency, and NVLink 5's share of it in NCCL's NVLS-tree (an all-reduce across NVLink domains). Each group of figures is fitted to all the logs whose bottleneck is that technology
(validation/collectives.json), minimising the share of their rows of 64 MiB and more that lie
beyond the validation's tolerance, then the mean |busbw error| (each log weighing the same), by coordinate
descent; NVLink first (the multi-node logs cross it too), then the networks.

    python3 scripts/fit-links.py            # prints the fit; --write updates topologies/links.json
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import importlib
validate = importlib.import_module("validate")

root = validate.root
spec = json.loads((root / "validation" / "collectives.json").read_text())
LARGE = spec["from_bytes"]


def entries(*prefixes):
    return [e for e in spec["logs"] if any(
        e["log"].startswith(p.split(" t")[0]) and (" t" not in p or e.get("table") == int(p.split(" t")[1])) for p in prefixes)]


def us(x):
    return f"{x:.3g}us"


# group: (links it sets, figures [(name, getter path, lower, upper, log scale)], logs)
GROUPS = [
    # NVLink generations each from their own logs; NVLink 4 has no ring log inside one node, so its
    # Simple efficiency is fitted with InfiniBand's over the H100 multi-node logs (13).
    # NVLink 3's only log (10) runs nccl-tests in one process (outside the validation): it takes
    # NVLink 5's figures.
    ("nvlink5", ["nvlink5", "nvlink3"], [("simple.efficiency", 0.4, 1.0, False), ("simple.hop_latency", 1.0, 30.0, True)],
     entries("19 t2", "19 t3")),
    ("nvls-nvlink4", ["nvlink4"], [("nvls.efficiency", 0.4, 1.0, False), ("nvls.latency", 5.0, 300.0, True)], entries("09")),
    # NVLink 5's NVLS over every in-switch all-reduce log: 4 to 64 ranks, one node to 16 hosts of
    # an NVL72 rack (realdata 19 t1, 25).
    ("nvls-nvlink5", ["nvlink5"], [("nvls.efficiency", 0.4, 1.0, False), ("nvls.latency", 5.0, 300.0, True)],
     entries("19 t1", "25_oci_nccl_scale/oci_GB200_01", "25_oci_nccl_scale/oci_GB200_02", "25_oci_nccl_scale/oci_GB300_01",
             "25_oci_nccl_scale/oci_GB300_02", "25_oci_nccl_scale/oci_GB300_03", "25_oci_nccl_scale/oci_B300_01")),
    ("pcie4", ["pcie4", "pcie5"], [("simple.efficiency", 0.2, 1.0, False), ("simple.hop_latency", 1.0, 100.0, True)],
     entries("11")),
    # InfiniBand's all-to-all: the Vultr pair (19 t6, 16 ranks) and OCI's GB200 racks (realdata 25,
    # 128 and 192 ranks) together.
    ("ib", ["ib-ndr", "ib-xdr"],
     [("simple.efficiency", 0.4, 1.0, False), ("simple.hop_latency", 2.0, 100.0, True), ("exchange_factor", 0.2, 1.2, False)],
     entries("13", "19 t4", "19 t5", "19 t6", "25_oci_nccl_scale/oci_GB200_08", "25_oci_nccl_scale/oci_GB200_09")),
    # OCI's B300 RoCE (realdata 25): its two-node all-reduce and all-to-all; the hop latency is
    # InfiniBand's (the log prints no size below 8 GiB).
    ("roce-800", ["roce-800"], [("simple.efficiency", 0.4, 1.0, False), ("exchange_factor", 0.5, 1.5, False)],
     entries("25_oci_nccl_scale/oci_B300_02", "25_oci_nccl_scale/oci_B300_04")),
    # NVLink 5's NVLS-tree (an all-reduce across NVLink domains): its share of the NVLS efficiency,
    # over every all-reduce log that spans two or three domains (realdata 25: GB200 2 and 3 racks,
    # GB300 2 racks, B300 2 nodes); beyond two domains NCCL's own ratio applies on top (80/96).
    ("nvls-tree-nvlink5", ["nvlink5"], [("nvls.tree_efficiency", 0.5, 1.0, False)],
     entries("25_oci_nccl_scale/oci_GB200_03", "25_oci_nccl_scale/oci_GB200_04", "25_oci_nccl_scale/oci_GB300_04",
             "25_oci_nccl_scale/oci_B300_02")),
    ("nvlink4", ["nvlink4"], [("simple.efficiency", 0.4, 1.0, False), ("simple.hop_latency", 1.0, 30.0, True)],
     entries("13")),
    # The cloud NICs' Simple steps cost hundreds of microseconds (TCPXO's CPU proxies, EFA's SRD):
    # log 01 takes 922 us + 5.7 us per MiB from 128 MiB up.
    ("roce", ["roce-400"], [("simple.efficiency", 0.2, 1.0, False), ("simple.hop_latency", 2.0, 3000.0, True)], entries("02")),
    ("efa", ["efa"], [("simple.efficiency", 0.2, 1.0, False), ("simple.hop_latency", 2.0, 3000.0, True)], entries("08")),
    ("tcpxo", ["tcpxo"], [("simple.efficiency", 0.2, 1.0, False), ("simple.hop_latency", 2.0, 3000.0, True)], entries("01")),
]


def get(link, path):
    *head, last = path.split(".")
    for h in head:
        link = link[h]
    v = link.get(last, 1.0)
    return float(v[:-2]) if isinstance(v, str) else v


def put(link, path, value):
    *head, last = path.split(".")
    node = link
    for h in head:
        node = node.setdefault(h, {})
    node[last] = us(value) if "latency" in last else round(value, 3)
    if path == "simple.efficiency":  # LL moves a quarter of Simple's bandwidth (NCCL's tuner)
        link["ll"]["efficiency"] = round(value * 0.25, 4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim", default=root / "build" / "release" / "moesim")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--groups", help="comma-separated groups to fit (default: all, in order)")
    args = ap.parse_args()
    links = json.loads((root / "topologies" / "links.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        data = pathlib.Path(tmp)
        shutil.copytree(root / "topologies", data / "topologies")
        (data / "models").symlink_to(root / "models")

        def score(group_entries):
            # The share of rows beyond the tolerance first (what the validation test holds), then
            # the mean error among fits that leave as many out.
            (data / "topologies" / "links.json").write_text(json.dumps(links))
            # Each log weighs the same, however many sizes it prints (a 15-size sweep is one
            # measurement setup, as is a page that prints its two largest sizes).
            try:
                per_log = [[abs(r["error"]) for r in validate.simulate(args.moesim, data, e) if r["size"] >= LARGE]
                           for e in group_entries]
            except subprocess.CalledProcessError:  # figures moesim refuses (an all-to-all beyond the line rate)
                return float("inf"), float("inf"), float("inf"), 1.0
            per_log = [errs for errs in per_log if errs]
            outside = sum(sum(1 for x in errs if x > spec["tolerance"]) / len(errs) for errs in per_log) / len(per_log)
            mean = sum(sum(errs) / len(errs) for errs in per_log) / len(per_log)
            return outside + mean / 10, max(max(errs) for errs in per_log), mean, outside

        for name, targets, figures, group in GROUPS:
            if args.groups and name not in args.groups.split(","):
                continue
            def set_all(path, v):
                for t in targets:
                    put(links["links"][t], path, v)
            best = score(group)[0]
            for _ in range(3):  # coordinate descent, each figure scanned over its range
                for path, lo, hi, log in figures:
                    n = 31
                    grid = [lo * (hi / lo) ** (i / (n - 1)) if log else lo + (hi - lo) * i / (n - 1) for i in range(n)]
                    current = get(links["links"][targets[0]], path)
                    best_v = current
                    for v in grid:
                        set_all(path, v)
                        m = score(group)[0]
                        if m < best - 1e-9:
                            best, best_v = m, v
                    set_all(path, best_v)
            _, worst, mean, outside = score(group)
            figs = ", ".join(f"{p} {get(links['links'][targets[0]], p)}" for p, *_ in figures)
            print(f"{name}: {figs}: mean |error| {mean:.1%}, worst {worst:.1%}, {outside:.0%} of rows outside over "
                  f"{len(group)} logs", file=sys.stderr)
    if args.write:
        (root / "topologies" / "links.json").write_text(json.dumps(links, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
