#!/usr/bin/env python3
"""Re-pins the golden results (tests/golden/*.json) from fresh runs of their scenarios.

Run it only after a change that is meant to move the results, and say why in the commit:
    build/release/moesim must be built first;  python3 scripts/update-golden.py
"""
import json
import pathlib
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
binary = root / "build" / "release" / "moesim"


def pointer(doc, ptr):
    for part in ptr.lstrip("/").split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


for golden in sorted((root / "tests" / "golden").glob("*.json")):
    spec = json.loads(golden.read_text())
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([str(binary), "run", str(root / spec["scenario"]), "--out", out, "--quiet"], check=True)
        results = json.loads((pathlib.Path(out) / "results.json").read_text())
    spec["pinned"] = {ptr: pointer(results, ptr) for ptr in spec["pinned"]}
    golden.write_text(json.dumps(spec, indent=2) + "\n")
    print(f"{golden.relative_to(root)}: {len(spec['pinned'])} values", file=sys.stderr)
