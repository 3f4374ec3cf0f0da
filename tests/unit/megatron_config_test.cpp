// `moesim import megatron`: a Megatron-LM command line or a Megatron-Bridge ConfigContainer as a
// scenario's sections (sim/scenario/megatron_config.hpp). The flags are those of
// megatron/training/arguments.py; the models' values those of models/ (each citing its released
// configuration); the ConfigContainers real performance recipes of Megatron-Bridge
// (tests/data/megatron_bridge, SOURCES.md).
#include <gtest/gtest.h>

#include <sstream>

#include "sim/core/error.hpp"
#include "sim/scenario/megatron_config.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

std::vector<std::string> words(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string w; s >> w;) out.push_back(w);
  return out;
}

scenario::MegatronImport import(const std::string& line) { return scenario::from_megatron_args(words(line), "cmd"); }

std::string refused_at(const std::string& line) {
  try {
    import(line);
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cmd");
    return e.path();
  }
  ADD_FAILURE() << "accepted: " << line;
  return {};
}

scenario::MegatronImport bridge(const std::string& name, const scenario::MegatronImportOptions& options = {}) {
  return scenario::from_megatron_bridge_config(test::repository_file("tests/data/megatron_bridge/" + name), name, options);
}

std::string bridge_refused_at(const std::string& text) {
  try {
    scenario::from_megatron_bridge_config(text, "cfg.yaml");
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cfg.yaml");
    return e.path();
  }
  ADD_FAILURE() << "accepted: " << text;
  return {};
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

}  // namespace

TEST(MegatronArgs, Qwen3MoeCommandLineGivesItsModelLayoutAndTraining) {
  const auto i = import(
      "--num-layers 48 --hidden-size 2048 --ffn-hidden-size 6144 --moe-ffn-hidden-size 768 --num-attention-heads 32 "
      "--group-query-attention --num-query-groups 4 --kv-channels 128 --num-experts 128 --moe-router-topk 8 --swiglu "
      "--disable-bias-linear --qk-layernorm --position-embedding-type rope --vocab-size 151936 --seq-length 4096 "
      "--micro-batch-size 2 --global-batch-size 1024 --bf16 --tensor-model-parallel-size 2 --sequence-parallel "
      "--pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 3 --expert-model-parallel-size 8 "
      "--use-distributed-optimizer --recompute-granularity selective --recompute-modules core_attn moe_act moe "
      "--moe-grouped-gemm --log-interval 1");
  // models/qwen3-30b-a3b.json's shape (head_dim: 32 heads of 128 are not the hidden 2048).
  EXPECT_EQ(i.model, schema::Json::parse(R"({"layers": 48, "hidden": 2048, "ffn_hidden": 768, "dense_ffn_hidden": 6144,
      "experts": 128, "top_k": 8, "expert_kind": "swiglu", "heads": 32, "kv_heads": 4, "head_dim": 128, "vocab": 151936,
      "linear_bias": false, "rotary": true, "qk_norm": true})"));
  // 48 layers over PP 4 in stages of 3: 4 virtual stages per rank.
  EXPECT_EQ(i.parallel, schema::Json::parse(R"({"tp": 2, "pp": 4, "ep": 8, "vp": 4, "sequence_parallel": true,
                                                "sharding": "distributed_optimizer"})"));
  // The whole MoE layer's recomputation is not modelled: left out of the modules.
  EXPECT_EQ(i.training, schema::Json::parse(R"({"sequence_length": 4096, "micro_batch_size": 2, "global_batch_size": 1024,
      "dtype": "bf16", "recompute": "selective", "recompute_modules": ["core_attn", "moe_act"]})"));
  EXPECT_EQ(i.not_imported, (std::vector<std::string>{"--log-interval", "--moe-grouped-gemm"}));
}

