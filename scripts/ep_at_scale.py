"""scenarios/ep-1000dc.json at another number of datacenters, for the scale scripts.

The cluster keeps its preset's levels (topologies/hybridep-1000dc.json: their links, fabrics,
bandwidths and latencies) with the datacenter count changed, so a scaled run costs its
collectives as the shipped scenario does. Writes the scenario to stdout.

    python3 scripts/ep_at_scale.py DCS [--experts N] [--ep-size N] [--layers N] [--model flow|analytic]
                                       [--sampling sampled|expected]
"""
import argparse
import json
import pathlib

root = pathlib.Path(__file__).resolve().parent.parent

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("dcs", type=int)
ap.add_argument("--experts", type=int, help="default: one a GPU")
ap.add_argument("--ep-size", type=int)
ap.add_argument("--layers", type=int)
ap.add_argument("--model", choices=["flow", "analytic"])
ap.add_argument("--sampling", choices=["sampled", "expected"])
args = ap.parse_args()

sc = json.loads((root / "scenarios" / "ep-1000dc.json").read_text())
preset = sc["cluster"]["preset"]
levels = json.loads((root / "topologies" / f"{preset}.json").read_text())["levels"]
if levels[0]["name"] != "dc":
    raise SystemExit(f"ep_at_scale.py: {preset}'s outer level is {levels[0]['name']}, not dc; update this script")
levels[0]["count"] = args.dcs
sc["cluster"]["levels"] = levels
sc["model"]["experts"] = args.experts or args.dcs * levels[1]["count"]
if args.layers:
    sc["model"]["layers"] = args.layers
if args.ep_size:
    sc["strategy"]["ep_size"] = args.ep_size
if args.model:
    sc.setdefault("network", {})["model"] = args.model
if args.sampling:
    sc["routing"]["sampling"] = args.sampling
print(json.dumps(sc, indent=1))
