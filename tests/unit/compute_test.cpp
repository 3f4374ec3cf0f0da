// The compute model: GeMM shape effects derived by hand from the model's rules
// (sim/compute/compute_model.hpp), against the OpenXLA sm_90 table as a whole, and against the
// published maximum achievable matmul FLOPS; the kernels' fixed cost, attention, calibration tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "sim/core/error.hpp"

#include "sim/blocks/layer_costs.hpp"
#include "sim/compute/compute_model.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {
constexpr std::size_t kBf16 = static_cast<std::size_t>(cluster::Dtype::bf16);
constexpr std::size_t kFp8 = static_cast<std::size_t>(cluster::Dtype::fp8);

// A made-up GPU: 1 PFLOP/s FP16 and BF16 (2 FP8), 3 TB/s, GeMM ceiling 0.5, no MAMF measurement.
cluster::GpuSpec gpu(bool flash, int sms = 0) {
  cluster::GpuSpec g;
  g.key = "test";
  g.peak_flops[kBf16] = 1e15;
  g.peak_flops[static_cast<std::size_t>(cluster::Dtype::fp16)] = 1e15;
  g.peak_flops[kFp8] = 2e15;
  g.hbm_bytes_per_second = 3e12;
  g.sms = sms;
  g.gemm_efficiency = 0.5;
  g.attention_efficiency = 0.5;
  g.flash_attention = flash;
  return g;
}

// A modelled time against a hand-derived one in seconds (rounding may differ by a picosecond).
void expect_ps(Time t, double seconds) { EXPECT_NEAR(static_cast<double>(t), seconds * 1e12, 2.0); }

compute::ComputeOptions no_overhead(cluster::Dtype d = cluster::Dtype::bf16) {
  compute::ComputeOptions o;
  o.dtype = d;
  o.launch_overhead = 0;
  return o;
}

// A GPU kind of topologies/gpus.json.
cluster::GpuSpec catalogue(const std::string& key) {
  return test::scenario_from(fmt::format(R"({{"name": "g", "cluster": {{"gpu": "{}", "levels": [
      {{"name": "gpu", "count": 1, "bandwidth": "1GB/s", "latency": "1us"}}]}}, "model": {{"preset": "gpt-medium-moe"}},
      "training": {{"sequence_length": 128}}, "strategy": {{"name": "ep"}}}})",
                                         key))
      .topology()
      .gpu(0);
}

compute::ComputeModel model(const std::string& key, cluster::Dtype d = cluster::Dtype::bf16) {
  compute::ComputeOptions o;
  o.dtype = d;
  return compute::ComputeModel(catalogue(key), o);
}

// A tile's ramp in K elements: kTileRampK = 155 on the H100 it was fitted on (989.4 TFLOP/s BF16
// over 132 SMs), scaled by the GPU's FP16 peak per SM (the ramp is a time, whatever the dtype).
// The made-up GPU's 1e15 over 132 SMs: 155 · 1e15 / 989.4e12 = 156.66.
double ramp_k(double fp16_peak, double sms) { return 155 * (fp16_peak / sms) / (989.4e12 / 132); }

// The per-SM rate of a tile: peak · ceiling / SMs, times min(1, intensity / 55) with the tile's
// intensity 2·tm·tn / ((tm + tn) · bytes) FLOPs per operand byte (kCriticalIntensity = 55).
double tile_seconds(double tm, double tn, double k, double peak, double ceiling, double sms, double bytes = 2) {
  const double intensity = 2 * tm * tn / ((tm + tn) * bytes);
  return 2 * tm * tn * (k + ramp_k(peak, sms)) / (peak * ceiling / sms * std::min(1.0, intensity / 55));
}
}  // namespace

TEST(ComputeModel, SquareGemmWithoutSmCountIsComputeBound) {
  // No SM count: no waves; the best tile (128×256, intensity 85 ≥ 55) at the ceiling:
  // 2·1024³·(1024 + 155)/1024 FLOP at 1e15 × 0.5 = 4.9454 us. Memory: 3·1024²·2 B / 3e12 B/s = 2.1 us, less.
  compute::ComputeModel cm(gpu(true), no_overhead());
  EXPECT_EQ(cm.gemm(1024, 1024, 1024), seconds_to_time(2.0 * 1024 * 1024 * (1024 + 155) / 5e14));
}

