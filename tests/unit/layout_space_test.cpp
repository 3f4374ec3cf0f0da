// moesim search's layout space (sim/search/layout_space.hpp): Megatron-Core's divisibility rules,
// the first/last stage split of layers that do not divide, and the balanced buffer share.
#include <gtest/gtest.h>

#include "sim/search/layout_space.hpp"

namespace moesim::search {
namespace {

TEST(LayoutSpace, StageSplitAsMegatronRecipesWriteIt) {
  // DeepSeek-V3's 61 decoder layers over PP 4 × VP 4: the longest first stage (4) that leaves the
  // other 14 stages equal and a last stage of at least one: 4 + 14·4 + 1 = 61 (the 26.08 recipe's).
  EXPECT_EQ(stage_split(61, 16), std::pair(4, 1));
  EXPECT_EQ(stage_split(48, 4), std::pair(12, 12));  // even: every stage the same
  EXPECT_EQ(stage_split(48, 1), std::pair(48, 48));  // one stage holds them all
  EXPECT_EQ(stage_split(7, 2), std::pair(4, 3));     // two stages: no middle to even out
  // 5 over 4: first 2 and last 2 leave 1 for 2 stages, 2/1 leaves 2 (1 each, shorter than the
  // first), 1/1 leaves 3: no split.
  EXPECT_EQ(stage_split(5, 4), std::pair(0, 0));
}

TEST(LayoutSpace, BalancedCapacityIsTopKOverTheRowsAGroupCanHold) {
  // k / (EP × min(k, E/EP)), docs/scenario.md's 0.03125 for DeepSeek-V3 at EP 64.
  EXPECT_DOUBLE_EQ(balanced_capacity(256, 8, 64), 8.0 / (64 * 4));
  EXPECT_DOUBLE_EQ(balanced_capacity(256, 8, 8), 8.0 / (8 * 8));
}

TEST(LayoutSpace, MegatronsDivisibilityRules) {
  // 16 GPUs in domains of 8, a 12-layer model of 32 experts and 16 heads, global batch 64:
  // TP {1, 2} × PP {1, 2} × EP {8, 16} × micro-batch {4, 8}, VP 1.
  //   TP 1 PP 1: DP 16, EP 8 or 16; 16·4 = 64 takes micro-batch 4 only         → 2
  //   TP 2 PP 1: DP 8, EP 8 or 16 (16 GPUs a stage); both micro-batches         → 4
  //   TP 1 PP 2: DP 8, 8 GPUs a stage hold EP 8 only; both micro-batches        → 2
  //   TP 2 PP 2: DP 4, EP 8 only; both micro-batches                            → 2
  LayoutInputs in{.gpus = 16, .domain_gpus = 8, .layers = 12, .experts = 32, .heads = 16, .kv_heads = 16, .global_batch = 64};
  SearchSpace space{.tp = {1, 2}, .pp = {1, 2}, .vp = {1}, .cp = {1}, .ep = {8, 16}, .etp = {1}, .mbs = {4, 8}, .recompute = {"none"},
                    .sharding = {"none"}, .dispatcher = {"nccl"}};
  const auto layouts = enumerate_layouts(in, space);
  EXPECT_EQ(layouts.size(), 10u);
  for (const auto& l : layouts) {
    EXPECT_EQ(l.first_stage_layers, 12 / l.pp);
    EXPECT_EQ(16 % (l.tp * l.pp), 0);
    EXPECT_EQ(16 / l.pp % l.ep, 0);
    EXPECT_EQ(64 % (16 / (l.tp * l.pp) * l.mbs), 0);
  }
  // TP 16 exceeds the NVLink domain; TP 3 divides no head count; VP 2 needs PP > 1 and, at PP 2,
  // the microbatches per rank (64 / (DP 8 × 4) = 2) a multiple of PP: one layout (EP 8, mbs 4).
  space = {.tp = {16, 3}, .pp = {1}, .vp = {1}, .cp = {1}, .ep = {16}, .etp = {1}, .mbs = {4}, .recompute = {"none"},
           .sharding = {"none"}, .dispatcher = {"nccl"}};
  EXPECT_TRUE(enumerate_layouts(in, space).empty());
  space = {.tp = {1}, .pp = {1, 2}, .vp = {2}, .cp = {1}, .ep = {8}, .etp = {1}, .mbs = {4, 8}, .recompute = {"none"},
           .sharding = {"none"}, .dispatcher = {"nccl"}};
  const auto interleaved = enumerate_layouts(in, space);
  ASSERT_EQ(interleaved.size(), 1u);
  EXPECT_EQ(interleaved[0].mbs, 4);
  EXPECT_EQ(interleaved[0].first_stage_layers, 3);
}

TEST(LayoutSpace, ContextAndExpertTensorParallelRules) {
  // The same 16 GPUs and model, sequences of 1024 tokens, experts 1000 wide; TP 1, PP 1, EP 8,
  // micro-batch 4; CP {1, 2, 3} × ETP {1, 2, 16} × sharding {none, distributed_optimizer}:
  //   CP 3: 1024 tokens do not split into 2·3 chunks                              → none
  //   ETP 16: beyond the NVLink domain of 8                                        → none
  //   CP 1 (DP 16, 16·4 = 64 sequences a step) and CP 2 (DP 8, two microbatches), ETP 1 or 2
  //   (EP 8 × ETP 2 = 16 GPUs, a stage), each with both shardings                  → 2·2·2 = 8
  LayoutInputs in{.gpus = 16, .domain_gpus = 8, .layers = 12, .experts = 32, .heads = 16, .kv_heads = 16, .global_batch = 64,
                  .sequence = 1024, .expert_ffn = 1000};
  const SearchSpace space{.tp = {1}, .pp = {1}, .vp = {1}, .cp = {1, 2, 3}, .ep = {8}, .etp = {1, 2, 16}, .mbs = {4},
                          .recompute = {"none"}, .sharding = {"none", "distributed_optimizer"}, .dispatcher = {"nccl"}};
  const auto layouts = enumerate_layouts(in, space);
  ASSERT_EQ(layouts.size(), 8u);
  for (const auto& l : layouts) {
    EXPECT_TRUE(l.cp == 1 || l.cp == 2);
    EXPECT_TRUE(l.etp == 1 || l.etp == 2);
  }
  EXPECT_EQ(layouts.front().sharding, "none");
  EXPECT_EQ(layouts[1].sharding, "distributed_optimizer");
  // An expert width ETP does not divide: ETP 2 of 999 columns is left out.
  in.expert_ffn = 999;
  EXPECT_EQ(enumerate_layouts(in, space).size(), 4u);
}

}  // namespace
}  // namespace moesim::search
