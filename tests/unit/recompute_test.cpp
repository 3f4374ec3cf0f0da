// Activation recomputation (Korthikanti et al., "Reducing Activation Recomputation in Large
// Transformer Models", 2022): what each mode keeps in memory and what it adds to the backward.
#include <gtest/gtest.h>

#include "sim/core/error.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

schema::Json small(const std::string& recompute, const std::string& gpu = "h100-sxm5-80gb") {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["gpu"] = gpu;
  doc["training"]["recompute"] = recompute;
  doc["training"]["dtype"] = "fp16";  // 2 bytes, as Korthikanti's counts (V100 has no bf16)
  return doc;
}

double activations(const schema::Json& doc) {
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run();
  return sim.memory()[0].activations;
}

// The small EP scenario: 2 MoE layers, H 256, 4 heads, 128 tokens (s·b) per GPU, 4 experts of
// M 512 (2-GeMM MLP), top-1, one expert per GPU; expected routing brings each GPU 4 · 32 = 128
// token copies. Per layer, in bytes (16-bit):
//   attention and norms (11 + 4)·sbh = 15 · 128 · 256        = 491520
//   experts 128 copies · (3H + 4M) = 128 · 2816             = 360448
//   router logits 2 · 128 · 4                                 =   1024
//   layer                                                     = 852992
// and without FlashAttention the scores 5·a·s·(s·b) = 5 · 4 · 128 · 128 = 327680 more.
constexpr double kLayer = 852992, kScores = 327680, kInput = 2 * 128 * 256;

TEST(Recompute, MemoryKeptByEachMode) {
  // FlashAttention (H100) never keeps the scores: none and selective keep both layers whole.
  EXPECT_DOUBLE_EQ(activations(small("none")), 2 * kLayer);
  EXPECT_DOUBLE_EQ(activations(small("selective")), 2 * kLayer);
  // Full: each layer's input 2·sbh, and one layer whole while it is recomputed.
  EXPECT_DOUBLE_EQ(activations(small("full")), 2 * kInput + kLayer);
  // Without FlashAttention (V100) the scores are kept unless selective recomputation drops them.
  EXPECT_DOUBLE_EQ(activations(small("none", "v100-sxm2-32gb")), 2 * (kLayer + kScores));
  EXPECT_DOUBLE_EQ(activations(small("selective", "v100-sxm2-32gb")), 2 * kLayer);
}

TEST(Recompute, AttentionActivationsFollowTheProjectionWidths) {
  // Korthikanti's 11·sbh is, per token, the QKV input 2h, Q, K, V and the output projection's
  // input at 2 B per column, its dropout mask h: 3·256 + 2·(256 + 256 + 256 + 256) = 2816 = 11h.
  //   GQA with 1 K/V head of 64: 768 + 2·(256 + 64 + 64 + 256) = 2048, 768 less per token;
  //   MLA (4 heads, q_lora 64, kv_lora 32, nope 32 + rope 16, v 32): Q and K 4·48 = 192 wide, V
  //   and the output 4·32 = 128: 768 + 2·640 = 2048, plus its latents before and after their
  //   norms 4·64 + 4·32 + 2·16 = 416: 2464, 352 less per token.
  // 128 tokens per GPU, 2 layers, fp16 (1 byte-unit per Korthikanti byte).
  const double mha = activations(small("none"));
  auto gqa = small("none");
  gqa["model"]["kv_heads"] = 1;
  EXPECT_DOUBLE_EQ(mha - activations(gqa), 2 * 768.0 * 128);
  auto mla = small("none");
  mla["model"]["mla"] = {{"q_lora_rank", 64}, {"kv_lora_rank", 32}, {"qk_nope_head_dim", 32},
                         {"qk_rope_head_dim", 16}, {"v_head_dim", 32}};
  EXPECT_DOUBLE_EQ(mha - activations(mla), 2 * 352.0 * 128);
}

Time compute_of(const simulation::Simulation& sim, engine::Phase phase, std::uint32_t gpu = 0) {
  Time total = 0;
  for (const auto& t : sim.task_log().tasks())
    if (t.end >= 0 && t.type == engine::TaskType::Compute && t.gpu == gpu && t.label.phase == phase) total += t.end - t.start;
  return total;
}

