#!/usr/bin/env python3
"""Compares moesim with the real measurements of tests/data/realdata and writes docs/validation.md.

Collectives: every nccl-tests table listed in validation/collectives.json is simulated,
uncalibrated, with `moesim collective NAME --cluster PRESET --compare LOG` (its sizes and ranks),
and its busbw compared size by size.

Timed collectives: the all-reduce times of realdata 22 (NCCL over TCP sockets, tc-limited links) are
simulated on a cluster of one GPU per node joined by the named link, at the row's rate and node count.

Training: every row of realdata 23 (Megatron-Bridge's published MoE pre-training throughput) is
listed in validation/training.json with the scenario that expresses it (run uncalibrated with
`moesim run`; its GPUs, batch sizes, sequence and TP/PP/CP/VP/EP checked against the row) or the
reason none can; tokens/s/GPU compared.

Archive: every MoE row of realdata 24 (Megatron-Bridge's performance archive, every container from
25.09 to 26.06.01) as the scenario scripts/archive.py builds from the row, its recipe's settings at
the container's release and validation/archive.json, or the reason it cannot be; tokens/s/GPU
compared per row, per system and per container, and the same configuration across containers.

    python3 scripts/validate.py [--moesim build/release/moesim] [--data DIR] [--out docs/validation.md]
    python3 scripts/validate.py --check      # exit 1 if a collective row of >= 64 MiB or a training
                                             # row is off by more than its tolerance and its entry
                                             # does not say why (`outside`)
    python3 scripts/validate.py --only training|collectives|archive   # one part (with --check: the tests;
                                             # archive --check: every scenario it builds validates, and
                                             # a layout's measured effect across containers is met)
    python3 scripts/validate.py --json F     # the collective rows as JSON (scripts/fit-links.py reads them)
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(root / "scripts"))
import archive  # noqa: E402  (scripts/archive.py: the archive's rows as scenarios)
ROW = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+([+-]\d+\.\d)%(?:\s+(\S.*))?$")


def simulate(moesim, data, entry):
    cmd = [str(moesim), "collective", entry["collective"], "--cluster", entry["cluster"],
           "--compare", str(root / "tests" / "data" / "realdata" / entry["log"])]
    for key, flag in (("table", "--table"), ("gpus", "-n"), ("gpus_per_node", "--gpus-per-node"), ("algorithm", "--algorithm")):
        if key in entry:
            cmd += [flag, str(entry[key])]
    if data:
        cmd += ["--data", str(data)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows, compared = [], False
    for line in out.splitlines():
        if line.startswith("# compared with"):
            compared = True
        m = ROW.match(line) if compared else None
        if m:
            size = int(m.group(1))
            rows.append({"size": size, "measured_us": float(m.group(2)), "simulated_us": float(m.group(3)),
                         "measured_busbw": float(m.group(4)), "simulated_busbw": float(m.group(5)),
                         "error": float(m.group(6)) / 100, "algorithm": (m.group(7) or "").strip()})
    if not rows:
        raise SystemExit(f"validate: no compared rows from {' '.join(cmd)}")
    return rows


SETTING = re.compile(r"^(?:delay\s+(\S+)\s+)?bandwidth\s+(\S+)$")


def timed_rows(path, section):
    """(nodes, setting, rate, delay, MiB, measured ms) of a realdata 22 section's NCCL columns."""
    rows, inside, nodes, head = [], False, None, None
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("## ") or line.startswith("######## "):
            inside = line.strip() == section
            continue
        if not inside:
            continue
        m = re.match(r"^#### (\d+) node:", line)
        if m:
            nodes, head = int(m.group(1)), None
        elif line.startswith("|") and nodes:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if head is None:
                head = cells
            elif not set(cells[0]) <= set("-: "):
                setting = SETTING.match(re.sub(r"\s+", " ", cells[0]))
                for column, value in zip(head[1:], cells[1:]):
                    size = re.match(r"^NCCL-(\d+) MB$", column)
                    if size and setting:
                        rows.append({"nodes": nodes, "setting": cells[0], "rate": setting.group(2),
                                     "delay": setting.group(1) or "0ms", "mib": int(size.group(1)),
                                     "measured_ms": float(value.removesuffix("ms").strip())})
    if not rows:
        raise SystemExit(f"validate: {path}: no NCCL rows with a bandwidth setting under {section!r}")
    return rows


