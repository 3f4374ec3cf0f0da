// HeterMoE's Asym-EA "gather and squeeze" (seed 002 §4.2, Algorithm 1; sim/strategies/zebra/asym_ea):
// the worked examples of the spec (seeds-001-002-004.md, 002 A.6), derived by hand below, the
// n1/n2 cross-check of ambiguity 1, the memory bounds in the units of ambiguity 3, and the
// divisibility rule of the paper's setups (Table 1, Fig. 10).
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/strategies/zebra/asym_ea.hpp"

using namespace moesim;
using namespace moesim::strategies::zebra;

namespace {
// The spec's common inputs (A.6): n = 24 experts, L = 8 layers, T^Attn_A = 3, T^Exp_E = 4,
// T^Attn_E = 3.2, so T_gather = 4 − 3 = 1 per layer.
OffloadInputs worked(int m, int n) {
  OffloadInputs in;
  in.experts = 24;
  in.layers = 8;
  in.attention_gpus = m;
  in.expert_gpus = n;
  in.t_attn_a = 3;
  in.t_exp_e = 4;
  in.t_attn_e = 3.2;
  return in;
}
using O = std::vector<int>;
}  // namespace

TEST(AsymEa, WorkedExampleWithoutMemoryBounds) {
  // M = N = 6 (O1): n1 = max(1, 6/6) = 1, n2 = 1·6/6 = 1. T_squeeze = (4·6/24)·1 + (3.2·6/24)·1
  // = 1 + 0.8 = 1.8. Gathered bubble 1, 2 → squeeze 1 (0.2 left), 1.2, 2.2 → 1 (0.4), 1.4,
  // 2.4 → 1 (0.6), 1.6, 2.6 → 1 (0.8): every second layer, ⌊8·1/1.8⌋ = 4 in all.
  const OffloadPlan p = gather_and_squeeze(worked(6, 6));
  EXPECT_EQ(p.n1, 1);
  EXPECT_EQ(p.n2, 1);
  EXPECT_DOUBLE_EQ(p.t_gather, 1.0);
  EXPECT_DOUBLE_EQ(p.t_squeeze, 1.8);
  EXPECT_DOUBLE_EQ(p.alpha, 1.0);
  EXPECT_DOUBLE_EQ(p.beta, 1.0);
  EXPECT_EQ(p.offloaded, (O{0, 1, 0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(p.total(), 4);
  // With M = N the two T_squeeze formulas agree (ambiguity 1).
  auto consistent = worked(6, 6);
  consistent.formula = SqueezeFormula::Consistent;
  EXPECT_DOUBLE_EQ(gather_and_squeeze(consistent).t_squeeze, 1.8);
}

TEST(AsymEa, UpperBoundSpreadsFewerChunks) {
  // The spec's n_max = 2 example puts 2 into α directly; with M = N = 6 the conversion of
  // ambiguity 3 keeps it: n_max' = ⌊2·6/6⌋ = 2. α = min(⌊2/1⌋·1.8/(8·1), 1) = 0.45: the bubble
  // gathers 0.45 per layer and reaches 1.8 at layers 4 and 8. Σ = 2 = n_max'.
  auto in = worked(6, 6);
  in.n_max = 2;
  const OffloadPlan p = gather_and_squeeze(in);
  EXPECT_DOUBLE_EQ(p.alpha, 0.45);
  EXPECT_DOUBLE_EQ(p.beta, 1.0);
  EXPECT_EQ(p.offloaded, (O{0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(p.total(), 2);
}

TEST(AsymEa, LowerBoundNeedsTheEpsilon) {
  // The spec's n_min = 6 example is per expert GPU (it puts 6 into β directly). n_min is the total
  // the expert GPUs must shed, converted as n_min' = ⌈n_min/N⌉ (ambiguity 3), so the total here is
  // 6 per expert GPU × 6 = 36. β = max(⌈6/1⌉·1.8/(8·1), 1) = 1.35: gathered 1.35, 2.7 → 1 (0.9),
  // 2.25 → 1 (0.45), 1.8 → 1 (0), 1.35, 2.7 → 1, 2.25 → 1, 1.8 → 1. Σ = 6 = n_min'.
  auto in = worked(6, 6);
  in.n_min = 36;
  const OffloadPlan p = gather_and_squeeze(in);
  EXPECT_DOUBLE_EQ(p.alpha, 1.0);
  EXPECT_DOUBLE_EQ(p.beta, 1.35);
  EXPECT_EQ(p.offloaded, (O{0, 1, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(p.total(), 6);
  // The hazard the ε guards against: replaying lines 8 and 10 in doubles, layer 4 gathers
  // 1.7999999999999998 against T_squeeze = 1.8000000000000003; a bare ≥ would skip it and give
  // [0,1,1,0,1,1,1,0], Σ = 5 < 6 (spec A.6).
  const double step = p.alpha * p.beta * p.t_gather;
  double t = step;      // layer 1: 1.35
  t += step;            // layer 2: 2.7
  t -= p.t_squeeze;     //          0.9
  t += step;            // layer 3: 2.25
  t -= p.t_squeeze;     //          0.45
  t += step;            // layer 4: 1.8, one ulp short
  EXPECT_LT(t, p.t_squeeze);
  EXPECT_NEAR(t, p.t_squeeze, 1e-15);
}

TEST(AsymEa, PrintedAndConsistentSqueezeDifferWhenMAndNDiffer) {
  // M = 4, N = 8 (O2): n1 = 8/4 = 2, n2 = 2·4/8 = 1. Per expert: 4·8/24 = 1.333 leaves an expert
  // GPU, 3.2·8/24 = 1.067 joins an attention GPU.
  //   printed:    1.333·2 + 1.067·1 = 3.733; gathered 1, 2, 3, 4 → 1 (0.267), 1.267, 2.267,
  //               3.267, 4.267 → 1: layers 4 and 8.
  //   consistent: 1.333·1 + 1.067·2 = 3.467; 4 → 1 (0.533), 1.533, 2.533, 3.533 → 1 (0.067),
  //               1.067: layers 4 and 7.
  auto in = worked(4, 8);
  const OffloadPlan paper = gather_and_squeeze(in);
  EXPECT_EQ(paper.n1, 2);
  EXPECT_EQ(paper.n2, 1);
  EXPECT_NEAR(paper.t_squeeze, 4.0 * 8 / 24 * 2 + 3.2 * 8 / 24, 1e-12);
  EXPECT_NEAR(paper.t_squeeze, 3.7333, 1e-4);
  EXPECT_EQ(paper.offloaded, (O{0, 0, 0, 1, 0, 0, 0, 1}));
  in.formula = SqueezeFormula::Consistent;
  const OffloadPlan consistent = gather_and_squeeze(in);
  EXPECT_NEAR(consistent.t_squeeze, 4.0 * 8 / 24 + 3.2 * 8 / 24 * 2, 1e-12);
  EXPECT_NEAR(consistent.t_squeeze, 3.4667, 1e-4);
  EXPECT_EQ(consistent.offloaded, (O{0, 0, 0, 1, 0, 0, 1, 0}));
}

TEST(AsymEa, ChunksOfTwoWhenAttentionGpusOutnumberExpertGpus) {
  // M = 6, N = 3 (O3): n1 = max(1, 3/6 → 0) = 1, n2 = 1·6/3 = 2: each chunk takes 2 experts from
  // each of the 3 expert GPUs and gives 1 to each of the 6 attention GPUs. Per expert 4·3/24 = 0.5
  // and 3.2·3/24 = 0.4; printed T_squeeze = 0.5·1 + 0.4·2 = 1.3. Gathered 1, 2 → 1 (0.7),
  // 1.7 → 1 (0.4), 1.4 → 1 (0.1), 1.1, 2.1 → 1 (0.8), 1.8 → 1 (0.5), 1.5 → 1 (0.2): six chunks,
  // ⌊8/1.3⌋ = 6, of 2 experts each.
  const OffloadPlan p = gather_and_squeeze(worked(6, 3));
  EXPECT_EQ(p.n1, 1);
  EXPECT_EQ(p.n2, 2);
  EXPECT_NEAR(p.t_squeeze, 1.3, 1e-12);
  EXPECT_EQ(p.offloaded, (O{0, 2, 2, 2, 0, 2, 2, 2}));
  EXPECT_EQ(p.total(), 12);
}

TEST(AsymEa, NoBubbleNoOffloadUnlessMemoryForcesIt) {
  // T^Attn_A ≥ T^Exp_E: the attention GPUs never wait (T_gather ≤ 0), nothing is offloaded (the
  // paper's Fig. 12: no gain beyond 20K on Mixtral-D1).
  auto in = worked(6, 6);
  in.t_attn_a = 4;  // = T^Exp_E
  OffloadPlan p = gather_and_squeeze(in);
  EXPECT_DOUBLE_EQ(p.t_gather, 0.0);
  EXPECT_EQ(p.offloaded, O(8, 0));
  in.t_attn_a = 5;
  EXPECT_EQ(gather_and_squeeze(in).offloaded, O(8, 0));
  in.n_max = 0;  // an upper bound alone changes nothing
  EXPECT_EQ(gather_and_squeeze(in).offloaded, O(8, 0));
  // The expert GPUs must shed 12 experts (2 each, n_min' = ⌈12/6⌉ = 2, R = 2 chunks): β is
  // undefined, so after layer l ⌊l·2/8⌋ chunks are out: layers 4 and 8. 18 experts (3 each):
  // ⌊l·3/8⌋ = 0, 0, 1, 1, 1, 2, 2, 3: layers 3, 6 and 8.
  in.n_max = -1;
  in.n_min = 12;
  p = gather_and_squeeze(in);
  EXPECT_EQ(p.offloaded, (O{0, 0, 0, 1, 0, 0, 0, 1}));
  EXPECT_DOUBLE_EQ(p.alpha, 1.0);
  EXPECT_DOUBLE_EQ(p.beta, 1.0);
  in.n_min = 18;
  EXPECT_EQ(gather_and_squeeze(in).offloaded, (O{0, 0, 1, 0, 0, 1, 0, 1}));
  // O3's chunks of 2 (M = 6, N = 3): 7 experts in all → n_min' = ⌈7/3⌉ = 3, R = ⌈3/2⌉ = 2 chunks.
  auto o3 = worked(6, 3);
  o3.t_attn_a = 4;
  o3.n_min = 7;
  EXPECT_EQ(gather_and_squeeze(o3).offloaded, (O{0, 0, 0, 2, 0, 0, 0, 2}));
}

TEST(AsymEa, ALayerOffloadsAtMostTheExpertsAnExpertGpuHolds) {
  // M = 6, N = 3, n = 6: each expert GPU holds 2 experts per layer, one chunk of n2 = 2. T^Attn_A
  // = 0, T^Exp_E = 10, T^Attn_E = 1: T_gather = 10, printed T_squeeze = (10·3/6)·1 + (1·3/6)·2 = 6
  // (it counts the removed expert once, n1 = 1, though each expert GPU gives up n2 = 2). Line 9
  // alone would offload ⌊10/6⌋ = 1 chunk at layer 1 and ⌊14/6⌋ = 2 chunks (4 experts, more than
  // the 2 held) at layer 2; capped, every layer gives up its 2.
  OffloadInputs in;
  in.experts = 6;
  in.layers = 4;
  in.attention_gpus = 6;
  in.expert_gpus = 3;
  in.t_attn_a = 0;
  in.t_exp_e = 10;
  in.t_attn_e = 1;
  const OffloadPlan p = gather_and_squeeze(in);
  EXPECT_DOUBLE_EQ(p.t_squeeze, 6.0);
  EXPECT_EQ(p.offloaded, (O{2, 2, 2, 2}));
}

TEST(AsymEa, DivisibilityOfThePapersSetups) {
  // Table 1: O1 6:6, O2 4:8, O3 6:3, C1 2:6, C2 2:8 (attention : expert GPUs) all use Asym-EA;
  // Fig. 10 (4 A40 with 2–8 V100): only 4:2, 4:4 and 4:8 can; 4:3 and 4:5 cannot.
  using Ratios = std::vector<std::pair<int, int>>;
  for (const auto& [m, n] : Ratios{{6, 6}, {4, 8}, {6, 3}, {2, 6}, {2, 8}, {4, 2}, {4, 4}})
    EXPECT_TRUE(asym_ea_divisible(m, n)) << m << ":" << n;
  for (const auto& [m, n] : Ratios{{4, 3}, {4, 5}, {4, 6}, {4, 7}, {0, 4}, {4, 0}, {-2, 4}})
    EXPECT_FALSE(asym_ea_divisible(m, n)) << m << ":" << n;
}

TEST(AsymEa, NonsenseInputsAreInputErrors) {
  auto bad = [](auto change) {
    auto in = worked(6, 6);
    change(in);
    return in;
  };
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.attention_gpus = 0; })), InputError);
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.expert_gpus = -1; })), InputError);
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.attention_gpus = 4, i.expert_gpus = 3; })), InputError);
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.experts = 25; })), InputError);  // not a multiple of N
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.layers = 0; })), InputError);
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.t_exp_e = -1; })), InputError);
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.t_attn_e = std::numeric_limits<double>::quiet_NaN(); })), InputError);
  EXPECT_THROW(gather_and_squeeze(bad([](OffloadInputs& i) { i.n_min = -1; })), InputError);
  try {
    gather_and_squeeze(bad([](OffloadInputs& i) { i.attention_gpus = 4, i.expert_gpus = 3; }));
    ADD_FAILURE() << "4:3 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("multiple"), std::string::npos) << e.what();
  }
}

TEST(AsymEa, MemoryBoundsThatCannotBothHoldAreInfeasible) {
  // 36 experts must leave (6 chunks per expert GPU) but each attention GPU holds 1 (1 chunk).
  auto in = worked(6, 6);
  in.n_min = 36;
  in.n_max = 1;
  EXPECT_THROW(gather_and_squeeze(in), InfeasibleError);
  // More than all 8 layers × 4 experts per expert GPU: 33 each (n_min = 6·33 = 198).
  in.n_max = -1;
  in.n_min = 198;
  EXPECT_THROW(gather_and_squeeze(in), InfeasibleError);
  in.n_min = 192;  // exactly all of them: every layer gives up its 4
  EXPECT_EQ(gather_and_squeeze(in).offloaded, O(8, 4));
}
