// A Megatron training configuration as scenario sections: see megatron_config.hpp. Field names and
// meanings are Megatron-Core's (core_v0.17: transformer_config.py, model_parallel_config.py) and
// Megatron-LM's arguments.py: --moe-layer-freq's list form, kv_channels as the head width,
// --num-query-groups under --group-query-attention, --disable-bias-linear (biases are on by
// default), --fp8-format with --fp8-recipe (mxfp8 on Blackwell), window_size (left, right) with
// window_attn_skip_freq (every N-th layer full attention).
#include "sim/scenario/megatron_config.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/core/enum_names.hpp"
#include "sim/core/error.hpp"
#include "sim/parallel/ep_backend.hpp"
#include "sim/parallel/layout.hpp"
#include "sim/scenario/scenario_schema.hpp"
#include "sim/software/software.hpp"
#include "sim/workload/model_shape.hpp"
#include "sim/workload/routing.hpp"

namespace moesim::scenario {

namespace {

using schema::Json;

// The fields of one configuration by Megatron's names, and how its source names each.
struct Fields {
  std::map<std::string, Json> values;  // a command line's switch: true; its values: their words
  std::map<std::string, std::string> names;
  bool command_line = false;
};

// Reads fields and remembers which were read: those never read are reported as not imported.
class Reader {
 public:
  Reader(const Fields& f, std::string source) : f_(f), source_(std::move(source)) {}

  bool command_line() const { return f_.command_line; }
  // How the source names a field; one it lacks as it would name it (--num-layers, model.num_layers).
  std::string name(const std::string& key) const {
    const auto it = f_.names.find(key);
    if (it != f_.names.end()) return it->second;
    if (!f_.command_line) return "model." + key;
    std::string flag = "--" + key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    return flag;
  }
  // Present with a value (YAML's null is no value).
  bool given(const std::string& key) {
    used_.insert(key);
    const auto it = f_.values.find(key);
    return it != f_.values.end() && !it->second.is_null();
  }
  // A switch: on when present as a bare flag or true, off when false, `otherwise` when absent.
  bool on(const std::string& key, bool otherwise = false) {
    if (!given(key)) return otherwise;
    const Json& v = f_.values.at(key);
    if (v.is_boolean()) return v.get<bool>();
    if (v.is_number()) return v.get<double>() != 0;
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      return s != "false" && s != "False" && s != "0";
    }
    return true;
  }
  // A switch stated false (a YAML false, a "False" value).
  bool off(const std::string& key) { return given(key) && !on(key); }
  std::string text(const std::string& key) {
    if (!given(key)) return {};
    const Json& v = f_.values.at(key);
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("_target_")) return v.at("_target_").get<std::string>();  // Bridge's {_target_: torch.bfloat16}
    return v.dump();
  }
  long long count(const std::string& key) {
    given(key);
    const Json& v = f_.values.at(key);
    if (v.is_number_integer() && v.get<long long>() > 0) return v.get<long long>();
    if (v.is_string()) {
      const std::string& s = v.get_ref<const std::string&>();
      try {
        std::size_t used = 0;
        const long long n = std::stoll(s, &used);
        if (used == s.size() && n > 0) return n;
      } catch (const std::logic_error&) {
      }
    }
    throw InputError(source_, name(key), fmt::format("is {}, not a positive whole number", v.dump()),
                     fmt::format("give a count, e.g. {} 8", name(key)));
  }
  // A list: YAML's sequence or a command line's words.
  std::vector<Json> list(const std::string& key) {
    if (!given(key)) return {};
    const Json& v = f_.values.at(key);
    if (v.is_array()) return {v.begin(), v.end()};
    std::vector<Json> out;
    std::stringstream words(text(key));
    for (std::string w; words >> w;) out.emplace_back(w);
    return out;
  }
  [[noreturn]] void refuse(const std::string& key, const std::string& what, const std::string& fix) const {
    throw InputError(source_, name(key), what, fix);
  }
  std::vector<std::string> unread() const {
    std::vector<std::string> out;
    for (const auto& [key, value] : f_.values)
      if (!used_.count(key) && !value.is_null() && !(value.is_boolean() && !value.get<bool>())) out.push_back(name(key));
    return out;
  }

