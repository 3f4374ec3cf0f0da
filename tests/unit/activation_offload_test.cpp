// Fine-grained activation offloading (training.offload_modules, Megatron-Core's offload_modules;
// workload/memory.cpp, blocks/activation_offload.cpp): each module moves exactly the tensors it
// saves to the host, over the GPU's PCIe link, after its forward, and brings them back before its
// backward, once the backward of the module offloaded after it is done.
#include <gtest/gtest.h>

#include <map>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/workload/memory.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

using workload::OffloadModule;

std::uint8_t bits(std::initializer_list<OffloadModule> modules) { return test::module_bits(modules); }

// test::small_moe_model: 4 layers (the first dense), 3 MoE layers of 8 SwiGLU experts of 512,
// top-2, one shared expert; hidden 1024, 8 heads of 128 (q = k = v = o = 1024 wide).
workload::ModelShape small_model() { return test::small_moe_model(); }

// One GPU's footprint with these modules offloaded: 4096 tokens, 8192 routed copies per MoE
// layer, two microbatches in flight, FlashAttention.
workload::MemoryFootprint footprint(std::uint8_t modules, cluster::Dtype dtype = cluster::Dtype::bf16,
                                    std::uint8_t recomputed = 0) {
  workload::TrainingConfig t;
  t.sequence_length = 4096;
  t.dtype = dtype;
  t.offload_modules = modules;
  if (recomputed) {
    t.recompute = workload::Recompute::Selective;
    t.recompute_modules = recomputed;
  }
  workload::MemoryInputs in;
  in.params = 1;
  in.tokens = 4096;
  in.expert_tokens_per_layer = 8192;
  in.in_flight = 2;
  return workload::memory_footprint(small_model(), t, in);
}

}  // namespace

TEST(ActivationOffload, EachModuleMovesExactlyItsTensorsToTheHost) {
  // T = 4096 tokens, C = 8192 copies, h = 1024, d = 512. The last layer (3) keeps its tensors (its
  // backward follows its forward), so a module that moves F per layer from n of the other layers
  // holds 2·n·F on the host (2 microbatches in flight) and frees 2·n·F − F on the GPU: one layer's
  // come back during its backward.
  const workload::MemoryFootprint none = footprint(0);
  const auto check = [&](std::initializer_list<OffloadModule> modules, double per_layer, int layers) {
    const workload::MemoryFootprint f = footprint(bits(modules));
    EXPECT_DOUBLE_EQ(none.activations - f.activations, (2.0 * layers - 1) * per_layer);
    EXPECT_DOUBLE_EQ(f.host - none.host, 2.0 * layers * per_layer);
  };
  // attn_norm and mlp_norm: a norm's input, 2h per token, in layers 0–2 (dense and MoE alike).
  check({OffloadModule::AttnNorm}, 4096.0 * 2 * 1024, 3);
  check({OffloadModule::MlpNorm}, 4096.0 * 2 * 1024, 3);
  // qkv_linear: the QKV projection's input, 2h; core_attn: Q, K, V, 2·(3·1024) per token;
  // attn_proj: the core's output, 2·1024.
  check({OffloadModule::QkvLinear}, 4096.0 * 2 * 1024, 3);
  check({OffloadModule::CoreAttn}, 4096.0 * 6 * 1024, 3);
  check({OffloadModule::AttnProj}, 4096.0 * 2 * 1024, 3);
  // expert_fc1: each copy's fc1 input, 2h; moe_act: its fc1 output, 2·(2d) for SwiGLU; in the MoE
  // layers 1 and 2.
  check({OffloadModule::ExpertFc1}, 8192.0 * 2 * 1024, 2);
  check({OffloadModule::MoeAct}, 8192.0 * 4 * 512, 2);
  // Together they add up.
  check({OffloadModule::ExpertFc1, OffloadModule::MoeAct}, 8192.0 * (2 * 1024 + 4 * 512), 2);
  // Under FP8 every count halves (memory_footprint's scale: 1 byte of 2).
  const auto fp8 = [&](std::uint8_t b) { return footprint(b, cluster::Dtype::fp8); };
  EXPECT_DOUBLE_EQ(fp8(bits({OffloadModule::ExpertFc1})).host, 2.0 * 2 * 8192 * 1024);
  // What a recomputed module does not keep is not there to move: moe_act's input under
  // routed_experts, qkv_linear's under layernorm.
  const auto only_recomputed = [&](OffloadModule o, workload::RecomputeModule r) {
    const auto rb = static_cast<std::uint8_t>(1u << static_cast<int>(r));
    return footprint(bits({o}), cluster::Dtype::bf16, rb).host;
  };
  EXPECT_DOUBLE_EQ(only_recomputed(OffloadModule::MoeAct, workload::RecomputeModule::RoutedExperts), 0.0);
  EXPECT_DOUBLE_EQ(only_recomputed(OffloadModule::QkvLinear, workload::RecomputeModule::Layernorm), 0.0);
}