TEST(MegatronArgs, DeepSeekV3CommandLineGivesMlaDenseLayersAndTheSharedExpert) {
  const auto i = import(
      "--num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --moe-ffn-hidden-size 2048 --num-attention-heads 128 "
      "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 "
      "--v-head-dim 128 --num-experts 256 --moe-router-topk 8 --moe-shared-expert-intermediate-size 2048 "
      "--moe-layer-freq ([0]*3+[1]*58) --mtp-num-layers 1 --swiglu --disable-bias-linear --vocab-size 129280 "
      "--fp8-format e4m3 --fp8-recipe mxfp8 --pipeline-model-parallel-size 8 --decoder-first-pipeline-num-layers 4 "
      "--decoder-last-pipeline-num-layers 1 --context-parallel-size 2 --expert-tensor-parallel-size 1");
  EXPECT_EQ(i.parallel, schema::Json::parse(R"({"pp": 8, "cp": 2, "etp": 1, "first_stage_layers": 4, "last_stage_layers": 1})"));
  EXPECT_EQ(i.model.at("dense_layers"), 3);
  EXPECT_EQ(i.model.at("shared_experts"), 1);
  EXPECT_EQ(i.model.at("mtp_layers"), 1);
  EXPECT_EQ(i.model.at("mla"), schema::Json::parse(R"({"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128,
                                                     "qk_rope_head_dim": 64, "v_head_dim": 128})"));
  EXPECT_FALSE(i.model.contains("kv_heads"));
  EXPECT_EQ(i.training.at("dtype"), "mxfp8");
}

TEST(MegatronArgs, WhatMoesimCannotExpressIsRefusedNamingTheFlag) {
  const std::string shape = "--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --num-experts 64 ";
  EXPECT_EQ(refused_at(shape + "--moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 3000"),
            "--moe-shared-expert-intermediate-size");  // no multiple of 1408
  EXPECT_EQ(import(shape + "--moe-ffn-hidden-size 1408 --moe-shared-expert-intermediate-size 5632").model.at("shared_experts"),
            4);  // Qwen1.5-MoE-A2.7B's 5632 = 4 x 1408
  EXPECT_EQ(refused_at(shape + "--moe-layer-freq ([1,0]*12)"), "--moe-layer-freq");
  EXPECT_EQ(refused_at(shape + "--moe-layer-freq ([0]*3+[1]*20)"), "--moe-layer-freq");  // 23 layers, not 24
  EXPECT_EQ(refused_at(shape + "--micro-batch-size two"), "--micro-batch-size");
  EXPECT_EQ(refused_at("num-layers 24"), "num-layers");
  EXPECT_EQ(refused_at("--hidden-size 2048 --num-attention-heads 16 --num-experts 64"), "--num-layers");
}

// GPT-OSS-120B's GB200 recipe: models/gpt-oss-120b.json's shape (the 128-token window on every
// other layer, from window_size [127, 0] and window_attn_skip_freq 2), the archive's layout of it
// (EP 64, MBS 4, GBS 1280), its selective recomputation, forced balance as expected routing; its
// alltoall dispatcher and no CUDA graphs leave the software section empty. Its dump says BF16.
TEST(MegatronBridgeConfig, GptOssGb200RecipeGivesItsModelLayoutAndTraining) {
  const auto i = bridge("gpt_oss_120b_pretrain_gb200_fp8_mx_v2.yaml");
  EXPECT_EQ(i.model, schema::Json::parse(R"({"layers": 36, "hidden": 2880, "ffn_hidden": 2880, "experts": 128, "top_k": 4,
      "expert_kind": "clamped_quick_geglu", "heads": 64, "kv_heads": 8, "head_dim": 64, "vocab": 201088, "linear_bias": true,
      "rotary": true, "qk_norm": false, "sliding_window": {"tokens": 128, "every": 2}})"));
  EXPECT_EQ(i.parallel, schema::Json::parse(R"({"tp": 1, "pp": 1, "cp": 1, "ep": 64, "etp": 1, "sharding": "distributed_optimizer"})"));
  EXPECT_EQ(i.training, schema::Json::parse(R"({"sequence_length": 4096, "micro_batch_size": 4, "global_batch_size": 1280,
      "dtype": "bf16", "recompute": "selective", "recompute_modules": ["layernorm", "moe_act"]})"));
  EXPECT_EQ(i.software, schema::Json::object());
  EXPECT_EQ(i.routing, schema::Json::parse(R"({"sampling": "expected"})"));
  EXPECT_TRUE(mentions(i.approximated, "model.softmax_type"));      // the attention sinks
  // The clamped quick-GELU GLU is its expert_kind, neither approximated nor left out.
  EXPECT_FALSE(mentions(i.approximated, "model.activation_func"));
  EXPECT_FALSE(mentions(i.not_imported, "model.activation_func"));
  EXPECT_TRUE(mentions(i.not_imported, "optimizer.adam_beta1"));    // named by section and field
  EXPECT_FALSE(mentions(i.not_imported, "model.num_layers"));
}

