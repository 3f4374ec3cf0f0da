// The software's kernel switches (software.permute, software.activation_fusion, software.cross_entropy) from the scenario
// to the simulated iteration, and the torchtitan preset that sets them (software/torchtitan.json,
// read from torchtitan's source: software/sources/torchtitan-moe.md).
#include <gtest/gtest.h>

#include "sim/blocks/layer_costs.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {
// One GPU (no exchange), one bare MoE layer of 8 SwiGLU experts, top-2, 4096 tokens, expected
// routing: its iteration is the compute stream's kernels in a row, the host not modelled.
schema::Json one_layer(const schema::Json& software) {
  auto doc = schema::Json::parse(R"({
    "name": "software-kernels",
    "cluster": {"gpu": "h100-sxm5-80gb", "levels": [{"name": "gpu", "count": 1, "bandwidth": "450GB/s", "latency": "2us"}]},
    "model": {"layers": 1, "hidden": 2048, "ffn_hidden": 1024, "experts": 8, "top_k": 2, "heads": 16, "vocab": 0,
              "expert_kind": "swiglu", "attention": false},
    "training": {"sequence_length": 4096, "micro_batch_size": 1},
    "routing": {"sampling": "expected"},
    "strategy": {"name": "ep"}
  })");
  if (!software.is_null()) doc["software"] = software;
  return doc;
}
}  // namespace

TEST(SoftwareKernels, TorchtitanPresetSetsItsKernels) {
  const auto sc = test::scenario_from(one_layer(schema::Json{{"preset", "torchtitan"}}).dump());
  EXPECT_EQ(sc.software.permute, compute::PermuteKernels::Torchtitan);
  EXPECT_FALSE(sc.software.fused_activation);
  EXPECT_EQ(sc.software.grouped_gemm, compute::GroupedGemmKernels::TorchGroupedMm);
  EXPECT_EQ(sc.software.router_kernels, 12);  // torchtitan-moe.md §1: 8 router kernels, 4 of bookkeeping
  // The compute model costs them.
  EXPECT_EQ(sc.compute.permute_kernels, compute::PermuteKernels::Torchtitan);
  EXPECT_FALSE(sc.compute.fused_activation);
  // Overridden key by key, as every preset.
  const auto fused = test::scenario_from(one_layer(schema::Json{{"preset", "torchtitan"}, {"permute", "fused"}}).dump());
  EXPECT_EQ(fused.software.permute, compute::PermuteKernels::Fused);
  EXPECT_FALSE(fused.software.fused_activation);
}

TEST(SoftwareKernels, TheSwitchesLengthenTheIterationByTheirKernels) {
  // With no host costs the one GPU runs the layer's kernels back to back: the router and permute,
  // the experts, the un-permute, then their backwards. Switching the permutation to torchtitan's
  // kernels and SwiGLU to two eager kernels lengthens the iteration by exactly the difference of
  // those kernels, forward and backward (layer_costs.cpp); nothing else moves.
  simulation::Simulation base(test::scenario_from(one_layer(schema::Json{}).dump()));
  base.run();
  const schema::Json eager{{"permute", "torchtitan"}, {"activation_fusion", false}};
  const auto sc = test::scenario_from(one_layer(eager).dump());
  simulation::Simulation run(sc);
  run.run();
  const auto plain = test::scenario_from(one_layer(schema::Json{}).dump());
  const compute::ComputeModel f(plain.topology().gpu(0), plain.compute), e(sc.topology().gpu(0), sc.compute);
  const workload::ModelShape& m = sc.model;
  const double t = 4096;
  const std::vector<double> rows(8, t * 2 / 8);
  const auto edges = [&](const compute::ComputeModel& cm) {
    return blocks::gate_time(cm, m, t).time + blocks::combine_time(cm, m, t).time + blocks::gate_backward_time(cm, m, t).time +
           blocks::combine_backward_time(cm, m, t).time;
  };
  const auto experts = [&](const compute::ComputeModel& cm) {
    const blocks::ExpertsWork w = blocks::experts_work(cm, m, rows, m.ffn_hidden);
    return w.forward.time + w.backward.time;
  };
  const Time more = (edges(e) - edges(f)) + (experts(e) - experts(f));
  EXPECT_GT(more, 0);
  EXPECT_EQ(run.mean_iteration_time() - base.mean_iteration_time(), more);
}

