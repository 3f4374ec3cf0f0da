// A Megatron training configuration as a moesim scenario's model, parallel, training, software and
// routing sections. Megatron-LM's arguments (megatron/training/arguments.py), Megatron-Core's
// TransformerConfig and Megatron-Bridge's ConfigContainer name the same fields alike
// (--num-layers is num_layers), so one mapping serves two readers:
//  - a Megatron-LM training command line (from_megatron_args: "--num-layers", "48", ...);
//  - a Megatron-Bridge ConfigContainer as YAML (from_megatron_bridge_config: what
//    ConfigContainer.to_yaml writes, e.g. the performance recipes' scripts/performance/dryrun_configs
//    and a run's run_config.yaml; JSON, a subset of YAML, is read too), its sections model, train,
//    dataset, ddp, mixed_precision and optimizer, the few fields Bridge names otherwise translated
//    (num_moe_experts is Megatron-LM's num_experts).
// Each field moesim has a key for is mapped; the others are returned by name (logging, checkpoints,
// data, initialisation), so the user sees what was not imported; what moesim models only
// approximately (blockwise FP8 as current scaling, attention sinks) is returned as such. A field
// whose value moesim cannot express (MoE layers between dense ones other than leading, a shared
// expert whose width is no multiple of the experts', FP4 training, the allgather dispatcher) is
// refused naming the field. The software switches follow Megatron-Bridge's performance recipes as
// Megatron-Core runs them (the same mapping scripts/archive.py applies to the traced recipes):
// cuda_graph_impl/cuda_graph_scope, the flex dispatcher's backend and SMs,
// overlap_moe_expert_parallel_comm, delay_wgrad_compute, moe_shared_expert_overlap, the fusions,
// use_transformer_engine_op_fuser; moe_router_force_load_balancing is expected routing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/core/schema.hpp"

namespace moesim::scenario {

struct MegatronImport {
  schema::Json model = schema::Json::object();
  schema::Json parallel = schema::Json::object();
  schema::Json training = schema::Json::object();
  schema::Json software = schema::Json::object();
  schema::Json routing = schema::Json::object();
  std::vector<std::string> not_imported;  // fields moesim has no key for, as the source names them ("--log-interval")
  std::vector<std::string> approximated;  // what moesim models otherwise than the field says, one line each
};

struct MegatronImportOptions {
  // A model preset's resolved model section (layers, experts, top_k, ...): the model is the preset
  // ({"preset": name} plus the configuration's MTP layers) and the configuration's shape fields,
  // optional then, must agree with it; empty: the model is the configuration's shape.
  std::optional<schema::Json> preset;
  std::string preset_name;
};

// `args`: the command line's flags and values, as a shell splits them ("--num-layers", "48",
// "--bf16", ...). Throws InputError naming the flag (`source`: what to name as the file).
MegatronImport from_megatron_args(const std::vector<std::string>& args, const std::string& source,
                                  const MegatronImportOptions& options = {});

// `text`: a ConfigContainer as YAML (or JSON). Throws InputError naming the field ("model.num_layers").
MegatronImport from_megatron_bridge_config(const std::string& text, const std::string& source,
                                           const MegatronImportOptions& options = {});

}  // namespace moesim::scenario