 private:
  const Fields& f_;
  std::string source_;
  std::set<std::string> used_;
};

// The model's shape, as the configuration gives it.
Json model_shape(Reader& r) {
  for (const char* key : {"num_layers", "hidden_size", "num_attention_heads", "num_experts"})
    if (!r.given(key))
      r.refuse(key, "is missing",
               "give the model's shape (num_layers, hidden_size, num_attention_heads, num_experts), or a model preset "
               "(--model PRESET) for the rest of the configuration");
  Json m = Json::object();
  m["layers"] = r.count("num_layers");
  m["hidden"] = r.count("hidden_size");
  const long long dense_ffn = r.given("ffn_hidden_size") ? r.count("ffn_hidden_size") : 4 * m["hidden"].get<long long>();
  const long long expert_ffn = r.given("moe_ffn_hidden_size") ? r.count("moe_ffn_hidden_size") : dense_ffn;
  m["ffn_hidden"] = expert_ffn;
  if (dense_ffn != expert_ffn) m["dense_ffn_hidden"] = dense_ffn;
  m["experts"] = r.count("num_experts");
  m["top_k"] = r.given("moe_router_topk") ? r.count("moe_router_topk") : 2;  // Megatron's default 2
  // moe_layer_freq: 1 (every layer), a list of 0/1 per layer (Bridge), or a Python list
  // expression such as "([0]*3+[1]*58)" (Megatron-LM's command line).
  if (r.given("moe_layer_freq")) {
    const std::vector<Json> list = r.list("moe_layer_freq");
    long long dense = -1;
    std::smatch match;
    const std::string f = r.text("moe_layer_freq");
    if (list.size() > 1 && std::all_of(list.begin(), list.end(), [](const Json& x) { return x.is_number_integer(); })) {
      const auto first_moe = std::find(list.begin(), list.end(), Json(1));
      if (std::all_of(first_moe, list.end(), [](const Json& x) { return x == 1; }) &&
          std::all_of(list.begin(), first_moe, [](const Json& x) { return x == 0; }))
        dense = first_moe - list.begin();
      if (dense >= 0 && static_cast<long long>(list.size()) != m["layers"].get<long long>())
        r.refuse("moe_layer_freq", fmt::format("lists {} layers, the model has {}", list.size(), m["layers"].get<long long>()),
                 "give one entry per layer");
    } else if (f == "1") {
      dense = 0;
    } else if (std::regex_match(f, match, std::regex(R"(\(?\[0\]\*(\d+)\s*\+\s*\[1\]\*(\d+)\)?)"))) {
      dense = std::stoll(match[1]);
      if (dense + std::stoll(match[2]) != m["layers"].get<long long>())
        r.refuse("moe_layer_freq", fmt::format("is \"{}\", which does not count {} layers", f, m["layers"].get<long long>()),
                 "make its dense and MoE layers add up to the model's layers");
    }
    if (dense < 0)
      r.refuse("moe_layer_freq", fmt::format("is {}: moesim's dense layers lead the model", f),
               "use 1 or ([0]*D+[1]*M) (D leading dense layers)");
    if (dense > 0) m["dense_layers"] = dense;
  }
  if (r.given("moe_shared_expert_intermediate_size")) {
    const long long w = r.count("moe_shared_expert_intermediate_size");
    if (w % expert_ffn)
      r.refuse("moe_shared_expert_intermediate_size",
               fmt::format("is {}, not a multiple of the experts' {}: moesim's shared experts are as wide as the routed ones", w, expert_ffn),
               "approximate it by hand: \"shared_experts\": round(width / the experts' width)");
    m["shared_experts"] = w / expert_ffn;
  }
  // --swiglu sets gated_linear_unit; GPT-OSS's clamped quick-GELU GLU (activation_func quick_gelu
  // with activation_func_clamp_value) is gated as well (3 GeMMs), its own kind.
  const bool gated = r.on("swiglu") || r.on("gated_linear_unit");
  const bool clamped_quick_gelu =
      r.text("activation_func").find("quick_gelu") != std::string::npos && r.given("activation_func_clamp_value");
  using workload::ExpertKind;
  m["expert_kind"] = name_string(workload::kExpertKindNames, !gated               ? ExpertKind::Mlp
                                                             : clamped_quick_gelu ? ExpertKind::ClampedQuickGeGlu
                                                                                  : ExpertKind::SwiGlu);
  m["heads"] = r.count("num_attention_heads");
  if (r.on("multi_latent_attention")) {
    Json mla = Json::object();
    mla["q_lora_rank"] = r.given("q_lora_rank") ? r.count("q_lora_rank") : 0;
    mla["kv_lora_rank"] = r.given("kv_lora_rank") ? r.count("kv_lora_rank") : 512;  // Megatron's defaults (MLATransformerConfig)
    mla["qk_nope_head_dim"] = r.given("qk_head_dim") ? r.count("qk_head_dim") : 128;
    mla["qk_rope_head_dim"] = r.given("qk_pos_emb_head_dim") ? r.count("qk_pos_emb_head_dim") : 64;
    mla["v_head_dim"] = r.given("v_head_dim") ? r.count("v_head_dim") : 128;
    m["mla"] = mla;
  } else {
    // A command line's --num-query-groups counts under --group-query-attention only; Bridge's field always.
    if ((!r.command_line() || r.on("group_query_attention")) && r.given("num_query_groups") &&
        r.count("num_query_groups") != m["heads"].get<long long>())
      m["kv_heads"] = r.count("num_query_groups");
    if (r.given("kv_channels") && r.count("kv_channels") * m["heads"].get<long long>() != m["hidden"].get<long long>())
      m["head_dim"] = r.count("kv_channels");
  }
  if (r.given("vocab_size")) m["vocab"] = r.count("vocab_size");
  m["linear_bias"] = r.on("add_bias_linear", true) && !r.on("disable_bias_linear");
  const std::string position = r.text("position_embedding_type");
  m["rotary"] = position.empty() || position == "rope" || position == "yarn" || position == "mrope";
  m["qk_norm"] = r.on("qk_layernorm");
  // window_size (left, right): each query sees its left tokens before it and itself, causal; every
  // window_attn_skip_freq-th layer (1-based) attends fully, the others through the window.
  if (r.given("window_size")) {
    const std::vector<Json> w = r.list("window_size");
    long long left = -1;
    if (!w.empty()) try {
        left = w[0].is_number() ? w[0].get<long long>() : std::stoll(w[0].get<std::string>());
      } catch (const std::logic_error&) {
      }
    if (left < 0)
      r.refuse("window_size", fmt::format("is {}, not a (left, right) token count", r.text("window_size")),
               "give the window's tokens before each query, e.g. [127, 0]");
    long long period = 1;
    if (r.given("window_attn_skip_freq")) period = r.count("window_attn_skip_freq");
    if (period > 2)
      r.refuse("window_attn_skip_freq", fmt::format("is {}: moesim windows every layer or every other one (from the first)", period),
               "use 1 (every layer windowed) or 2 (windowed and full layers alternate, GPT-OSS)");
    if (left > 0) m["sliding_window"] = {{"tokens", left + 1}, {"every", period}};
  }
  return m;
}

