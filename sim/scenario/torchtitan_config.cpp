// A torchtitan configuration as scenario sections: see torchtitan_config.hpp. Key names and
// defaults are torchtitan's JobConfig (torchtitan/config/job_config.py): [training]
// local_batch_size, global_batch_size (-1: local × data-parallel degree), seq_len,
// mixed_precision_param; [parallelism] data_parallel_shard_degree (-1: the GPUs left over),
// data_parallel_replicate_degree, tensor/context/pipeline/expert(_tensor)_parallel_degree,
// pipeline_parallel_schedule and pipeline_parallel_microbatch_size (default 1);
// [activation_checkpoint] mode and selective_ac_option; [model] name, flavor and converters.
#include "sim/scenario/torchtitan_config.hpp"

#include <fmt/format.h>
#include <map>
#include <set>
#include <toml++/toml.h>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/enum_names.hpp"
#include "sim/core/error.hpp"
#include "sim/parallel/layout.hpp"
#include "sim/workload/model_shape.hpp"

namespace moesim::scenario {

namespace {

using schema::Json;

// torchtitan's (model.name, model.flavor) → the moesim model of the same released configuration
// (models/*.json, each citing it): torchtitan/models/{deepseek_v3,qwen3,gpt_oss}/__init__.py.
const std::map<std::pair<std::string, std::string>, std::string>& model_presets() {
  static const std::map<std::pair<std::string, std::string>, std::string> presets{
      {{"deepseek_v3", "671B"}, "deepseek-v3"},
      {{"qwen3", "30B-A3B"}, "qwen3-30b-a3b"},
      {{"qwen3", "235B-A22B"}, "qwen3-235b-a22b"},
      {{"gpt_oss", "120b"}, "gpt-oss-120b"},
  };
  return presets;
}

// torchtitan's pipeline schedules (torch.distributed.pipelining's names) → moesim's.
const std::map<std::string, parallel::PipelineSchedule>& schedules() {
  using parallel::PipelineSchedule;
  static const std::map<std::string, PipelineSchedule> s{{"1F1B", PipelineSchedule::OneFOneB},
                                                         {"GPipe", PipelineSchedule::GPipe},
                                                         {"Interleaved1F1B", PipelineSchedule::Interleaved},
                                                         {"DualPipeV", PipelineSchedule::DualPipeV}};
  return s;
}

// Every leaf key of the file, dotted ("parallelism.tensor_parallel_degree"); a torchtitan file
// nests 3 tables deep ([quantize.linear.float8]), so deeper than kMaxDepth is no configuration.
constexpr int kMaxDepth = 16;
void leaves(const toml::table& t, const std::string& prefix, std::vector<std::string>& out, const std::string& source,
            int depth = 0) {
  if (depth > kMaxDepth)
    throw InputError(source, prefix, fmt::format("nests tables deeper than {}", kMaxDepth),
                     "give a torchtitan training configuration (train_configs/*.toml)");
  for (const auto& [key, node] : t) {
    const std::string name = prefix.empty() ? std::string(key.str()) : prefix + "." + std::string(key.str());
    if (const toml::table* sub = node.as_table()) leaves(*sub, name, out, source, depth + 1);
    else out.push_back(name);
  }
}

}  // namespace

TorchtitanImport from_torchtitan_toml(const std::string& text, const std::string& source) {
  toml::table doc;
  try {
    doc = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source, fmt::format("line {}", e.source().begin.line), std::string(e.description()),
                     "give a torchtitan training configuration (train_configs/*.toml)");
  }
  std::set<std::string> used;
  // A key's value, marked as imported; `fallback` where the file leaves it to torchtitan's default.
  const auto value = [&]<typename T>(const std::string& dotted, T fallback) -> T {
    used.insert(dotted);
    const toml::node_view<toml::node> node = doc.at_path(dotted);
    if (!node) return fallback;
    if (const auto v = node.value<T>()) return *v;
    throw InputError(source, dotted, "has the wrong type", "see torchtitan's JobConfig (torchtitan/config/job_config.py) for its type");
  };
  const auto count = [&](const std::string& dotted, long long fallback) {
    const long long n = value(dotted, fallback);
    if (n < 1) throw InputError(source, dotted, fmt::format("is {}", n), "give a positive degree");
    return n;
  };

  TorchtitanImport out;
  const std::string name = value("model.name", std::string()), flavor = value("model.flavor", std::string());
  const auto preset = model_presets().find({name, flavor});
  if (preset == model_presets().end())
    throw InputError(source, "model.flavor",
                     fmt::format("is {} {}, which has no moesim model", name.empty() ? "(no model.name)" : name,
                                 flavor.empty() ? "(no flavor)" : flavor),
                     "import its Hugging Face config.json with `moesim import hf` and give the result as the scenario's "
                     "model; known here: deepseek_v3 671B, qwen3 30B-A3B and 235B-A22B, gpt_oss 120b");
  out.model = {{"preset", preset->second}};

  // Float8 and MX converters quantize the linear layers' GeMMs (torchtitan/components/quantization).
  using cluster::Dtype;
  Dtype dtype = value("training.mixed_precision_param", std::string("bfloat16")) == "float32" ? Dtype::fp32 : Dtype::bf16;
  used.insert("model.converters");
  if (const toml::array* converters = doc.at_path("model.converters").as_array())
    for (const auto& c : *converters)
      if (const auto s = c.value<std::string>()) {
        if (s->find("mx") != std::string::npos) dtype = Dtype::mxfp8;
        else if (s->find("float8") != std::string::npos && dtype != Dtype::mxfp8) dtype = Dtype::fp8;
      }

