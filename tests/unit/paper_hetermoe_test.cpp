// HeterMoE (seed 002) §6.3, claim C5: the heterogeneity-aware pipeline-parallel baseline of
// scenarios/hetermoe-pp.json against zebra on O1 (6 A40 + 6 V100), Mixtral-D1, by moesim's memory
// model. The paper: PP "cannot fit even a single layer and the activations of a single 28K or 32K
// sequence into V100's memory", while HeterMoE trains both lengths. moesim refuses the layer splits
// that put 3 or more of Mixtral-D1's layers on a V100 at 32K (4 or more: their weights, gradients
// and Adam state alone pass 16 GiB; 3: with the LM head's logits), but it fits one layer, and
// the LM head, at 28K and 32K: the infeasibility is not reproduced. What moesim would need is written at the last test.
#include <gtest/gtest.h>

#include <string>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// Mixtral-D1 (models/mixtral-d1.json: hidden 1024, FFN 3584 SwiGLU, 24 experts, 8 heads of 128,
// 2 KV heads, vocab 32000), parameters of one layer as moesim counts them (ModelShape):
// attention 1024·(1024 + 256 + 256) + 1024·1024 = 2,621,440; norms 2·1024 = 2048; router
// 1024·24 = 24,576; experts 24·3·1024·3584 = 264,241,152. With parallel.ep 1 a PP stage holds all
// 24 experts of each of its layers. The last stage also holds the LM head, 32000·1024.
constexpr double kLayerParams = 2621440.0 + 2048.0 + 24576.0 + 264241152.0;  // 266,889,216
constexpr double kHeadParams = 32000.0 * 1024.0;                               // 32,768,000
constexpr double kV100Bytes = 16.0 * 1024 * 1024 * 1024;                        // 16 GiB (topologies/gpus.json)

// scenarios/hetermoe-pp.json at one O1 split (pp 2, 6 pipelines of one A40 stage and one V100
// stage, R = 6 microbatches of one sequence, 1F1B, FP16, full recomputation) and length.
simulation::Simulation pipeline_o1(int a40_layers, int sequence_length) {
  auto doc = schema::Json::parse(test::repository_file("scenarios/hetermoe-pp.json"));
  doc.erase("sweep");
  doc["parallel"]["first_stage_layers"] = a40_layers;
  doc["parallel"]["last_stage_layers"] = 8 - a40_layers;
  doc["training"]["sequence_length"] = sequence_length;
  return simulation::Simulation(test::scenario_from(doc.dump(), "hetermoe-pp.json"));
}

// The V100 stage's footprint by hand (sim/workload/memory.hpp), n layers at sequence length s:
// FP16 weights and gradients 2 B and Adam 12 B per parameter; with full recomputation the last
// stage of 1F1B keeps 1 microbatch's layer inputs, 2·s·h bytes per layer, and one layer whole while
// it is recomputed: the attention and norms 12,288 B per token (3h + 2·(1024 + 256 + 256 + 1024)
// + 4h; no score matrix under recomputation), the s·k = 2s token copies of its experts at
// 3h + 6·3584 = 24,576 B each (ep 1: every copy stays on the GPU) and 2·s·24 B of router logits;
// and, as the last stage, for its one microbatch at the loss the LM head's inputs (final norm and
// output projection, 2h each) and the logits the loss keeps, in FP16 under the scenario's software
// (Transformer Engine's fused cross entropy, the default; Megatron-LM's estimate counts 4 B):
// s·(4·1024 + 2·32000) B.
double v100_stage_bytes(int layers, double s) {
  const double states = 16.0 * (layers * kLayerParams + kHeadParams);
  const double recomputed_layer = 12288.0 * s + 2.0 * s * 24576.0 + 2.0 * s * 24.0;
  const double head = s * (4.0 * 1024.0 + 2.0 * 32000.0);
  return states + layers * 2.0 * s * 1024.0 + recomputed_layer + head;
}

}  // namespace