// Decoder layers per virtual stage of a Megatron-Core pipeline layout
// (pipeline_parallel_layer_layout.py): the compact form ("Et*4|(t*4|)*14tmL": E the embedding, t a
// decoder layer, m an MTP layer, L the loss, | between stages, (...)*N and x*N repeats) or the list
// form (per stage, its layers' names: embedding, decoder, mtp, loss), as a YAML list of lists or
// as "embedding,decoder|decoder,mtp,loss".
std::vector<long long> layout_stages(const std::vector<Json>& list, std::string text) {
  std::vector<long long> stages;
  if (!list.empty() && list.front().is_array()) {
    for (const Json& stage : list) stages.push_back(std::count(stage.begin(), stage.end(), Json("decoder")));
    return stages;
  }
  if (text.find(',') != std::string::npos || text.starts_with("embedding") || text.starts_with("decoder")) {
    std::stringstream in(text);
    for (std::string stage; std::getline(in, stage, '|');) {
      long long n = 0;
      std::stringstream names(stage);
      for (std::string name; std::getline(names, name, ',');) n += name.find("decoder") != std::string::npos;
      stages.push_back(n);
    }
    return stages;
  }
  const std::regex group(R"(\(([^()]*)\)\*(\d+))"), single(R"(([A-Za-z])\*(\d+))");
  const auto expand = [](const std::regex& re, std::string s) {
    std::smatch m;
    while (std::regex_search(s, m, re)) {
      std::string repeated;
      for (long long i = std::stoll(m[2]); i > 0; --i) repeated += m[1].str();
      s = m.prefix().str() + repeated + m.suffix().str();
    }
    return s;
  };
  text = expand(single, expand(group, text));
  std::stringstream in(text);
  for (std::string stage; std::getline(in, stage, '|');) stages.push_back(std::count(stage.begin(), stage.end(), 't'));
  return stages;  // getline drops the empty stage after a trailing |
}