def timed(moesim, data, entry):
    """Each tc-limited row of a timed log simulated with `moesim collective` on a generated cluster."""
    rows = timed_rows(root / "tests" / "data" / "realdata" / entry["log"], entry["section"])
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for key in sorted({(r["nodes"], r["rate"], r["delay"]) for r in rows}):
            nodes, rate, delay = key
            scenario = {"name": f"realdata-22-{nodes}-{rate}", "model": {"preset": "gpt-medium-moe"}, "strategy": {"name": "ep"},
                        "training": {"sequence_length": 1024, "micro_batch_size": 1, "dtype": "fp16"},
                        "cluster": {"gpu": entry["gpu"], "levels": [
                            {"name": "node", "count": nodes, "bandwidth": rate, "latency": delay, "link": entry["link"]},
                            {"name": "gpu", "count": 1, "bandwidth": "100Gbps", "latency": "1us"}]}}
            path = pathlib.Path(tmp) / f"{nodes}-{rate}.json"
            path.write_text(json.dumps(scenario))
            mibs = sorted({r["mib"] for r in rows if (r["nodes"], r["rate"], r["delay"]) == key})
            cmd = [str(moesim), "collective", entry["collective"], "--cluster", str(path), "--algorithm", entry["algorithm"],
                   "-b", f"{mibs[0]}M", "-e", f"{mibs[-1]}M", "-f", "2"] + (["--data", str(data)] if data else [])
            text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            simulated = {int(f[0]): float(f[5]) for f in (l.split() for l in text.splitlines()) if f and f[0].isdigit()}
            for r in rows:
                if (r["nodes"], r["rate"], r["delay"]) == key:
                    us = simulated.get(r["mib"] << 20)
                    if us is None:
                        raise SystemExit(f"validate: {' '.join(cmd)} printed no row of {r['mib']} MiB")
                    out.append(dict(r, simulated_ms=us / 1e3, error=us / 1e3 / r["measured_ms"] - 1))
    return out


def size_text(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:g} {unit}"
    return f"{b} B"


TABLE_HEAD = ["System", "#-GPUs", "Precision", "GBS", "MBS", "Sequence Length", "TP", "PP", "CP", "VP", "EP",
              "Tokens / sec / GPU"]


def published_rows(path):
    """The rows of realdata 23's tables: {(model, system, precision): {column: value}}."""
    rows, model, head = {}, None, None
    for line in pathlib.Path(path).read_text().splitlines():
        if line.startswith("#### Model:"):
            model, head = line.split(":", 1)[1].strip(), None
        elif line.startswith("|") and model:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if head is None:
                head = cells
                if head[:len(TABLE_HEAD)] != TABLE_HEAD:
                    raise SystemExit(f"validate: {path}: the table of {model} has columns {head}, expected {TABLE_HEAD}")
            elif not set(cells[0]) <= set("-: "):
                row = dict(zip(head, cells))
                key = (model, row["System"], row["Precision"])
                if key in rows:
                    raise SystemExit(f"validate: {path}: two rows for {key}")
                rows[key] = row
    return rows


def run_scenario(moesim, data, scenario):
    with tempfile.TemporaryDirectory() as out:
        cmd = [str(moesim), "run", str(root / scenario), "--out", out, "--quiet"] + (["--data", str(data)] if data else [])
        subprocess.run(cmd, check=True)
        results = json.loads((pathlib.Path(out) / "results.json").read_text())
        effective = json.loads((pathlib.Path(out) / "scenario.effective.json").read_text())
    return results, effective


def layout_mismatches(row, results, effective):
    """Where the scenario is not the published run: GPUs, batch, sequence, parallel sizes."""
    par, tr = effective["parallel"], effective["training"]
    ours = {"#-GPUs": results["cluster"]["gpus"], "GBS": tr["global_batch_size"], "MBS": tr["micro_batch_size"],
            "Sequence Length": tr["sequence_length"], "TP": par["tp"], "PP": par["pp"], "CP": par["cp"],
            "VP": par["vp"] if par["pp"] > 1 and par["vp"] > 1 else "n/a", "EP": par["ep"]}
    return [f"{k} {v} where the row has {row[k]}" for k, v in ours.items() if str(v) != row[k]]


def training(moesim, data):
    spec = json.loads((root / "validation" / "training.json").read_text())
    source = root / "tests" / "data" / "realdata" / spec["source"]
    published = published_rows(source)
    listed = {(r["model"], r["system"], r["precision"]): r for r in spec["rows"]}
    for key in published.keys() - listed.keys():
        raise SystemExit(f"validate: validation/training.json lists no entry for {key} of {spec['source']}: add its scenario "
                         f"or say why none can express it (`not_expressible`)")
    for key in listed.keys() - published.keys():
        raise SystemExit(f"validate: validation/training.json: {key} is not a row of {spec['source']}")
    rows = []
    for r in spec["rows"]:
        row = published[(r["model"], r["system"], r["precision"])]
        entry = {"entry": r, "published": row, "measured": float(row["Tokens / sec / GPU"])}
        if "scenario" in r:
            results, effective = run_scenario(moesim, data, r["scenario"])
            wrong = layout_mismatches(row, results, effective)
            if wrong:
                raise SystemExit(f"validate: {r['scenario']} is not the run of {r['model']} on {r['system']}: " + "; ".join(wrong))
            entry["simulated"] = results["tokens_per_second"] / results["cluster"]["gpus"]
            entry["error"] = entry["simulated"] / entry["measured"] - 1
            entry["iteration_s"] = results["iteration_time_ms"] / 1e3
            entry["exposed_comm_s"] = results["exposed_communication_ms"]["mean"] / 1e3
            entry["measured_kernels"] = results["kernel_sources"]["measured_share"]
        rows.append(entry)
    return spec, rows


