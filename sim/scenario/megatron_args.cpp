// A Megatron-LM command line as scenario sections: see megatron_args.hpp. Flag names and meanings
// are megatron/training/arguments.py's (core_v0.17): --moe-layer-freq's list form, kv_channels as
// the head width, --num-query-groups under --group-query-attention, --disable-bias-linear (biases
// are on by default), --fp8-format with --fp8-recipe (mxfp8 on Blackwell).
#include "sim/scenario/megatron_args.hpp"

#include <fmt/format.h>
#include <map>
#include <set>
#include <regex>
#include <sstream>

#include "sim/core/error.hpp"

namespace moesim::scenario {

namespace {

using schema::Json;

// "--num-layers" → "num_layers".
std::string flag_key(const std::string& flag) {
  std::string k = flag.substr(2);
  for (char& c : k)
    if (c == '-') c = '_';
  return k;
}

long long positive(const std::map<std::string, std::string>& v, const std::string& key, const std::string& source) {
  const std::string& text = v.at(key);
  try {
    std::size_t used = 0;
    const long long n = std::stoll(text, &used);
    if (used == text.size() && n > 0) return n;
  } catch (const std::logic_error&) {
  }
  throw InputError(source, "--" + key, fmt::format("is \"{}\", not a positive whole number", text), "give a count, e.g. --" + key + " 8");
}

}  // namespace

MegatronImport from_megatron_args(const std::vector<std::string>& args, const std::string& source) {
  // Flags and their values ("" for a switch).
  std::map<std::string, std::string> v;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].starts_with("--"))
      throw InputError(source, args[i], "is not a flag (Megatron's arguments are --name value)",
                       "give the training command's arguments, e.g. --num-layers 48 --hidden-size 2048");
    const std::string key = flag_key(args[i]);
    std::string value;
    // A value may itself be a list of words (--recompute-modules core_attn moe_act).
    while (i + 1 < args.size() && !args[i + 1].starts_with("--")) value += (value.empty() ? "" : " ") + args[++i];
    v[key] = value;
  }
  MegatronImport out;
  // Every flag looked at counts as imported; those never looked at are reported.
  std::set<std::string> used;
  const auto has = [&](const char* k) {
    used.insert(k);
    return v.count(k) > 0;
  };
  const auto num = [&](const char* k) {
    used.insert(k);
    return positive(v, k, source);
  };
  for (const char* flag : {"--num-layers", "--hidden-size", "--num-attention-heads", "--num-experts"})
    if (!has(flag_key(flag).c_str()))
      throw InputError(source, flag, "is missing",
                       "give the model's shape flags: --num-layers, --hidden-size, --num-attention-heads, --num-experts");

  Json& m = out.model;
  m["layers"] = num("num_layers");
  m["hidden"] = num("hidden_size");
  const long long dense_ffn = has("ffn_hidden_size") ? num("ffn_hidden_size") : 4 * m["hidden"].get<long long>();
  const long long expert_ffn = has("moe_ffn_hidden_size") ? num("moe_ffn_hidden_size") : dense_ffn;
  m["ffn_hidden"] = expert_ffn;
  if (dense_ffn != expert_ffn) m["dense_ffn_hidden"] = dense_ffn;
  m["experts"] = num("num_experts");
  m["top_k"] = has("moe_router_topk") ? num("moe_router_topk") : 2;  // Megatron's default 2
  // --moe-layer-freq: an integer (1: every layer) or a Python list such as "([0]*3+[1]*58)".
  if (has("moe_layer_freq")) {
    const std::string f = v.at("moe_layer_freq");
    std::smatch match;
    if (f == "1") {
    } else if (std::regex_match(f, match, std::regex(R"(\(?\[0\]\*(\d+)\s*\+\s*\[1\]\*(\d+)\)?)"))) {
      m["dense_layers"] = std::stoll(match[1]);
      if (std::stoll(match[1]) + std::stoll(match[2]) != m["layers"].get<long long>())
        throw InputError(source, "--moe-layer-freq", fmt::format("is \"{}\", which does not count --num-layers {}", f, m["layers"].get<long long>()),
                         "make its dense and MoE layers add up to --num-layers");
    } else {
      throw InputError(source, "--moe-layer-freq", fmt::format("is \"{}\": moesim's dense layers lead the model", f),
                       "use 1 or ([0]*D+[1]*M) (D leading dense layers)");
    }
  }
  if (has("moe_shared_expert_intermediate_size")) {
    const long long w = num("moe_shared_expert_intermediate_size");
    if (w % expert_ffn)
      throw InputError(source, "--moe-shared-expert-intermediate-size",
                       fmt::format("is {}, not a multiple of the experts' {}: moesim's shared experts are as wide as the routed ones", w, expert_ffn),
                       "approximate it by hand: \"shared_experts\": round(width / --moe-ffn-hidden-size)");
    m["shared_experts"] = w / expert_ffn;
  }
  m["expert_kind"] = has("swiglu") ? "swiglu" : "mlp";
  m["heads"] = num("num_attention_heads");
  if (has("multi_latent_attention")) {
    Json mla = Json::object();
    mla["q_lora_rank"] = has("q_lora_rank") ? num("q_lora_rank") : 0;
    mla["kv_lora_rank"] = has("kv_lora_rank") ? num("kv_lora_rank") : 512;  // Megatron's defaults (MLATransformerConfig)
    mla["qk_nope_head_dim"] = has("qk_head_dim") ? num("qk_head_dim") : 128;
    mla["qk_rope_head_dim"] = has("qk_pos_emb_head_dim") ? num("qk_pos_emb_head_dim") : 64;
    mla["v_head_dim"] = has("v_head_dim") ? num("v_head_dim") : 128;
    m["mla"] = mla;
  } else {
    if (has("group_query_attention") && has("num_query_groups")) m["kv_heads"] = num("num_query_groups");
    if (has("kv_channels") && num("kv_channels") * m["heads"].get<long long>() != m["hidden"].get<long long>())
      m["head_dim"] = num("kv_channels");
  }
  if (has("vocab_size")) m["vocab"] = num("vocab_size");
  if (has("mtp_num_layers")) m["mtp_layers"] = num("mtp_num_layers");
  has("add_bias_linear");  // Megatron's default: biases are on unless --disable-bias-linear
  m["linear_bias"] = !has("disable_bias_linear");
  m["rotary"] = has("position_embedding_type") ? v.at("position_embedding_type") == "rope" || v.at("position_embedding_type") == "yarn" : true;
  m["qk_norm"] = has("qk_layernorm");

  Json& p = out.parallel;
  // The layout's sizes, each under the parallel key schema::moesim_name_of gives its flag.
  for (const char* flag : {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                           "expert_model_parallel_size", "expert_tensor_parallel_size", "virtual_pipeline_model_parallel_size",
                           "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers"}) {
    if (has(flag)) p[*schema::moesim_name_of(flag)] = num(flag);
  }
  if (has("num_layers_per_virtual_pipeline_stage")) {
    const long long per = num("num_layers_per_virtual_pipeline_stage"), pp = p.value("pp", 1LL);
    if (m["layers"].get<long long>() % (per * pp))
      throw InputError(source, "--num-layers-per-virtual-pipeline-stage", fmt::format("is {}: {} layers do not split into stages of it over PP {}", per,
                                                                                        m["layers"].get<long long>(), pp),
                       "give --virtual-pipeline-model-parallel-size instead");
    p["vp"] = m["layers"].get<long long>() / (per * pp);
  }
  if (p.value("tp", 1LL) > 1) p["sequence_parallel"] = has("sequence_parallel");
  if (has("use_distributed_optimizer")) p["sharding"] = "distributed_optimizer";

  Json& t = out.training;
  if (has("seq_length")) t["sequence_length"] = num("seq_length");
  if (has("micro_batch_size")) t["micro_batch_size"] = num("micro_batch_size");
  if (has("global_batch_size")) t["global_batch_size"] = num("global_batch_size");
  t["dtype"] = has("fp8_format") ? (has("fp8_recipe") && v.at("fp8_recipe") == "mxfp8" ? "mxfp8" : "fp8")
               : has("fp16")     ? "fp16"
               : has("bf16")     ? "bf16"
                                 : "fp32";
  if (has("recompute_granularity")) {
    const std::string g = v.at("recompute_granularity");
    if (g != "full" && g != "selective")
      throw InputError(source, "--recompute-granularity", fmt::format("is \"{}\"", g), "use full or selective");
    t["recompute"] = g;
    if (g == "selective" && has("recompute_modules")) {
      Json modules = Json::array();
      std::stringstream words(v.at("recompute_modules"));
      for (std::string w; words >> w;)
        if (w != "moe") modules.push_back(w);  // the whole MoE layer: not modelled (docs/scenario.md)
      t["recompute_modules"] = modules;
    }
  }

  for (const auto& [key, value] : v)
    if (!used.count(key)) {
      std::string flag = "--" + key;
      for (char& c : flag)
        if (c == '_') c = '-';
      out.not_imported.push_back(flag);
    }
  return out;
}

}  // namespace moesim::scenario