// The pipeline split beyond PP and VP: first and last stages' layers as Megatron-Core derives
// them (pipeline_model_parallel_layout, num_layers_in_first/last_pipeline_stage, or the embedding
// and the loss counted as a layer each in an even split), the VP a layout implies.
void pipeline_split(Reader& r, long long layers, Json& p) {
  const long long pp = p.value("pp", 1LL);
  long long vp = p.value("vp", 1LL);
  if (r.given("pipeline_model_parallel_layout")) {
    const std::vector<long long> stages = layout_stages(r.list("pipeline_model_parallel_layout"), r.text("pipeline_model_parallel_layout"));
    const std::string layout = r.text("pipeline_model_parallel_layout");
    long long total = 0;
    for (const long long s : stages) total += s;
    if (total != layers)
      r.refuse("pipeline_model_parallel_layout", fmt::format("holds {} layers, the model {}", total, layers),
               "give a layout of the model's layers");
    if (static_cast<long long>(stages.size()) % pp)
      r.refuse("pipeline_model_parallel_layout", fmt::format("has {} stages for PP {}", stages.size(), pp),
               "give PP x VP stages");
    vp = static_cast<long long>(stages.size()) / pp;
    if (stages.size() > 2 && std::set<long long>(stages.begin() + 1, stages.end() - 1).size() > 1)
      r.refuse("pipeline_model_parallel_layout", fmt::format("\"{}\" splits its middle stages unevenly", layout),
               "moesim's middle stages hold equal layers: give first and last stages' layers instead");
    if (vp > 1) p["vp"] = vp;
    p["first_stage_layers"] = stages.front();
    p["last_stage_layers"] = stages.back();
    return;
  }
  bool given = false;
  for (const auto& [field, key] : {std::pair{"decoder_first_pipeline_num_layers", "first_stage_layers"},
                                   std::pair{"decoder_last_pipeline_num_layers", "last_stage_layers"}})
    if (r.given(field)) p[key] = r.count(field), given = true;
  if (given) return;
  const bool embedding = r.on("account_for_embedding_in_pipeline_split"), loss = r.on("account_for_loss_in_pipeline_split");
  if (embedding || loss) {
    const long long units = layers + embedding + loss;
    if (units % (pp * vp))
      r.refuse(embedding ? "account_for_embedding_in_pipeline_split" : "account_for_loss_in_pipeline_split",
               fmt::format("counts {} layers (embedding and loss as one each), which do not split over {} stages", units, pp * vp),
               "give first and last stages' layers instead");
    const long long per = units / (pp * vp);
    if (embedding) p["first_stage_layers"] = per - 1;
    if (loss) p["last_stage_layers"] = per - 1;
  }
}

