// The parallel layout: Megatron-Core's rank order and its groups.
#include <gtest/gtest.h>

#include "sim/parallel/layout.hpp"

namespace moesim::parallel {
namespace {

using Groups = std::vector<std::vector<std::uint32_t>>;

TEST(Layout, MegatronDocstringExampleSixteenGpusTp2Pp4) {
  // megatron/core/parallel_state.py, initialize_model_parallel's docstring: "16 GPUs g0..g15,
  // 2 GPUs to parallelize the model tensor, 4 GPUs to parallelize the model pipeline: 8 tensor
  // model-parallel groups [g0, g1], [g2, g3], [g4, g5], [g6, g7], [g8, g9], [g10, g11], [g12, g13],
  // [g14, g15]; 4 pipeline model-parallel groups [g0, g4, g8, g12], [g1, g5, g9, g13],
  // [g2, g6, g10, g14], [g3, g7, g11, g15]; 8 data-parallel groups [g0, g2], [g1, g3], [g4, g6],
  // [g5, g7], [g8, g10], [g9, g11], [g12, g14], [g13, g15]."
  const ParallelLayout l({.tp = 2, .pp = 4}, 16);
  EXPECT_EQ(l.dp(), 2);
  EXPECT_EQ(l.groups(Dim::Tp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}));
  EXPECT_EQ(l.groups(Dim::Pp), (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(l.groups(Dim::Dp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  EXPECT_EQ(l.stage_gpus(2), (std::vector<std::uint32_t>{8, 9, 10, 11}));
  EXPECT_EQ(l.stage_of(11), 2);
}

TEST(Layout, ExpertGroupsFoldOverTheSameGpusAndShareThePipelineGroups) {
  // 16 GPUs, TP 2, CP 2, PP 2 (DP 2) for attention; ETP 1, EP 4 for experts (EDP 16/(1·4·2) = 2).
  // Dense rank = tp + 2(cp + 2(dp + 2 pp)); expert rank = ep + 4(edp + 2 pp).
  const ParallelLayout l({.tp = 2, .cp = 2, .pp = 2, .ep = 4}, 16);
  EXPECT_EQ(l.dp(), 2);
  EXPECT_EQ(l.edp(), 2);
  EXPECT_EQ(l.groups(Dim::Cp), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}));
  // The dense gradients' group varies cp and dp: tp and pp fixed.
  EXPECT_EQ(l.groups(Dim::DpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}));
  EXPECT_EQ(l.groups(Dim::Ep), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(l.groups(Dim::Edp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}));
  EXPECT_EQ(l.groups(Dim::Pp), (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(l.groups_in_stage(Dim::Ep, 1), (Groups{{8, 9, 10, 11}, {12, 13, 14, 15}}));
  EXPECT_EQ(l.ep_rank(6), 2);
}

TEST(Layout, ExpertTensorParallelIsTheFastestExpertDimension) {
  // 8 GPUs, ETP 2, EP 2 (EDP 2): expert rank = etp + 2(ep + 2 edp).
  const ParallelLayout l({.tp = 2, .ep = 2, .etp = 2}, 8);
  EXPECT_EQ(l.groups(Dim::Etp), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.groups(Dim::Ep), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.groups(Dim::Edp), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(Layout, BadSizesAreNamedWithTheFix) {
  EXPECT_TRUE(layout_problems({.tp = 2, .pp = 4, .ep = 2}, 16, 8).empty());
  const auto product = layout_problems({.tp = 3}, 16, 8);
  ASSERT_EQ(product.size(), 1u);
  EXPECT_EQ(product[0].field, "tp");
  EXPECT_NE(product[0].problem.find("does not divide the cluster's 16 GPUs"), std::string::npos);
  const auto ep = layout_problems({.pp = 2, .ep = 16}, 16, 16);
  ASSERT_EQ(ep.size(), 1u);
  EXPECT_NE(ep[0].problem.find("8 GPUs of a pipeline stage"), std::string::npos);
  const auto experts = layout_problems({.ep = 4}, 16, 6);
  ASSERT_EQ(experts.size(), 1u);
  EXPECT_NE(experts[0].problem.find("6 experts are not divisible by ep 4"), std::string::npos);
}

}  // namespace
}  // namespace moesim::parallel