// Its GB300 sibling captures the attention, router and preprocessing in CUDA graphs
// (cuda_graph_impl transformer_engine) and recomputes nothing (recompute_granularity null).
TEST(MegatronBridgeConfig, GptOssGb300RecipeCapturesModulesInCudaGraphs) {
  const auto i = bridge("gpt_oss_120b_pretrain_gb300_fp8_mx_v2.yaml");
  EXPECT_EQ(i.software, schema::Json::parse(R"({"cuda_graphs": ["attn", "moe_router", "moe_preprocess"]})"));
  EXPECT_FALSE(i.training.contains("recompute"));
}

// The published layouts of realdata 24 (Megatron-Bridge's performance archive), field by field:
// GPT-OSS-120B on 64 H100, BF16, TP 1 PP 4 EP 8, MBS 1, GBS 1280, sequence 4096 (lines 238, 338,
// 435, 520: 26.04.01 to 26.02), and on 64 B300 in 26.02, EP 64, MBS 4 (line 518), whose recipe
// also captures the attention, router and preprocessing in CUDA graphs.
TEST(MegatronBridgeConfig, GptOssH100AndB300RecipesAreTheArchivesLayouts) {
  const auto h100 = bridge("gpt_oss_120b_pretrain_h100_fp8_mx_v2.yaml");
  EXPECT_EQ(h100.parallel, schema::Json::parse(R"({"tp": 1, "pp": 4, "cp": 1, "ep": 8, "etp": 1, "sharding": "distributed_optimizer"})"));
  EXPECT_EQ(h100.training.at("micro_batch_size"), 1);
  EXPECT_EQ(h100.training.at("global_batch_size"), 1280);
  EXPECT_EQ(h100.training.at("sequence_length"), 4096);
  EXPECT_EQ(h100.training.at("dtype"), "bf16");
  const auto b300 = bridge("gpt_oss_120b_pretrain_b300_fp8_mx_v2.yaml");
  EXPECT_EQ(b300.parallel, schema::Json::parse(R"({"tp": 1, "pp": 1, "cp": 1, "ep": 64, "etp": 1, "sharding": "distributed_optimizer"})"));
  EXPECT_EQ(b300.training.at("micro_batch_size"), 4);
  EXPECT_EQ(b300.training.at("global_batch_size"), 1280);
  EXPECT_EQ(b300.software, schema::Json::parse(R"({"cuda_graphs": ["attn", "moe_router", "moe_preprocess"]})"));
}

// DeepSeek-V3's H100 recipe: MLA, 3 leading dense layers (moe_layer_freq's list of 61), the shared
// expert, MTP; the pipeline layout "Et|(tt|)*30mL" is 32 virtual stages over PP 8 (VP 4): the
// embedding's stage holds 1 decoder layer, 30 stages 2, the last stage the MTP layer and the loss
// (0 decoder layers); HybridEP with 32 SMs; blockwise FP8 approximated as current scaling; the
// precision-aware optimizer's BF16 moments and main gradients.
TEST(MegatronBridgeConfig, DeepSeekV3H100RecipeGivesItsPipelineLayoutAndDispatcher) {
  const auto i = bridge("deepseek_v3_pretrain_h100_fp8_sc_v1.yaml");
  EXPECT_EQ(i.model.at("dense_layers"), 3);
  EXPECT_EQ(i.model.at("shared_experts"), 1);
  EXPECT_EQ(i.model.at("mtp_layers"), 1);
  EXPECT_EQ(i.model.at("dense_ffn_hidden"), 18432);
  EXPECT_TRUE(i.model.contains("mla"));
  EXPECT_EQ(i.parallel, schema::Json::parse(R"({"tp": 2, "pp": 8, "cp": 1, "ep": 64, "etp": 1, "vp": 4, "first_stage_layers": 1,
      "last_stage_layers": 0, "sequence_parallel": true, "sharding": "distributed_optimizer", "ep_backend": "hybridep", "ep_sms": 32})"));
  EXPECT_EQ(i.training.at("dtype"), "fp8");
  EXPECT_EQ(i.training.at("fp8_scaling"), "current");
  EXPECT_TRUE(mentions(i.approximated, "mixed_precision.fp8_recipe blockwise"));
  EXPECT_EQ(i.training.at("recompute_modules"), schema::Json::parse(R"(["mla_up_proj", "mlp"])"));
  EXPECT_EQ(i.training.at("optimizer_states"), schema::Json::parse(R"({"exp_avg": "bf16", "exp_avg_sq": "bf16", "main_grads": "bf16"})"));
}