// torch dtypes by name as Bridge writes them ("torch.bfloat16") as moesim's dtypes.
std::optional<cluster::Dtype> torch_dtype(const std::string& torch) {
  using cluster::Dtype;
  static const std::map<std::string, Dtype> dtypes{
      {"torch.float32", Dtype::fp32}, {"torch.bfloat16", Dtype::bf16}, {"torch.float16", Dtype::fp16}, {"torch.uint8", Dtype::fp8}};
  const auto it = dtypes.find(torch);
  return it == dtypes.end() ? std::nullopt : std::optional<Dtype>(it->second);
}

MegatronImport from_fields(const Fields& fields, const std::string& source, const MegatronImportOptions& options) {
  Reader r(fields, source);
  MegatronImport out;
  // The model: the configuration's shape, or a preset that shape (where given) must agree with.
  const bool shaped = r.given("num_layers");
  if (options.preset) {
    out.model = {{"preset", options.preset_name}};
    if (shaped) {
      const Json shape = model_shape(r);
      for (const auto& [key, field] : {std::pair{"layers", "num_layers"}, std::pair{"hidden", "hidden_size"},
                                       std::pair{"experts", "num_experts"}, std::pair{"top_k", "moe_router_topk"},
                                       std::pair{"heads", "num_attention_heads"}})
        if (options.preset->contains(key) && shape.at(key) != options.preset->at(key))
          r.refuse(field, fmt::format("is {}, where model preset {} has {}", shape.at(key).dump(), options.preset_name, options.preset->at(key).dump()),
                   "name the preset of this model, or import without a model preset");
    }
  } else {
    out.model = model_shape(r);
  }
  if (r.given("mtp_num_layers")) out.model["mtp_layers"] = r.count("mtp_num_layers");
  if (r.text("softmax_type") == "learnable")
    out.approximated.push_back(r.name("softmax_type") + " learnable: each head's attention sink (one more logit a row) is not modelled");
  const Json& shape = options.preset ? *options.preset : out.model;
  const long long layers = shape.value("layers", 0LL);
  const long long experts = shape.value("experts", 1LL), top_k = shape.value("top_k", 1LL);

  Json& p = out.parallel;
  // The layout's sizes, each under the parallel key moesim_name_of gives its field.
  for (const char* field : {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                            "expert_model_parallel_size", "expert_tensor_parallel_size", "virtual_pipeline_model_parallel_size"})
    if (r.given(field)) p[*moesim_name_of(field)] = r.count(field);
  if (r.given("num_layers_per_virtual_pipeline_stage")) {
    const long long per = r.count("num_layers_per_virtual_pipeline_stage"), pp = p.value("pp", 1LL);
    if (layers % (per * pp))
      r.refuse("num_layers_per_virtual_pipeline_stage",
               fmt::format("is {}: {} layers do not split into stages of it over PP {}", per, layers, pp),
               "give the virtual pipeline size instead");
    p["vp"] = layers / (per * pp);
  }
  pipeline_split(r, layers, p);
  if (p.value("tp", 1LL) > 1) p["sequence_parallel"] = r.on("sequence_parallel");
  if (r.given("use_distributed_optimizer"))
    p["sharding"] = name_string(parallel::kShardingNames, r.on("use_distributed_optimizer") ? parallel::Sharding::DistributedOptimizer
                                                                                            : parallel::Sharding::None);
  // The token dispatcher: alltoall (NCCL's all-to-all-v after a device-to-host read), or flex with
  // its backend (DeepEP, HybridEP) and the SMs it takes.
  const std::string dispatcher = r.given("moe_token_dispatcher_type") ? r.text("moe_token_dispatcher_type") : "alltoall";
  std::string backend = dispatcher == "flex" ? r.text("moe_flex_dispatcher_backend") : "";
  if (r.on("moe_enable_deepep")) backend = "deepep";  // Megatron-Core's older switch for flex + DeepEP
  if (dispatcher == "flex" || !backend.empty()) {
    if (backend != "deepep" && backend != "hybridep")
      r.refuse("moe_flex_dispatcher_backend", fmt::format("is \"{}\"", backend), "use deepep or hybridep");
    const bool hybrid = backend == "hybridep";
    p["ep_backend"] = name_string(parallel::kEpBackendNames, hybrid ? parallel::EpBackendKind::HybridEp : parallel::EpBackendKind::DeepEp);
    const char* sms = hybrid ? "moe_hybridep_num_sms" : "moe_deepep_num_sms";
    if (r.given(sms)) p["ep_sms"] = r.count(sms);
  } else if (dispatcher != "alltoall") {
    r.refuse("moe_token_dispatcher_type", fmt::format("is \"{}\": moesim models the alltoall and flex dispatchers", dispatcher),
             "use alltoall, or flex with a DeepEP or HybridEP backend");
  }

  Json& s = out.software;
  const std::string graphs = r.text("cuda_graph_impl");
  if (graphs == "full_iteration") {
    s["cuda_graphs"] = {name_string(software::kGraphScopeNames, software::GraphScope::FullIteration)};
    // The recipe's paged stash sizes each rank's expert buffers 1.5x the balanced share
    // (moe_expert_rank_capacity_factor) without a device-to-host read: non-blocking HybridEP
    // with that capacity (balanced routing needs K / (EP x min(K, local experts))).
    if (p.value("ep_backend", std::string()) != name_of(parallel::kEpBackendNames, parallel::EpBackendKind::HybridEp))
      r.refuse("cuda_graph_impl", "is full_iteration around a dispatch that reads its sizes back to the host",
               "use the flex dispatcher with the HybridEP backend (its paged stash) or per-module graphs");
    const long long ep = p.value("ep", 1LL), local = std::max(1LL, experts / ep);
    p["ep_non_blocking"] = true;
    p["ep_capacity_factor"] = std::min(1.0, 1.5 * static_cast<double>(top_k) / static_cast<double>(ep * std::min(top_k, local)));
    out.approximated.push_back(r.name("cuda_graph_impl") + " full_iteration: the paged stash as non-blocking HybridEP at 1.5x the balanced capacity");
  } else if (graphs == "transformer_engine" || graphs == "local") {
    // The per-module scopes moesim knows (full_iteration is cuda_graph_impl's, above).
    Json scopes = Json::array();
    for (const Json& x : r.list("cuda_graph_scope")) {
      const auto scope = x.is_string() ? value_of(software::kGraphScopeNames, x.get<std::string>()) : std::nullopt;
      if (scope && *scope != software::GraphScope::FullIteration) scopes.push_back(x);
    }
    s["cuda_graphs"] = scopes;
  }
  if (r.on("use_transformer_engine_op_fuser"))
    s["grouped_gemm"] = name_string(compute::kGroupedGemmNames, compute::GroupedGemmKernels::One);
  if (r.on("overlap_moe_expert_parallel_comm")) {
    s["ep_overlap"] = true;
    if (r.on("delay_wgrad_compute")) s["delay_wgrad"] = true;
  }
  if (r.on("moe_shared_expert_overlap")) s["shared_expert_overlap"] = true;
  if (r.off("cross_entropy_loss_fusion"))  // vocab_parallel_cross_entropy, unfused, in fp32
    s["cross_entropy"] = name_string(compute::kCrossEntropyNames, compute::CrossEntropyKernels::Megatron);
  if (r.on("cross_entropy_loss_fusion") && r.text("cross_entropy_fusion_impl") == "native")
    out.approximated.push_back(r.name("cross_entropy_fusion_impl") + " native: Megatron-Core's fused loss costed as Transformer Engine's");
  if (r.off("moe_router_fusion")) {
    s["router_kernels"] = 72;  // Megatron-LM's DeepSeek-V3 GB200 guide L85: 72 unfused router kernels
    s["router_fusion"] = false;  // torch.topk instead of Transformer Engine's fused top-k
  }
  if (r.off("moe_permute_fusion")) s["permute"] = name_string(compute::kPermuteNames, compute::PermuteKernels::Megatron);
  if (r.off("bias_activation_fusion")) s["activation_fusion"] = false;
  if (r.off("apply_rope_fusion")) {
    s["rope_fusion"] = false;
    out.approximated.push_back(r.name("apply_rope_fusion") + " false: Megatron-Core's unfused rotary costed as torchtitan's eager one");
  }
  if (r.on("moe_router_force_load_balancing"))
    out.routing["sampling"] = name_string(workload::kRoutingSamplingNames, workload::RoutingSampling::Expected);

  Json& t = out.training;
  if (r.given("seq_length")) t["sequence_length"] = r.count("seq_length");
  if (r.given("micro_batch_size")) t["micro_batch_size"] = r.count("micro_batch_size");
  if (r.given("global_batch_size")) t["global_batch_size"] = r.count("global_batch_size");
  if (r.given("fp4") || r.given("fp4_format"))
    r.refuse(r.given("fp4") ? "fp4" : "fp4_format", "asks for FP4 training (NVFP4), which moesim does not model",
             "import the BF16, FP8 or MXFP8 recipe of this model");
  if (r.given("fp8") || r.given("fp8_format")) {
    const std::string recipe = r.text("fp8_recipe");
    t["dtype"] = name_string(cluster::kDtypeNames, recipe == "mxfp8" ? cluster::Dtype::mxfp8 : cluster::Dtype::fp8);
    const std::string current = name_string(workload::kFp8ScalingNames, workload::Fp8Scaling::Current);
    if (recipe == "tensorwise") t["fp8_scaling"] = current;  // per-tensor current scaling (FP8-CS)
    if (recipe == "blockwise") {
      t["fp8_scaling"] = current;
      out.approximated.push_back(r.name("fp8_recipe") + " blockwise: DeepSeek's 1x128/128x128 block scales costed as per-tensor current scaling");
    }
  } else {
    t["dtype"] = name_string(cluster::kDtypeNames, r.on("fp16")   ? cluster::Dtype::fp16
                                                   : r.on("bf16") ? cluster::Dtype::bf16
                                                                  : cluster::Dtype::fp32);
  }
  if (r.given("recompute_granularity")) {
    const std::string g = r.text("recompute_granularity");
    using workload::Recompute;
    if (g != "full" && g != "selective") r.refuse("recompute_granularity", fmt::format("is \"{}\"", g), "use full or selective");
    const Recompute recompute = g == "full" ? Recompute::Full : Recompute::Selective;
    t["recompute"] = name_string(workload::kRecomputeNames, recompute);
    if (recompute == Recompute::Selective) {
      Json modules = Json::array();
      // Megatron-Core's default, core_attn, is moesim's name for it too.
      const Json core_attn(name_string(workload::kRecomputeModuleNames, workload::RecomputeModule::CoreAttn));
      for (const Json& m : r.given("recompute_modules") ? r.list("recompute_modules") : std::vector<Json>{core_attn})
        if (m != "moe") modules.push_back(m);  // the whole MoE layer: not modelled (docs/scenario.md)
        else out.approximated.push_back(r.name("recompute_modules") + " moe: the whole MoE layer's recomputation is not modelled (left out)");
      t["recompute_modules"] = modules;
    }
  }
  if (r.on("fine_grained_activation_offloading") && r.given("offload_modules")) {
    Json modules = Json::array();
    for (const Json& m : r.list("offload_modules")) modules.push_back(m);
    t["offload_modules"] = modules;
  }
  if (r.on("use_precision_aware_optimizer")) {
    // Megatron-Core's precision-aware optimizer: the optimizer states' dtypes; FP32 ones are moesim's default.
    Json states = Json::object();
    for (const auto& [field, key] : {std::pair{"main_params_dtype", "main_params"}, std::pair{"exp_avg_dtype", "exp_avg"},
                                     std::pair{"exp_avg_sq_dtype", "exp_avg_sq"}}) {
      const auto d = torch_dtype(r.text(field));
      if (d && *d != cluster::Dtype::fp32) states[key] = name_string(cluster::kDtypeNames, *d);
    }
    if (torch_dtype(r.text("main_grads_dtype")) == cluster::Dtype::bf16)
      states["main_grads"] = name_string(cluster::kDtypeNames, cluster::Dtype::bf16);
    if (!states.empty()) t["optimizer_states"] = states;
  }
  out.not_imported = r.unread();
  return out;
}