TEST(ComputeModel, SkinnyGemmIsMemoryBound) {
  // m = 1: (1·1024 + 1024²)·2 B of operands and 1024·2 B of output = 2101248 B streamed at the
  // HBM's achievable rate, kHbmEfficiency (0.814) of 3e12 B/s, as every memory-bound kernel:
  // 860462 ps; the FLOPs need 4.2 ns.
  compute::ComputeModel cm(gpu(true), no_overhead());
  EXPECT_EQ(cm.gemm(1, 1024, 1024), 860'462);
  // FP8 (Transformer Engine): 1-byte operands, BF16 output: 1024 + 1024² + 2·1024 = 1051648 B → 430650 ps.
  compute::ComputeModel fp8(gpu(true), no_overhead(cluster::Dtype::fp8));
  EXPECT_EQ(fp8.gemm(1, 1024, 1024), seconds_to_time(1051648.0 / (compute::kHbmEfficiency * 3e12)));
}

TEST(ComputeModel, LaunchOverheadDominatesTinyGemms) {
  // Default fixed cost 5.3 us per kernel. 64×64×64 on 132 SMs: one 64×64 tile (intensity
  // 2·64·64/(128·2) = 32 FLOP/B → 32/55 of the ceiling) of 2·64·64·(64 + 156.66) FLOP at
  // 1e15·0.5/132 per SM: 0.818 us. Memory 3·64²·2 B: 8 ns. The fixed cost is 87 % of the time.
  compute::ComputeModel cm(gpu(true, 132), {});
  EXPECT_EQ(cm.kernel_overhead(), compute::kKernelOverhead);
  const Time tiny = cm.gemm(64, 64, 64);
  expect_ps(tiny - compute::kKernelOverhead, tile_seconds(64, 64, 64, 1e15, 0.5, 132));
  EXPECT_GT(static_cast<double>(compute::kKernelOverhead) / static_cast<double>(tiny), 0.85);
  // Eight times the FLOPs (K = 512: still no split, 512/512 = 1 slice) cost 1.8 us more, not 8×.
  EXPECT_LT(static_cast<double>(cm.gemm(64, 64, 512)) / static_cast<double>(tiny), 1.4);
  // Memory-bound kernels pay their own fixed cost once and reach kHbmEfficiency of the HBM
  // bandwidth (3e12 B/s here); an explicit scenario value replaces both fixed costs.
  EXPECT_EQ(cm.memory_bound(3e6), compute::kMemoryKernelOverhead + seconds_to_time(1e-6 / compute::kHbmEfficiency));
  compute::ComputeOptions o;
  o.launch_overhead = 3 * kMicrosecond;
  o.backward_factor = 2.0;
  compute::ComputeModel explicit_overhead(gpu(true, 132), o);
  expect_ps(explicit_overhead.gemm(64, 64, 64) - 3 * kMicrosecond, tile_seconds(64, 64, 64, 1e15, 0.5, 132));
  EXPECT_EQ(explicit_overhead.backward(explicit_overhead.gemm(64, 64, 64)), 2 * explicit_overhead.gemm(64, 64, 64));
}

TEST(ComputeModel, WaveQuantization) {
  // 132 SMs, K = 4096, n = 256. 8448 rows: 66 × 2 = 132 tiles of 128×128 (intensity 64 ≥ 55), one
  // full wave: T1 = 2·128·128·(4096 + 156.66) / (1e15·0.5/132) = 36.8 us (memory 24.6 us, less;
  // 128×256 tiles would be 66, split-K in 2 with a reduction: slower).
  // 8576 rows (1.5 % more): 134 tiles of 128×128 need 2 waves; the best is 268 tiles of 64×128 in
  // 3 waves of half-size tiles at 42.67/55 of the ceiling: 3·(T1/2)·55/42.67 = 1.934·T1.
  compute::ComputeModel cm(gpu(true, 132), no_overhead());
  const double t1 = tile_seconds(128, 128, 4096, 1e15, 0.5, 132);
  expect_ps(cm.gemm(8448, 256, 4096), t1);
  expect_ps(cm.gemm(8576, 256, 4096), 3 * tile_seconds(64, 128, 4096, 1e15, 0.5, 132));
  EXPECT_NEAR(static_cast<double>(cm.gemm(8576, 256, 4096)) / static_cast<double>(cm.gemm(8448, 256, 4096)),
              3 * 0.5 * 55 / (2.0 * 64 * 128 / (192 * 2)), 1e-6);
  // Square 4096³: 1024 tiles of 128×128 in 8 waves (1056 slots) or 512 of 128×256 in 4 (528):
  // the same, 1024/1056 of the SMs busy.
  expect_ps(cm.gemm(4096, 4096, 4096), 8 * t1);
}

TEST(ComputeModel, SplitKFillsTheSmsForFewTilesAndPaysTheReduction) {
  // 256×256×8192 on 132 SMs. 4 tiles of 128×128 split into min(⌊132/4⌋, ⌊8192/512⌋) = 16 slices
  // of 512 → 64 units, one wave: 2·128²·(512 + 156.66)/(1e15·0.5/132) = 5.77 us, and the partial
  // sums, 2·256²·16·4 B, reduce at 0.814 · 3e12 B/s (kHbmEfficiency) in 3.44 us: 9.21 us. Unsplit,
  // one 128×128 tile would take 2·128²·(8192 + 156.66)/3.79e12 = 72 us. The best: 16 tiles of
  // 64×64 in min(8, 16) = 8 slices of 1024 (128 units): 2·64²·(1024 + 156.66)·(55/32)/3.79e12 =
  // 4.38 us (operands 8.5 MB: 3.5 us, less) + a reduction of 2·256²·8·4 B: 1.72 us.
  compute::ComputeModel cm(gpu(true, 132), no_overhead());
  const double reduction = 2.0 * 256 * 256 * 8 * 4 / (compute::kHbmEfficiency * 3e12);
  expect_ps(cm.gemm(256, 256, 8192), tile_seconds(64, 64, 1024, 1e15, 0.5, 132) + reduction);
  EXPECT_LT(time_to_seconds(cm.gemm(256, 256, 8192)), tile_seconds(128, 128, 8192, 1e15, 0.5, 132) / 8);
}

TEST(ComputeModel, GroupedGemmIsOneLaunchOverTheUnionOfTiles) {
  // Two experts of 8448 and 128 rows (n = 256, K = 4096): their tiles, 66·2 + 1·2 = 134 of 128×128
  // or 132·2 + 2·2 = 268 of 64×128, are those of one GeMM of 8576 rows, and it stays compute-bound
  // with both experts' weights (76.7 MB: 25.6 us < 71 us): the same time, one fixed cost.
  compute::ComputeModel cm(gpu(true, 132), {});
  const std::vector<double> experts{8448, 128};
  EXPECT_EQ(cm.grouped_gemm(experts, 256, 4096), cm.gemm(8576, 256, 4096));
  // (Apart, the 8448 rows would fill exactly one wave: the union's 134 tiles need a second one.)
  // E equal groups fill the waves as a batched GeMM's b copies do: 4 experts of 1024 rows (n 1536,
  // K 2048) are one GeMM of 4096 rows, 384 tiles of 128×128 in 3 waves, 57 us (compute-bound:
  // with 4 weights of 1536×2048 the operands are 54 MB, 18 us); apart each expert's 96 tiles take
  // a wave of 19 us and a fixed cost: 4·(19 + 5.3) us, more than the grouped kernel saves in launches alone.
  const std::vector<double> four(4, 1024);
  EXPECT_EQ(cm.grouped_gemm(four, 1536, 2048), cm.gemm(4096, 1536, 2048));
  EXPECT_LT(cm.grouped_gemm(four, 1536, 2048) + 3 * compute::kKernelOverhead, 4 * cm.gemm(1024, 1536, 2048));
  // Experts without tokens add nothing; no tokens at all: no kernel.
  const std::vector<double> with_idle{8448, 0, 128, 0};
  EXPECT_EQ(cm.grouped_gemm(with_idle, 256, 4096), cm.grouped_gemm(experts, 256, 4096));
  const std::vector<double> idle(3, 0.0);
  EXPECT_EQ(cm.grouped_gemm(idle, 256, 4096), 0);
}

TEST(ComputeModel, GroupedWeightGradientRunsEachExpertsOutputOverItsRows) {
  // dB_i = A_iᵀ·dC_i: expert i's gradient is a k × n output whose main loop runs over its rows.
  // One expert's is the GeMM of that output over its rows (the same tiles, bytes and fixed cost):
  // 4096 × 4096 over 512 rows, 512 tiles of 256×128 in 4 waves, no split-K.
  compute::ComputeModel cm(gpu(true, 132), {});
  const std::vector<double> one{512};
  EXPECT_EQ(cm.grouped_gemm_wgrad(one, 4096, 4096), cm.gemm(4096, 4096, 512));
  // Two experts' outputs stacked are one GeMM of twice the rows of output over the same K: their
  // tiles fill the same waves (compute-bound: the operands, 8 MB with two 32 MB gradients, take
  // 24 us against 120 us of tiles).
  const std::vector<double> two{512, 512};
  EXPECT_EQ(cm.grouped_gemm_wgrad(two, 4096, 4096), cm.gemm(8192, 4096, 512));
  // Few rows per expert make short main loops: 16 experts of 64 rows, n 1536, k 2048.
  //   forward: 64×128 tiles (intensity 2·64·128/(192·2) = 42.7 of 55: 0.776 of the 0.5 PFLOP/s
  //   ceiling), 16·12 = 192 tiles in 2 waves over K = 2048 + 156.66: 2·132·2·64·128·2204.66/(0.5e15·0.776)
  //   = 36.0 us; but the 16 experts' weights, 100.7 MB, and the rows in and out, 7.3 MB, take
  //   108.0 MB / (0.814 · 3e12 B/s) = 44.2 us: memory-bound, 49.53 us with the 5.3 us fixed cost;
  //   weight gradient: 128×256 tiles at the full ceiling, 16·96 = 1536 in 12 waves, each over only
  //   the 64 rows + the ramp (156.66 steps on this GPU, ramp_k): 12·132·2·128·256·220.66/0.5e15
  //   + 5.3 us = 51.11 us (the same 108 MB: 44.2 us, less), 3 % more for the same FLOPs.
  const std::vector<double> small(16, 64);
  EXPECT_NEAR(time_to_seconds(cm.grouped_gemm(small, 1536, 2048)) * 1e6, 49.53, 0.01);
  EXPECT_NEAR(time_to_seconds(cm.grouped_gemm_wgrad(small, 1536, 2048)) * 1e6, 51.11, 0.01);
  // No rows: no kernel.
  const std::vector<double> idle(3, 0.0);
  EXPECT_EQ(cm.grouped_gemm_wgrad(idle, 1536, 2048), 0);
}

TEST(ComputeModel, TransformerEngineMultiStreamGroupedGemm) {
  // Transformer Engine's GroupedLinear (grouped GeMM backend per_expert): a cuBLAS GeMM per expert,
  // GeMM i on stream i mod 4; each holds the GPU for its time alone less the fixed cost F, and
  // each stream launches its next GeMM F after its last one ends.
  compute::ComputeOptions per_expert;
  per_expert.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
  const compute::ComputeModel te(gpu(true, 132), per_expert), one(gpu(true, 132), {});
  const double F = time_to_seconds(compute::kKernelOverhead);
  // Long GeMMs keep the GPU busy: F once, then each GeMM's waves one after another.
  const std::vector<double> four(4, 1024);
  const double alone = time_to_seconds(one.gemm(1024, 1536, 2048));
  EXPECT_NEAR(time_to_seconds(te.grouped_gemm(four, 1536, 2048)), F + 4 * (alone - F), 1e-11);
  // More than one grouped kernel of the same rows: the union's tiles fill waves the GeMMs apart leave part-empty.
  EXPECT_GT(te.grouped_gemm(four, 1536, 2048), one.grouped_gemm(four, 1536, 2048));
  // GeMMs shorter than F/3 leave the streams waiting on their launches: 8 of compute c each, on 4
  // streams: the first four run back to back from F (ends F + c … F + 4c); stream 0's second is
  // launched at (F + c) + F, after the GPU has gone idle, and the other three follow it back to
  // back: 2F + 5c in all. 8 experts of 64 rows, n = k = 64: one 64×64 tile each, c well under F/3.
  const std::vector<double> tiny(8, 64);
  const double c = time_to_seconds(one.gemm(64, 64, 64)) - F;
  ASSERT_LT(c, F / 3);
  EXPECT_NEAR(time_to_seconds(te.grouped_gemm(tiny, 64, 64)), 2 * F + 5 * c, 1e-11);
  // The weight gradients too: per expert, its k × n output over its rows.
  const double wgrad_alone = time_to_seconds(one.grouped_gemm_wgrad(std::vector<double>{1024}, 1536, 2048));
  EXPECT_NEAR(time_to_seconds(te.grouped_gemm_wgrad(four, 1536, 2048)), F + 4 * (wgrad_alone - F), 1e-11);
  // Experts without rows launch nothing.
  const std::vector<double> with_idle{1024, 0, 1024, 0, 1024, 1024};
  EXPECT_EQ(te.grouped_gemm(with_idle, 1536, 2048), te.grouped_gemm(four, 1536, 2048));
  EXPECT_EQ(te.grouped_gemm_kernels(with_idle), 4);

  // Transformer Engine's own measurement of this path (NVIDIA/TransformerEngine PR #2045: H100,
  // TE 2.7, CUDA 12.9, BF16): 8 GeMMs of 4096×768×2048 at 627.9 TFLOP/s and 16 of 2048×768×2048
  // at 553.9. The H100's model: 584 (-7 %) and 565 (+2 %); as one grouped kernel it would run
  // both at 747 (+19 %, +35 %), faster than the CUTLASS grouped kernel of the same PR (650.6, 636.9).
  compute::ComputeOptions bf16_per_expert;
  bf16_per_expert.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
  const compute::ComputeModel h100(catalogue("h100-sxm5-80gb"), bf16_per_expert);
  const auto tflops = [&](const compute::ComputeModel& cm, int groups, double rows) {
    const std::vector<double> g(groups, rows);
    return 2 * groups * rows * 768 * 2048 / time_to_seconds(cm.grouped_gemm(g, 768, 2048)) / 1e12;
  };
  EXPECT_NEAR(tflops(h100, 8, 4096), 627.9, 627.9 * 0.10);
  EXPECT_NEAR(tflops(h100, 16, 2048), 553.9, 553.9 * 0.05);
  EXPECT_GT(tflops(model("h100-sxm5-80gb"), 16, 2048), 553.9 * 1.3);
}

TEST(ComputeModel, TorchGroupedMmRunsPyTorchsTileWithoutSplitK) {
  // torch._grouped_mm (compute_model.hpp, kTorchGroupedMmCeiling) on the made-up GPU (132 SMs,
  // ceiling 0.5, 3e12 B/s): its main loop at 0.8 of the ceiling, 1e15·0.5·0.8/132 = 3.03 TFLOP/s
  // per SM; each call two kernels on the GPU, the preparation's fixed cost (2.34 us) before the
  // GeMM's (5.3 us).
  compute::ComputeOptions torch;
  torch.grouped_gemm_kernels = compute::GroupedGemmKernels::TorchGroupedMm;
  const compute::ComputeModel mm(gpu(true, 132), torch), cublas(gpu(true, 132), {});
  const double fixed = time_to_seconds(compute::kKernelOverhead + compute::kMemoryKernelOverhead);
  const double ramp = ramp_k(1e15, 132);
  // One group of 256 rows, n 256, K 8192: more than 128 rows and columns, the cooperative 128×256
  // tile (intensity 85 ≥ 55: the full rate), 2 tiles in one wave and no split-K:
  // 2·128·256·(8192 + 156.66)/3.03e12 = 180.56 us (operands 8.5 MB at 0.814·3e12: 3.5 us), 188.20 us
  // in all. cuBLAS splits the same K over the idle SMs and takes a tenth of it.
  const std::vector<double> one{256};
  const double large = 2.0 * 128 * 256 * (8192 + ramp) / (1e15 * 0.5 * 0.8 / 132);
  EXPECT_NEAR(time_to_seconds(mm.grouped_gemm(one, 256, 8192)), fixed + large, 1e-11);
  EXPECT_NEAR(time_to_seconds(mm.grouped_gemm(one, 256, 8192)) * 1e6, 188.20, 0.01);
  EXPECT_LT(10 * cublas.grouped_gemm(one, 256, 8192), mm.grouped_gemm(one, 256, 8192));
  // Two groups of 64 rows: at most 128 mean rows, the ping-pong 64×128 tile (intensity 42.7: 0.776
  // of the rate), one per group, in one wave: 2·64·128·(8192 + 156.66)/(3.03e12·0.776) = 58.19 us,
  // 65.83 us with both fixed costs. The mean counts empty groups, as PyTorch divides by the group
  // count: two groups of 192 rows and two without have a mean of 96, the 64×128 tile (12 tiles, one
  // wave: the same time), where the 192 rows of the groups with rows would take the 128×256 one.
  const std::vector<double> two{64, 64};
  const double small = 2.0 * 64 * 128 * (8192 + ramp) / (1e15 * 0.5 * 0.8 / 132 * (2.0 * 64 * 128 / (192 * 2) / 55));
  EXPECT_NEAR(time_to_seconds(mm.grouped_gemm(two, 256, 8192)), fixed + small, 1e-11);
  EXPECT_NEAR(time_to_seconds(mm.grouped_gemm(two, 256, 8192)) * 1e6, 65.83, 0.01);
  const std::vector<double> with_idle{192, 192, 0, 0};
  EXPECT_NEAR(time_to_seconds(mm.grouped_gemm(with_idle, 256, 8192)), fixed + small, 1e-11);
  // Its weight gradient is K-grouped (one k × n output per group): the tile follows the output,
  // 128×256 here, each group's tiles over its own rows.
  const std::vector<double> wgrad{4096};
  const double wtile = 2.0 * 128 * 256 * (4096 + ramp) / (1e15 * 0.5 * 0.8 / 132);
  EXPECT_NEAR(time_to_seconds(mm.grouped_gemm_wgrad(wgrad, 2048, 768)), fixed + wtile, 1e-11);
  // One op for the host, as the presets' host costs count it (the preparation is timed in the
  // call); no kernel without rows.
  EXPECT_EQ(mm.grouped_gemm_kernels(two), 1);
  EXPECT_EQ(mm.grouped_gemm(std::vector<double>(3, 0.0), 256, 8192), 0);
}

TEST(ComputeModel, PublishedMaximumAchievableMatmulFlops) {
  // stas00/ml-engineering@744d01e1 compute/accelerator/README.md, MAMF table (TFLOP/s at M×N×K):
  // the model reproduces each measurement at its shape, its fixed cost included, which sets the
  // GPU's ceiling.
  struct Case {
    const char* gpu;
    cluster::Dtype dtype;
    double tflops, m, n, k;
  };
  const Case cases[] = {
      {"a100-sxm4-80gb", cluster::Dtype::bf16, 271.2, 1024, 10240, 5120},
      {"h100-sxm5-80gb", cluster::Dtype::bf16, 794.5, 2048, 2048, 13312},
      {"h100-sxm5-80gb", cluster::Dtype::fp8, 1402.6, 1024, 9216, 14336},
      {"h200-sxm-141gb", cluster::Dtype::fp8, 1453.4, 1280, 4096, 12032},
      {"b200-sxm-180gb", cluster::Dtype::bf16, 1745.0, 1792, 16128, 3072},
      {"b200-sxm-180gb", cluster::Dtype::fp8, 3432.5, 15360, 4096, 3072},
      {"gb200-nvl72", cluster::Dtype::bf16, 1822.0, 4096, 9728, 2048},
      {"gb200-nvl72", cluster::Dtype::fp8, 3615.6, 19456, 5120, 1536},
  };
  for (const Case& c : cases) {
    const compute::ComputeModel cm = model(c.gpu, c.dtype);
    const double achieved = 2 * c.m * c.n * c.k / time_to_seconds(cm.gemm(c.m, c.n, c.k));
    EXPECT_NEAR(achieved / (c.tflops * 1e12), 1.0, 1e-6) << c.gpu << " " << cluster::to_string(c.dtype);
    EXPECT_GT(cm.gemm_ceiling(), c.tflops * 1e12 / cm.gpu().peak(c.dtype)) << c.gpu;  // the shape loses a little
    EXPECT_LT(cm.gemm_ceiling(), 1.0) << c.gpu;
  }
  // H100: the ceilings the measurements imply (the tile main loop's share of peak): BF16 0.871,
  // FP8 0.760 — FP8 reaches a smaller fraction of its doubled peak, at every large shape.
  const auto bf16 = model("h100-sxm5-80gb"), fp8 = model("h100-sxm5-80gb", cluster::Dtype::fp8);
  EXPECT_NEAR(bf16.gemm_ceiling(), 0.8706, 0.0005);
  EXPECT_NEAR(fp8.gemm_ceiling(), 0.7597, 0.0005);
  EXPECT_LT(fp8.gemm_efficiency(8192, 8192, 8192), 0.9 * bf16.gemm_efficiency(8192, 8192, 8192));
  // FP16 and TF32 take BF16's measurement (same tensor cores); H200 BF16 is H100's (the table's note).
  EXPECT_DOUBLE_EQ(model("h100-sxm5-80gb", cluster::Dtype::tf32).gemm_ceiling(), bf16.gemm_ceiling());
  EXPECT_DOUBLE_EQ(model("h100-sxm5-80gb", cluster::Dtype::fp16).gemm_ceiling(), bf16.gemm_ceiling());
  // A GPU without a measurement keeps its catalogued gemm_efficiency; the scenario's override wins.
  EXPECT_DOUBLE_EQ(model("a40-48gb").gemm_ceiling(), 0.68);
  compute::ComputeOptions o;
  o.gemm_efficiency = 0.6;
  EXPECT_DOUBLE_EQ(compute::ComputeModel(catalogue("h100-sxm5-80gb"), o).gemm_ceiling(), 0.6);
}

TEST(ComputeModel, NoGemmRunsFasterThanTheMeasuredMaximum) {
  // GB200 FP8: the best rate mamf-finder found is 3615.6 TFLOP/s (at 19456×5120×1536). DeepSeek-V3's
  // expert fc1 on 4 local experts of 8192 copies each (H 7168 → 2·2048) has 4.7× that K: the tile
  // model alone, whose tile ramp weighs less at long K, would run it faster than any measured
  // shape; held to the maximum, it takes 2·4·8192·4096·7168 FLOP / 3615.6 TFLOP/s exactly.
  const auto fp8 = model("gb200-nvl72", cluster::Dtype::fp8);
  const std::vector<double> rows(4, 8192);
  const double flops = 2.0 * 4 * 8192 * 4096 * 7168;
  EXPECT_NEAR(flops / time_to_seconds(fp8.grouped_gemm(rows, 4096, 7168)) / 3615.6e12, 1.0, 1e-9);
  EXPECT_NEAR(fp8.gemm_efficiency(32768, 4096, 7168), 3615.6 / 5000, 1e-9);
  // TF32 on H100 is held to BF16's maximum scaled by the peaks: 794.5 · 494.7 / 989.4 TFLOP/s.
  const auto tf32 = model("h100-sxm5-80gb", cluster::Dtype::tf32);
  EXPECT_LE(tf32.gemm_efficiency(16384, 16384, 16384), 794.5 / 989.4 + 1e-9);
  // A scenario's own ceiling stands alone: 0.9 of peak is beyond the measured maximum.
  compute::ComputeOptions o;
  o.dtype = cluster::Dtype::fp8;
  o.gemm_efficiency = 0.9;
  EXPECT_GT(compute::ComputeModel(catalogue("gb200-nvl72"), o).gemm_efficiency(32768, 4096, 7168), 3615.6 / 5000);
}

TEST(ComputeModel, Fp8TrainingKeepsTheAttentionCoreInBf16) {
  // Transformer Engine's FP8 recipes leave the attention core in BF16 (fp8_dpa defaults to False):
  // 2 sequences of 4096, 16 heads of 128, causal: 4·2·16·4096²·128/2 = 1.374e14 FLOP at the BF16
  // peak 1e15 × attention efficiency 0.5 (not the FP8 peak 2e15): 0.2749 s, as BF16 training.
  compute::ComputeModel bf16(gpu(true), no_overhead()), fp8(gpu(true), no_overhead(cluster::Dtype::fp8));
  expect_ps(fp8.attention(2, 16, 4096, 128, true), 4.0 * 2 * 16 * 4096 * 4096 * 128 / 2 / 5e14);
  EXPECT_EQ(fp8.attention(2, 16, 4096, 128, true), bf16.attention(2, 16, 4096, 128, true));
  // Without FlashAttention the scores pass through HBM in BF16 too: the same bytes.
  compute::ComputeModel bf16_unfused(gpu(false), no_overhead()), fp8_unfused(gpu(false), no_overhead(cluster::Dtype::fp8));
  EXPECT_EQ(fp8_unfused.attention(2, 16, 4096, 128, true), bf16_unfused.attention(2, 16, 4096, 128, true));
}

TEST(ComputeModel, Fp8CastReadsBf16AndWritesTwoFp8Copies) {
  // 1e9 elements: read 2 B, write the row-wise and the column-wise FP8 copy, 1 B each: 4e9 B at
  // 3e12 B/s at kHbmEfficiency (0.814): 1.638 ms, plus a memory-bound kernel's fixed cost 2.34 us.
  // BF16 training casts nothing.
  compute::ComputeOptions o;
  o.dtype = cluster::Dtype::fp8;
  compute::ComputeModel fp8(gpu(true), o);
  EXPECT_EQ(fp8.fp8_cast(1e9), compute::kMemoryKernelOverhead + seconds_to_time(4e9 / (compute::kHbmEfficiency * 3e12)));
  EXPECT_EQ(compute::ComputeModel(gpu(true), {}).fp8_cast(1e9), 0);
}

TEST(ComputeModel, Mxfp8RunsOnBlackwellTensorCoresAtItsMeasuredRateWithItsBlockScales) {
  // GB200: MXFP8 takes the FP8 peak (5000 TFLOP/s) and its own measurement, B200's MXFP8 grouped
  // GeMM carried by the GPUs' FP8 maxima (2303 · 3615.6 / 3432.5 = 2426 TFLOP/s at 131072×2048×7168,
  // topologies/gpus.json): the model meets it there, and its ceiling sits below FP8's.
  const auto fp8 = model("gb200-nvl72", cluster::Dtype::fp8), mx = model("gb200-nvl72", cluster::Dtype::mxfp8);
  EXPECT_NEAR(2.0 * 131072 * 2048 * 7168 / time_to_seconds(mx.gemm(131072, 2048, 7168)) / 2426e12, 1.0, 1e-6);
  EXPECT_LT(mx.gemm_ceiling(), 0.75 * fp8.gemm_ceiling());
  // Without a measurement of its own MXFP8 takes FP8's (the same tensor cores): the measured FP8
  // shape 19456×5120×1536 then runs at 3615.6 TFLOP/s (compute-bound: the scales' extra 1/32 B per
  // operand element only touch the memory side).
  cluster::GpuSpec unmeasured = catalogue("gb200-nvl72");
  unmeasured.mamf[static_cast<std::size_t>(cluster::Dtype::mxfp8)] = {};
  compute::ComputeOptions mo;
  mo.dtype = cluster::Dtype::mxfp8;
  const compute::ComputeModel carried(unmeasured, mo);
  EXPECT_DOUBLE_EQ(carried.gemm_ceiling(), fp8.gemm_ceiling());
  EXPECT_NEAR(2.0 * 19456 * 5120 * 1536 / time_to_seconds(carried.gemm(19456, 5120, 1536)) / 3615.6e12, 1.0, 1e-6);
  EXPECT_DOUBLE_EQ(cluster::dtype_bytes(cluster::Dtype::mxfp8), 1.03125);
  EXPECT_EQ(cluster::storage_dtype(cluster::Dtype::mxfp8), cluster::Dtype::bf16);
  // The cast writes both FP8 copies with their scales: 1e9 · (2 + 2 · 1.03125) = 4.0625e9 B at
  // 8 TB/s · 0.814, plus the memory-bound kernel's fixed cost.
  compute::ComputeOptions o;
  o.dtype = cluster::Dtype::mxfp8;
  EXPECT_EQ(compute::ComputeModel(catalogue("gb200-nvl72"), o).fp8_cast(1e9),
            compute::kMemoryKernelOverhead + seconds_to_time(4.0625e9 / (compute::kHbmEfficiency * 8e12)));
  // Hopper has FP8 tensor cores but no block-scaled ones: refused, naming the way out.
  try {
    model("h100-sxm5-80gb", cluster::Dtype::mxfp8);
    ADD_FAILURE() << "MXFP8 on an H100 was not refused";
  } catch (const moesim::InfeasibleError& e) {
    EXPECT_NE(std::string(e.what()).find("no MXFP8 tensor cores"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"fp8\""), std::string::npos) << e.what();
  }
  EXPECT_EQ(cluster::parse_dtype("mxfp8"), cluster::Dtype::mxfp8);
}

// Relative time errors of a model against a measured table: mean |error|, the worst and where.
struct ErrorStats {
  double sum = 0, signed_sum = 0, worst = 0;
  int rows = 0;
  std::string worst_case;
  void add(double predicted, double measured, const std::string& what) {
    const double e = predicted / measured - 1;
    sum += std::abs(e);
    signed_sum += e;
    ++rows;
    if (std::abs(e) > std::abs(worst)) worst = e, worst_case = what;
  }
  double mean() const { return rows ? sum / rows : 0; }
  double bias() const { return rows ? signed_sum / rows : 0; }  // mean signed error: < 0 predicts too fast
};

// The errors of GPU `gpu`'s uncalibrated model against an OpenXLA matmul table (realdata 20 and 26,
// see SOURCES.md): 375 batched shapes [b, m, k]·[b, k, n], b ∈ {1, 2, 4} × m, n, k ∈ {256 … 4096},
// achieved FLOP/s per dtype column; each batch is b groups of one grouped GeMM (the batch
// multiplies the tiles). `columns`: the table's column of each dtype (0 = the first after k).
std::vector<ErrorStats> xla_table_errors(const std::string& file, const std::string& gpu,
                                         const std::vector<std::pair<cluster::Dtype, int>>& columns, const std::string& label) {
  std::istringstream csv(test::realdata(file));
  std::vector<compute::ComputeModel> models;
  for (const auto& [d, c] : columns) models.push_back(model(gpu, d));
  std::vector<ErrorStats> stats(columns.size());
  std::string line;
  while (std::getline(csv, line)) {
    if (line.empty() || line[0] == '#' || line[0] == 'b') continue;
    std::vector<double> cells;
    std::istringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) cells.push_back(std::stod(cell));
    EXPECT_GE(cells.size(), 5u) << line;
    const double b = cells.at(0), m = cells.at(1), n = cells.at(2), k = cells.at(3);
    const std::vector<double> groups(static_cast<std::size_t>(b), m);
    for (std::size_t d = 0; d < columns.size(); ++d) {
      const double measured = 2 * b * m * n * k / cells.at(4 + static_cast<std::size_t>(columns[d].second));
      const double predicted = time_to_seconds(models[d].grouped_gemm(groups, n, k));
      stats[d].add(predicted, measured,
                   fmt::format("b={} {}x{}x{}: {:.1f} us measured, {:.1f} us predicted", b, m, n, k, measured * 1e6, predicted * 1e6));
    }
  }
  for (std::size_t d = 0; d < columns.size(); ++d)
    std::cout << fmt::format("{} {}: mean |time error| {:.2f}% (mean signed {:+.2f}%), worst {:+.1f}% ({})\n", label,
                             cluster::to_string(columns[d].first), 100 * stats[d].mean(), 100 * stats[d].bias(), 100 * stats[d].worst,
                             stats[d].worst_case);
  return stats;
}

