// Fine-grained selective recomputation (training.recompute_modules, Megatron-Core's
// recompute_modules; workload/memory.cpp, blocks/recompute_block.cpp): each module frees exactly
// the activations its forward keeps and runs exactly that forward again before its backward.
#include <gtest/gtest.h>

#include <map>

#include "sim/blocks/layer_costs.hpp"
#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/workload/memory.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

using workload::RecomputeModule;

std::uint8_t bits(std::initializer_list<RecomputeModule> modules) { return test::module_bits(modules); }

// test::small_moe_model: 4 layers, the first dense (FFN 2048), then 3 MoE layers of 8 SwiGLU
// experts of 512, top-2, one shared expert; hidden 1024, 8 heads of 128; BF16 (scale 1).
workload::ModelShape small_model() { return test::small_moe_model(); }

// The activations one GPU keeps with these modules recomputed: 4096 tokens, 8192 routed copies per
// MoE layer, two microbatches in flight, FlashAttention.
double activations(const workload::ModelShape& m, std::uint8_t modules) {
  workload::TrainingConfig t;
  t.sequence_length = 4096;
  t.recompute = workload::Recompute::Selective;
  t.recompute_modules = modules;
  workload::MemoryInputs in;
  in.params = 1;
  in.tokens = 4096;
  in.expert_tokens_per_layer = 8192;
  in.in_flight = 2;
  return workload::memory_footprint(m, t, in).activations;
}

}  // namespace

TEST(RecomputeModules, EachModuleFreesExactlyItsActivations) {
  // T = 4096 tokens, C = 8192 copies, h = 1024, d = 512 (experts and shared), D = 2048 (dense);
  // 2 microbatches in flight keep each layer's share twice, and the layer being recomputed holds
  // its recomputed share once more: a module that frees F per layer in n layers saves 2·n·F − F.
  const workload::ModelShape m = small_model();
  const double none = activations(m, 0);
  const auto saved = [&](std::initializer_list<RecomputeModule> modules) { return none - activations(m, bits(modules)); };
  // moe_act: the activation output, 2 bytes × d per copy: F = 8192·2·512 = 8 MiB, n = 3.
  EXPECT_DOUBLE_EQ(saved({RecomputeModule::MoeAct}), 5.0 * 8192 * 2 * 512);
  // layernorm: the QKV projection's input (2h per token) and the FFN's or shared experts' input
  // (2h per token): F = 4096·4·1024 = 16 MiB in each of the 4 layers.
  EXPECT_DOUBLE_EQ(saved({RecomputeModule::Layernorm}), 7.0 * 4096 * 4 * 1024);
  // mlp: the dense layer's FFN but its input: 3h + 6D − 2h = h + 6D = 13312 bytes per token, n = 1.
  EXPECT_DOUBLE_EQ(saved({RecomputeModule::Mlp}), 1.0 * 4096 * (1024 + 6 * 2048));
  // shared_experts: likewise over d: h + 6d = 4096 bytes per token, n = 3.
  EXPECT_DOUBLE_EQ(saved({RecomputeModule::SharedExperts}), 5.0 * 4096 * (1024 + 6 * 512));
  // core_attn frees nothing with FlashAttention (no scores kept), and mla_up_proj nothing without MLA.
  EXPECT_DOUBLE_EQ(saved({RecomputeModule::CoreAttn, RecomputeModule::MlaUpProj}), 0.0);

  // MLA (DeepSeek-V3's shape): mla_up_proj frees Q, K and V, 2·(q + k + v) bytes per token with
  // q = k = 8 heads × (128 + 64) and v = 8 × 128: 2·(1536 + 1536 + 1024) = 8192; n = 4.
  workload::ModelShape mla = small_model();
  mla.mla = workload::LatentAttention{1536, 512, 128, 64, 128};
  const double mla_none = activations(mla, 0);
  EXPECT_DOUBLE_EQ(mla_none - activations(mla, bits({RecomputeModule::MlaUpProj})), 7.0 * 4096 * 8192);
}

namespace {

// The small model on 2 GPUs (test::small_moe_case) under selective recomputation.
schema::Json recompute_case(const schema::Json& modules) {
  auto doc = test::small_moe_case("recompute-modules");
  doc["training"]["recompute"] = "selective";
  if (!modules.is_null()) doc["training"]["recompute_modules"] = modules;
  return doc;
}

}  // namespace

