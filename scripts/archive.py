"""Megatron-Bridge's performance archive (tests/data/realdata/24) as moesim scenarios.

Every MoE row of every NeMo container becomes a scenario built from the row (GPUs, precision, batch
sizes, sequence, parallel sizes), the settings its recipe had at the container's release
(software/sources/megatron-bridge-recipes.json) and the maps of validation/archive.json; or the
reason it cannot be. scripts/validate.py runs them; `python3 scripts/archive.py --write DIR` writes
the scenarios for a look (or `moesim run` by hand).
"""
import argparse
import json
import pathlib
import re

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


def stage_layers(layout):
    """Decoder layers per virtual stage of a Megatron pipeline layout: the compact form
    ('Et*4|(t*4|)*14tmL') or the list form ('embedding,decoder,...|decoder,mtp,loss')."""
    if "," in layout or layout.startswith(("embedding", "decoder")):
        return [sum(1 for t in stage.split(",") if t.strip() == "decoder") for stage in layout.split("|")]
    s = layout
    while "(" in s:
        s = re.sub(r"\(([^()]*)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    s = re.sub(r"([A-Za-z])\*(\d+)", lambda m: m.group(1) * int(m.group(2)), s)
    stages = s.split("|")
    if stages and stages[-1] == "":
        stages.pop()
    return [stage.count("t") for stage in stages]


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


def layers_of(model_preset):
    m = json.loads((root / "models" / f"{model_preset}.json").read_text())
    return m["layers"], m["experts"], m["top_k"], m.get("shared_experts", 0)


def pipeline(row, recipe, layers, pp, vp):
    """The pipeline split as moesim takes it: vp, first and last virtual stages' layers."""
    out = {}
    layout = setting(recipe, "pipeline_model_parallel_layout")
    first = setting(recipe, "num_layers_in_first_pipeline_stage")
    last = setting(recipe, "num_layers_in_last_pipeline_stage")
    if layout:
        stages = stage_layers(layout)
        if sum(stages) != layers:
            raise NotExpressible(f"the recipe's pipeline layout {layout} holds {sum(stages)} layers, the model {layers}")
        if len(stages) % pp:
            raise NotExpressible(f"the recipe's pipeline layout has {len(stages)} stages for PP {pp}")
        vp = len(stages) // pp
        middle = set(stages[1:-1])
        if len(middle) > 1:
            raise NotExpressible(f"the recipe's pipeline layout {layout} splits the middle stages unevenly")
        out["first_stage_layers"], out["last_stage_layers"] = stages[0], stages[-1]
    elif first is not None or last is not None:
        if first is not None:
            out["first_stage_layers"] = first
        if last is not None:
            out["last_stage_layers"] = last
    elif setting(recipe, "account_for_embedding_in_pipeline_split") or setting(recipe, "account_for_loss_in_pipeline_split"):
        # The embedding and the loss count as a layer each in the even split.
        units = layers + bool(setting(recipe, "account_for_embedding_in_pipeline_split")) + \
            bool(setting(recipe, "account_for_loss_in_pipeline_split"))
        if units % (pp * vp):
            raise NotExpressible(f"{units} layers (embedding and loss counted) do not split over {pp * vp} stages")
        per = units // (pp * vp)
        if setting(recipe, "account_for_embedding_in_pipeline_split"):
            out["first_stage_layers"] = per - 1
        if setting(recipe, "account_for_loss_in_pipeline_split"):
            out["last_stage_layers"] = per - 1
    elif layers % (pp * vp):
        raise NotExpressible(f"{layers} layers do not split evenly over PP {pp} x VP {vp}")
    return vp, out


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


def scenario(row, recipe, spec):
    """(scenario, notes) for an archive row and its recipe, or NotExpressible."""
    model = row["model"]
    if model in spec["not_expressible"]:
        raise NotExpressible(spec["not_expressible"][model])
    if model not in spec["models"]:
        raise NotExpressible(f"no model preset for {model}")
    if recipe is None:
        raise NotExpressible("no recipe found for this row")
    preset = spec["models"][model]
    layers, experts, top_k, _ = layers_of(preset)
    system = spec["systems"].get(row["System"])
    if system is None:
        raise NotExpressible(f"no system {row['System']}")
    dtype = spec["dtypes"].get(row["Precision"])
    if dtype is None:
        raise NotExpressible(f"no dtype {row['Precision']} (moesim has no FP4 format)")
    gpus = int(row["#-GPUs"])
    tp, pp, cp, ep = (int(row[k]) for k in ("TP", "PP", "CP", "EP"))
    vp = 1 if row["VP"] in ("n/a", "") else int(row["VP"])
    if int(row.get("FSDP", "0") or 0) > 0:
        raise NotExpressible("FSDP rows are not expressed yet")
    vp, stages = pipeline(row, recipe, layers, pp, vp)
    parallel = {"sharding": "distributed_optimizer" if setting(recipe, "use_distributed_optimizer", True) else "none",
                "tp": tp, "pp": pp, "cp": cp, "vp": vp, "ep": ep}
    parallel.update(stages)
    if tp > 1:
        parallel["sequence_parallel"] = bool(setting(recipe, "sequence_parallel", True))
    software = {"preset": spec["software"][row["container"]]}
    impl = setting(recipe, "cuda_graph_impl", "none")
    scopes = setting(recipe, "cuda_graph_scope", [])
    if impl == "full_iteration":
        software["cuda_graphs"] = ["full_iteration"]
    elif impl == "transformer_engine":
        known = ["attn", "moe_router", "moe_preprocess", "moe", "mlp"]
        software["cuda_graphs"] = [s for s in (scopes if isinstance(scopes, list) else []) if s in known]
    if setting(recipe, "use_transformer_engine_op_fuser"):
        software["grouped_gemm"] = "grouped"
    if setting(recipe, "overlap_moe_expert_parallel_comm"):
        software["ep_overlap"] = True
        if setting(recipe, "delay_wgrad_compute"):
            software["delay_wgrad"] = True
    if setting(recipe, "moe_shared_expert_overlap"):
        software["shared_expert_overlap"] = True
    if setting(recipe, "cross_entropy_loss_fusion") is False:
        software["cross_entropy"] = "megatron"  # vocab_parallel_cross_entropy, unfused, in fp32
    if setting(recipe, "moe_router_fusion") is False:
        software["router_kernels"] = 72  # Megatron-LM's DeepSeek-V3 GB200 guide L85: 72 unfused
        software["router_fusion"] = False  # torch.topk instead of TE's fused top-k
    dispatcher = setting(recipe, "moe_token_dispatcher_type", "alltoall")
    if dispatcher == "flex":
        backend = setting(recipe, "moe_flex_dispatcher_backend")
        if backend not in ("deepep", "hybridep"):
            raise NotExpressible(f"flex dispatcher backend {backend}")
        parallel["ep_backend"] = backend
        sms = setting(recipe, "moe_hybridep_num_sms" if backend == "hybridep" else "moe_deepep_num_sms")
        if sms:
            parallel["ep_sms"] = sms
    elif dispatcher != "alltoall":
        raise NotExpressible(f"the {dispatcher} token dispatcher is not modelled")
    notes = not_modelled(recipe)
    if row["container"] == "26.06.01" and setting(recipe, "use_transformer_engine_op_fuser"):
        # The archive's footnote on these rows names NVIDIA/cudnn-frontend#256: the CuTe-DSL fused
        # grouped GeMM + dGLU backward kernel (grouped_gemm_dglu_wrapper_sm100) ran 10x slower in
        # cudnn-frontend 1.24 than in 1.23 (GPT-OSS and DeepSeek-V3 workloads, GB200-class GPUs).
        # Its fix (NVIDIA/cudnn-frontend PR #322) names the cause: the kernel's fc1 bias-gradient
        # reduction under CUTLASS DSL 4.5, 1362.768 us with it against 139.392 us without on the
        # issue's SM100 shape. Only a model with expert biases computes it (GPT-OSS; DeepSeek-V3 and
        # Qwen3 measured within 2 % of 26.06 in this container), and moesim charges it only there.
        software["dglu_dbias_slowdown"] = round(1362.768 / 139.392, 3)
    if impl == "full_iteration":
        # The recipe's paged stash sizes each rank's expert buffers 1.5x the balanced share
        # (moe_expert_rank_capacity_factor) without a device-to-host read: non-blocking HybridEP
        # with that capacity (balanced routing needs K / (EP x min(K, local experts))).
        if parallel.get("ep_backend") != "hybridep":
            raise NotExpressible("a full-iteration CUDA graph around a dispatch that reads its sizes back")
        local = max(1, experts // ep)
        parallel["ep_non_blocking"] = True
        parallel["ep_capacity_factor"] = min(1.0, 1.5 * top_k / (ep * min(top_k, local)))
        notes.append("paged stash (as non-blocking HybridEP at 1.5x the balanced capacity)")
    model = {"preset": preset}
    if (setting(recipe, "mtp_num_layers") or 0) > 0:
        model["mtp_layers"] = setting(recipe, "mtp_num_layers")
    recompute = setting(recipe, "recompute_granularity")
    training = {"sequence_length": int(row["Sequence Length"]), "micro_batch_size": int(row["MBS"]),
                "global_batch_size": int(row["GBS"]), "dtype": dtype,
                "recompute": recompute if recompute in ("full", "selective") else "none"}
    if recompute == "selective":
        # Megatron-Core's recompute_modules (default core_attn); the whole MoE layer is not modelled.
        training["recompute_modules"] = [m for m in setting(recipe, "recompute_modules", ["core_attn"]) if m != "moe"]
    if dtype == "fp8" and setting(recipe, "fp8_recipe") == "tensorwise":
        training["fp8_scaling"] = "current"  # Megatron-Core's per-tensor current scaling (FP8-CS)
    if setting(recipe, "fine_grained_activation_offloading") and setting(recipe, "offload_modules"):
        training["offload_modules"] = list(setting(recipe, "offload_modules"))
    if setting(recipe, "use_precision_aware_optimizer") is True:
        # Megatron-Core's precision-aware optimizer: the state dtypes the recipe gives (DeepSeek-V3:
        # BF16 moments and main gradients). FP32 main gradients are left at moesim's default (the
        # training's dtype): the perf scripts also set ddp.grad_reduce_in_fp32, not traced.
        torch_dtypes = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.uint8": "fp8"}
        states = {}
        for key, name in (("main_params_dtype", "main_params"), ("exp_avg_dtype", "exp_avg"),
                          ("exp_avg_sq_dtype", "exp_avg_sq")):
            dt = torch_dtypes.get(setting(recipe, key))
            if dt and dt != "fp32":
                states[name] = dt
        if torch_dtypes.get(setting(recipe, "main_grads_dtype")) == "bf16":
            states["main_grads"] = "bf16"
        if states:
            training["optimizer_states"] = states
    sc = {"name": "mb-{}-{}-{}-{}-{}".format(row["container"], preset, row["System"].lower(), row["Precision"].lower(), row["GBS"]),
          "description": f"Megatron-Bridge {row['container']} performance archive, line {row['line']} of "
                         f"tests/data/realdata/{spec['source']} ({row['Tokens / sec / GPU']} tokens/s/GPU measured); "
                         f"recipe {recipe['file']} at {recipe['ref']}",
          "cluster": cluster(system, gpus), "model": model, "training": training,
          "routing": {"sampling": "expected" if setting(recipe, "moe_router_force_load_balancing", False) else "sampled"},
          "parallel": parallel, "software": software, "strategy": {"name": "ep"}}
    return sc, notes


def entries(spec=None):
    """Every MoE row of the archive: {row, recipe, scenario, notes} or {row, reason}."""
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
            e["scenario"], e["notes"] = scenario(row, e["recipe"], spec)
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
    args = ap.parse_args()
    es = entries()
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
