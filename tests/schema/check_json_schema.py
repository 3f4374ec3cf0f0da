#!/usr/bin/env python3
"""docs/scenario.schema.json is what `moesim schema` writes, and it agrees with moesim.

1. The shipped file is the generated one, byte for byte (regenerate it with
   `build/release/moesim schema -o docs/scenario.schema.json`), and so is the Markdown reference
   docs/scenario-reference.md (`moesim schema --markdown -o docs/scenario-reference.md`).
2. It is a valid draft 2020-12 schema, and every scenario of scenarios/ and tests/data validates
   against it, as every preset file of models/, topologies/ and software/ against its section.
3. What it refuses, moesim refuses too (exit code 2): a misspelt key, an unknown choice, a number
   without its unit, an option the strategy does not take, a bad unit string; and a value it
   accepts that moesim accepts.

Usage: check_json_schema.py MOESIM
"""
import copy
import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonschema

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fail(msg):
    print(f"check_json_schema: {msg}", file=sys.stderr)
    sys.exit(1)


def check_file(validator, path):
    """Fails on the first error of the JSON file at `path` under `validator`; returns its document."""
    with open(path) as f:
        doc = json.load(f)
    errors = list(validator.iter_errors(doc))
    if errors:
        e = errors[0]
        fail(f"{os.path.relpath(path, ROOT)}: {'.'.join(map(str, e.absolute_path))}: {e.message}")
    return doc


def main():
    moesim = sys.argv[1]
    generated = subprocess.run([moesim, "schema"], check=True, capture_output=True, text=True).stdout
    shipped_path = os.path.join(ROOT, "docs", "scenario.schema.json")
    with open(shipped_path) as f:
        shipped = f.read()
    if generated != shipped:
        fail("docs/scenario.schema.json is not what `moesim schema` writes; regenerate it with "
             "`build/release/moesim schema -o docs/scenario.schema.json`")
    reference = subprocess.run([moesim, "schema", "--markdown"], check=True, capture_output=True, text=True).stdout
    with open(os.path.join(ROOT, "docs", "scenario-reference.md")) as f:
        if f.read() != reference:
            fail("docs/scenario-reference.md is not what `moesim schema --markdown` writes; regenerate it with "
                 "`build/release/moesim schema --markdown -o docs/scenario-reference.md`")
    schema = json.loads(generated)
    jsonschema.Draft202012Validator.check_schema(schema)
    v = jsonschema.Draft202012Validator(schema)

    checked = 0
    files = sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.json")))
    files += sorted(glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.json"), recursive=True))
    for path in files:
        with open(path) as f:
            doc = json.load(f)
        if not (isinstance(doc, dict) and "strategy" in doc and "training" in doc):
            continue
        check_file(v, path)
        checked += 1
    if checked < 30:
        fail(f"only {checked} scenarios found to check")

    sections = {"models": "model", "software": "software", "topologies": "cluster"}
    presets = 0
    for folder, key in sections.items():
        whole = schema["properties"][key]["anyOf"][0]
        pv = jsonschema.Draft202012Validator(whole)
        for path in sorted(glob.glob(os.path.join(ROOT, folder, "*.json"))):
            if os.path.basename(path) in ("gpus.json", "links.json"):
                continue
            check_file(pv, path)
            presets += 1
    if presets < 20:
        fail(f"only {presets} presets found to check")

    # The same verdict from the schema and from moesim on edits of the quickstart scenario.
    with open(os.path.join(ROOT, "scenarios", "quickstart.json")) as f:
        base = json.load(f)

    def edit(fn):
        d = copy.deepcopy(base)
        fn(d)
        return d

    cases = [
        ("a misspelt key", False, edit(lambda d: d["training"].__setitem__("micro_batch_sise", 2))),
        ("an unknown choice", False, edit(lambda d: d["training"].__setitem__("dtype", "bf17"))),
        ("a number without its unit", False, edit(lambda d: d.__setitem__("compute", {"launch_overhead": 5}))),
        ("a unit moesim does not parse", False, edit(lambda d: d.__setitem__("compute", {"launch_overhead": "5usec"}))),
        ("an option the strategy does not take", False, edit(lambda d: d["strategy"].__setitem__("no_such_option", 1))),
        ("another framework's name", False, edit(lambda d: d["training"].__setitem__("seq_length", 1024))),
        ("a time with spaces", True, edit(lambda d: d.__setitem__("compute", {"launch_overhead": " 5 us"}))),
        ("a whole number written 2.0", True, edit(lambda d: d["training"].__setitem__("microbatches", 2.0))),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for what, valid, doc in cases:
            by_schema = not list(v.iter_errors(doc))
            path = os.path.join(tmp, "case.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            r = subprocess.run([moesim, "validate", path, "--quiet", "--data", ROOT], capture_output=True, text=True)
            by_moesim = r.returncode == 0
            if r.returncode not in (0, 2):
                fail(f"{what}: moesim validate exited {r.returncode}: {r.stderr.strip()}")
            if by_schema != valid or by_moesim != valid:
                fail(f"{what}: expected {'accepted' if valid else 'refused'}; the schema "
                     f"{'accepts' if by_schema else 'refuses'} it, moesim {'accepts' if by_moesim else 'refuses'} it "
                     f"({r.stderr.strip()})")
    print(f"check_json_schema: docs/scenario.schema.json and docs/scenario-reference.md are current; {checked} scenarios and {presets} presets "
          f"validate; {len(cases)} edits judged alike by the schema and by moesim")


if __name__ == "__main__":
    main()
