#!/usr/bin/env python3
"""Identical replicas simulated once give the results of simulating every GPU (issue 50 part 1,
sim/simulation/replica_symmetry.hpp): every shipped `ep` scenario (or, with --archive DIR, every
scenario `scripts/archive.py --write DIR` wrote) under expected routing and the analytic network
model (or, with --network flow, the flow model), its sweep left out, run twice, as is and with --every-gpu; results.json must be identical
but for the engine's own figures. Prints each scenario's replicas, CPU seconds of both runs and
the verdict; exits 1 on any difference. Label long (`make test-long`).

  scripts/symmetry-check.py [--moesim build/release/moesim] [--archive DIR] [--network flow] [--max-gpus N]
"""
import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_seconds_of(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return done, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moesim", default=os.path.join(ROOT, "build/release/moesim"))
    ap.add_argument("--archive", help="a folder of archive scenarios instead of scenarios/")
    ap.add_argument("--network", choices=["analytic", "flow"], default="analytic")
    ap.add_argument("--max-gpus", type=int, default=0, help="compare no scenario of more GPUs (0: all)")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.archive or os.path.join(ROOT, "scenarios"), "*.json")))
    failed = reduced = 0
    with tempfile.TemporaryDirectory() as tmp:
        for f in files:
            doc = json.load(open(f))
            if doc.get("strategy", {}).get("name") != "ep":
                continue
            doc.setdefault("routing", {})["sampling"] = "expected"
            doc.setdefault("network", {})["model"] = args.network
            doc.pop("sweep", None)
            name = os.path.basename(f)[:-5]
            path = os.path.join(tmp, name + ".json")
            json.dump(doc, open(path, "w"))
            outs = {}
            cpu = {}
            for mode, extra in (("reduced", []), ("full", ["--every-gpu"])):
                out = os.path.join(tmp, f"{name}-{mode}")
                done, cpu[mode] = cpu_seconds_of([args.moesim, "run", path, "-o", out, "--quiet"] + extra)
                if done.returncode != 0:
                    outs = None
                    print(f"{name}: refused ({done.stderr.strip().splitlines()[-1][:160]})")
                    break
                outs[mode] = json.load(open(os.path.join(out, "results.json")))
                if mode == "reduced" and args.max_gpus and outs[mode]["cluster"]["gpus"] > args.max_gpus:
                    print(f"{name}: not compared ({outs[mode]['cluster']['gpus']} GPUs, --max-gpus {args.max_gpus})")
                    outs = None
                    break
                if mode == "reduced" and outs[mode]["engine"]["replicas_simulated_once"] == 1:
                    print(f"{name}: every GPU simulated ({outs[mode]['engine']['every_gpu_simulated_because']})")
                    outs = None
                    break
            if not outs:
                continue
            reduced += 1
            engine = outs["reduced"].pop("engine")
            outs["full"].pop("engine")
            same = outs["reduced"] == outs["full"]
            failed += 0 if same else 1
            print(f"{name}: {engine['replicas_simulated_once']} replicas of {engine['simulated_gpus']} GPUs, "
                  f"{cpu['reduced']:.2f} CPU-s against {cpu['full']:.2f}: {'identical' if same else 'DIFFERENT'}",
                  flush=True)
    print(f"{reduced} scenarios simulated once per replica, {failed} different from the full run")
    return 1 if failed or reduced == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