TEST(RecomputeModules, EachModuleRunsExactlyItsForwardAgainBeforeItsBackward) {
  // With layernorm, moe_act, mlp and shared_experts, each GPU runs, per microbatch: the input
  // norm in each of the 4 layers before the attention's backward, the pre-MLP norm in each, the
  // dense layer's FFN once, and in each of the 3 MoE layers the shared expert's FFN and the
  // experts' activation over the 8192 copies the GPU's 4 experts receive (balanced: 4096 tokens ×
  // top-2 from each of the 2 GPUs, half of them to each). Each such task takes its forward's time
  // (layer_costs), and starts after its layer's forward.
  simulation::Simulation base(test::scenario_from(recompute_case(nullptr).dump()));
  base.run(test::with_task_log());
  simulation::Simulation sim(test::scenario_from(
      recompute_case(schema::Json::array({"layernorm", "moe_act", "mlp", "shared_experts"})).dump()));
  sim.run(test::with_task_log());
  const compute::ComputeModel cm(sim.scenario().kinds[0], sim.scenario().compute);
  const workload::ModelShape& m = sim.scenario().model;
  const double tokens = 4096;
  const std::map<std::string, Time> want{
      {"attention", blocks::norm_time(cm, m, tokens).time},
      {"pre_mlp_norm", blocks::norm_time(cm, m, tokens).time},
      {"dense_ffn", blocks::ffn_time(cm, m, tokens, 2048).time},
      {"shared_expert", blocks::ffn_time(cm, m, tokens, 512).time},
      {"expert_activation", blocks::expert_activation_time(cm, m, 8192, 512).time}};
  const std::map<std::string, int> count_want{
      {"attention", 4 * 2}, {"pre_mlp_norm", 4 * 2}, {"dense_ffn", 1 * 2}, {"shared_expert", 3 * 2}, {"expert_activation", 3 * 2}};
  std::map<std::string, int> count;
  const auto& names = sim.engine().names();
  std::map<std::tuple<int, int>, Time> forward_end;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.gpu != 0 || t.end < 0) continue;
    const std::string name = names[t.label.name];
    const auto key = std::tuple{t.label.layer, t.label.microbatch};
    if (t.label.phase == engine::Phase::Forward) forward_end[key] = std::max(forward_end[key], t.end);
    if (t.label.phase != engine::Phase::Recompute) continue;
    ++count[name];
    ASSERT_TRUE(want.contains(name)) << name;
    EXPECT_EQ(t.end - t.start, want.at(name)) << name;
  }
  EXPECT_EQ(count, count_want);
  for (const auto& t : sim.task_log().tasks()) {
    if (t.gpu != 0 || t.end < 0 || t.label.phase != engine::Phase::Recompute) continue;
    const auto key = std::tuple{t.label.layer, t.label.microbatch};
    EXPECT_GE(t.start, forward_end.at(key));
  }
  // Recomputing costs time and saves memory.
  EXPECT_GT(sim.mean_iteration_time(), base.mean_iteration_time());
  EXPECT_LT(sim.memory()[0].activations, base.memory()[0].activations);
}

TEST(RecomputeModules, WhatIsNotModelledOrMeaninglessIsRefused) {
  // The whole MoE layer with its exchanges.
  test::expect_refused_at(recompute_case(schema::Json::array({"moe"})), "$.training.recompute_modules");
  // MLA's up projections in a model without MLA.
  test::expect_refused_at(recompute_case(schema::Json::array({"mla_up_proj"})), "$.training.recompute_modules");
  // Modules without selective recomputation.
  auto full = recompute_case(schema::Json::array({"moe_act"}));
  full["training"]["recompute"] = "full";
  test::expect_refused_at(full, "$.training.recompute_modules");
}

TEST(RecomputeModules, RoutedExpertsRecomputeTheirWholeForwardAsTorchtitan) {
  // routed_experts (torchtitan's selective checkpointing, which saves no torch._grouped_mm output):
  // memory keeps each routed copy's input only, mlp_per_token(d) − 2h = 3h + 6d − 2h = h + 6d
  // bytes freed per copy: F = 8192 · (1024 + 6 · 512) per MoE layer, n = 3, saved 2·n·F − F = 5·F.
  const workload::ModelShape m = small_model();
  EXPECT_DOUBLE_EQ(activations(m, 0) - activations(m, bits({RecomputeModule::RoutedExperts})), 5.0 * 8192 * (1024 + 6 * 512));
  // With moe_act as well it frees no more (the activation is among what it frees).
  EXPECT_DOUBLE_EQ(activations(m, bits({RecomputeModule::RoutedExperts, RecomputeModule::MoeAct})),
                   activations(m, bits({RecomputeModule::RoutedExperts})));
  // Time: in each of the 3 MoE layers and 2 microbatches, one recompute task per GPU before the
  // experts' backward, as long as the experts' forward over the GPU's 4 experts × 2048 copies
  // (layer_costs' experts_time), in the place of moe_act's activation.
  simulation::Simulation sim(test::scenario_from(recompute_case(schema::Json::array({"routed_experts"})).dump()));
  sim.run(test::with_task_log());
  const compute::ComputeModel cm(sim.scenario().kinds[0], sim.scenario().compute);
  const std::vector<double> rows(4, 2048);
  const compute::Work forward = blocks::experts_time(cm, sim.scenario().model, rows, 512);
  const auto& names = sim.engine().names();
  int count = 0;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.gpu != 0 || t.end < 0 || t.label.phase != engine::Phase::Recompute) continue;
    ++count;
    EXPECT_EQ(names[t.label.name], "routed_experts");
    EXPECT_EQ(t.end - t.start, forward.time);
  }
  EXPECT_EQ(count, 3 * 2);
}
