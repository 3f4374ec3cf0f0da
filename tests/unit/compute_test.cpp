// The roofline compute model, derived by hand.
#include <gtest/gtest.h>

#include "sim/compute/compute_model.hpp"

using namespace moesim;

namespace {
cluster::GpuSpec gpu(bool flash) {
  cluster::GpuSpec g;
  g.key = "test";
  g.peak_flops[static_cast<std::size_t>(cluster::Dtype::bf16)] = 1e15;
  g.hbm_bytes_per_second = 3e12;
  g.gemm_efficiency = 0.5;
  g.attention_efficiency = 0.5;
  g.flash_attention = flash;
  return g;
}
}  // namespace

TEST(ComputeModel, SquareGemmIsComputeBound) {
  // 2·1024³ = 2147483648 FLOP at 1e15 × 0.5: 4294967.296 ps → 4294967. Memory: 3·1024²·2 B /
  // 3e12 B/s = 2.1 us, less.
  compute::ComputeModel cm(gpu(true), {});
  EXPECT_EQ(cm.gemm(1024, 1024, 1024), 4'294'967);
}

TEST(ComputeModel, SkinnyGemmIsMemoryBound) {
  // m = 1: (1024 + 1024² + 1024)·2 B = 2101248 B at 3e12 B/s = 700416 ps; the FLOPs need 4.2 ns.
  compute::ComputeModel cm(gpu(true), {});
  EXPECT_EQ(cm.gemm(1, 1024, 1024), 700'416);
}

TEST(ComputeModel, LaunchOverheadAndBackwardFactor) {
  compute::ComputeOptions o;
  o.launch_overhead = 3 * kMicrosecond;
  o.backward_factor = 2.0;
  compute::ComputeModel cm(gpu(true), o);
  EXPECT_EQ(cm.gemm(1024, 1024, 1024), 4'294'967 + 3'000'000);
  EXPECT_EQ(cm.backward(cm.gemm(1024, 1024, 1024)), 2 * (4'294'967 + 3'000'000));
}

TEST(ComputeModel, AttentionWithoutFlashAttentionIsMemoryBoundAtLongSequences) {
  // 1 sequence, 32 heads of 128, L = 32768, causal: 4·32·L²·128·0.5 = 8.8e12 FLOP → 17.59 ms at
  // 5e14. Without FlashAttention the L×L scores pass HBM 4 times: 4·32·L²·2 B = 2.75e11 B →
  // 91.6 ms at 3e12 B/s, so memory decides and the GPU is 5.2× slower.
  compute::ComputeModel flash(gpu(true), {});
  compute::ComputeModel plain(gpu(false), {});
  const double l = 32768;
  const Time tf = flash.attention(1, 32, l, 128, true);
  const Time tp = plain.attention(1, 32, l, 128, true);
  EXPECT_EQ(tf, seconds_to_time(4.0 * 32 * l * l * 128 * 0.5 / 5e14));
  const double bytes = 4.0 * 32 * l * 128 * 2 + 4.0 * 32 * l * l * 2;
  EXPECT_EQ(tp, seconds_to_time(bytes / 3e12));
  EXPECT_GT(static_cast<double>(tp) / static_cast<double>(tf), 5.0);
}

TEST(ComputeModel, WaveQuantizationOfSmallAndOddGemms) {
  // 132 SMs. 4096×4096: 32×32 = 1024 tiles = 7.76 waves → 8 waves: 1024/1056 = 0.9697.
  // 64×2048×7168 (an expert with 64 tokens): 1×16 tiles, split-K by min(⌊132/16⌋, ⌊7168/512⌋) = 8
  // → 128 tiles in one wave: 128/132. 128×128×256: one tile, K too short to split: 1/132.
  auto g = gpu(true);
  g.sms = 132;
  compute::ComputeModel cm(g, {});
  EXPECT_DOUBLE_EQ(cm.wave_efficiency(4096, 4096, 4096), 1024.0 / 1056.0);
  EXPECT_DOUBLE_EQ(cm.wave_efficiency(64, 2048, 7168), 128.0 / 132.0);
  EXPECT_DOUBLE_EQ(cm.wave_efficiency(128, 128, 256), 1.0 / 132.0);
  EXPECT_DOUBLE_EQ(cm.gemm_efficiency(4096, 4096, 4096), 0.5 * 1024.0 / 1056.0);
  // Without an SM count the GPU's efficiency applies unchanged.
  EXPECT_DOUBLE_EQ(compute::ComputeModel(gpu(true), {}).gemm_efficiency(128, 128, 256), 0.5);
}