TEST(PaperHeterMoE, PipelineBaselineV100StageHoldsAtMostTwoLayersAt32K) {
  // The head at 32K: 32,768·(4096 + 64,000) = 2,231,369,728 B.
  // 2 layers: 16·(2·266,889,216 + 32,768,000) = 9,064,742,912 B of state + 2·67,108,864 B of
  // layer inputs + 2,014,838,784 B of the recomputed layer + the head = 13,445,169,152 B
  // (12.52 GiB): fits 16 GiB (17,179,869,184 B).
  // 3 layers: 13,334,970,368 + 3·67,108,864 + 2,014,838,784 + 2,231,369,728 = 17,782,505,472 B
  // (16.56 GiB): moesim refuses, naming GPU 6, the first V100. 4 layers: 16·1,100,324,864 =
  // 17,605,197,824 B of state alone passes 16 GiB.
  EXPECT_DOUBLE_EQ(v100_stage_bytes(2, 32768), 13445169152.0);
  EXPECT_DOUBLE_EQ(v100_stage_bytes(3, 32768), 17782505472.0);
  for (int v100_layers = 1; v100_layers <= 7; ++v100_layers) {
    SCOPED_TRACE("V100 stage with " + std::to_string(v100_layers) + " layers");
    auto sim = pipeline_o1(8 - v100_layers, 32768);
    bool refused = false;
    try {
      sim.check();
    } catch (const InfeasibleError& e) {
      refused = true;
      EXPECT_NE(std::string(e.what()).find("GPU 6 (v100-sxm2-16gb)"), std::string::npos) << e.what();
    }
    EXPECT_EQ(refused, v100_layers >= 3);
    const auto& f = sim.memory()[6];
    EXPECT_DOUBLE_EQ(f.weights, 2.0 * (v100_layers * kLayerParams + kHeadParams));
    EXPECT_DOUBLE_EQ(f.optimizer, 12.0 * (v100_layers * kLayerParams + kHeadParams));
    EXPECT_NEAR(f.total(), v100_stage_bytes(v100_layers, 32768), 1.0);
  }
}

TEST(PaperHeterMoE, ZebraFitsTheV100sAt28KAnd32K) {
  // scenarios/hetermoe-o1.json, HeterMoE without Asym-EA (every expert stays on the V100s, the most
  // they hold; Asym-EA only moves experts to the A40s), R = 6. Each V100 holds 24/6 = 4 experts of
  // each of 8 layers: 32·3·1024·3584 = 352,321,536 parameters, 16 B each = 5,637,144,576 B. It
  // receives B = M·s·k/N = 6·s·2/6 = 2s token copies per layer and microbatch, keeps their inputs,
  // 2·1024 B each, for all 6 microbatches in flight (Theorem 1's layer-major order) and all 8
  // layers, and recomputes one layer's experts whole, 2s·24,576 B:
  //   32K: 5,637,144,576 + 6·8·2·65,536·1024 + 65,536·24,576 = 13,690,208,256 B (12.75 GiB);
  //   28K: 5,637,144,576 + 6·8·2·57,344·1024 + 57,344·24,576 = 12,683,575,296 B (11.81 GiB).
  const std::pair<int, double> cases[] = {{28672, 12683575296.0}, {32768, 13690208256.0}};
  for (const auto& [s, bytes] : cases) {
    SCOPED_TRACE(s);
    auto doc = schema::Json::parse(test::repository_file("scenarios/hetermoe-o1.json"));
    doc.erase("sweep");
    doc["training"]["sequence_length"] = s;
    doc["strategy"]["asym_ea"] = "off";
    simulation::Simulation sim(test::scenario_from(doc.dump(), "hetermoe-o1.json"));
    EXPECT_NO_THROW(sim.check());
    for (std::uint32_t g = 6; g < 12; ++g) EXPECT_DOUBLE_EQ(sim.memory()[g].total(), bytes);
    EXPECT_LT(bytes, kV100Bytes);
  }
}

TEST(PaperHeterMoE, PipelineBaselineFitsOneLayerOnAV100At28KAnd32KUnlikeThePaper) {
  // C5 not reproduced. One layer and the LM head on each V100 (7 layers on the A40s):
  //   32K: 16·299,657,216 = 4,794,515,456 B of state + 67,108,864 + 2,014,838,784 B of
  //        activations + 2,231,369,728 B at the head = 9,107,832,832 B;
  //   28K: 4,794,515,456 + 2·28,672·1024 + (12,288 + 49,152 + 48)·28,672 + 28,672·68,096
  //        = 8,568,668,160 B;
  // both under 16 GiB, so moesim runs PP at 28K and 32K. What would refuse them: the attention
  // score matrix of a GPU without FlashAttention (V100, topologies/gpus.json), a·s² FP16 values =
  // 2·8·s² B, materialised while the layer is recomputed and in its backward: 13.2 GB at 28K and
  // 17.2 GB at 32K, 9.7 GB at 24K, which with the layer's 4.5 GiB of state refuses exactly 28K and
  // 32K as the paper says. moesim's memory model drops the scores under any recomputation
  // (sim/workload/memory.cpp keeps them only with recompute none). Counting the scores would also refuse EP's and EP(Ideal)'s V100s at 28K and
  // 32K, which the paper runs (Fig. 7), so it cannot simply be added; left as it is.
  const std::pair<int, double> cases[] = {{28672, 8568668160.0}, {32768, 9107832832.0}};
  for (const auto& [s, bytes] : cases) {
    SCOPED_TRACE(s);
    auto sim = pipeline_o1(7, s);
    EXPECT_NO_THROW(sim.check());
    EXPECT_DOUBLE_EQ(v100_stage_bytes(1, s), bytes);
    EXPECT_NEAR(sim.memory()[6].total(), bytes, 1.0);
    EXPECT_LT(bytes, kV100Bytes);
  }
}