TEST(ComputeModel, XlaSm90Table) {
  // The OpenXLA sm_90 table (realdata 20): BF16 and f32 (TF32 tensor cores: XLA's default
  // precision) on an H100-class GPU. The uncalibrated H100 model predicts their times with a mean
  // absolute error of 3.9 % (BF16) and 11.9 % (TF32); the flat 0.75 × 128×128-wave model before it
  // missed by 44 % and 49 %. The GeMM constants are fitted to this table (compute_model.cpp), with
  // HBM at its datasheet rate then (3.3 %, worst +29 %): streamed at the achievable rate every
  // kernel now gets (kHbmEfficiency), split-K's partial sums of the smallest outputs take longer
  // (worst +32 %, b=1 256×256×4096: 6.4 us measured, 8.4 us predicted).
  const auto stats = xla_table_errors("20_xla_h100_sm90_bf16_f32_gemm_flops_grid.csv", "h100-sxm5-80gb",
                                      {{cluster::Dtype::bf16, 0}, {cluster::Dtype::tf32, 1}}, "XLA sm_90");
  ASSERT_EQ(stats[0].rows, 375);
  EXPECT_LT(stats[0].mean(), 0.15);  // the fidelity goal (issue 16)
  EXPECT_LT(stats[0].mean(), 0.04);  // what the fit reaches
  EXPECT_LT(std::abs(stats[0].worst), 0.35);
  EXPECT_LT(stats[1].mean(), 0.15);
  EXPECT_LT(std::abs(stats[1].worst), 0.60);
}