  Json& p = out.parallel;
  const long long tp = count("parallelism.tensor_parallel_degree", 1), pp = count("parallelism.pipeline_parallel_degree", 1);
  const long long cp = count("parallelism.context_parallel_degree", 1);
  p["tp"] = tp, p["pp"] = pp, p["cp"] = cp;
  p["ep"] = count("parallelism.expert_parallel_degree", 1);
  p["etp"] = count("parallelism.expert_tensor_parallel_degree", 1);
  // FSDP2 shards parameters, gradients and optimizer state over the shard degree (-1: every GPU
  // the other degrees leave); a replicate degree alone is plain data parallelism (DDP).
  const long long shard = value("parallelism.data_parallel_shard_degree", -1LL);
  count("parallelism.data_parallel_replicate_degree", 1);  // plain data parallelism: the GPUs the cluster has
  if (shard == 0 || shard < -1) throw InputError(source, "parallelism.data_parallel_shard_degree", fmt::format("is {}", shard), "give -1 (the GPUs left over) or a positive degree");
  p["sharding"] = name_string(parallel::kShardingNames, shard == 1 ? parallel::Sharding::None : parallel::Sharding::Fsdp);
  if (tp > 1) p["sequence_parallel"] = true;  // torchtitan's TP is sequence-parallel (parallelize.py)
  // The schedule, and the layers of a stage, matter only with pipeline stages.
  const std::string schedule = value("parallelism.pipeline_parallel_schedule", std::string("1F1B"));
  const long long layers_per_stage = value("parallelism.pipeline_parallel_layers_per_stage", 0LL);
  if (pp > 1) {
    const auto s = schedules().find(schedule);
    if (s == schedules().end())
      throw InputError(source, "parallelism.pipeline_parallel_schedule", fmt::format("is {}, which moesim does not run", schedule),
                       "use 1F1B, GPipe, Interleaved1F1B or DualPipeV");
    p["schedule"] = name_string(parallel::kPipelineScheduleNames, s->second);
    if (s->second == parallel::PipelineSchedule::Interleaved) {
      if (layers_per_stage < 1)
        throw InputError(source, "parallelism.pipeline_parallel_layers_per_stage",
                         "is missing: the virtual stages of Interleaved1F1B follow from it",
                         "add it (the transformer layers of one virtual stage)");
      out.layers_per_stage = layers_per_stage;
    }
  }

  Json& t = out.training;
  t["sequence_length"] = count("training.seq_len", 2048);
  // A rank's local batch runs as microbatches of pipeline_parallel_microbatch_size under PP.
  const long long local = count("training.local_batch_size", 8);
  const long long micro = pp > 1 ? count("parallelism.pipeline_parallel_microbatch_size", 1) : local;
  if (local % micro)
    throw InputError(source, "parallelism.pipeline_parallel_microbatch_size", fmt::format("is {}: the local batch of {} does not split into it", micro, local),
                     "give a divisor of training.local_batch_size");
  t["micro_batch_size"] = micro;
  // Without a global batch every data-parallel rank runs its local batch once a step.
  const long long global = value("training.global_batch_size", -1LL);
  if (global > 0) t["global_batch_size"] = global;
  else t["microbatches"] = local / micro;
  t["dtype"] = name_string(cluster::kDtypeNames, dtype);
  const std::string ac = value("activation_checkpoint.mode", std::string("selective"));
  if (ac == "full") {
    t["recompute"] = name_string(workload::kRecomputeNames, workload::Recompute::Full);
  } else if (ac == "selective") {
    // The op policy (torchtitan/distributed/activation_checkpoint.py) saves the GeMMs on its list;
    // torch._grouped_mm is not on it, so the routed experts are recomputed (software/torchtitan.json).
    const std::string option = value("activation_checkpoint.selective_ac_option", std::string("2"));
    if (option != "op")
      throw InputError(source, "activation_checkpoint.selective_ac_option",
                       fmt::format("is \"{}\": checkpointing every {}th layer whole is not modelled", option, option),
                       "use \"op\", or mode \"full\" or \"none\"");
    t["recompute"] = name_string(workload::kRecomputeNames, workload::Recompute::Selective);
    t["recompute_modules"] = Json::array({name_string(workload::kRecomputeModuleNames, workload::RecomputeModule::RoutedExperts)});
  } else if (ac != "none") {
    throw InputError(source, "activation_checkpoint.mode", fmt::format("is \"{}\"", ac), "use none, selective or full");
  }

  // The torchtitan preset's optimizer step: clip_grad_norm_ (training.max_norm), then AdamW.
  value("training.max_norm", 1.0);
  const std::string optimizer = value("optimizer.name", std::string("AdamW"));
  if (optimizer != "AdamW" && optimizer != "Adam")
    throw InputError(source, "optimizer.name", fmt::format("is {}: moesim models Adam's step and state only", optimizer),
                     "simulate it with AdamW (its step and memory, not the optimizer's own)");
  out.software = {{"preset", "torchtitan"}};

  std::vector<std::string> all;
  leaves(doc, "", all, source);
  for (const auto& k : all)
    if (!used.count(k)) out.not_imported.push_back(k);
  return out;
}

}  // namespace moesim::scenario
