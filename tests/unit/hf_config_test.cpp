// `moesim import hf`: Hugging Face config.json files of MoE models as moesim model objects
// (sim/scenario/hf_config.hpp). The configs below are the released ones (their architecture fields,
// copied from each model repository's config.json); the import must give the curated presets of
// models/, which cite those same configs, and refuse what moesim cannot express, naming the field.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.hpp"
#include "sim/scenario/hf_config.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// Every key of the curated preset but its name and source is in the import with the same value,
// and the import holds nothing else, except dense_ffn_hidden equal to ffn_hidden (its default).
void expect_preset(const schema::Json& imported, const char* preset) {
  const auto curated = schema::Json::parse(test::repository_file(std::string("models/") + preset + ".json"));
  for (const auto& [key, value] : curated.items()) {
    if (key == "name" || key == "source") continue;
    if (key == "dense_ffn_hidden" && !imported.contains(key) && value == curated.at("ffn_hidden")) continue;
    ASSERT_TRUE(imported.contains(key)) << preset << ": " << key << " not imported\n" << imported.dump(1);
    EXPECT_EQ(imported.at(key), value) << preset << ": " << key;
  }
  for (const auto& [key, value] : imported.items()) {
    if (key == "name" || key == "source" || curated.contains(key)) continue;
    EXPECT_EQ(value, schema::Json(0)) << preset << ": " << key << " imported, not in the preset";  // dense_layers 0
  }
}

schema::Json import(const char* config) {
  return scenario::model_from_hf_config(schema::Json::parse(config), "config.json", "m");
}

}  // namespace

TEST(HfConfig, TheReleasedConfigsGiveTheCuratedPresets) {
  // Qwen/Qwen3-30B-A3B.
  expect_preset(import(R"({"architectures": ["Qwen3MoeForCausalLM"], "decoder_sparse_step": 1, "head_dim": 128,
      "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 6144, "mlp_only_layers": [], "model_type": "qwen3_moe",
      "moe_intermediate_size": 768, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
      "num_hidden_layers": 48, "num_key_value_heads": 4, "rope_theta": 1000000.0, "sliding_window": null,
      "use_sliding_window": false, "vocab_size": 151936})"),
                "qwen3-30b-a3b");
  // mistralai/Mixtral-8x7B-v0.1.
  expect_preset(import(R"({"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
      "intermediate_size": 14336, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
      "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rope_theta": 1000000.0,
      "sliding_window": null, "vocab_size": 32000})"),
                "mixtral-8x7b");
  // deepseek-ai/DeepSeek-V3 (its multi-token prediction module, num_nextn_predict_layers, is a
  // scenario's mtp_layers, not part of the preset).
  expect_preset(import(R"({"architectures": ["DeepseekV3ForCausalLM"], "first_k_dense_replace": 3, "hidden_act": "silu",
      "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512, "model_type": "deepseek_v3",
      "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_routed_experts": 256, "n_shared_experts": 1,
      "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
      "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
      "rope_scaling": {"type": "yarn", "factor": 40}, "rope_theta": 10000, "v_head_dim": 128, "vocab_size": 129280})"),
                "deepseek-v3");
  // openai/gpt-oss-120b: layer_types alternate, the first windowed.
  expect_preset(import(R"({"architectures": ["GptOssForCausalLM"], "attention_bias": true, "experts_per_token": 4,
      "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "intermediate_size": 2880,
      "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
      "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4, "num_hidden_layers": 36,
      "num_key_value_heads": 8, "num_local_experts": 128, "rope_scaling": {"rope_type": "yarn"}, "rope_theta": 150000,
      "sliding_window": 128, "vocab_size": 201088})"),
                "gpt-oss-120b");
}

TEST(HfConfig, QwenMoesSharedExpertIsAsManyRoutedWidths) {
  // Qwen/Qwen1.5-MoE-A2.7B: one shared expert of 5632 beside 60 routed experts of 1408, top-4 (its
  // model card: "4 shared experts" worth): moesim's 4 shared experts of 1408.
  const auto m = import(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
      "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632, "num_experts": 60,
      "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
      "rope_theta": 1000000.0, "use_sliding_window": false, "sliding_window": 32768, "vocab_size": 151936})");
  EXPECT_EQ(m.at("shared_experts"), 4);
  EXPECT_EQ(m.at("ffn_hidden"), 1408);
  EXPECT_EQ(m.at("experts"), 60);
  EXPECT_FALSE(m.contains("sliding_window"));  // use_sliding_window false
  EXPECT_FALSE(m.contains("kv_heads"));        // as many as the heads
}

TEST(HfConfig, WhatMoesimCannotExpressIsRefusedNamingTheField) {
  const auto refused_at = [](const char* config) {
    try {
      import(config);
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "config.json");
      return e.path();
    }
    ADD_FAILURE() << "accepted: " << config;
    return std::string();
  };
  // A shared expert whose width is no multiple of the routed experts' (a made-up 3000 beside 1408).
  EXPECT_EQ(refused_at(R"({"model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
      "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 3000, "num_experts": 60,
      "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_attention_heads": 16})"),
            "$.shared_expert_intermediate_size");
  // Dense layers between MoE layers.
  EXPECT_EQ(refused_at(R"({"model_type": "qwen3_moe", "hidden_size": 2048, "moe_intermediate_size": 768,
      "decoder_sparse_step": 2, "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 48,
      "num_attention_heads": 32})"),
            "$.decoder_sparse_step");
  // A dense model has no experts.
  EXPECT_EQ(refused_at(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
      "num_hidden_layers": 32, "num_attention_heads": 32})"),
            "$.num_local_experts");
}