TEST(ComputeModel, XlaSm100Table) {
  // Held out of every fit: the OpenXLA sm_100 table (realdata 26), the same 375 shapes on a
  // B200-class GPU in BF16 and FP8 (e4m3 × e4m3 → bf16). The B200 model takes the Hopper-fitted
  // tile shapes and fixed cost, the ramp as the same time (its K scaled by B200's FP16 peak per SM
  // over the H100's: 2250/148 against 989.4/132, 2.03×), and its ceilings from B200's published MAMF.
  const auto stats = xla_table_errors("26_xla_b200_sm100_gemm_flops_grid.csv", "b200-sxm-180gb",
                                      {{cluster::Dtype::bf16, 0}, {cluster::Dtype::fp8, 2}}, "XLA sm_100");
  ASSERT_EQ(stats[0].rows, 375);
  // Held out, it reaches 6.7 % (BF16) and 12.0 % (FP8) mean time error, optimistic on average
  // (-5.1 %, -11.2 % signed). With the ramp's K taken as the H100's (as if the prologue and epilogue
  // sped up with the tensor cores) it reached 9.1 % and 12.9 % (-8.4 %, -12.2 %): Blackwell's tiles
  // finish their main loop twice as fast as Hopper's, so a small GeMM's fixed parts weigh more.
  EXPECT_LT(stats[0].mean(), 0.15);  // the fidelity goal (issue 16)
  EXPECT_LT(stats[1].mean(), 0.15);
  EXPECT_LT(stats[0].mean(), 0.075);  // what the time-fixed ramp reaches (0.091 without it)
  EXPECT_GT(stats[0].bias(), -0.06);
  EXPECT_LT(std::abs(stats[0].worst), 0.45);
  EXPECT_LT(std::abs(stats[1].worst), 0.45);
}

