"""Megatron-Bridge's performance archive (tests/data/realdata/24) as moesim scenarios.

Every MoE row of every NeMo container becomes a scenario built from the row (GPUs, precision, batch
sizes, sequence, parallel sizes), the settings its recipe had at the container's release
(software/sources/megatron-bridge-recipes.json) and the maps of validation/archive.json; or the
reason it cannot be. The row's run is written as a Megatron configuration and read by `moesim import
megatron`, the one mapping of Megatron's settings to a scenario that users' recipes go through too. scripts/validate.py runs them; `python3 scripts/archive.py --write DIR` writes
the scenarios for a look (or `moesim run` by hand).
"""
import argparse
import json
import pathlib
import re
import subprocess
import tempfile

root = pathlib.Path(__file__).resolve().parent.parent


class NotExpressible(Exception):
    pass


def published(path):
    """The MoE-candidate rows of the archive's tables whose first column is the system (26.02 on):
    dicts of the table's columns plus container, model and line (1-based); and the rows of other
    tables (25.x: model first) as (container, line, text)."""
    rows, others = [], []
    container = model = head = None
    for n, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        m = re.match(r"## (\S+) NeMo Container", line)
        if m:
            container, model, head = m.group(1), None, None
            continue
        m = re.match(r"#### Model: (.*)", line)
        if m:
            model, head = m.group(1).strip(), None
            continue
        if not line.startswith("|") or container is None:
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if head is None:
            head = cells
            continue
        if set(cells[0]) <= set("-: "):
            continue
        if head[0] != "System":
            others.append((container, n, line))
            continue
        row = dict(zip(head, cells))
        row.update(container=container, model=model, line=n)
        rows.append(row)
    return rows, others


def setting(recipe, key, default=None):
    v = recipe["settings"].get(key)
    if isinstance(v, dict) and "value" in v:
        v = v["value"]
    return default if v is None else v


def cluster(system, gpus):
    """The row's GPUs as the system's NVLink domains (racks or nodes) joined by their NICs."""
    d = system["domain"]
    inner = dict(system["domain_level"])
    if gpus <= d:
        inner["count"] = gpus
        return {"gpu": system["gpu"], "source": system["source"], "levels": [inner]}
    if gpus % d:
        raise NotExpressible(f"{gpus} GPUs are not whole domains of {d}")
    inner["count"] = d
    out = system["scale_out"]
    level = {"name": out["name"], "count": gpus // d, "bandwidth": f"{out['bandwidth_per_gpu_gbps'] * d}Gbps",
             "latency": out["latency"], "ports": d, "link": out["link"]}
    return {"gpu": system["gpu"], "source": system["source"], "levels": [level, inner]}


def not_modelled(recipe):
    """The recipe's settings that change its speed and moesim does not model yet."""
    notes = []
    if setting(recipe, "delay_wgrad_compute") and not setting(recipe, "overlap_moe_expert_parallel_comm"):
        notes.append("delayed weight-gradient GeMMs without EP overlap")
    if setting(recipe, "fp8_dot_product_attention"):
        notes.append("FP8 attention core (BF16 here)")
    if setting(recipe, "use_transformer_engine_op_fuser"):
        notes.append("CuTe-DSL fused grouped MLP (timed as moesim's grouped GeMM)")
    modules = setting(recipe, "recompute_modules") or []
    if setting(recipe, "recompute_granularity") == "selective" and "moe" in modules:
        notes.append("recompute of the whole MoE layer")
    if setting(recipe, "cpu_offloading"):
        notes.append("layer-wise CPU activation offloading (cpu_offloading)")
    if setting(recipe, "cross_entropy_loss_fusion") and setting(recipe, "cross_entropy_fusion_impl") == "native":
        notes.append("Megatron-Core's fused native cross entropy (timed as Transformer Engine's)")
    return notes


def megatron_config(row, recipe, dtype):
    """The row's run as a Megatron configuration (Megatron-Core's field names): its recipe's traced
    settings, with what the archive states of the run over them (layout, batch, sequence,
    precision), and the defaults the recipes leave to Megatron-Bridge (the distributed optimizer, and
    sequence parallelism under TP)."""
    settings = {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in recipe["settings"].items()}
    settings = {k: v for k, v in settings.items() if v is not None and "." not in k}
    tp, pp, cp, ep = (int(row[k]) for k in ("TP", "PP", "CP", "EP"))
    vp = None if row["VP"] in ("n/a", "") or int(row["VP"]) == 1 else int(row["VP"])
    settings.update(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, context_parallel_size=cp,
                    expert_model_parallel_size=ep, virtual_pipeline_model_parallel_size=vp,
                    seq_length=int(row["Sequence Length"]), micro_batch_size=int(row["MBS"]),
                    global_batch_size=int(row["GBS"]))
    settings.setdefault("use_distributed_optimizer", True)
    if tp > 1:
        settings.setdefault("sequence_parallel", True)
    settings.pop("fp4", None)
    if dtype == "bf16":
        settings.update(bf16=True, fp8=None)
    elif dtype == "mxfp8":
        settings.update(fp8="e4m3", fp8_recipe="mxfp8")
    else:
        settings["fp8"] = settings.get("fp8") or "hybrid"
        if settings.get("fp8_recipe") == "mxfp8":
            settings.pop("fp8_recipe")
    return {"model": settings}


