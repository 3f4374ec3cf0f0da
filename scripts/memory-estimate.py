#!/usr/bin/env python3
"""Checks moesim's memory estimate against the measured peak (issue 21): for every scenario given
(default: all of scenarios/), `moesim validate` says "peak memory about X" before anything runs;
`moesim run` is then timed by /usr/bin/time, whose maximum resident set size is the measured peak.
Prints both per scenario and exits 1 if any estimate is off by more than --tolerance (25 %).

    scripts/memory-estimate.py [--moesim build/release/moesim] [--tolerance 0.25] [SCENARIO ...]
"""
import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3, "TiB": 1024**4}


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moesim", default=str(root / "build" / "release" / "moesim"))
    ap.add_argument("--tolerance", type=float, default=0.25)
    ap.add_argument("scenarios", nargs="*")
    a = ap.parse_args()
    scenarios = a.scenarios or sorted(str(p) for p in (root / "scenarios").glob("*.json"))
    worst, failed = 0.0, []
    print(f"{'scenario':<32} {'estimate':>10} {'measured':>10} {'error':>8}")
    for s in scenarios:
        v = subprocess.run([a.moesim, "validate", s], capture_output=True, text=True)
        m = re.search(r"peak memory about ([0-9.]+) (B|KiB|MiB|GiB|TiB)", v.stdout)
        if v.returncode != 0 or not m:
            print(f"{s}: validate failed: {v.stdout}{v.stderr}", file=sys.stderr)
            return 2
        estimate = float(m.group(1)) * UNITS[m.group(2)]
        with tempfile.TemporaryDirectory() as out:
            t = subprocess.run(["/usr/bin/time", "-f", "%M", a.moesim, "run", s, "--quiet", "--out", out],
                               capture_output=True, text=True)
        if t.returncode != 0:
            print(f"{s}: run failed: {t.stderr}", file=sys.stderr)
            return 2
        measured = float(t.stderr.strip().splitlines()[-1]) * 1024  # GNU time: KiB
        error = estimate / measured - 1
        worst = max(worst, abs(error))
        name = pathlib.Path(s).stem
        print(f"{name:<32} {estimate / 2**20:>8.1f} M {measured / 2**20:>8.1f} M {100 * error:>+7.1f} %")
        if abs(error) > a.tolerance:
            failed.append(name)
    print(f"largest error {100 * worst:.1f} % (tolerance {100 * a.tolerance:.0f} %)")
    if failed:
        print("outside the tolerance: " + ", ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