TEST(ComputeModel, MeasuredB200Mxfp8GroupedGemm) {
  // torchao's MXFP8 grouped GeMMs on a B200 at its 1000 W limit (the catalogue's source for
  // b200-sxm-180gb's mxfp8 "mamf"): 131072 rows in 8 groups of 16384. The forward, 7168 -> 2048,
  // took 1671.2 us: the catalogue derives the MXFP8 ceiling from it, so the model meets it. The data
  // gradient, 2048 -> 7168 (the same FLOPs, a K of 2048), took 1683.4 us: held out.
  const auto mx = model("b200-sxm-180gb", cluster::Dtype::mxfp8);
  const std::vector<double> groups(8, 16384);
  EXPECT_NEAR(time_to_seconds(mx.grouped_gemm(groups, 2048, 7168)) * 1e6, 1671.2, 1671.2 * 0.01);
  EXPECT_NEAR(time_to_seconds(mx.grouped_gemm(groups, 7168, 2048)) * 1e6, 1683.4, 1683.4 * 0.10);
  // Per-tensor FP8 on the same GPU runs the forward half again as fast (its MAMF ceiling).
  const auto fp8 = model("b200-sxm-180gb", cluster::Dtype::fp8);
  EXPECT_LT(fp8.grouped_gemm(groups, 2048, 7168) * 1.3, mx.grouped_gemm(groups, 2048, 7168));
}

// NVIDIA's fused grouped-MLP benchmark (realdata 28, SOURCES.md there): on a GB200 and a GB300,
// twice each, 8 experts of 4096 rows, K = 8192, N = 4096, MXFP8 operands, CUDA-graph replay. Each
// activation is timed as cuDNN-frontend's fused kernel (a block-scaled grouped GeMM with the
// activation and the output's MXFP8 quantization in its epilogue: the kernels of Megatron-Core's
// fused expert MLP, grouped GeMM backend `grouped`) and as Transformer Engine's unfused path (the
// input quantized, TE's grouped GeMM, the activation with its quantization: backend per_expert).
struct FusedMlpTiming {
  std::string gpu, activation;
  double fused = 0, te = 0;  // seconds
};
std::vector<FusedMlpTiming> fused_mlp_timings() {
  std::vector<FusedMlpTiming> rows;
  for (const char* file : {"gb200_run1", "gb200_run2", "gb300_run1", "gb300_run2"}) {
    std::istringstream in(test::realdata(fmt::format("28_cudnn_fused_grouped_mlp/{}_output_verbose.txt", file)));
    std::string line, device;
    while (std::getline(in, line)) {
      if (line.starts_with("device: NVIDIA ")) device = line.substr(15);
      if (line.starts_with("activation: ")) rows.push_back({device == "GB200" ? "gb200-nvl72" : "gb300-nvl72", line.substr(12)});
      const auto ms = [&] { return std::stod(line.substr(line.find(':') + 1)) * 1e-3; };
      if (line.starts_with("fused cuDNN avg:")) rows.back().fused = ms();
      if (line.starts_with("unfused TE avg:")) rows.back().te = ms();
    }
  }
  return rows;
}

TEST(ComputeModel, MeasuredBlackwellFusedGroupedMlp) {
  const auto timings = fused_mlp_timings();
  ASSERT_EQ(timings.size(), 24u);  // 4 runs x 6 activations
  const std::vector<double> groups(8, 4096);
  constexpr double k = 8192, n = 4096;
  ErrorStats forward, backward, te_forward;
  for (const auto& t : timings) {
    const bool glu = t.activation == "swiglu" || t.activation == "geglu";
    const bool dglu = t.activation == "dswiglu" || t.activation == "dgeglu";
    if (!glu && !dglu) continue;  // SReLU is no expert activation moesim models
    compute::ComputeOptions o;
    o.dtype = cluster::Dtype::mxfp8;
    const compute::ComputeModel fused(catalogue(t.gpu), o);
    o.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
    const compute::ComputeModel te(catalogue(t.gpu), o);
    const std::string what = fmt::format("{} {}", t.gpu, t.activation);
    if (glu) {
      // The GLU forward: one grouped GeMM K -> 2N; its epilogue's activation and quantization
      // ride on the main loop, so the GeMM alone is taken as the fused kernel's time.
      forward.add(time_to_seconds(fused.grouped_gemm(groups, 2 * n, k)), t.fused, what);
      // TE: the input quantized (32768 x 8192), the GeMM, then the activation over its 2N-wide output
      // (reads 2N, writes N: an MXFP8 output, 1 byte, as layer_costs' activation_kernels counts it)
      // and its quantization for fc2 (N wide).
      const double rows = 8 * 4096;
      const double te_time = time_to_seconds(te.fp8_cast(rows * k) + te.grouped_gemm(groups, 2 * n, k) +
                                             te.memory_bound(3 * rows * n) + te.fp8_cast(rows * n));
      te_forward.add(te_time, t.te, what);
    } else {
      // The dGLU backward: the data-gradient GeMM K -> N (fc2's, the upstream gradient K wide), the
      // activation's backward over its saved 2N-wide input in the same epilogue.
      backward.add(time_to_seconds(fused.grouped_gemm(groups, n, k)), t.fused, what);
    }
  }
  for (const auto& [label, s] : {std::pair{"fused GLU forward", &forward}, {"fused dGLU backward", &backward},
                                 {"TE unfused forward", &te_forward}})
    std::cout << fmt::format("realdata 28 {}: {} timings, mean |time error| {:.1f}% (bias {:+.1f}%), worst {:+.1f}% ({})\n",
                             label, s->rows, 100 * s->mean(), 100 * s->bias(), 100 * s->worst, s->worst_case);
  EXPECT_EQ(forward.rows, 8);
  EXPECT_EQ(backward.rows, 8);
  // Held out, and not met: the catalogue's MXFP8 ceilings (torchao's B200 grouped GeMM, 2303
  // TFLOP/s, carried to the GB200 and GB300 by their FP8 maxima: 2426 and 2559) make the fused
  // forward's GeMM 24 % slower than these kernels (+19..+31 %; the kernels reach 2.84-2.94 PFLOP/s
  // on the GB200 and 3.22-3.34 on the GB300 with their epilogue), the dGLU's GeMM 9 % slower
  // though its epilogue also reads and writes 1 GB, and Transformer Engine's whole unfused forward
  // 18 % slower. Taken as the ceilings (GB200 2887, GB300 3281, B200 and B300 carried from them),
  // they moved realdata 24's mean |error| from 17.4 to 21.2 % (2026-11-29, `scripts/archive.py`):
  // every Blackwell MXFP8 row faster, where most already were too fast. These are bursts of five
  // 1.5 ms CUDA-graph replays; training holds the tensor cores for seconds, and a B200 held
  // busy past about 5 ms drops its SM clock from 1965 to about 1580 MHz and loses up to 15 % of its
  // TFLOP/s (flashinfer-ai/flashinfer#2899, measured under FA4), an H800 overlapping GeMMs with
  // communication from 1980 to 1575 MHz (deepseek-ai/DeepGEMM#120). moesim simulates that clock in
  // runs of real software (the catalogue's sustained_clock, engine::Engine::set_sustained_clock), on
  // top of these ceilings, which stay the torchao-derived ones until a sustained-load measurement
  // decides whether they are burst rates (software/README.md). The bounds hold today's figures, so
  // a change of the MXFP8 ceilings must face this test.
  EXPECT_GT(forward.bias(), 0.15);
  EXPECT_LT(forward.bias(), 0.35);
  EXPECT_LT(backward.mean(), 0.15);
  EXPECT_LT(te_forward.mean(), 0.25);
}

// The uncalibrated GeMM model of GPU `gpu` against measured GeMM tables (moesim-measurements/1
// files of tests/data/measured), per dtype.
std::map<std::string, ErrorStats> gemm_table_errors(const std::string& gpu, std::initializer_list<const char*> files) {
  std::map<std::string, ErrorStats> stats;
  std::map<std::string, compute::ComputeModel> models;  // per dtype
  for (const char* file : files) {
    const auto doc = nlohmann::json::parse(test::measured(file));
    for (const auto& g : doc.at("gemm")) {
      const std::string dt = g.at("dtype");
      const double m = g.at("m"), n = g.at("n"), k = g.at("k"), measured = g.at("time").get<double>() * 1e-6;
      if (!models.contains(dt)) models.emplace(dt, model(gpu, *cluster::parse_dtype(dt)));
      const double predicted = time_to_seconds(models.at(dt).gemm(m, n, k));
      stats[dt].add(predicted, measured,
                    fmt::format("{}x{}x{}: {:.1f} us measured, {:.1f} us predicted", m, n, k, measured * 1e6, predicted * 1e6));
    }
  }
  for (const auto& [dt, s] : stats)
    std::cout << fmt::format("{} measured {}: {} shapes, mean |time error| {:.2f}% (bias {:+.1f}%), worst {:+.1f}% ({})\n", gpu,
                             dt, s.rows, 100 * s.mean(), 100 * s.bias(), 100 * s.worst, s.worst_case);
  return stats;
}

TEST(ComputeModel, MeasuredH100CublasLtTable) {
  // Held out of every fit: this project's own H100 SXM (80GB HBM3) measurements
  // (tests/data/measured/, SOURCES.md there): moesim-calibrate-gemm, cuBLASLt, 483 shapes per dtype
  // (the MoE shapes and M, N, K ∈ {256 … 16384}); FP8 (e4m3 × e4m3 → bf16) through torch._scaled_mm.
  const auto stats = gemm_table_errors("h100-sxm5-80gb", {"h100-cublaslt-gemm.json", "h100-fp8-gemm.json"});
  // The uncalibrated model, fitted to other data (XLA's table, the published MAMF), reaches 7.3 %
  // (BF16), 9.3 % (FP16), 10.6 % (TF32), 10.0 % (FP8) and 14.4 % (FP32, CUDA cores) mean time
  // error (8.1, 10.3, 11.6, 11.7 and 14.4 % with HBM at its datasheet rate); worst +46 %, +48 %,
  // +45 %, −85 %, +74 %. The 16-bit worst is a skinny GeMM (128×7168×2048: 11.6 us) whose 29 MB of
  // weights this benchmark, repeating one GeMM, keeps in the H100's 50 MB L2: it reads them at
  // 4.7 TB/s, above the HBM's 3.35, which no training step's layers, each its own weights, do.
  // FP8's worst is one shape where cuBLASLt's heuristic picks a slow kernel (8192×1024×256: 83 µs,
  // 7.5× its neighbours' time per FLOP).
  const std::map<std::string, std::pair<double, double>> bounds{
      {"bf16", {0.08, 0.50}}, {"fp16", {0.10, 0.50}}, {"tf32", {0.11, 0.50}}, {"fp8", {0.11, 0.90}}, {"fp32", {0.15, 0.80}}};
  ASSERT_EQ(stats.size(), bounds.size());
  for (const auto& [dt, b] : bounds) {
    const ErrorStats& s = stats.at(dt);
    EXPECT_EQ(s.rows, dt == "fp8" ? 459 : 483) << dt;  // FP8: the 24 shapes with N = 8 are below cuBLASLt's FP8 minimum
    EXPECT_LT(s.mean(), b.first) << dt;
    EXPECT_LT(std::abs(s.worst), b.second) << dt;
  }
}