TEST(Recompute, FullRecomputationRunsEachLayersForwardAgainWithItsAllToAlls) {
  simulation::Simulation none(test::scenario_from(small("none").dump()));
  none.run(test::with_task_log());
  simulation::Simulation full(test::scenario_from(small("full").dump()));
  full.run(test::with_task_log());
  // The recomputed kernels are the forward's (no vocabulary: every forward kernel is a layer's).
  EXPECT_GT(compute_of(none, engine::Phase::Forward), 0);
  EXPECT_EQ(compute_of(full, engine::Phase::Recompute), compute_of(none, engine::Phase::Forward));
  EXPECT_EQ(compute_of(full, engine::Phase::Backward), compute_of(none, engine::Phase::Backward));
  // Each layer's dispatch and combine run a third time: 2 layers × (2 forward + 2 recompute + 2 backward).
  const auto a2a = [](const simulation::Simulation& s) {
    return s.results_json()["network"]["collectives"]["all_to_all"]["count"].get<double>();
  };
  EXPECT_EQ(a2a(none), 2 * 4);
  EXPECT_EQ(a2a(full), 2 * 6);
  EXPECT_GT(full.results().iterations[0].time, none.results().iterations[0].time);
}

TEST(Recompute, SelectiveRecomputesTheAttentionCoreOnlyWithoutFlashAttention) {
  simulation::Simulation fa(test::scenario_from(small("selective").dump()));
  fa.run(test::with_task_log());
  EXPECT_EQ(compute_of(fa, engine::Phase::Recompute), 0);
  const auto doc = small("selective", "v100-sxm2-32gb");
  simulation::Simulation v100(test::scenario_from(doc.dump()));
  v100.run(test::with_task_log());
  const auto sc = test::scenario_from(doc.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  // One attention core forward (1 sequence of 128, 4 heads of 64) per layer and microbatch.
  EXPECT_EQ(compute_of(v100, engine::Phase::Recompute), 2 * cm.attention(1, 4, 128, 64, true));
}

TEST(Recompute, Qwen3With8B200sFitsOnlyWithFullRecomputation) {
  // Qwen3-30B-A3B, EP8 on 8 B200 (180 GiB), local batch 8 × 4096 tokens: the activations of 48
  // layers do not fit without recomputation; with full recomputation only layer inputs are kept
  // (2·sbh·48 = 6 GiB) and the GPU needs well under 180 GiB.
  auto doc = schema::Json::parse(R"({"name": "q3",
    "cluster": {"gpu": "b200-sxm-180gb", "levels": [{"name": "gpu", "count": 8, "bandwidth": "900GB/s", "latency": "2us"}]},
    "model": {"preset": "qwen3-30b-a3b"}, "training": {"sequence_length": 4096, "micro_batch_size": 8},
    "routing": {"sampling": "expected"}, "strategy": {"name": "ep"}})");
  EXPECT_THROW(simulation::Simulation(test::scenario_from(doc.dump())).run(), moesim::InfeasibleError);
  doc["training"]["recompute"] = "full";
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run();
  EXPECT_LT(sim.memory()[0].total(), 180.0 * (1ULL << 30));
  // Inputs 48 · 2 · 32768 · 2048 B, plus the largest layer whole: attention and norms per token
  // 3H + 2·(Q 32·128 + K 4·128 + V 4·128 + output 32·128) + 4H = 6144 + 18432 + 8192 = 32768,
  // · 32768 tokens = 1073741824 (MHA's 15·sbh would be 1006632960), and the inputs of Qwen3's
  // query and key norms, 2·(4096 + 512) = 9216 a token: 301989888; experts 32768 · 8 copies (each GPU's 16 experts get 1/8 of all)
  // · (3H + 6M) = 262144 · 10752 = 2818572288, router 2 · 32768 · 128 = 8388608. With pp 1 the GPU
  // runs both vocabulary ends (Megatron-LM's estimate): the embedding's ids and dropout mask,
  // 32768 · (8 + 2048) = 67371008, and the head's inputs (4H a token) and the logits over 151,936
  // tokens the loss keeps, in BF16 under Transformer Engine's fused cross entropy (the default):
  // 32768 · (4 · 2048 + 2 · 151936) = 10225713152: 10 GB, more than the 48 layers' inputs.
  EXPECT_DOUBLE_EQ(sim.memory()[0].activations,
                   48 * 2.0 * 32768 * 2048 + 1073741824.0 + 301989888.0 + 2818572288.0 + 8388608.0 + 67371008.0 +
                       10225713152.0);
}

}  // namespace
}  // namespace moesim