def on_archive_scenario(moesim, data, entry, command, *args):
    """`moesim COMMAND SCENARIO ARGS` on an archive entry's scenario, written to a temporary folder
    (`{out}` in ARGS: a folder inside it); returns the process and, where it wrote one, results.json."""
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / f"{entry['scenario']['name']}.json"
        path.write_text(json.dumps(entry["scenario"]))
        out = pathlib.Path(d) / "out"
        cmd = [str(moesim), command, str(path)] + [a.format(out=out) for a in args] + (["--data", str(data)] if data else [])
        proc = subprocess.run(cmd, capture_output=True, text=True)
        results = out / "results.json"
        return proc, json.loads(results.read_text()) if proc.returncode == 0 and results.exists() else None


def archive_results(moesim, data):
    """Every archive entry (scripts/archive.py), the expressible ones run: simulated tokens/s/GPU,
    error, iteration time and its shares waiting for launches and for exposed communication."""
    entries = archive.entries(moesim)

    def run(e):
        proc, r = on_archive_scenario(moesim, data, e, "run", "--out", "{out}", "--quiet")
        if proc.returncode == 2:  # refused (out of memory, ...): the row says so
            e["refused"] = proc.stderr.strip().splitlines()[-1].split(": ", 3)[-1]  # after "moesim: cannot run: FILE: "
            return e
        if proc.returncode:
            raise SystemExit(f"validate: {e['scenario']['name']}: moesim exited {proc.returncode}: {proc.stderr}")
        measured = float(e["row"]["Tokens / sec / GPU"])
        simulated = r["tokens_per_second"] / r["cluster"]["gpus"]
        it = r["iteration_time_ms"]
        e.update(measured=measured, simulated=simulated, error=simulated / measured - 1, iteration_s=it / 1e3,
                 launch_wait=r.get("launch_wait_ms", {}).get("mean", 0) / it,
                 exposed=r["exposed_communication_ms"]["mean"] / it,
                 measured_kernels=r["kernel_sources"]["measured_share"])
        return e

    runnable = [e for e in entries if "scenario" in e]
    with concurrent.futures.ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
        list(pool.map(run, runnable))
    return entries


def measured_of(e):
    return float(e["row"]["Tokens / sec / GPU"])


def layout_of(e):
    return f"MBS {e['row']['MBS']} PP {e['row']['PP']} VP {e['row']['VP']} EP {e['row']['EP']}"


def same_run(x, y):
    """Two scenarios that differ only in their name and description."""
    strip = lambda sc: {k: v for k, v in sc.items() if k not in ("name", "description")}
    return strip(x) == strip(y)


def consecutive_runs(entries, order):
    """The same model, system, precision, GPUs and global batch in two consecutive containers of
    `order` (validation/archive.json's software, oldest first): (key, a, b) of the entries with a
    scenario, a in the later container, b in the one before it."""
    same = {}
    for e in entries:
        if "scenario" in e:
            r = e["row"]
            same.setdefault((r["model"], r["System"], r["Precision"], r["#-GPUs"], r["GBS"]), []).append(e)
    for key, es in same.items():
        es = sorted(es, key=lambda e: order.index(e["row"]["container"]), reverse=True)
        for a, b in zip(es, es[1:]):
            yield key, a, b


def container_effects(entries, order):
    """Per (model, a's container, b's container) of consecutive_runs: where the same model ran in both on a system
    with its scenario identical (layout and recipe unchanged) and its measured throughput moved by
    more than 5 %, that system and its measured ratio, the containers' own effect."""
    effects = {}
    for key, a, b in consecutive_runs(entries, order):
        ratio = measured_of(b) / measured_of(a)
        if layout_of(a) == layout_of(b) and same_run(a["scenario"], b["scenario"]) and abs(ratio - 1) > 0.05:
            effects[(key[0], a["row"]["container"], b["row"]["container"])] = (key[1], ratio)
    return effects


def layout_unmet(spec, key, a, b):
    """validation/archive.json's reason a consecutive_runs pair's layout ratio is unmet, or None."""
    return spec.get("layout_unmet", {}).get("|".join((key[0], key[1], a["row"]["container"], b["row"]["container"])))