TEST(ComputeModel, MeasuredH200GemmTable) {
  // Held out of every fit: this project's H200 SXM (141GB HBM3e) measurements of 2026-11-28
  // (tests/data/measured/SOURCES.md): the same 483 shapes through torch.mm (cuBLASLt), BF16, and FP8
  // through torch._scaled_mm. The catalogue's H200 ceilings are the H100's MAMF (BF16) and the
  // H200's own published MAMF (FP8); nothing here was fitted to these tables.
  const auto stats = gemm_table_errors("h200-sxm-141gb", {"h200-cublas-gemm.json", "h200-fp8-gemm.json"});
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats.at("bf16").rows, 483);
  EXPECT_EQ(stats.at("fp8").rows, 459);
  // BF16: 6.8 % mean time error (bias -2.1 %), worst +41 % (8192×8×2048, 9.9 us: a skinny GeMM
  // whose operands stay in L2 between the benchmark's repetitions, as on the H100). FP8: 14.1 %,
  // nearly all of it optimistic (bias -13.5 %): the H200's published FP8 MAMF (1453 TFLOP/s at one
  // large shape) overstates what torch._scaled_mm reaches across the table; worst -60 % at a K of
  // 256 (8192×16384×256), as on the H100.
  EXPECT_LT(stats.at("bf16").mean(), 0.075);
  EXPECT_LT(std::abs(stats.at("bf16").worst), 0.45);
  EXPECT_LT(stats.at("fp8").mean(), 0.15);
  EXPECT_LT(std::abs(stats.at("fp8").worst), 0.65);
}

// The attention model of GPU `gpu` against cuDNN's fused attention (BF16, causal) in `file`, by
// (head dim, pass: 0 forward, 1 backward).
std::map<std::pair<int, int>, ErrorStats> attention_errors(const std::string& gpu, const char* file) {
  const auto doc = nlohmann::json::parse(test::measured(file));
  const auto cm = model(gpu);
  std::map<std::pair<int, int>, ErrorStats> err;
  for (const auto& a : doc.at("attention")) {
    // MLA's entries name V's head size after the implementation ("cudnn-fused-sdpa (V head dim 128)").
    if (!a.at("implementation").get<std::string>().starts_with("cudnn-fused-sdpa") || a.at("dtype") != "bf16" ||
        !a.at("causal").get<bool>())
      continue;
    const double b = a.at("batch"), h = a.at("heads"), l = a.at("seq"), qk = a.at("head_dim");
    // With V's head size apart from Q's and K's (MLA), moesim's core runs at their mean
    // (workload::ModelShape::core_head_dim): the FLOPs of Q·Kᵀ and P·V together.
    const std::string impl = a.at("implementation");
    const auto v_at = impl.find("V head dim ");
    const double d = v_at == std::string::npos ? qk : (qk + std::stod(impl.substr(v_at + 11))) / 2;
    const double predicted[2] = {time_to_seconds(cm.attention(b, h, l, d, true)), time_to_seconds(cm.attention_backward(b, h, l, d, true))};
    const double measured[2] = {a.at("forward").get<double>() * 1e-6, a.at("backward").get<double>() * 1e-6};
    for (int pass = 0; pass < 2; ++pass) err[{static_cast<int>(qk), pass}].add(predicted[pass], measured[pass], fmt::format("L={}", l));
  }
  for (const auto& [key, e] : err)
    std::cout << fmt::format("{} cuDNN attention d={} {}: mean |time error| {:.1f}% (bias {:+.1f}%), worst {:+.1f}% ({})\n", gpu,
                             key.first, key.second == 0 ? "forward" : "backward", 100 * e.mean(), 100 * e.bias(), 100 * e.worst,
                             e.worst_case);
  return err;
}

// Each (head dim, pass) of `err` has a mean |time error| below its bound.
void expect_attention_within(std::map<std::pair<int, int>, ErrorStats>& err, const std::map<std::pair<int, int>, double>& bounds) {
  for (const auto& [key, bound] : bounds) EXPECT_LT(err[key].mean(), bound) << "d=" << key.first << " pass " << key.second;
}

TEST(ComputeModel, MeasuredH100FusedAttention) {
  // cuDNN's fused attention (Transformer Engine's kernel, through PyTorch's SDPA) on an H100, BF16,
  // causal, 16 heads, 16384 tokens per batch, L = 1024 … 16384 (tests/data/measured/). The catalogue's
  // H100 efficiencies (forward 0.58, backward 0.47) are the means over L = 2048–8192 at head dim 128;
  // the other lengths and head dim 64 are held out: the flat efficiency misses short sequences
  // (L = 1024: forward 0.46, backward 0.29 measured) and small heads, which a later model of the
  // softmax's exponentials (SFU) and per-row work should take.
  auto err = attention_errors("h100-sxm5-80gb", "h100-fused-attention.json");
  ASSERT_EQ((err[std::pair{128, 0}].rows), 5);
  ASSERT_EQ((err[std::pair{64, 0}].rows), 5);
  // The model: d = 128 forward 8.7 %, backward 16.3 % mean time error (worst −18 %, −37 %, at
  // L = 1024); d = 64 forward 28 %, backward 23 %. Before, the backward took twice the forward's
  // time for 2.5× its FLOPs: 1.25 × 0.55 = 0.69 of peak, where cuDNN reaches 0.29–0.54.
  expect_attention_within(err, {{{128, 0}, 0.12}, {{128, 1}, 0.20}, {{64, 0}, 0.35}, {{64, 1}, 0.30}});
}

TEST(ComputeModel, MeasuredH200FusedAttention) {
  // Held out: the same cuDNN attention on this project's H200 (2026-11-28), and MLA's shape (128
  // heads, Q/K head dim 192, V 128) at L = 1024 … 8192. The H200 takes the H100's efficiencies.
  auto err = attention_errors("h200-sxm-141gb", "h200-fused-attention.json");
  auto mla = attention_errors("h200-sxm-141gb", "h200-fused-attention-mla.json");
  ASSERT_EQ((err[std::pair{128, 0}].rows), 5);
  ASSERT_EQ((mla[std::pair{192, 0}].rows), 4);
  // As on the H100: d = 128 forward 8.6 %, backward 16.6 %; d = 64 29 % and 23 %, optimistic (small
  // heads); MLA's forward 6.1 %, its backward 18.2 % optimistic (worst -35 % at L = 1024).
  expect_attention_within(err, {{{128, 0}, 0.10}, {{128, 1}, 0.19}, {{64, 0}, 0.32}, {{64, 1}, 0.25}});
  expect_attention_within(mla, {{{192, 0}, 0.08}, {{192, 1}, 0.20}});
}

// The grouped-GeMM model of GPU `gpu` with torch._grouped_mm's kernels against `file`'s measured
// grouped GeMMs, by pass (forward, dgrad, wgrad) and split (even, skewed); `cublas`: the same at
// cuBLAS's ceiling (moesim's idealised "grouped"). The data gradient of [rows, k] x [k, n] is the
// grouped GeMM [rows, n] x [n, k]; the weight gradients are grouped_gemm_wgrad's.
struct GroupedErrors {
  std::map<std::string, ErrorStats> model, cublas;  // "pass split"
};
// The modelled time of one measured grouped GeMM (a case of tests/data/measured/*grouped-gemm*.json):
// its forward [rows, k] × [k, n], data gradient [rows, n] × [n, k] or weight gradient (per group
// [k, rows_g] × [rows_g, n]), in seconds.
double grouped_case_seconds(const compute::ComputeModel& cm, const nlohmann::json& g) {
  const std::vector<double> rows = g.at("rows").get<std::vector<double>>();
  const double n = g.at("n"), k = g.at("k");
  const std::string pass = g.value("pass", "forward");
  if (pass == "dgrad") return time_to_seconds(cm.grouped_gemm(rows, k, n));
  if (pass == "wgrad") return time_to_seconds(cm.grouped_gemm_wgrad(rows, n, k));
  return time_to_seconds(cm.grouped_gemm(rows, n, k));
}

// torch._grouped_mm's model on GPU `gpu`, its ceiling `ceiling` (unset: kTorchGroupedMmCeiling).
compute::ComputeModel grouped_mm_model(const std::string& gpu, std::optional<double> ceiling = std::nullopt) {
  compute::ComputeOptions torch;
  torch.grouped_gemm_kernels = compute::GroupedGemmKernels::TorchGroupedMm;
  torch.torch_grouped_mm_ceiling = ceiling;
  return compute::ComputeModel(catalogue(gpu), torch);
}