// The list form of a pipeline layout: 16 stages of the VR200 recipe, 4 decoder layers in the
// embedding's stage, 1 beside the MTP layer and the loss; MXFP8 from mixed_precision (e4m3, mxfp8).
TEST(MegatronBridgeConfig, DeepSeekV3ListLayoutAndMxfp8) {
  const auto i = bridge("deepseek_v3_pretrain_vr200_fp8_mx_v2.yaml");
  EXPECT_EQ(i.parallel.at("vp"), 4);
  EXPECT_EQ(i.parallel.at("first_stage_layers"), 4);
  EXPECT_EQ(i.parallel.at("last_stage_layers"), 1);
  EXPECT_EQ(i.training.at("dtype"), "mxfp8");
}

// With a model preset the model is the preset's; a shape that disagrees with it is refused.
TEST(MegatronBridgeConfig, AModelPresetMustAgreeWithTheShape) {
  scenario::MegatronImportOptions o;
  o.preset = schema::Json::parse(R"({"layers": 36, "hidden": 2880, "experts": 128, "top_k": 4, "heads": 64})");
  o.preset_name = "gpt-oss-120b";
  EXPECT_EQ(bridge("gpt_oss_120b_pretrain_gb200_fp8_mx_v2.yaml", o).model, schema::Json::parse(R"({"preset": "gpt-oss-120b"})"));
  o.preset->at("layers") = 24;
  try {
    bridge("gpt_oss_120b_pretrain_gb200_fp8_mx_v2.yaml", o);
    ADD_FAILURE() << "a 36-layer configuration accepted as a 24-layer preset";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "model.num_layers");
  }
}

// What moesim cannot express is refused naming the field: FP4 training (the real NVFP4 recipe),
// the allgather dispatcher, a window on every fourth layer, an unknown flex backend, a whole-
// iteration graph around a dispatch that reads its sizes back, an uneven pipeline layout, not YAML.
TEST(MegatronBridgeConfig, WhatMoesimCannotExpressIsRefusedNamingTheField) {
  try {
    bridge("qwen3_235b_a22b_pretrain_gb200_nvfp4_v2.yaml");
    ADD_FAILURE() << "NVFP4 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "mixed_precision.fp4");
  }
  const std::string shape = "model: {num_layers: 8, hidden_size: 1024, num_attention_heads: 8, num_moe_experts: 8, ";
  EXPECT_EQ(bridge_refused_at(shape + "moe_token_dispatcher_type: allgather}"), "model.moe_token_dispatcher_type");
  EXPECT_EQ(bridge_refused_at(shape + "window_size: [127, 0], window_attn_skip_freq: 4}"), "model.window_attn_skip_freq");
  EXPECT_EQ(bridge_refused_at(shape + "moe_token_dispatcher_type: flex, moe_flex_dispatcher_backend: nixl}"),
            "model.moe_flex_dispatcher_backend");
  EXPECT_EQ(bridge_refused_at(shape + "cuda_graph_impl: full_iteration}"), "model.cuda_graph_impl");
  EXPECT_EQ(bridge_refused_at(shape + "pipeline_model_parallel_size: 2, pipeline_model_parallel_layout: 'Et|tttt|tt|tL'}"),
            "model.pipeline_model_parallel_layout");
  EXPECT_EQ(bridge_refused_at(shape + "num_layers: [1}"), "line 1");
  EXPECT_EQ(bridge_refused_at("train: {micro_batch_size: 1}"), "model");
}