def layout_ratio_check(moesim, data, entries):
    """Issue 44's check that a layout's effect comes out of the simulation: every pair of consecutive
    containers whose layout changed (realdata 24's B200 Qwen3-30B, micro-batch 4 to 1) and whose
    containers' own effect another system measured with nothing changed. The measured ratio over
    that effect is the layout's; moesim's ratio of the two scenarios must be within the archive's
    `layout_tolerance` of it, or be listed in its `layout_unmet` with the reason (and fail once it
    is within: the list must not outlive the gap)."""
    spec = json.loads((root / "validation" / "archive.json").read_text())
    tolerance, order = spec["layout_tolerance"], list(spec["software"])
    effects = container_effects(entries, order)
    failures, checked = [], 0
    for key, a, b in consecutive_runs(entries, order):
        effect = effects.get((key[0], a["row"]["container"], b["row"]["container"]))
        if layout_of(a) == layout_of(b) or not effect:
            continue
        tokens = []
        for e in (a, b):
            proc, r = on_archive_scenario(moesim, data, e, "run", "--out", "{out}", "--quiet")
            if proc.returncode:
                raise SystemExit(f"validate: {e['scenario']['name']}: moesim exited {proc.returncode}: {proc.stderr}")
            tokens.append(r["tokens_per_second"])
        layout = measured_of(b) / measured_of(a) / effect[1]
        simulated = tokens[1] / tokens[0]
        checked += 1
        print(f"validate: {key[0]} {key[2]} on {key[1]}, {a['row']['container']} -> {b['row']['container']}, "
              f"{layout_of(a)} -> {layout_of(b)}: the layout's measured ratio {layout:.3f} (the containers' "
              f"{effect[1]:.3f} divided out, measured on {effect[0]}), simulated {simulated:.3f}", file=sys.stderr)
        within = abs(simulated / layout - 1) <= tolerance
        unmet = layout_unmet(spec, key, a, b)
        if unmet and within:
            failures.append(f"{key[0]} on {key[1]}, {a['row']['container']} -> {b['row']['container']}: listed in "
                            f"validation/archive.json layout_unmet but now within {tolerance:.0%}: remove it")
        elif unmet:
            print(f"validate: unmet, listed in validation/archive.json layout_unmet: {unmet}", file=sys.stderr)
        elif not within:
            failures.append(f"{key[0]} on {key[1]}, {layout_of(a)} -> {layout_of(b)}: simulated ratio {simulated:.3f} "
                            f"against the layout's measured {layout:.3f}, outside {tolerance:.0%}")
    if not checked:
        failures.append("no archive pair changed its layout between two containers whose own effect was measured: "
                        "the layout-ratio check compared nothing")
    return failures


def archive_check(moesim, data, entries):
    """Every scenario the archive builds is accepted by `moesim validate` (its schema and layout; one
    that cannot run, out of GPU memory, is shown as such in docs/validation.md)."""
    failures = []
    for e in entries:
        if "scenario" not in e:
            continue
        proc, _ = on_archive_scenario(moesim, data, e, "validate")
        # A scenario moesim cannot run (out of GPU memory) is a finding docs/validation.md shows;
        # bad input is a defect of the archive's scenarios.
        if proc.returncode and "cannot run:" not in proc.stderr:
            failures.append(f"archive row at line {e['row']['line']}: {proc.stderr.strip()}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--moesim", default=root / "build" / "release" / "moesim")
    ap.add_argument("--data")
    ap.add_argument("--out", default=root / "docs" / "validation.md")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--only", choices=["collectives", "training", "archive"])
    ap.add_argument("--json")
    args = ap.parse_args()
    failures = []
    spec = results = None
    if args.only == "archive":
        if not args.check:
            raise SystemExit("validate: --only needs --check (docs/validation.md is written from every part)")
        entries = archive.entries(args.moesim)
        failures = archive_check(args.moesim, args.data, entries) + layout_ratio_check(args.moesim, args.data, entries)
        for f in failures:
            print(f"validate: {f}", file=sys.stderr)
        return 1 if failures else 0
    if args.only != "training":
        spec = json.loads((root / "validation" / "collectives.json").read_text())
        tol, large = spec["tolerance"], spec["from_bytes"]
        results = [{"entry": e, "rows": simulate(args.moesim, args.data, e)} for e in spec["logs"]]
        spec["timed_results"] = [{"entry": e, "rows": timed(args.moesim, args.data, e)} for e in spec.get("timed", [])]
        if args.json:
            pathlib.Path(args.json).write_text(json.dumps(results))
            return 0
        for r in results:
            e = r["entry"]
            large_rows = [row for row in r["rows"] if row["size"] >= large]
            if "outside" in e and large_rows and all(abs(row["error"]) <= tol for row in large_rows):
                failures.append(f"{e['log']} table {e.get('table', 1)} ({e['collective']} on {e['cluster']}) is within {tol:.0%} "
                                f"at every size of {size_text(large)} and more: drop its `outside` reason from validation/collectives.json")
            for row in r["rows"]:
                if row["size"] >= large and abs(row["error"]) > tol and "outside" not in e:
                    failures.append(f"{e['log']} table {e.get('table', 1)} ({e['collective']} on {e['cluster']}): "
                                    f"{size_text(row['size'])} busbw {row['simulated_busbw']} simulated vs "
                                    f"{row['measured_busbw']} measured ({row['error']:+.1%}) outside {tol:.0%}")
        for r in spec["timed_results"]:
            e = r["entry"]
            for row in r["rows"]:
                if abs(row["error"]) > tol and "outside" not in e:
                    failures.append(f"{e['log']} ({e['collective']}, {row['nodes']} nodes, {row['setting']}): {row['mib']} MiB "
                                    f"{row['simulated_ms']:.0f} ms simulated vs {row['measured_ms']:g} measured "
                                    f"({row['error']:+.1%}) outside {tol:.0%}")
    train_spec = train_rows = None
    if args.only is None or args.only == "training":
        train_spec, train_rows = training(args.moesim, args.data)
        for t in train_rows:
            e = t["entry"]
            if "error" in t and abs(t["error"]) > train_spec["tolerance"] and "outside" not in e:
                failures.append(f"{e['scenario']} ({e['model']} on {e['system']}): {t['simulated']:.0f} tokens/s/GPU simulated vs "
                                f"{t['measured']:.0f} measured ({t['error']:+.1%}) outside {train_spec['tolerance']:.0%}")
            if "error" in t and abs(t["error"]) <= train_spec["tolerance"] and "outside" in e:
                failures.append(f"{e['scenario']} ({e['model']} on {e['system']}) is within {train_spec['tolerance']:.0%} "
                                f"({t['error']:+.1%}): drop its `outside` reason from validation/training.json")
    if args.check:
        for f in failures:
            print(f"validate: {f}", file=sys.stderr)
        return 1 if failures else 0
    if args.only:
        raise SystemExit("validate: --only needs --check (docs/validation.md is written from both parts)")
    entries = archive_results(args.moesim, args.data)
    write(args.out, spec, results, train_spec, train_rows, entries)
    accuracy = pathlib.Path(args.out).with_name("accuracy.md")
    write_accuracy(accuracy, spec, results, train_rows, entries)
    print(f"wrote {args.out} and {accuracy}; {len(failures)} rows outside their tolerance without a reason", file=sys.stderr)
    return 0