GroupedErrors grouped_errors(const std::string& gpu, const char* file) {
  const auto doc = nlohmann::json::parse(test::measured(file));
  const compute::ComputeModel grouped_mm = grouped_mm_model(gpu), cublas = model(gpu);
  GroupedErrors out;
  for (const auto& g : doc.at("grouped_gemm")) {
    const std::vector<double> rows = g.at("rows").get<std::vector<double>>();
    const double measured = g.at("time").get<double>() * 1e-6;
    const std::string pass = g.value("pass", "forward");
    const auto time = [&](const compute::ComputeModel& cm) { return grouped_case_seconds(cm, g); };
    const double predicted = time(grouped_mm);
    const std::string key = pass + " " + g.at("split").get<std::string>();
    const std::string what = fmt::format("{} {} {} groups of {} rows: {:.1f} us measured, {:.1f} us predicted",
                                         g.at("model").get<std::string>(), g.at("gemm").get<std::string>(), rows.size(),
                                         g.at("rows").back().get<double>(), measured * 1e6, predicted * 1e6);
    out.model[key].add(predicted, measured, what);
    out.cublas[key].add(time(cublas), measured, what);
  }
  for (const auto& [key, e] : out.model)
    std::cout << fmt::format("{} torch._grouped_mm {}: {} cases, mean |time error| {:.1f}% (bias {:+.1f}%), worst {:+.1f}% ({})\n",
                             gpu, key, e.rows, 100 * e.mean(), 100 * e.bias(), 100 * e.worst, e.worst_case);
  return out;
}

TEST(ComputeModel, MeasuredH100GroupedExpertGemms) {
  // The fit data of kTorchGroupedMmCeiling: grouped expert GeMMs on an H100 (torch._grouped_mm,
  // the CUTLASS grouped kernel PyTorch's MoE layers call; tests/data/measured/h100-grouped-gemm.json),
  // BF16, the expert fc1/fc2 shapes of Mixtral-8x7B, DeepSeek-V3 and Qwen3-30B-A3B, 1–64 groups,
  // rows split evenly or skewed (the token counts of a Zipf-like router), 4096–65536 rows in all.
  const auto e = grouped_errors("h100-sxm5-80gb", "h100-grouped-gemm.json");
  const auto& err = e.model;
  ASSERT_EQ(err.at("forward even").rows + err.at("forward skewed").rows, 198);
  // PyTorch's tile and no split-K at the fitted 0.80 of cuBLAS's ceiling, the weights streamed at
  // the HBM's achievable rate: 7.3 % (even) and 8.4 % (skewed) mean time error (12.5 and 11.9 %
  // with cuBLAS's tile choice and split-K at 0.75); worst +26 % (Mixtral-8x7B's fc2 as one group
  // of 4096 rows: 599 us measured, as fast as cuBLASLt's) and -33 % (Qwen3-30B-A3B's fc1, 4096 rows
  // skewed over 16 groups: 93 us measured, a kernel this small well under its large-shape rate).
  // At cuBLAS's rate and tiles (moesim's idealised "grouped"): 16.4 % and 22.1 %, nearly every case
  // optimistic.
  EXPECT_LT(err.at("forward even").mean(), 0.08);
  EXPECT_LT(err.at("forward skewed").mean(), 0.09);
  EXPECT_LT(std::abs(err.at("forward even").worst), 0.30);
  EXPECT_LT(std::abs(err.at("forward skewed").worst), 0.35);
  EXPECT_GT(e.cublas.at("forward even").mean(), 0.15);
  EXPECT_GT(e.cublas.at("forward skewed").mean(), 0.20);
}

TEST(ComputeModel, GroupedExpertGemmFamiliesLeftOut) {
  // Issue 46's check on the grouped-GeMM tables: kTorchGroupedMmCeiling refitted without one model
  // family's cases (least squares of the log time ratio over the rest of h100-grouped-gemm.json,
  // on a 0.002 grid), then that family predicted in every measured file and pass (the fit data's
  // H100 run, the H100's second run, the H200's): each within 10 % mean time error. DeepSeek-V2,
  // in no fit, is predicted by the full fit. Measured: 6.1-9.6 % (Qwen3-30B-A3B's small GeMMs the
  // worst, 8.8-9.6 %), refitted ceilings 0.786-0.806; the full fit's optimum, 0.796, is the
  // constant's 0.80.
  const auto fit_doc = nlohmann::json::parse(test::measured("h100-grouped-gemm.json"));
  const std::vector<std::pair<std::string, nlohmann::json>> files{
      {"h100-sxm5-80gb", fit_doc},
      {"h100-sxm5-80gb", nlohmann::json::parse(test::measured("h100-grouped-gemm-passes.json"))},
      {"h200-sxm-141gb", nlohmann::json::parse(test::measured("h200-grouped-gemm.json"))}};
  const auto fit = [&](const std::string& left_out) {
    double best = 0, best_loss = INFINITY;
    for (int i = 0; i <= 100; ++i) {
      const double c = 0.70 + 0.002 * i;
      const compute::ComputeModel cm = grouped_mm_model("h100-sxm5-80gb", c);
      double loss = 0;
      for (const auto& g : fit_doc.at("grouped_gemm"))
        if (g.at("model") != left_out)
          loss += std::pow(std::log(grouped_case_seconds(cm, g) / (g.at("time").get<double>() * 1e-6)), 2);
      if (loss < best_loss) best_loss = loss, best = c;
    }
    return best;
  };
  EXPECT_NEAR(fit(""), compute::kTorchGroupedMmCeiling, 0.01);
  for (const std::string family : {"Mixtral-8x7B", "DeepSeek-V3", "Qwen3-30B-A3B", "DeepSeek-V2"}) {
    const double ceiling = fit(family);
    for (const auto& [gpu, doc] : files) {
      const compute::ComputeModel cm = grouped_mm_model(gpu, ceiling);
      ErrorStats err;
      for (const auto& g : doc.at("grouped_gemm"))
        if (g.at("model") == family)
          err.add(grouped_case_seconds(cm, g), g.at("time").get<double>() * 1e-6, "");
      if (err.rows == 0) continue;
      std::cout << fmt::format("{} left out (ceiling {:.3f}), {}: {} cases, mean |time error| {:.1f}%\n", family, ceiling,
                               gpu, err.rows, 100 * err.mean());
      EXPECT_LT(err.mean(), 0.10) << family << " on " << gpu;
    }
  }
}

// Held out of every fit: the grouped GeMMs of both GPUs' runs of 2026-11-28 (tests/data/measured/
// SOURCES.md): the shapes above plus DeepSeek-V2's experts (hidden 5120, 1536; 20 groups: its 160
// experts at EP 8), and the backward's data and weight gradients, each called as autograd calls it
// (276 cases per pass). `bounds`: per "pass split", the mean |time error| observed, rounded up.
void expect_grouped_passes(const std::string& gpu, const char* file, const std::map<std::string, double>& bounds) {
  const auto e = grouped_errors(gpu, file);
  for (const char* pass : {"forward", "dgrad", "wgrad"})
    EXPECT_EQ(e.model.at(fmt::format("{} even", pass)).rows + e.model.at(fmt::format("{} skewed", pass)).rows, 276) << pass;
  ASSERT_EQ(e.model.size(), bounds.size());
  for (const auto& [key, bound] : bounds) {
    EXPECT_LT(e.model.at(key).mean(), bound) << gpu << " " << key;
    EXPECT_LT(std::abs(e.model.at(key).worst), 0.50) << gpu << " " << key;
    // cuBLAS's rate ("grouped") is the worse model of torch._grouped_mm in every pass.
    EXPECT_GT(e.cublas.at(key).mean(), e.model.at(key).mean()) << gpu << " " << key;
  }
}

TEST(ComputeModel, MeasuredGroupedExpertGemmPasses) {
  // H100 (the same machine kind as the fit data, a later run): forward 6.4/7.6 % (even/skewed),
  // data gradient 5.4/7.6 %, weight gradient 7.5/7.5 %. H200 (the H100's ceilings, its own HBM):
  // forward 8.0/8.3 %, data gradient 6.8/8.5 %, weight gradient 7.2/6.8 % (with cuBLAS's tile
  // choice and split-K at 0.75: 8.4-13.7 %). The worst cases, -31 to -43 %, are Qwen3-30B-A3B's
  // small GeMMs (K or N = 768, 30–200 us) and skewed groups: short main loops and few tiles, which
  // the model's tile ramp under-costs; the most pessimistic, +27 %, one group of Mixtral's 4096
  // rows, which torch._grouped_mm runs as fast as cuBLASLt.
  expect_grouped_passes("h100-sxm5-80gb", "h100-grouped-gemm-passes.json",
                        {{"forward even", 0.07}, {"forward skewed", 0.08}, {"dgrad even", 0.06}, {"dgrad skewed", 0.08},
                         {"wgrad even", 0.08}, {"wgrad skewed", 0.08}});
  expect_grouped_passes("h200-sxm-141gb", "h200-grouped-gemm.json",
                        {{"forward even", 0.085}, {"forward skewed", 0.09}, {"dgrad even", 0.07}, {"dgrad skewed", 0.09},
                         {"wgrad even", 0.075}, {"wgrad skewed", 0.07}});
}

// The memory-bound model of GPU `gpu` against `file`'s bandwidth kernels: copy, RMSNorm, row
// gather, eager SwiGLU (two kernels) and router softmax; row scatter (uncoalesced writes) and top-k
// (a sort) are not bandwidth kernels and are left out.
ErrorStats memory_kernel_errors(const std::string& gpu, const char* file) {
  const auto doc = nlohmann::json::parse(test::measured(file));
  const auto cm = model(gpu);
  ErrorStats err;
  for (const auto& k : doc.at("kernels")) {
    const std::string name = k.at("kernel");
    if (name != "copy" && name != "rms_norm" && name != "gather_rows" && name != "swiglu_eager" && name != "softmax") continue;
    const double kernels = k.at("kernels"), bytes = k.at("bytes"), measured = k.at("time").get<double>() * 1e-6;
    // A two-kernel op moves its bytes in two launches: two fixed costs.
    const double predicted = time_to_seconds(cm.memory_bound(bytes / kernels)) * kernels;
    err.add(predicted, measured, fmt::format("{} {}: {:.1f} us measured, {:.1f} us predicted", name, k.at("shape").dump(), measured * 1e6, predicted * 1e6));
  }
  std::cout << fmt::format("{} memory-bound kernels: {} cases, mean |time error| {:.1f}% (bias {:+.1f}%), worst {:+.1f}% ({})\n",
                           gpu, err.rows, 100 * err.mean(), 100 * err.bias(), 100 * err.worst, err.worst_case);
  return err;
}

