// The buffers of fused EP backends and the drops of a non-blocking dispatch (seed 001; spec
// 001.A.4-A.6, A.10, claim C4), on the spec's DeepSeek-V3 numbers and hand-routed cases.
#include <gtest/gtest.h>

#include "sim/workload/ep_buffers.hpp"

namespace moesim {
namespace {

using workload::all_to_all_buffer_rows;
using workload::balanced_capacity_factor;
using workload::fit_permuted;
using workload::permuted_buffer_rows;
using workload::permuted_rows;

TEST(EpBuffers, DeepSeekV3AtEp64AsTheSpecDerives) {
  // DeepSeek-V3 671B, EP 64 in one NVL72, local batch 8 × sequence 4096: N = 32,768 tokens per
  // rank, h = 7168, bf16 (2 B), top-8 of 256 experts, E_local = 4.
  const double n = 8 * 4096, h = 7168, b = 2;
  // All-to-all buffer: N × EP = 2,097,152 slots × 7168 × 2 B = 30.06e9 B, "≈ 30.1 GB".
  EXPECT_EQ(all_to_all_buffer_rows(n, 64), 2'097'152);
  EXPECT_NEAR(all_to_all_buffer_rows(n, 64) * h * b / 1e9, 30.06, 0.01);
  // Permuted buffer at cf = 1: N × EP × min(8, 4) = 8,388,608 rows (a multiple of 32) × 7168 × 2 B
  // = 120.3e9 B per layer, "≈ 120 GB".
  EXPECT_EQ(permuted_buffer_rows(n, 64, 8, 4, 1.0, 32), 8'388'608);
  EXPECT_NEAR(permuted_buffer_rows(n, 64, 8, 4, 1.0, 32) * h * b / 1e9, 120.26, 0.01);
  // The balanced case, N × K = 262,144 rows (3.76 GB), is cf = K / (EP × min(K, E_local)) = 8/256.
  EXPECT_DOUBLE_EQ(balanced_capacity_factor(64, 8, 4), 0.03125);
  EXPECT_EQ(permuted_buffer_rows(n, 64, 8, 4, 0.03125, 32), 262'144);
}

TEST(EpBuffers, PermutedBudgetRoundsUpToTheAlignment) {
  // N 3, EP 2, top-2, 4 local experts, cf 0.5: 3·2·2·0.5 = 6 rows → 8 (bf16's alignment), 32 (MXFP8).
  EXPECT_EQ(permuted_buffer_rows(3, 2, 2, 4, 0.5, 8), 8);
  EXPECT_EQ(permuted_buffer_rows(3, 2, 2, 4, 0.5, 32), 32);
  // min(K, E_local): top-8 over 2 local experts needs at most 2 rows per token.
  EXPECT_EQ(permuted_buffer_rows(16, 4, 8, 2, 1.0, 8), 128);
}

TEST(EpBuffers, NonBlockingDropsTheExpertMajorTail) {
  // Local experts receive 100, 37 and 50 copies. Blocking mode sizes the buffer to what they need,
  // Σ roundup8 = 104 + 40 + 56 = 200 rows, and keeps everything.
  const std::vector<double> copies{100, 37, 50};
  EXPECT_EQ(permuted_rows(copies, 8), 200);
  const auto all = fit_permuted(copies, permuted_rows(copies, 8), 8);
  EXPECT_EQ(all.kept, copies);
  EXPECT_EQ(all.dropped, 0);
  // A budget of 150 rows (alignment 8): expert 0 rows 0-99 (group to 104), expert 1 rows 104-140
  // (group to 144), expert 2 from row 144: 6 of its 50 fit. 44 dropped.
  const auto fit8 = fit_permuted(copies, 150, 8);
  EXPECT_EQ(fit8.kept, (std::vector<double>{100, 37, 6}));
  EXPECT_EQ(fit8.dropped, 44);
  // MXFP8's 32-row groups: expert 1 starts at row 128 and keeps 22, expert 2 (from 192) none: 65.
  const auto fit32 = fit_permuted(copies, 150, 32);
  EXPECT_EQ(fit32.kept, (std::vector<double>{100, 22, 0}));
  EXPECT_EQ(fit32.dropped, 65);
}

}  // namespace
}  // namespace moesim
