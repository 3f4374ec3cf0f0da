// `moesim import megatron`: a Megatron-LM command line as a scenario's model, parallel and training
// sections (sim/scenario/megatron_args.hpp). The flags are those of megatron/training/arguments.py;
// the models' values those of models/ (each citing its released configuration).
#include <gtest/gtest.h>

#include <sstream>

#include "sim/core/error.hpp"
#include "sim/scenario/megatron_args.hpp"

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
  EXPECT_EQ(refused_at(shape + "--micro-batch-size two"), "--micro_batch_size");
  EXPECT_EQ(refused_at("num-layers 24"), "num-layers");
  EXPECT_EQ(refused_at("--hidden-size 2048 --num-attention-heads 16 --num-experts 64"), "--num-layers");
}