def write_training(lines, spec, rows):
    tol, goal = spec["tolerance"], spec["goal"]
    expressed = [t for t in rows if "error" in t]
    within = [t for t in expressed if abs(t["error"]) <= tol]
    lines += ["## End-to-end training (Megatron-Bridge 26.08, tests/data/realdata/23)", "",
              f"Every row of the published table, run with `moesim run SCENARIO` uncalibrated (the scenario's GPUs,",
              f"batch sizes, sequence and parallel sizes are checked against the row). The test (`tests/validation`)",
              f"holds every expressed row within {tol:.0%} of the measured tokens/s/GPU (the goal is {goal:.0%}), except",
              f"where an entry says why not. {len(within)} of {len(expressed)} expressed rows are within {tol:.0%};",
              f"{len(rows) - len(expressed)} rows cannot be expressed yet.", "",
              "What the comparison rests on: each scenario runs its recipe's software (`perf_recipes/*/gb*00/` at",
              "067f987d, whose settings for these rows equal the 26.06.01 recipes' traced in",
              "`software/sources/megatron-bridge-recipes.json`): the HybridEP dispatcher with 32 SMs, EP communication",
              "overlapped with another microbatch's compute (`overlap_moe_expert_parallel_comm`) with delayed weight",
              "gradients, CUDA graphs of the whole iteration, the paged stash as non-blocking HybridEP at 1.5x the",
              "balanced capacity; MXFP8 GeMMs run at the rate measured on a B200 (`topologies/gpus.json`). The FP8",
              "attention core runs in BF16 and the fused grouped MLP as moesim's grouped GeMM.", "",
              "| model | system | GPUs | layout | measured tokens/s/GPU | simulated | error | simulated iteration | of it exposed communication | kernels from measured tables | scenario or reason |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for t in rows:
        e, p = t["entry"], t["published"]
        vp = "-" if p["VP"] == "n/a" else p["VP"]
        layout = f"TP {p['TP']} PP {p['PP']} VP {vp} EP {p['EP']}, MBS {p['MBS']} GBS {p['GBS']}"
        head = f"| {e['model']} {e['precision']} | {e['system']} | {p['#-GPUs']} | {layout} | {t['measured']:.0f} |"
        if "error" in t:
            mark = "" if abs(t["error"]) <= tol else " **!**"
            note = f"`{e['scenario']}`" + (f": outside {tol:.0%}: {e['outside']}" if "outside" in e else "")
            lines.append(f"{head} {t['simulated']:.0f} | {t['error']:+.1%}{mark} | {t['iteration_s']:.2f} s | "
                         f"{t['exposed_comm_s'] / t['iteration_s']:.0%} | {t['measured_kernels']:.0%} | {note} |")
        else:
            lines.append(f"{head} - | - | - | - | - | not expressible: {e['not_expressible']} |")
    lines.append("")


def write_archive(lines, entries):
    spec = json.loads((root / "validation" / "archive.json").read_text())
    goal = spec["goal"]
    run = [e for e in entries if "error" in e]
    mean = lambda xs: sum(xs) / len(xs) if xs else 0
    refused = [e for e in entries if "refused" in e]
    lines += ["## Megatron-Bridge's performance archive (tests/data/realdata/24)", "",
              f"Every MoE row of every NeMo container, {len(entries)} in all: {len(run)} run as the scenario",
              "`scripts/archive.py` builds from the row, its recipe's settings at the container's release",
              "(`software/sources/megatron-bridge-recipes.json`: CUDA graphs, dispatcher, fusions, recomputation,",
              "pipeline layout; the software preset of its release) and `validation/archive.json`, read as a",
              "Megatron configuration by `moesim import megatron` (the importer users' recipes go through); the",
              "others say why they cannot be. `python3 scripts/archive.py --write DIR` writes the scenarios. Each row lists",
              "the recipe's settings moesim does not model yet; `launch wait` is the share of the iteration the",
              "GPUs' kernels were ready but not yet issued by the host; `measured kernels` the share of the",
              "kernels' time costed from measured tables (results.json `kernel_sources`; the rest by the model).",
              "No row is held to a tolerance yet",
              f"(the goal: within {goal:.0%})."]
    if refused:
        lines += [f"{len(refused)} expressible rows are refused by moesim: out of GPU memory where the real run fit",
                  "(activations counted whole after Korthikanti et al.; the recipes' paged stash and Transformer",
                  "Engine's own savings are not modelled yet)."]
    lines += [""]
    if run:
        lines += [f"Mean |error| {mean([abs(e['error']) for e in run]):.1%} over {len(run)} rows; "
                  f"{sum(abs(e['error']) <= goal for e in run)} within {goal:.0%}; "
                  f"{sum(e['error'] > 0 for e in run)} too fast, {sum(e['error'] < 0 for e in run)} too slow.", ""]
        lines += ["| by | rows | mean abs error | within goal | too fast |", "|---|---:|---:|---:|---:|"]
        for key, name in (("System", "system"), ("container", "container"), ("model", "model")):
            groups = {}
            for e in run:
                groups.setdefault(e["row"][key], []).append(e)
            for g, es in groups.items():
                lines.append(f"| {name} {g} | {len(es)} | {mean([abs(e['error']) for e in es]):.1%} | "
                             f"{sum(abs(e['error']) <= goal for e in es)} | {sum(e['error'] > 0 for e in es)} |")
        lines.append("")
        # The same model, system, precision and GPUs in two containers: how the throughput moved.
        order = list(spec["software"])
        pairs = []
        for key, a, b in consecutive_runs(run, order):
            ma, mb = b["measured"] / a["measured"], b["simulated"] / a["simulated"]
            if abs(ma - 1) > 0.05 or abs(mb - 1) > 0.05:
                pairs.append((key, a, b, ma, mb))
        if pairs:
            # A pair whose layout changed mixes the layout's effect with the containers'. Where the same
            # model ran in the same two containers on another system with its layout and recipe
            # unchanged (the scenario identical: a simulated ratio of 1), that pair's measured ratio
            # is the containers' own effect, and dividing it out leaves the layout's (layout_ratio_check
            # holds moesim to it).
            controls = container_effects(run, order)
            lines += ["The same configuration in two containers, where either throughput moved by more than 5 %. "
                      "Where the layout changed and the same model ran in the same two containers on another system "
                      "with nothing changed (its scenario identical), that system's measured ratio is the containers' "
                      "own effect: the last column divides it out, and the simulated ratio must be within "
                      f"{spec['layout_tolerance']:.0%} of it (`scripts/validate.py --check --only archive`, in the test suite).", "",
                      "| model | system | from | to | layout from → to | measured ratio | simulated ratio | "
                      "layout's ratio (containers' effect) |",
                      "|---|---|---|---|---|---:|---:|---:|"]
            for key, a, b, ma, mb in pairs:
                control = controls.get((key[0], a["row"]["container"], b["row"]["container"]))
                corrected = (f"{ma / control[1]:.2f} ({control[1]:.2f} on {control[0]})"
                             if control and layout_of(a) != layout_of(b) else "-")
                unmet = layout_unmet(spec, key, a, b)
                if unmet and corrected != "-":
                    corrected += f" **unmet**: {unmet}"
                lines.append(f"| {key[0]} {key[2]} | {key[1]} | {a['row']['container']} | {b['row']['container']} | "
                             f"{layout_of(a)} → {layout_of(b)} | {ma:.2f} | {mb:.2f} | {corrected} |")
            lines.append("")
    lines += ["| container | model | system | GPUs | layout | measured | simulated | error | launch wait | exposed comm | measured kernels | not modelled, or why not expressible |",
              "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for e in entries:
        r = e["row"]
        if "System" not in r:
            lines.append(f"| {r['container']} | {r['model']} | - | - | - | - | - | - | - | - | - | {e['reason']} |")
            continue
        vp = "-" if r["VP"] == "n/a" else r["VP"]
        layout = f"TP {r['TP']} PP {r['PP']} VP {vp} EP {r['EP']}, MBS {r['MBS']} GBS {r['GBS']}"
        head = f"| {r['container']} | {r['model']} {r['Precision']} | {r['System']} | {r['#-GPUs']} | {layout} | {r['Tokens / sec / GPU']} |"
        if "error" in e:
            lines.append(f"{head} {e['simulated']:.0f} | {e['error']:+.1%} | {e['launch_wait']:.0%} | {e['exposed']:.0%} | "
                         f"{e['measured_kernels']:.0%} | "
                         f"{'; '.join(e['notes']) or '-'} |")
        elif "refused" in e:
            lines.append(f"{head} - | - | - | - | - | refused: {e['refused']} |")
        else:
            lines.append(f"{head} - | - | - | - | - | not expressible: {e['reason']} |")
    lines.append("")


def write(path, spec, results, train_spec, train_rows, archive_entries):
    tol, large = spec["tolerance"], spec["from_bytes"]
    lines = ["# Validation: moesim against real measurements", "",
             "Generated by `make validate` (`scripts/validate.py`); do not edit by hand. Every figure is",
             "simulated **uncalibrated**: the presets' link rates and `topologies/links.json` (NCCL's",
             "protocol latencies, per-technology efficiencies), the GPU catalogue's peaks and published",
             "matmul maxima, no profile.", ""]
    write_training(lines, train_spec, train_rows)
    write_archive(lines, archive_entries)
    lines += ["## Collectives (nccl-tests logs of tests/data/realdata)", "",
             f"Each log is simulated with `moesim collective NAME --cluster PRESET --compare LOG` at its sizes",
             f"and rank count. The test (`tests/validation`) holds every row of {size_text(large)} and more",
             f"within {tol:.0%} of its measured bus bandwidth, except where an entry says why not, and fails",
             f"an entry whose reason no row needs any more.", "",
             "| log | what | cluster | ranks | mean abs error, all sizes | mean abs error, >= 64 MiB | worst >= 64 MiB |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        e, rows = r["entry"], r["rows"]
        big = [x for x in rows if x["size"] >= large]
        worst = max(big, key=lambda x: abs(x["error"])) if big else None
        mean_all = sum(abs(x["error"]) for x in rows) / len(rows)
        mean_big = sum(abs(x["error"]) for x in big) / len(big) if big else 0
        name = e["log"].split("_")[0] + (f" t{e['table']}" if "table" in e else "")
        lines.append(f"| {name} {e['collective']} | {e['what']} | `{e['cluster']}` | {e.get('gpus', '')} | {mean_all:.1%} | "
                     f"{mean_big:.1%} | " + (f"{worst['error']:+.1%} at {size_text(worst['size'])}" if worst else "-") + " |")
    for r in spec.get("timed_results", []):
        e, rows = r["entry"], r["rows"]
        worst = max(rows, key=lambda x: abs(x["error"]))
        mean = sum(abs(x["error"]) for x in rows) / len(rows)
        lines.append(f"| {e['log'].split('_')[0]} {e['collective']} (times) | {e['what']} | generated, `{e['link']}` link | "
                     f"{min(x['nodes'] for x in rows)}-{max(x['nodes'] for x in rows)} | {mean:.1%} | {mean:.1%} | "
                     f"{worst['error']:+.1%} at {worst['mib']} MiB |")
    lines += ["", "Rows (measured and simulated busbw in GB/s, as nccl-tests prints it; `moesim ran`: the algorithm "
              "moesim chose for the size, NCCL's NVLS, NVLS-tree across NVLink domains, ring or direct exchange, "
              "and the protocol of its steps, LL or Simple):", ""]
    for r in results:
        e, rows = r["entry"], r["rows"]
        lines += [f"### {e['log']}" + (f", table {e['table']}" if "table" in e else "") + f": {e['what']}", "",
                  f"`moesim collective {e['collective']} --cluster {e['cluster']}" +
                  (f" -n {e['gpus']}" if "gpus" in e else "") + (f" --algorithm {e['algorithm']}" if "algorithm" in e else "") +
                  f" --compare tests/data/realdata/{e['log']}" + (f" --table {e['table']}" if "table" in e else "") +
                  (f" --gpus-per-node {e['gpus_per_node']}" if "gpus_per_node" in e else "") + "`", ""]
        if "outside" in e:
            lines += [f"Outside {tol:.0%}: {e['outside']}", ""]
        lines += ["| size | measured us | simulated us | measured busbw | simulated busbw | error | moesim ran |",
                  "|---:|---:|---:|---:|---:|---:|---|"]
        for x in rows:
            if x["size"] < 1 << 20:
                continue
            mark = " **!**" if x["size"] >= large and abs(x["error"]) > tol else ""
            lines.append(f"| {size_text(x['size'])} | {x['measured_us']:g} | {x['simulated_us']:g} | {x['measured_busbw']:g} | "
                         f"{x['simulated_busbw']:g} | {x['error']:+.1%}{mark} | {x['algorithm']} |")
        lines.append("")
    for r in spec.get("timed_results", []):
        e, rows = r["entry"], r["rows"]
        lines += [f"### {e['log']}: {e['what']}", "",
                  f"Each tc-limited row of its `{e['section']}` section: `moesim collective {e['collective']} --algorithm "
                  f"{e['algorithm']}` on {e['gpu']} GPUs, one per node, the nodes joined by a switch of the row's rate "
                  f"and the `{e['link']}` link. Sizes: {e['sizes']}. Not compared: {e['skipped']}." +
                  (f" The `{e['link']}` link's efficiency is fitted to these rows (topologies/links.json): the table checks "
                   f"the fit, it holds nothing out." if e.get("fitted") else ""), "",
                  "| nodes | setting | size | measured ms | simulated ms | error |", "|---:|---|---:|---:|---:|---:|"]
        for x in rows:
            mark = " **!**" if abs(x["error"]) > tol else ""
            lines.append(f"| {x['nodes']} | {x['setting']} | {x['mib']} MiB | {x['measured_ms']:g} | {x['simulated_ms']:.0f} | "
                         f"{x['error']:+.1%}{mark} |")
        lines.append("")
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


def error_table(lines, title, groups, goal):
    """One row per group of (label, signed errors): how many, mean |error|, median signed error,
    the range, how many within the goal."""
    lines += [f"| {title} | rows | mean abs error | median signed error | range | within {goal:.0%} |",
              "|---|---:|---:|---:|---|---:|"]
    for label, errors in groups:
        if not errors:
            continue
        s = sorted(errors)
        median = s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2
        lines.append(f"| {label} | {len(s)} | {sum(abs(x) for x in s) / len(s):.1%} | {median:+.1%} | "
                     f"{s[0]:+.0%} to {s[-1]:+.0%} | {sum(abs(x) <= goal for x in s)} |")
    lines.append("")


def write_accuracy(path, spec, results, train_rows, entries):
    """docs/accuracy.md: how far to trust a number, by GPU, model, scale, software and what bounds
    the iteration, from the same runs as docs/validation.md."""
    goal = json.loads((root / "validation" / "archive.json").read_text())["goal"]
    run = [e for e in entries if "error" in e]
    trained = [t for t in train_rows if "error" in t]
    every = [(e["row"], e) for e in run] + [({"System": t["entry"]["system"], "model": t["entry"]["model"],
                                              "container": "26.08", "#-GPUs": t["published"]["#-GPUs"]}, t) for t in trained]

    def by(key, order=None):
        groups = {}
        for row, e in every:
            groups.setdefault(key(row, e), []).append(e["error"])
        return sorted(groups.items(), key=lambda g: order(g[0]) if order else g[0])

    def scale(row, e):
        n = int(row["#-GPUs"])
        return "8 GPUs (one node)" if n <= 8 else "16 to 64 GPUs" if n <= 64 else "256 GPUs and more"

    def bound(row, e):
        if e.get("launch_wait", 0) > 0.2:
            return "host-bound (the GPUs wait for launches > 20 % of the iteration)"
        if e.get("exposed", e.get("exposed_comm_s", 0) / e.get("iteration_s", 1)) > 0.3:
            return "communication-bound (exposed communication > 30 %)"
        return "compute-bound (neither)"

    errors = [e["error"] for _, e in every]
    lines = ["# How far to trust moesim's numbers", "",
             "Generated by `make validate` (`scripts/validate.py`) from the runs of `docs/validation.md`; do not",
             "edit by hand. Every number is simulated uncalibrated (no profile). Signed error is simulated over",
             "measured, less 1: positive means moesim is too optimistic (too fast). Use it as the error bar of a",
             "prediction like the group it falls in; a configuration unlike every row here has no error bar.", "",
             "## Training throughput", "",
             f"{len(every)} real MoE training runs of Megatron-Bridge (its performance archive, containers 26.02 to",
             f"26.06.01, and the 26.08 release table; DeepSeek-V3, Qwen3-235B-A22B, Qwen3-30B-A3B, GPT-OSS 120B on",
             f"DGX H100, B200, B300, GB200 and GB300): mean |error| {sum(abs(x) for x in errors) / len(errors):.1%}, "
             f"{sum(abs(x) <= goal for x in errors)} within {goal:.0%}, {sum(x > 0 for x in errors)} too fast.", ""]
    error_table(lines, "GPU system", by(lambda row, e: row["System"]), goal)
    error_table(lines, "model", by(lambda row, e: row["model"]), goal)
    error_table(lines, "scale", by(scale, order=lambda label: int(label.split()[0])), goal)
    error_table(lines, "software (container)", by(lambda row, e: row["container"]), goal)
    error_table(lines, "what bounds the simulated iteration", by(bound), goal)
    lines += ["Not validated against any measurement in the repository: frameworks other than Megatron",
              "(the `torchtitan` and `pytorch-eager` presets), A100 and older GPUs in training, clusters of",
              "more than 256 GPUs in training, and links between datacenters (their models follow the papers",
              "of `docs/validation.md`'s scenarios, not measurements).", ""]
    if results:
        tol, large = spec["tolerance"], spec["from_bytes"]
        lines += ["## Collectives", "",
                  f"{len(results)} nccl-tests tables (`docs/validation.md`), bus bandwidth at {size_text(large)} and more, by collective:", ""]
        groups = {}
        for r in results:
            # nccl-tests' alltoall_perf and moesim's all_to_all are one collective
            name = r["entry"]["collective"].replace("alltoall", "all_to_all")
            groups.setdefault(name, []).extend(x["error"] for x in r["rows"] if x["size"] >= large)
        error_table(lines, "collective", sorted(groups.items()), tol)
        outside = [r for r in results if any(x["size"] >= large and abs(x["error"]) > tol for x in r["rows"])]
        lines += [f"{len(outside)} tables have a size of {size_text(large)} or more outside {tol:.0%}; "
                  "`docs/validation.md` gives each one's reason:", ""]
        lines += [f"- {r['entry']['log'].split('_')[0]}" + (f" t{r['entry']['table']}" if "table" in r["entry"] else "") +
                  f" {r['entry']['collective']}: {r['entry']['what']}" for r in outside]
        lines.append("")
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