TEST(SoftwareKernels, CrossEntropyKernelsMoveTheirBytes) {
  // The loss over T = 4096 tokens × V = 32000 logits on an H100, bytes per logit read from each
  // implementation's source (layer_costs.cpp): Transformer Engine's fused kernels read the 16-bit
  // logits twice and write the gradient over them once (6), then scale it in place (2 + 2);
  // Megatron-Core's unfused fp32 path copies (2 + 4), takes the max (4), subtracts it (4 + 4),
  // exponentiates (4 + 4), sums (4) and divides (4 + 4): 38, then scales (4 + 4) and casts back
  // (4 + 2): 14; PyTorch's F.cross_entropy over an fp32 copy (2 + 4), log_softmax's three reads
  // and a write (16): 22, then the zero fill (4), the softmax backward (12 + 4) and the cast back
  // (4 + 2): 26.
  const auto sc = test::scenario_from(one_layer(schema::Json{}).dump());
  const double t = 4096, v = 32000;
  const auto work = [&](compute::CrossEntropyKernels k) {
    compute::ComputeOptions o = sc.compute;
    o.cross_entropy = k;
    return blocks::cross_entropy_work(compute::ComputeModel(sc.topology().gpu(0), o), t, v);
  };
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const auto expect = [&](compute::CrossEntropyKernels k, double forward, int fk, double backward, int bk) {
    const blocks::CrossEntropyWork w = work(k);
    EXPECT_EQ(w.forward.time, cm.memory_bound(t * v * forward));
    EXPECT_EQ(w.forward.kernels, fk);
    EXPECT_EQ(w.backward.time, cm.memory_bound(t * v * backward));
    EXPECT_EQ(w.backward.kernels, bk);
  };
  expect(compute::CrossEntropyKernels::TransformerEngine, 6, 2, 4, 1);
  expect(compute::CrossEntropyKernels::Megatron, 38, 19, 14, 7);
  expect(compute::CrossEntropyKernels::PyTorch, 22, 3, 26, 4);
  // The default is Transformer Engine's; the eager presets run PyTorch's.
  EXPECT_EQ(sc.compute.cross_entropy, compute::CrossEntropyKernels::TransformerEngine);
  for (const char* preset : {"torchtitan", "pytorch-eager"})
    EXPECT_EQ(test::scenario_from(one_layer(schema::Json{{"preset", preset}}).dump()).compute.cross_entropy,
              compute::CrossEntropyKernels::PyTorch);
  EXPECT_EQ(test::scenario_from(one_layer(schema::Json{{"cross_entropy", "megatron"}}).dump()).compute.cross_entropy,
            compute::CrossEntropyKernels::Megatron);
}

TEST(SoftwareKernels, TheLossKeepsItsLogitsInTheDtypeItsSoftwareDoes) {
  // The LM head's share of the activations, one microbatch in flight: the final norm's and output
  // projection's inputs (2h each) and the logits the loss keeps for its backward, T·V of them.
  // Transformer Engine's fused cross entropy saves the logits it overwrote with their gradient, in
  // the training's storage dtype (2 bytes under BF16); Megatron-Core's and PyTorch's losses keep an
  // fp32 copy (4 bytes). T = 4096, V = 32000: they differ by 2 · 4096 · 32000 = 262,144,000 bytes,
  // and on one GPU the simulated footprint by exactly that. Under fp32 training all keep 4 bytes.
  auto doc = one_layer(schema::Json{});
  doc["model"]["vocab"] = 32000;
  const auto te = test::scenario_from(doc.dump());
  const auto software = [&](const char* ce, const char* dtype) {
    auto d = doc;
    d["software"] = {{"cross_entropy", ce}};
    d["training"]["dtype"] = dtype;
    return test::scenario_from(d.dump());
  };
  EXPECT_TRUE(te.training.logits_in_storage_dtype);
  EXPECT_FALSE(software("megatron", "bf16").training.logits_in_storage_dtype);
  EXPECT_FALSE(software("pytorch", "bf16").training.logits_in_storage_dtype);
  const auto activations = [](const scenario::Scenario& sc) {
    simulation::Simulation sim(sc);
    sim.run();
    return sim.memory()[0].activations;
  };
  EXPECT_DOUBLE_EQ(activations(software("megatron", "bf16")) - activations(te), 2.0 * 4096 * 32000);
  EXPECT_DOUBLE_EQ(activations(software("pytorch", "bf16")), activations(software("megatron", "bf16")));
  EXPECT_DOUBLE_EQ(activations(software("te", "fp32")), activations(software("megatron", "fp32")));
}