// "--num-layers" → "num_layers".
std::string flag_key(const std::string& flag) {
  std::string k = flag.substr(2);
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

// A YAML node as JSON: scalars typed as YAML 1.2's core schema reads them (true/false, null, integers, floats).
Json to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      for (const auto& x : n) a.push_back(to_json(x));
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = n.Scalar();
      if (n.Tag() == "!") return s;  // quoted: a string
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      if (s == "null" || s == "~" || s.empty()) return nullptr;
      try {
        std::size_t used = 0;
        const long long i = std::stoll(s, &used);
        if (used == s.size()) return i;
        const double d = std::stod(s, &used);
        if (used == s.size()) return d;
      } catch (const std::logic_error&) {
      }
      return s;
    }
    default:
      return nullptr;
  }
}

}  // namespace

MegatronImport from_megatron_args(const std::vector<std::string>& args, const std::string& source, const MegatronImportOptions& options) {
  Fields f;
  f.command_line = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].starts_with("--"))
      throw InputError(source, args[i], "is not a flag (Megatron's arguments are --name value)",
                       "give the training command's arguments, e.g. --num-layers 48 --hidden-size 2048");
    const std::string flag = args[i], key = flag_key(flag);
    std::string value;
    // A value may itself be a list of words (--recompute-modules core_attn moe_act).
    while (i + 1 < args.size() && !args[i + 1].starts_with("--")) value += (value.empty() ? "" : " ") + args[++i];
    f.values[key] = value.empty() ? Json(true) : Json(value);
    f.names[key] = flag;
  }
  return from_fields(f, source, options);
}