namespace {

// The small model on 2 GPUs (test::small_moe_case: EP 2, 2 microbatches, balanced routing, the
// analytic network, where a host copy takes its link's latency plus bytes over its bandwidth).
schema::Json offload_case(const schema::Json& modules) {
  auto doc = test::small_moe_case("activation-offload");
  if (!modules.is_null()) doc["training"]["offload_modules"] = modules;
  return doc;
}

}  // namespace

TEST(ActivationOffload, ExpertInputsCrossPcieAfterTheirForwardAndBeforeTheirBackward) {
  // expert_fc1 on GPU 0: its 4 experts receive 8192 copies per microbatch (4096 tokens × top-2 from
  // each of the 2 GPUs, half to each), 2h = 2048 bytes each: 16 MiB leave after each MoE layer's
  // expert forward and come back before its expert backward, in MoE layers 1 and 2 (3 is the
  // last) and both microbatches. Each copy takes the H100's PCIe Gen5 link (topologies/gpus.json:
  // 64 GB/s a direction, 2 µs): 2 µs + 16 MiB / 64 GB/s = 264.144 µs.
  simulation::Simulation base(test::scenario_from(offload_case(nullptr).dump()));
  base.run(test::with_task_log());
  simulation::Simulation sim(test::scenario_from(offload_case(schema::Json::array({"expert_fc1"})).dump()));
  sim.run(test::with_task_log());
  const double bytes = 8192.0 * 2 * 1024;
  const auto& host_copies = sim.network_stats().by_kind[static_cast<int>(network::CollectiveKind::HostCopy)];
  EXPECT_EQ(host_copies.collectives, 2u * 2 * 2 * 2);  // GPUs × layers × microbatches × (out, back)
  EXPECT_DOUBLE_EQ(host_copies.bytes, 2 * 2 * 2 * 2 * bytes);
  const auto& names = sim.engine().names();
  using Key = std::tuple<int, int>;  // layer, microbatch
  std::map<Key, engine::Task> out, back, experts_forward, experts_backward;
  for (const auto& t : sim.task_log().tasks()) {
    if (t.gpu != 0 || t.end < 0) continue;
    const std::string name = names[t.label.name];
    const Key key{t.label.layer, t.label.microbatch};
    if (name == "offload_activations") out[key] = t;
    if (name == "reload_activations") back[key] = t;
    if (name == "experts") (t.label.phase == engine::Phase::Forward ? experts_forward : experts_backward)[key] = t;
  }
  ASSERT_EQ(out.size(), 4u);
  ASSERT_EQ(back.size(), 4u);
  for (const auto& [key, t] : out) {
    EXPECT_EQ(t.end - t.start, 2'000'000 + 262'144'000) << std::get<0>(key);  // ps
    EXPECT_GE(t.start, experts_forward.at(key).end);
    const auto& r = back.at(key);
    EXPECT_EQ(r.end - r.start, t.end - t.start);
    EXPECT_GE(r.start, t.end);
    EXPECT_LE(r.end, experts_backward.at(key).start);
  }
  // Layer 1's copies come back once layer 2's expert backward (the module offloaded after it) is done.
  for (int mb = 0; mb < 2; ++mb) EXPECT_GE(back.at({1, mb}).start, experts_backward.at({2, mb}).end);
  // The GPU holds less, the host the rest; the copies cost time where nothing hides them.
  EXPECT_LT(sim.memory()[0].activations, base.memory()[0].activations);
  EXPECT_GT(sim.memory()[0].host, base.memory()[0].host);
  EXPECT_GE(sim.mean_iteration_time(), base.mean_iteration_time());
}

TEST(ActivationOffload, WhatCannotBeOffloadedIsRefused) {
  // Full recomputation keeps only each layer's input.
  auto full = offload_case(schema::Json::array({"expert_fc1"}));
  full["training"]["recompute"] = "full";
  test::expect_refused_at(full, "$.training.offload_modules");
  // The core's output without the core (Megatron-Core refuses it: the core's backward needs it).
  test::expect_refused_at(offload_case(schema::Json::array({"attn_proj"})), "$.training.offload_modules");
  // A module Megatron-Core does not offload.
  test::expect_refused_at(offload_case(schema::Json::array({"shared_experts"})), "$.training.offload_modules[0]");
}