TEST(ComputeModel, MeasuredH100MemoryBoundKernels) {
  // The fit data of kMemoryKernelOverhead and kHbmEfficiency (h100-memory-bound-kernels.json),
  // 4096–65536 rows × 64–7168. This pins the fit: 15 % mean time error, where the datasheet's
  // 3.35 TB/s and the GeMM fixed cost miss by 22 %.
  const ErrorStats err = memory_kernel_errors("h100-sxm5-80gb", "h100-memory-bound-kernels.json");
  EXPECT_EQ(err.rows, 43);
  EXPECT_LT(err.mean(), 0.16);
}

TEST(ComputeModel, MeasuredH200MemoryBoundKernels) {
  // Held out: the same kernels on this project's H200 (2026-11-28).
  const ErrorStats err = memory_kernel_errors("h200-sxm-141gb", "h200-memory-bound-kernels.json");
  EXPECT_EQ(err.rows, 43);
  // 18.9 % mean time error, optimistic (bias -13.6 %): copies reach 83–88 % of the H200's 4.8 TB/s
  // as the H100's reach 87–91 % of 3.35, but eager SwiGLU and RMSNorm stay near the H100's absolute
  // rate (2.2 and 2.8–3.5 TB/s, 0.47 and 0.58–0.73 of the H200's bandwidth, where the H100 gives
  // 0.64 and 0.61): kernels that issue several instructions per element are bound by the SMs,
  // which the two GPUs share; moesim's fraction of HBM does not see that.
  EXPECT_LT(err.mean(), 0.20);
  EXPECT_LT(err.bias(), -0.10);
}

TEST(ComputeModel, CalibrationTablesOverrideTheModel) {
  // A table's FLOP/s give the time as before the shape model: max(FLOPs / measured, bytes / HBM),
  // with no fixed cost (a measured time includes its launch) unless the scenario sets one; a grouped
  // GeMM is the sum of its groups, each as the table measured it.
  compute::KernelTables tables;
  tables.gemm_flops = [](double, double, double) { return 400e12; };
  compute::ComputeModel measured(gpu(true, 132), {}, tables);
  EXPECT_EQ(measured.gemm(4096, 4096, 4096), seconds_to_time(2.0 * 4096 * 4096 * 4096 / 400e12));
  const std::vector<double> groups{1024, 2048};
  EXPECT_EQ(measured.grouped_gemm(groups, 4096, 4096), measured.gemm(1024, 4096, 4096) + measured.gemm(2048, 4096, 4096));
  compute::ComputeOptions o;
  o.launch_overhead = 2 * kMicrosecond;
  compute::ComputeModel with_overhead(gpu(true, 132), o, tables);
  EXPECT_EQ(with_overhead.gemm(4096, 4096, 4096), 2 * kMicrosecond + seconds_to_time(2.0 * 4096 * 4096 * 4096 / 400e12));
}

TEST(ComputeModel, AttentionWithoutFlashAttentionIsMemoryBoundAtLongSequences) {
  // 1 sequence, 32 heads of 128, L = 32768, causal: 4·32·L²·128·0.5 = 8.8e12 FLOP → 17.59 ms at
  // 5e14. Without FlashAttention the L×L scores pass HBM 4 times: 4·32·L²·2 B = 2.75e11 B →
  // 113.0 ms at 0.814 · 3e12 B/s (kHbmEfficiency, the rate every kernel streams HBM at), so memory
  // decides and the GPU is 6.4× slower.
  compute::ComputeModel flash(gpu(true), no_overhead());
  compute::ComputeModel plain(gpu(false), no_overhead());
  const double l = 32768;
  const Time tf = flash.attention(1, 32, l, 128, true);
  const Time tp = plain.attention(1, 32, l, 128, true);
  EXPECT_EQ(tf, seconds_to_time(4.0 * 32 * l * l * 128 * 0.5 / 5e14));
  const double bytes = 4.0 * 32 * l * 128 * 2 + 4.0 * 32 * l * l * 2;
  EXPECT_EQ(tp, seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)));
  EXPECT_GT(static_cast<double>(tp) / static_cast<double>(tf), 5.0);
  // The modelled kernel's fixed cost applies to attention too.
  EXPECT_EQ(compute::ComputeModel(gpu(true), {}).attention(1, 32, l, 128, true), compute::kKernelOverhead + tf);
}

namespace {
// HeterMoE Fig. 2 (seed 002 §2.3): "each GPU's total forward and backward time for a single
// attention and expert module, using the model settings from Mixtral 8x7B" (models/mixtral-8x7b.json:
// hidden 4096, SwiGLU FFN 14336, 32 heads of 128, 8 KV heads, 8 experts, top-2), one sequence of
// `seq` tokens, FP16 (V100 and T4 have no BF16). The attention module: the attention block
// (norm, Q/K/V and output projections, causal core) forward and backward. The expert module: one
// FFN, forward and backward (ComputeModel::backward); the paper does not say how many tokens it
// gets, taken as an expert's share of the sequence's routed copies, seq·top-k/experts = seq/4
// (the ratios move by under 1.5 % with the whole sequence instead).
struct Fig2Module {
  double attention = 0, expert = 0;  // seconds
};
Fig2Module fig2_modules(const std::string& gpu, int seq) {
  const auto s = test::scenario_from(fmt::format(R"({{"name": "fig2", "cluster": {{"gpu": "{}", "levels": [
      {{"name": "gpu", "count": 1, "bandwidth": "1GB/s", "latency": "1us"}}]}}, "model": {{"preset": "mixtral-8x7b"}},
      "training": {{"sequence_length": {}, "dtype": "fp16"}}, "strategy": {{"name": "ep"}}}})",
                                                 gpu, seq));
  const compute::ComputeModel cm(s.topology().gpu(0), s.compute);
  const Time attention =
      (blocks::attention_time(cm, s.model, s.training) + blocks::attention_backward_time(cm, s.model, s.training)).time;
  const double tokens = static_cast<double>(seq) * s.model.top_k / s.model.experts;
  const Time ffn = blocks::ffn_time(cm, s.model, tokens, s.model.ffn_hidden).time;
  return {time_to_seconds(attention), time_to_seconds(ffn + cm.backward(ffn))};
}
}  // namespace

TEST(ComputeModel, HeterMoEFig2Ratios) {
  // HeterMoE §2.3 (Fig. 2), spec 002 claim C1, each within 15 %:
  //   (a) V100 reaches on average 80 % of A40's performance on experts (time_A40 / time_V100),
  //       stable across sequence lengths; A40 beats V100 on attention by 3.7x at 64K and the gap
  //       widens with sequence length;
  //   (b) L40S beats T4 on MLP by 7.0x on average, on attention by 9.9x at 4K and 13.6x at 64K.
  // In the model the gaps widen because the attention core (quadratic in the sequence) outgrows
  // the projections (linear) and runs at 0.16 (V100) and 0.18 (T4) of peak against A40's 0.5 and
  // L40S's 0.45. Without FlashAttention the L×L scores also pass HBM, but that binds only T4's
  // forward (256·L² B at 320 GB/s against 8192·L² FLOP at 0.18 × 65 TFLOP/s); V100 stays
  // compute-bound (and the paper ran xformers on it, which keeps the scores on chip too).
  // Fig. 2's sequence lengths: 4K to 64K.
  const std::vector<int> seqs{4096, 8192, 16384, 32768, 65536};
  std::vector<double> v100_expert_share, a40_attention, l40s_mlp, l40s_attention;
  for (const int seq : seqs) {
    const Fig2Module a40 = fig2_modules("a40-48gb", seq), v100 = fig2_modules("v100-sxm2-16gb", seq);
    const Fig2Module l40s = fig2_modules("l40s-48gb", seq), t4 = fig2_modules("t4-16gb", seq);
    v100_expert_share.push_back(a40.expert / v100.expert);
    a40_attention.push_back(v100.attention / a40.attention);
    l40s_mlp.push_back(t4.expert / l40s.expert);
    l40s_attention.push_back(t4.attention / l40s.attention);
    std::cout << fmt::format("Fig. 2 at {:>5} tokens: V100/A40 experts {:.3f}, A40/V100 attention {:.2f}x, L40S/T4 MLP {:.2f}x, "
                             "L40S/T4 attention {:.2f}x\n",
                             seq, v100_expert_share.back(), a40_attention.back(), l40s_mlp.back(), l40s_attention.back());
  }
  const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
  const auto within = [](double measured, double claimed) { return std::abs(measured / claimed - 1) <= 0.15; };
  EXPECT_TRUE(within(mean(v100_expert_share), 0.80)) << mean(v100_expert_share);
  for (const double r : v100_expert_share) EXPECT_TRUE(within(r, 0.80)) << r;
  // "Remains stable across different sequence lengths, as each token is independently computed":
  // 0.808 to 0.827 in the model, a spread under 5 % of the mean.
  const auto [lo, hi] = std::minmax_element(v100_expert_share.begin(), v100_expert_share.end());
  EXPECT_LT((*hi - *lo) / mean(v100_expert_share), 0.05);
  EXPECT_TRUE(within(a40_attention.back(), 3.7)) << a40_attention.back();
  EXPECT_TRUE(within(mean(l40s_mlp), 7.0)) << mean(l40s_mlp);
  EXPECT_TRUE(within(l40s_attention.front(), 9.9)) << l40s_attention.front();
  EXPECT_TRUE(within(l40s_attention.back(), 13.6)) << l40s_attention.back();
  // The attention gaps widen with every doubling of the sequence.
  for (std::size_t i = 1; i < seqs.size(); ++i) {
    EXPECT_GT(a40_attention[i], a40_attention[i - 1]) << seqs[i];
    EXPECT_GT(l40s_attention[i], l40s_attention[i - 1]) << seqs[i];
  }
}
