// A Hugging Face config.json as a moesim model object: see hf_config.hpp. Field names are those of
// transformers' configuration classes (models/{mixtral,qwen2_moe,qwen3_moe,deepseek_v2,deepseek_v3,
// gpt_oss,olmoe}/configuration_*.py).
#include "sim/scenario/hf_config.hpp"

#include <fmt/format.h>

#include "sim/core/enum_names.hpp"
#include "sim/core/error.hpp"
#include "sim/scenario/scenario_schema.hpp"
#include "sim/workload/model_shape.hpp"

namespace moesim::scenario {

namespace {

using schema::Json;

// The first of `keys` the config holds as a positive integer, or 0.
long long first_int(const Json& config, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (config.contains(k) && config.at(k).is_number_integer() && config.at(k).get<long long>() > 0)
      return config.at(k).get<long long>();
  return 0;
}

}  // namespace

Json model_from_hf_config(const Json& config, const std::string& file, const std::string& name) {
  if (!config.is_object())
    throw InputError(file, "$", "is not a JSON object", "give a Hugging Face config.json (the model repository's)");
  const std::string type = config.value("model_type", std::string());
  const auto need = [&](std::initializer_list<const char*> keys, const char* what) {
    const long long v = first_int(config, keys);
    if (v <= 0)
      throw InputError(file, fmt::format("$.{}", *keys.begin()), fmt::format("is missing: the config names no {}", what),
                       "give the config.json of an MoE model (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3, GPT-OSS, OLMoE)");
    return v;
  };
  Json m = Json::object();
  const std::string path = config.value("_name_or_path", std::string());
  std::string display = name;
  if (display.empty()) display = path;
  if (display.empty() && config.contains("architectures") && config.at("architectures").is_array() &&
      !config.at("architectures").empty() && config.at("architectures")[0].is_string())
    display = config.at("architectures")[0].get<std::string>();
  if (!display.empty()) m["name"] = display;
  m["source"] = fmt::format("imported from {} (Hugging Face config.json, model_type \"{}\") by `moesim import hf`", file,
                            type.empty() ? "?" : type);

  const long long layers = need({"num_hidden_layers", "n_layers"}, "layer count (num_hidden_layers)");
  const long long hidden = need({"hidden_size"}, "hidden size (hidden_size)");
  const long long experts =
      need({"num_local_experts", "num_experts", "n_routed_experts"}, "routed experts (num_local_experts, num_experts or n_routed_experts)");
  const long long top_k = need({"num_experts_per_tok", "experts_per_token", "moe_topk"}, "experts per token (num_experts_per_tok)");
  // The experts' width: moe_intermediate_size where the config has one (its intermediate_size is
  // then the dense layers'), else intermediate_size (Mixtral, GPT-OSS: every layer MoE).
  const long long moe_ffn = first_int(config, {"moe_intermediate_size"});
  const long long ffn = first_int(config, {"intermediate_size"});
  if (moe_ffn <= 0 && ffn <= 0)
    throw InputError(file, "$.intermediate_size", "is missing: the config names no expert width",
                     "give moe_intermediate_size or intermediate_size");

  // Dense layers: DeepSeek's first_k_dense_replace leading ones; Qwen-MoE's decoder_sparse_step and
  // mlp_only_layers may interleave dense and MoE layers, which moesim cannot express.
  long long dense = first_int(config, {"first_k_dense_replace"});
  if (config.contains("decoder_sparse_step") && config.at("decoder_sparse_step").is_number_integer() &&
      config.at("decoder_sparse_step").get<long long>() > 1)
    throw InputError(file, "$.decoder_sparse_step", "puts a dense layer between MoE layers, which moesim cannot express",
                     "use a config with decoder_sparse_step 1 (every layer MoE)");
  if (config.contains("moe_layer_freq") && config.at("moe_layer_freq").is_number_integer() &&
      config.at("moe_layer_freq").get<long long>() > 1)
    throw InputError(file, "$.moe_layer_freq", "puts dense layers between MoE layers, which moesim cannot express",
                     "use a config with moe_layer_freq 1");
  if (config.contains("mlp_only_layers") && config.at("mlp_only_layers").is_array() && !config.at("mlp_only_layers").empty()) {
    // Accepted only as leading layers 0..n-1 (moesim's dense_layers).
    const Json& only = config.at("mlp_only_layers");
    for (std::size_t i = 0; i < only.size(); ++i)
      if (!only[i].is_number_integer() || only[i].get<long long>() != static_cast<long long>(i))
        throw InputError(file, fmt::format("$.mlp_only_layers[{}]", i), "makes a dense layer that is not one of the first ones",
                         "moesim's dense layers lead the model (dense_layers); edit the imported model by hand");
    dense = static_cast<long long>(only.size());
  }

  // Shared experts: DeepSeek's n_shared_experts of the routed width; Qwen2-MoE's one shared expert of
  // shared_expert_intermediate_size as that many routed widths (Qwen1.5-MoE-A2.7B: 5632 = 4 x 1408;
  // its sigmoid gate on the shared output, one more small GeMM, is not costed). A width that is not
  // a multiple cannot be expressed (moesim's shared experts are as wide as the routed ones).
  const long long routed_width = moe_ffn > 0 ? moe_ffn : ffn;
  long long shared = first_int(config, {"n_shared_experts", "num_shared_experts"});
  if (const long long w = first_int(config, {"shared_expert_intermediate_size"}); w > 0) {
    if (w % routed_width)
      throw InputError(file, "$.shared_expert_intermediate_size",
                       fmt::format("is {}, not a multiple of the routed experts' {}: moesim's shared experts are as wide as "
                                   "the routed ones", w, routed_width),
                       "approximate it by hand: \"shared_experts\": round(shared width / routed width)");
    shared = w / routed_width;
  }

  // The gated activation: SiLU (SwiGLU experts) in every supported family but GPT-OSS, whose
  // clamped quick-GeGLU (swiglu_limit) is its own kind (models/gpt-oss-120b.json).
  const std::string act = config.value("hidden_act", std::string("silu"));
  if (act != "silu" && act != "swiglu" && type != "gpt_oss")
    throw InputError(file, "$.hidden_act", fmt::format("is \"{}\": moesim's gated experts are SwiGLU", act),
                     "edit the imported model's expert_kind by hand");

  m["layers"] = layers;
  m["dense_layers"] = dense;
  m["hidden"] = hidden;
  m["ffn_hidden"] = moe_ffn > 0 ? moe_ffn : ffn;
  if (moe_ffn > 0 && ffn > 0) m["dense_ffn_hidden"] = ffn;
  m["experts"] = experts;
  m["top_k"] = top_k;
  m["shared_experts"] = shared;
  m["expert_kind"] = name_string(workload::kExpertKindNames,
                                type == "gpt_oss" ? workload::ExpertKind::ClampedQuickGeGlu : workload::ExpertKind::SwiGlu);
  m["heads"] = need({"num_attention_heads"}, "attention heads (num_attention_heads)");
  // Multi-head latent attention (DeepSeek-V2/V3): its ranks and head widths; its kv_heads are its heads.
  if (first_int(config, {"kv_lora_rank"}) > 0) {
    Json mla = Json::object();
    mla["q_lora_rank"] = first_int(config, {"q_lora_rank"});  // null in DeepSeek-V2-Lite: queries from the hidden state
    mla["kv_lora_rank"] = first_int(config, {"kv_lora_rank"});
    mla["qk_nope_head_dim"] = need({"qk_nope_head_dim"}, "MLA query/key width (qk_nope_head_dim)");
    mla["qk_rope_head_dim"] = first_int(config, {"qk_rope_head_dim"});
    mla["v_head_dim"] = need({"v_head_dim"}, "MLA value width (v_head_dim)");
    m["mla"] = mla;
  } else {
    if (const long long kv = first_int(config, {"num_key_value_heads"}); kv > 0 && kv != m["heads"].get<long long>())
      m["kv_heads"] = kv;
    if (const long long d = first_int(config, {"head_dim"}); d > 0 && d * m["heads"].get<long long>() != hidden) m["head_dim"] = d;
  }
  if (const long long v = first_int(config, {"vocab_size"}); v > 0) m["vocab"] = v;
  // GPT-OSS's layer_types alternate sliding_attention (the first) and full_attention.
  if (config.contains("layer_types") && config.at("layer_types").is_array() && first_int(config, {"sliding_window"}) > 0) {
    const Json& types = config.at("layer_types");
    bool alternate = !types.empty();
    for (std::size_t i = 0; i < types.size(); ++i)
      alternate = alternate && types[i] == (i % 2 == 0 ? "sliding_attention" : "full_attention");
    bool all = !types.empty();
    for (const auto& t : types) all = all && t == "sliding_attention";
    if (!alternate && !all)
      throw InputError(file, "$.layer_types", "mixes sliding and full attention in a pattern moesim cannot express",
                       "moesim windows every layer, or every other one from layer 0; edit the imported model by hand");
    m["sliding_window"] = {{"tokens", first_int(config, {"sliding_window"})}, {"every", alternate ? 2 : 1}};
  } else if (first_int(config, {"sliding_window"}) > 0 && config.value("use_sliding_window", true)) {
    m["sliding_window"] = {{"tokens", first_int(config, {"sliding_window"})}, {"every", 1}};
  }
  if (config.value("attention_bias", false) && type == "gpt_oss") m["linear_bias"] = true;
  if (config.contains("rope_theta") || config.contains("rope_scaling") || config.contains("rope_parameters")) m["rotary"] = true;
  if (type == "qwen3_moe" || type == "olmoe") m["qk_norm"] = true;
  // What the model schema accepts, or the first thing it does not.
  schema::validate(model_schema(), m, file, "$(imported)");
  return m;
}

}  // namespace moesim::scenario