def scenario(row, recipe, spec, moesim):
    """(scenario, notes) for an archive row and its recipe, or NotExpressible: the row's run as
    `moesim import megatron` reads its Megatron configuration (one mapping of Megatron's settings,
    sim/scenario/megatron_config.cpp), on the row's system, with the model preset and the container's
    software preset."""
    model = row["model"]
    if model in spec["not_expressible"]:
        raise NotExpressible(spec["not_expressible"][model])
    if model not in spec["models"]:
        raise NotExpressible(f"no model preset for {model}")
    if recipe is None:
        raise NotExpressible("no recipe found for this row")
    preset = spec["models"][model]
    system = spec["systems"].get(row["System"])
    if system is None:
        raise NotExpressible(f"no system {row['System']}")
    dtype = spec["dtypes"].get(row["Precision"])
    if dtype is None:
        raise NotExpressible(f"no dtype {row['Precision']} (moesim has no FP4 format)")
    if int(row.get("FSDP", "0") or 0) > 0:
        raise NotExpressible("FSDP rows are not expressed yet")
    with tempfile.TemporaryDirectory() as d:
        config, cluster_file = pathlib.Path(d) / "config.json", pathlib.Path(d) / "cluster.json"
        config.write_text(json.dumps(megatron_config(row, recipe, dtype)))
        cluster_file.write_text(json.dumps(cluster(system, int(row["#-GPUs"]))))
        proc = subprocess.run([str(moesim), "import", "megatron", str(config), "--cluster", str(cluster_file), "--model", preset,
                               "--software", spec["software"][row["container"]]], capture_output=True, text=True)
    if proc.returncode == 2:
        raise NotExpressible(proc.stderr.strip().splitlines()[-1].split(": ", 3)[-1])
    if proc.returncode:
        raise SystemExit(f"archive: moesim import exited {proc.returncode}: {proc.stderr}")
    sc = json.loads(proc.stdout)
    notes = not_modelled(recipe)
    if row["container"] == "26.06.01" and setting(recipe, "use_transformer_engine_op_fuser"):
        # The archive's footnote on these rows names NVIDIA/cudnn-frontend#256: the CuTe-DSL fused
        # grouped GeMM + dGLU backward kernel (grouped_gemm_dglu_wrapper_sm100) ran 10x slower in
        # cudnn-frontend 1.24 than in 1.23 (GPT-OSS and DeepSeek-V3 workloads, GB200-class GPUs).
        # Its fix (NVIDIA/cudnn-frontend PR #322) names the cause: the kernel's fc1 bias-gradient
        # reduction under CUTLASS DSL 4.5, 1362.768 us with it against 139.392 us without on the
        # issue's SM100 shape. Only a model with expert biases computes it (GPT-OSS; DeepSeek-V3 and
        # Qwen3 measured within 2 % of 26.06 in this container), and moesim charges it only there.
        sc["software"]["dglu_dbias_slowdown"] = round(1362.768 / 139.392, 3)
    if setting(recipe, "cuda_graph_impl") == "full_iteration":
        notes.append("paged stash (as non-blocking HybridEP at 1.5x the balanced capacity)")
    sc["name"] = "mb-{}-{}-{}-{}-{}".format(row["container"], preset, row["System"].lower(), row["Precision"].lower(), row["GBS"])
    sc["description"] = (f"Megatron-Bridge {row['container']} performance archive, line {row['line']} of "
                         f"tests/data/realdata/{spec['source']} ({row['Tokens / sec / GPU']} tokens/s/GPU measured); "
                         f"recipe {recipe['file']} at {recipe['ref']}")
    return sc, notes


def entries(moesim, spec=None):
    """Every MoE row of the archive: {row, recipe, scenario, notes} or {row, reason}; `moesim` the
    binary whose `import megatron` builds the scenarios."""
    spec = spec or json.loads((root / "validation" / "archive.json").read_text())
    rows, others = published(root / "tests" / "data" / "realdata" / spec["source"])
    recipes = json.loads((root / spec["recipes"]).read_text())
    by_line = {(c, r["archive_line"]): r for c, v in recipes["containers"].items() for r in v["rows"]}
    moe = set(spec["models"]) | set(spec["not_expressible"])
    out = []
    for row in rows:
        if row["model"] not in moe:
            continue  # dense models (Llama, ...)
        e = {"row": row}
        try:
            if row["container"] not in spec["software"]:
                raise NotExpressible(spec["containers_without_release"].get(row["container"], "no software preset"))
            e["recipe"] = by_line.get((row["container"], row["line"]))
            e["scenario"], e["notes"] = scenario(row, e["recipe"], spec, moesim)
        except NotExpressible as x:
            e["reason"] = str(x)
        out.append(e)
    for container, line, text in others:
        name = text.strip().strip("|").split("|")[0].strip()
        if any(name.startswith(m) for m in moe):
            out.append({"row": {"container": container, "line": line, "model": name, "text": text},
                        "reason": spec["containers_without_release"].get(container, "another table format")})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", help="write each expressible row's scenario into this folder")
    ap.add_argument("--moesim", default=str(root / "build" / "release" / "moesim"), help="the moesim binary (its `import megatron`)")
    args = ap.parse_args()
    es = entries(args.moesim)
    if args.write:
        d = pathlib.Path(args.write)
        d.mkdir(parents=True, exist_ok=True)
        for e in es:
            if "scenario" in e:
                (d / f"{e['scenario']['name']}.json").write_text(json.dumps(e["scenario"], indent=2) + "\n")
    print(f"{sum('scenario' in e for e in es)} of {len(es)} MoE rows expressible")
    for e in es:
        if "reason" in e:
            r = e["row"]
            print(f"  {r['container']} {r['model']} {r.get('System', '')}: {e['reason']}")


if __name__ == "__main__":
    main()