MegatronImport from_megatron_bridge_config(const std::string& text, const std::string& source, const MegatronImportOptions& options) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(source, fmt::format("line {}", e.mark.line + 1), fmt::format("is not YAML: {}", e.msg),
                     "give a Megatron-Bridge ConfigContainer as YAML (ConfigContainer.to_yaml)");
  }
  if (!root.IsMap() || !root["model"] || !root["model"].IsMap())
    throw InputError(source, "model", "is missing: not a Megatron-Bridge ConfigContainer",
                     "give the YAML a recipe's ConfigContainer writes (its sections model, train, dataset, ...)");
  // Bridge's names for what Megatron-LM's arguments call otherwise.
  static const std::map<std::string, std::string> megatron_lm{
      {"num_moe_experts", "num_experts"},
      {"num_layers_in_first_pipeline_stage", "decoder_first_pipeline_num_layers"},
      {"num_layers_in_last_pipeline_stage", "decoder_last_pipeline_num_layers"},
      {"sequence_length", "seq_length"}};
  Fields f;
  // Sections in order of precedence: a field the model names wins over the same name elsewhere
  // (the model's seq_length over the dataset's, mixed_precision's fp8 over the model's copy).
  for (const char* section : {"mixed_precision", "model", "train", "ddp", "optimizer", "dataset"}) {
    const YAML::Node node = root[section];
    if (!node || !node.IsMap()) continue;
    for (const auto& kv : node) {
      const std::string field = kv.first.as<std::string>();
      if (field == "_target_") continue;
      const auto renamed = megatron_lm.find(field);
      const std::string key = renamed == megatron_lm.end() ? field : renamed->second;
      if (f.values.count(key)) continue;
      f.values[key] = to_json(kv.second);
      f.names[key] = fmt::format("{}.{}", section, field);
    }
  }
  return from_fields(f, source, options);
}

}  // namespace moesim::scenario
