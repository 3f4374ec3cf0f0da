// The kernels of an MoE layer (sim/blocks/layer_costs): memory-bound kernels from the bytes they
// move, derived by hand; the local experts as grouped GeMMs with one activation kernel; the
// kernels each piece launches, counted by hand.
#include <gtest/gtest.h>

#include <vector>

#include "sim/blocks/layer_costs.hpp"
#include "sim/compute/compute_model.hpp"

using namespace moesim;

namespace {
// A made-up GPU: 1 PFLOP/s BF16 (2 FP8), 3 TB/s, 132 SMs, GeMM ceiling 0.5.
cluster::GpuSpec gpu() {
  cluster::GpuSpec g;
  g.key = "test";
  g.peak_flops[static_cast<std::size_t>(cluster::Dtype::bf16)] = 1e15;
  g.peak_flops[static_cast<std::size_t>(cluster::Dtype::fp8)] = 2e15;
  g.hbm_bytes_per_second = 3e12;
  g.sms = 132;
  g.gemm_efficiency = 0.5;
  return g;
}

workload::ModelShape moe_layer(bool attention) {
  workload::ModelShape m;
  m.hidden = 1024;
  m.ffn_hidden = 512;
  m.experts = 16;
  m.top_k = 4;
  m.expert_kind = workload::ExpertKind::SwiGlu;
  m.attention = attention;
  return m;
}
}  // namespace

TEST(LayerCosts, MemoryBoundKernelsOfTheMoeBlock) {
  // T = 1000 tokens, H = 1024, E = 16, k = 4, BF16 (a = 2 B), HBM 3e12 B/s of which memory-bound
  // kernels reach kHbmEfficiency, fixed cost kMemoryKernelOverhead each.
  compute::ComputeOptions o;
  compute::ComputeModel cm(gpu(), o);
  const auto m = moe_layer(true);
  const double t = 1000, h = 1024, a = 2;
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  // Gate: pre-MLP RMSNorm 2·T·H·a, the router GeMM, softmax/top-k 2·T·E·4, permute (1 + k)·T·H·a.
  EXPECT_EQ(blocks::gate_time(cm, m, t).time,
            mb(2 * t * h * a) + cm.gemm(t, 16, h) + mb(2 * t * 16 * 4) + mb(5 * t * h * a));
  // Four kernels: the norm, the router GeMM, the top-k, the permute. A software whose router
  // launches 31 kernels (Megatron-Core with moe_router_fusion) launches 1 + 31 + 1, in the same time.
  EXPECT_EQ(blocks::gate_time(cm, m, t).kernels, 4);
  EXPECT_EQ(blocks::gate_time(cm, m, t, false, 31), (compute::Work{blocks::gate_time(cm, m, t).time, 33}));
  // Combine: un-permute with the weighted sum (k + 1)·T·H·a, residual add 3·T·H·a: two kernels.
  EXPECT_EQ(blocks::combine_time(cm, m, t), (compute::Work{mb(5 * t * h * a) + mb(3 * t * h * a), 2}));
  // A bare MoE layer (no attention) has no norm and no residual add.
  const auto bare = moe_layer(false);
  EXPECT_EQ(blocks::gate_time(cm, bare, t), (compute::Work{cm.gemm(t, 16, h) + mb(2 * t * 16 * 4) + mb(5 * t * h * a), 3}));
  EXPECT_EQ(blocks::combine_time(cm, bare, t), (compute::Work{mb(5 * t * h * a), 1}));
  // Under FP8 the activations stay BF16: the same bytes.
  compute::ComputeOptions f;
  f.dtype = cluster::Dtype::fp8;
  compute::ComputeModel fp8(gpu(), f);
  EXPECT_EQ(blocks::combine_time(fp8, m, t).time, mb(5 * t * h * a) + mb(3 * t * h * a));
}

TEST(LayerCosts, LocalExpertsRunAsGroupedGemmsWithOneActivation) {
  // Three local SwiGLU experts (ffn 512) with 300, 0 and 700 copies: fc1 one grouped GeMM
  // H → 2·ffn, SwiGLU over all 1000 copies (reads 2·ffn, writes ffn: 3·1000·512·2 B), fc2 one
  // grouped GeMM ffn → H.
  compute::ComputeModel cm(gpu(), {});
  const auto m = moe_layer(true);
  const std::vector<double> copies{300, 0, 700};
  const Time grouped = cm.grouped_gemm(copies, 1024, 1024) + compute::kMemoryKernelOverhead +
                       seconds_to_time(3.0 * 1000 * 512 * 2 / (compute::kHbmEfficiency * 3e12)) +
                       cm.grouped_gemm(copies, 1024, 512);
  EXPECT_EQ(blocks::experts_time(cm, m, copies, 512), (compute::Work{grouped, 3}));
  // Three kernel launches whatever the number of experts: apart, the two experts cost more.
  EXPECT_LT(blocks::experts_time(cm, m, copies, 512).time,
            blocks::ffn_time(cm, m, 300, 512).time + blocks::ffn_time(cm, m, 700, 512).time);
  // Launched a GeMM per expert with rows (Transformer Engine's GroupedLinear), fc1 and fc2 are two
  // launches each, 2 + 1 + 2, each pair timed as the per-expert GeMMs on their streams
  // (compute_test.cpp TransformerEngineMultiStreamGroupedGemm).
  compute::ComputeOptions per_expert;
  per_expert.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
  const compute::ComputeModel te(gpu(), per_expert);
  const Time apart = te.grouped_gemm(copies, 1024, 1024) + grouped - cm.grouped_gemm(copies, 1024, 1024) -
                     cm.grouped_gemm(copies, 1024, 512) + te.grouped_gemm(copies, 1024, 512);
  EXPECT_EQ(blocks::experts_time(te, m, copies, 512), (compute::Work{apart, 5}));
  // A dense FFN: its norm, the FFN, the residual add.
  auto dense = m;
  dense.dense_ffn_hidden = 2048;
  // Five kernels: the norm, fc1, the activation, fc2, the residual add.
  EXPECT_EQ(blocks::dense_ffn_time(cm, dense, 1000),
            (compute::Work{compute::kMemoryKernelOverhead +
                               seconds_to_time(2.0 * 1000 * 1024 * 2 / (compute::kHbmEfficiency * 3e12)) +
                               blocks::ffn_time(cm, dense, 1000, 2048).time + compute::kMemoryKernelOverhead +
                               seconds_to_time(3.0 * 1000 * 1024 * 2 / (compute::kHbmEfficiency * 3e12)),
                           5}));
}

TEST(LayerCosts, ExpertsBackwardRunsEachGradientAtItsShape) {
  // The three experts above (SwiGLU, ffn 512, H 1024, 300/0/700 copies) under FP8: the output
  // gradient (1000 × H) cast once for both of fc2's gradients (4 B an element), fc2's data
  // gradient (copies × ffn over H) and weight gradient (ffn × H per expert over its rows), the
  // SwiGLU backward (reads the gradient and both halves, writes both halves' gradients:
  // 5·1000·512·2 B), fc1's data gradient (copies × H over 2·ffn) and weight gradient (H × 2·ffn
  // per expert over its rows). Kernels: 1 + 2 + 1 + 2 (idle experts launch nothing).
  compute::ComputeOptions o;
  o.dtype = cluster::Dtype::fp8;
  compute::ComputeModel fp8(gpu(), o);
  const auto m = moe_layer(true);
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  const std::vector<double> copies{300, 0, 700};
  const Time wgrad = fp8.grouped_gemm_wgrad(copies, 1024, 512) + fp8.grouped_gemm_wgrad(copies, 1024, 1024);
  const blocks::ExpertsWork w = blocks::experts_work(fp8, m, copies, 512);
  EXPECT_EQ(w.forward, blocks::experts_time(fp8, m, copies, 512));
  EXPECT_EQ(w.wgrad, (compute::Work{wgrad, 2}));
  EXPECT_EQ(w.backward, (compute::Work{mb(4.0 * 1000 * 1024) + fp8.grouped_gemm(copies, 512, 1024) + mb(5.0 * 1000 * 512 * 2) +
                                           fp8.grouped_gemm(copies, 1024, 1024) + wgrad,
                                       6}));
  // A scenario's backward factor stands for every kernel, the experts' too: factor × forward, the
  // weight gradients half of it.
  o.backward_factor = 3;
  const blocks::ExpertsWork f = blocks::experts_work(compute::ComputeModel(gpu(), o), m, copies, 512);
  EXPECT_EQ(f.backward.time, 3 * f.forward.time);
  EXPECT_EQ(f.wgrad.time, f.backward.time / 2);
}

TEST(LayerCosts, Fp8CastsTheGemmInputsNoNormProduces) {
  // Under FP8, Transformer Engine's norms (and the activation before fc2) write the FP8 inputs of
  // the GeMMs after them; two inputs come from elsewhere and are cast on their own, each reading
  // 2 B and writing 2 × 1 B per element: the permuted copies before the experts' fc1 (1000 × H)
  // and the attention core's output before the output projection (T × output width).
  compute::ComputeOptions o;
  o.dtype = cluster::Dtype::fp8;
  compute::ComputeModel fp8(gpu(), o);
  auto m = moe_layer(true);
  m.heads = 8;
  m.explicit_head_dim = 128;
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  const std::vector<double> copies{300, 0, 700};
  const Time ffn = fp8.grouped_gemm(copies, 1024, 1024) + mb(3.0 * 1000 * 512 * 2) + fp8.grouped_gemm(copies, 1024, 512);
  EXPECT_EQ(blocks::experts_time(fp8, m, copies, 512), (compute::Work{mb(4.0 * 1000 * 1024) + ffn, 4}));
  // Through Transformer Engine's GroupedLinear (per_expert), each GroupedLinear quantizes its own
  // input, expert by expert: two casts of the copies (4 · 1000 · H B in all), two fc1 GeMMs, the
  // activation, two casts of its output before fc2 (4 · 1000 · 512 B), two fc2 GeMMs: 9 kernels.
  o.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
  const compute::ComputeModel te(gpu(), o);
  EXPECT_EQ(blocks::experts_time(te, m, copies, 512),
            (compute::Work{mb(4.0 * 1000 * 1024) + te.grouped_gemm(copies, 1024, 1024) + mb(3.0 * 1000 * 512 * 2) +
                               mb(4.0 * 1000 * 512) + te.grouped_gemm(copies, 1024, 512),
                           9}));
  // Its backward casts the output gradients of both: fc2's (1000 × H) and fc1's, the activation's
  // gradient (1000 × 2·512), each expert's on its own; the one grouped kernel the first only.
  const blocks::ExpertsWork te_work = blocks::experts_work(te, m, copies, 512), one_work = blocks::experts_work(fp8, m, copies, 512);
  // Kernels: fc2's gradient cast per expert (2 for 1), fc1's (2 more), and each of the four GeMMs
  // per expert (2 for 1): 7 more.
  EXPECT_EQ(te_work.backward.kernels - one_work.backward.kernels, 1 + 2 + 4);
  EXPECT_EQ(te_work.backward.time - one_work.backward.time,
            mb(4.0 * 1000 * 1024) +  // fc1's output gradient, 2·512 wide
                (te.grouped_gemm(copies, 512, 1024) - fp8.grouped_gemm(copies, 512, 1024)) +
                (te.grouped_gemm(copies, 1024, 1024) - fp8.grouped_gemm(copies, 1024, 1024)) +
                (te.grouped_gemm_wgrad(copies, 1024, 512) - fp8.grouped_gemm_wgrad(copies, 1024, 512)) +
                (te.grouped_gemm_wgrad(copies, 1024, 1024) - fp8.grouped_gemm_wgrad(copies, 1024, 1024)));
  // A dense FFN or the shared experts read the norm's FP8 output: no cast.
  const std::vector<double> one{1000};
  EXPECT_EQ(blocks::ffn_time(fp8, m, 1000, 512),
            (compute::Work{fp8.grouped_gemm(one, 1024, 1024) + mb(3.0 * 1000 * 512 * 2) + fp8.grouped_gemm(one, 1024, 512), 3}));
  // Output projection of 1000 tokens from 8 × 128 columns: the cast 4 · 1000 · 1024 B, the GeMM,
  // the residual add 3 · T · H · 2 B.
  EXPECT_EQ(blocks::output_projection_time(fp8, m, 1000),
            (compute::Work{mb(4.0 * 1000 * 1024) + fp8.gemm(1000, 1024, 1024) + mb(3.0 * 1000 * 1024 * 2), 3}));
  // Per-tensor current scaling (fp8_scaling "current", Megatron-Core's tensorwise recipe): each cast
  // reads its BF16 input once more for the amax (2 B an element: 6 B in all) and launches the amax
  // and scale kernels before it (3 kernels for 1).
  compute::ComputeOptions cs = o;
  cs.grouped_gemm_kernels = compute::GroupedGemmKernels::One;
  cs.fp8_current_scaling = true;
  const compute::ComputeModel current(gpu(), cs);
  EXPECT_EQ(blocks::output_projection_time(current, m, 1000),
            (compute::Work{mb(6.0 * 1000 * 1024) + fp8.gemm(1000, 1024, 1024) + mb(3.0 * 1000 * 1024 * 2), 5}));
  EXPECT_EQ(blocks::experts_time(current, m, copies, 512), (compute::Work{mb(6.0 * 1000 * 1024) + ffn, 6}));
  // BF16 training casts nothing.
  compute::ComputeModel bf16(gpu(), {});
  EXPECT_EQ(blocks::output_projection_time(bf16, m, 1000),
            (compute::Work{bf16.gemm(1000, 1024, 1024) + mb(3.0 * 1000 * 1024 * 2), 2}));
}

TEST(LayerCosts, ExpertOutputBiasAsMegatronCoreAddsIt) {
  // A model with linear biases, its experts' GeMMs Transformer Engine's GroupedLinear (per_expert):
  // Megatron-Core's TEGroupedMLP._apply_bias adds fc2's bias per local expert as t + b·p with p in
  // fp32 (core_v0.17.0 experts.py). Two local experts of r = 300 and 500 rows (C = 800), H = 1024,
  // BF16 (a = 2 B).
  compute::ComputeOptions o;
  o.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
  compute::ComputeModel cm(gpu(), o);
  auto m = moe_layer(true);
  const std::vector<double> rows{300, 500};
  const double h = 1024, a = 2, c = 800;
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  const blocks::ExpertsWork plain = blocks::experts_work(cm, m, rows, 512);
  m.linear_bias = true;
  const blocks::ExpertsWork biased = blocks::experts_work(cm, m, rows, 512);
  // Forward, per expert: b·p written in fp32 (4·r·H), t + b·p (reads a + 4, writes 4: (a + 8)·r·H);
  // then the cat of the fp32 rows (8·C·H) and the cast back (reads 4, writes a: (4 + a)·C·H).
  // 2 kernels an expert and 2: 6.
  Time forward = mb(8 * c * h) + mb((4 + a) * c * h);
  for (const double r : rows) forward += mb(4 * r * h) + mb((a + 8) * r * h);
  EXPECT_EQ(biased.forward.time - plain.forward.time, forward);
  EXPECT_EQ(biased.forward.kernels - plain.forward.kernels, 6);
  // Backward: the cast's gradient (reads a, writes 4) and the probabilities' gradients concatenated
  // (4·C); per expert the gradient cast to bf16 (4 + a), b's gradient g·p (8) and its row sum (4),
  // p's gradient g·b (8) and its sum over H (4), and b's [H] gradient cast ((4 + a)·H): 6 kernels
  // an expert and 2: 14. Weight gradients are untouched.
  Time backward = mb((a + 4) * c * h) + mb(8 * c);
  for (const double r : rows)
    backward += mb((4 + a) * r * h) + mb(8 * r * h) + mb(4 * r * h) + mb(8 * r * h) + mb(4 * r * h) + mb((4 + a) * h);
  EXPECT_EQ(biased.backward.time - plain.backward.time, backward);
  EXPECT_EQ(biased.backward.kernels - plain.backward.kernels, 14);
  EXPECT_EQ(biased.wgrad, plain.wgrad);
  // The forward the other callers cost is the same as experts_work's.
  EXPECT_EQ(blocks::experts_time(cm, m, rows, 512), biased.forward);
  // One grouped kernel (moesim's idealised backend, Megatron-Core's fused expert MLP) takes the
  // bias into its epilogue: no cost.
  compute::ComputeModel grouped(gpu(), compute::ComputeOptions{});
  auto unbiased = m;
  unbiased.linear_bias = false;
  EXPECT_EQ(blocks::experts_work(grouped, m, rows, 512), blocks::experts_work(grouped, unbiased, rows, 512));
  // Unless the release's fused dGLU kernel pays for the bias gradient: cudnn-frontend 1.24-1.25
  // under CUTLASS DSL 4.5 ran it at 1362.768 us where the same kernel without it took 139.392
  // (NVIDIA/cudnn-frontend PR #322, the fix of issue #256). That kernel is fc2's data gradient
  // (C rows of ffn 512 over H) and SwiGLU's backward (5·C·ffn·a bytes): the backward gains
  // (s - 1) times their time, nothing else; the forward, the weight gradients and a model
  // without biases are untouched.
  compute::ComputeOptions slow;
  slow.dglu_dbias_slowdown = 1362.768 / 139.392;
  const compute::ComputeModel regressed(gpu(), slow);
  const blocks::ExpertsWork fast = blocks::experts_work(grouped, m, rows, 512), hit = blocks::experts_work(regressed, m, rows, 512);
  const double dglu = time_to_seconds(regressed.grouped_gemm(rows, 512, h) + mb(5 * c * 512 * a));
  EXPECT_EQ(hit.backward.time - fast.backward.time, seconds_to_time((slow.dglu_dbias_slowdown - 1) * dglu));
  EXPECT_EQ(hit.backward.kernels, fast.backward.kernels);
  EXPECT_EQ(hit.forward, fast.forward);
  EXPECT_EQ(hit.wgrad, fast.wgrad);
  EXPECT_EQ(blocks::experts_work(regressed, unbiased, rows, 512), blocks::experts_work(grouped, unbiased, rows, 512));
  // Transformer Engine's GroupedLinear computes the bias gradient in kernels of its own (above).
  compute::ComputeOptions slow_per_expert = o;
  slow_per_expert.dglu_dbias_slowdown = slow.dglu_dbias_slowdown;
  EXPECT_EQ(blocks::experts_work(compute::ComputeModel(gpu(), slow_per_expert), m, rows, 512), biased);
}

TEST(LayerCosts, ClampedQuickGeGluClampsApartUnderTeGroupedMlp) {
  // GPT-OSS's experts under Megatron-Core's TEGroupedMLP (grouped GeMM backend per_expert):
  // weighted_bias_quick_geglu_impl (core_v0.17.0 fusions/fused_bias_geglu.py L411-440) clamps the
  // gate half and the up half of fc1's output and concatenates them, in eager PyTorch, before its
  // compiled activation. Two local experts of r = 300 and 500 rows (C = 800 copies), ffn M = 512,
  // BF16 (a = 2 B); each half is C·M·a bytes.
  compute::ComputeOptions o;
  o.grouped_gemm_kernels = compute::GroupedGemmKernels::PerExpert;
  const compute::ComputeModel cm(gpu(), o);
  auto swiglu = moe_layer(true);
  auto clamped = swiglu;
  clamped.expert_kind = workload::ExpertKind::ClampedQuickGeGlu;
  const std::vector<double> rows{300, 500};
  const double half = 800 * 512 * 2;
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  const blocks::ExpertsWork plain = blocks::experts_work(cm, swiglu, rows, 512);
  const blocks::ExpertsWork apart = blocks::experts_work(cm, clamped, rows, 512);
  // Forward: two clamps, each reading and writing its half (2 halves each), and the cat reading
  // and writing both (4): 3 kernels more. Both kinds are gated: the same three GeMMs.
  EXPECT_EQ(apart.forward.time - plain.forward.time, mb(2 * half) + mb(2 * half) + mb(4 * half));
  EXPECT_EQ(apart.forward.kernels - plain.forward.kernels, 3);
  // Backward: each clamp's gradient reads the gradient and its input and writes one (3 halves),
  // chunk's gradient concatenates the halves' (4): 3 kernels more; the weight gradients untouched.
  EXPECT_EQ(apart.backward.time - plain.backward.time, mb(3 * half) + mb(3 * half) + mb(4 * half));
  EXPECT_EQ(apart.backward.kernels - plain.backward.kernels, 3);
  EXPECT_EQ(apart.wgrad, plain.wgrad);
  // The offset it builds as a GPU tensor syncs the host after the clamps: what follows is the
  // fused activation (3 halves: reads the gate and up halves, writes one), fc2 and nothing else
  // (no bias, no FP8 casts here); SwiGLU syncs nowhere.
  EXPECT_EQ(plain.forward_after_sync, compute::Work{});
  const compute::Work fc2{cm.grouped_gemm(rows, 1024, 512), 2};  // one GeMM an expert
  EXPECT_EQ(apart.forward_after_sync, compute::kernel(mb(3 * half)) + fc2);
  // The recomputed activation (moe_act) is the clamps and the activation, the activation after the sync.
  EXPECT_EQ(blocks::expert_activation_time(cm, clamped, 800, 512), compute::kernel(mb(2 * half)) +
                                                                       compute::kernel(mb(2 * half)) +
                                                                       compute::kernel(mb(4 * half)) +
                                                                       compute::kernel(mb(3 * half)));
  EXPECT_EQ(blocks::expert_activation_after_sync(cm, clamped, 800, 512), compute::kernel(mb(3 * half)));
  EXPECT_EQ(blocks::expert_activation_after_sync(cm, swiglu, 800, 512), compute::Work{});
  // Megatron-Core 0.18's fused expert MLP (one grouped kernel; Transformer Engine's fused ops take
  // the clamp as the activation's limit): no clamps, no sync.
  const compute::ComputeModel fused(gpu(), compute::ComputeOptions{});
  EXPECT_EQ(blocks::experts_work(fused, clamped, rows, 512), blocks::experts_work(fused, swiglu, rows, 512));
}

TEST(LayerCosts, PermuteKernelsOfEachSoftware) {
  // T = 1000 tokens, H = 1024, E = 16, k = 4 (C = kT = 4000 copies), BF16 (a = 2 B); int64
  // indices (8 B). Each kernel's bytes as layer_costs.cpp derives them from the frameworks' code.
  const double t = 1000, h = 1024, e = 16, c = 4000, a = 2;
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  const auto m = moe_layer(true);
  const auto with = [](compute::PermuteKernels p) {
    compute::ComputeOptions o;
    o.permute_kernels = p;
    return compute::ComputeModel(gpu(), o);
  };
  const compute::ComputeModel fused = with(compute::PermuteKernels::Fused), megatron = with(compute::PermuteKernels::Megatron),
                              titan = with(compute::PermuteKernels::Torchtitan);
  // The permute is what gate_time adds to the gate of a fused dispatch (which permutes in its own
  // kernels).
  const auto permute = [&](const compute::ComputeModel& cm) {
    const compute::Work all = blocks::gate_time(cm, m, t), none = blocks::gate_time(cm, m, t, true);
    return compute::Work{all.time - none.time, all.kernels - none.kernels};
  };
  // Fused (Transformer Engine's moe_permute): reads each token, writes its k copies.
  EXPECT_EQ(permute(fused), (compute::Work{mb((1 + 4) * t * h * a), 1}));
  // Megatron-Core unfused: the bool routing map transposed (2·T·E); argsort of T·E byte keys (an
  // int64 arange 8·T·E, a histogram T·E, one radix pass reading and writing keys and indices
  // 18·T·E); the sorted indices modulo T (16·C); the probabilities transposed (2a·T·E) and
  // gathered (index 8, read and write a: (8 + 2a)·C); index_select (indices 8·C, rows 2·C·H·a).
  EXPECT_EQ(permute(megatron), (compute::Work{mb(2 * t * e) + mb(8 * t * e) + mb(t * e) + mb(18 * t * e) + mb(16 * c) +
                                                 mb(2 * a * t * e) + mb((8 + 2 * a) * c) + mb(8 * c + 2 * c * h * a),
                                             8}));
  // torchtitan: argsort of the C int64 expert ids (arange 8·C, histogram 8·C, eight 8-bit passes
  // of 32·C), the scores gathered (16·C), idx // k (16·C), the row gather (8·C + 2·C·H·a).
  Time sort = mb(8 * c) + mb(8 * c);
  for (int pass = 0; pass < 8; ++pass) sort += mb(32 * c);
  EXPECT_EQ(permute(titan), (compute::Work{sort + mb(16 * c) + mb(16 * c) + mb(8 * c + 2 * c * h * a), 13}));

  // The un-permute is combine_time less the residual add (3·T·H·a).
  const auto unpermute = [&](const compute::ComputeModel& cm) {
    const compute::Work w = blocks::combine_time(cm, m, t);
    return compute::Work{w.time - mb(3 * t * h * a), w.kernels - 1};
  };
  EXPECT_EQ(unpermute(fused), (compute::Work{mb((4 + 1) * t * h * a), 1}));
  // Megatron-Core unfused: probabilities and map transposed (2a·T·E, 2·T·E); masked_select's
  // count (T·E), nonzero (T·E + 8·C) and gather ((8 + 2a)·C); the copies times their probability
  // (2·C·H·a + a·C); a zeroed T × H output (T·H·a); scatter_add, C·H atomic adds at
  // kAtomicAddsPerSecond scaled by this GPU's HBM (3e12 of the H100's 3.35e12), slower here than
  // its bytes (C·H·a + 8·C, the output read and written 2·T·H·a).
  const double atomics = compute::kAtomicAddsPerSecond * 3e12 / compute::kAtomicReferenceHbm;
  const Time scatter = compute::kMemoryKernelOverhead + seconds_to_time(c * h / atomics);
  ASSERT_GT(c * h / atomics, (c * h * a + 8 * c + 2 * t * h * a) / (compute::kHbmEfficiency * 3e12));
  EXPECT_EQ(unpermute(megatron),
            (compute::Work{mb(2 * a * t * e) + mb(2 * t * e) + mb(t * e) + mb(t * e + 8 * c) + mb((8 + 2 * a) * c) +
                               mb(2 * c * h * a + a * c) + mb(t * h * a) + scatter,
                           8}));
  // torchtitan: a zeroed output (T·H·a); the copies to fp32 (C·H·(a + 4)), times the fp32 score
  // (8·C·H + 4·C), back to bf16 (C·H·(4 + a)); the deterministic scatter_add: a clone of the
  // output (2·T·H·a), the argsort of the C indices, two index kernels (8·C each) and the
  // accumulation (C·H·a + 8·C + 2·T·H·a).
  EXPECT_EQ(unpermute(titan), (compute::Work{mb(t * h * a) + mb(c * h * (a + 4)) + mb(8 * c * h + 4 * c) +
                                                  mb(c * h * (4 + a)) + mb(2 * t * h * a) + sort + mb(8 * c) + mb(8 * c) +
                                                  mb(c * h * a + 8 * c + 2 * t * h * a),
                                              18}));
  // Backward (autograd). The fused kernels: twice the forward. Megatron-Core's permute:
  // index_select's gradient, index_add_ into a zeroed T × H gradient (T·H·a, then C·H atomic adds),
  // the probabilities' (a·T·E + (8 + 2a)·C) and their transpose back (2a·T·E): 4 kernels.
  const auto permute_back = [&](const compute::ComputeModel& cm) {
    const compute::Work all = blocks::gate_backward_time(cm, m, t), none = blocks::gate_backward_time(cm, m, t, true);
    return compute::Work{all.time - none.time, all.kernels - none.kernels};
  };
  EXPECT_EQ(permute_back(fused), fused.backward(permute(fused)));
  EXPECT_EQ(permute_back(megatron),
            (compute::Work{mb(t * h * a) + scatter + mb(a * t * e + (8 + 2 * a) * c) + mb(2 * a * t * e), 4}));
  // torchtitan's: index_put_ accumulating through a sort (no atomics): a zeroed gradient, the argsort,
  // the rows accumulated (C·H·a + 8·C + 2·T·H·a), the scores' gradient (16·C): 13 kernels.
  EXPECT_EQ(permute_back(titan),
            (compute::Work{mb(t * h * a) + sort + mb(c * h * a + 8 * c + 2 * t * h * a) + mb(16 * c), 13}));
  // Megatron-Core's un-permute: the gather of the rows (8·C + 2·C·H·a), the product's gradients
  // (2·C·H·a + a·C; 3·C·H·a and its sum C·H·a), masked_select's (a·T·E; T·E + a·C + a·T·E) and
  // the transpose (2a·T·E): 7 kernels; the residual add's backward twice its forward.
  const Time residual_back = 2 * mb(3 * t * h * a);
  EXPECT_EQ(blocks::combine_backward_time(megatron, m, t),
            (compute::Work{mb(8 * c + 2 * c * h * a) + mb(2 * c * h * a + a * c) + mb(3 * c * h * a) + mb(c * h * a) +
                               mb(a * t * e) + mb(t * e + a * c + a * t * e) + mb(2 * a * t * e) + residual_back,
                           7 + 2}));
  // torchtitan's combine: the gather (8·C + 2·C·H·a), the casts' and the product's gradients
  // (C·H·(a + 4); 8·C·H + 4·C; 12·C·H and its sum 4·C·H; C·H·(4 + a)): 6 kernels.
  EXPECT_EQ(blocks::combine_backward_time(titan, m, t),
            (compute::Work{mb(8 * c + 2 * c * h * a) + mb(c * h * (a + 4)) + mb(8 * c * h + 4 * c) + mb(12 * c * h) +
                               mb(4 * c * h) + mb(c * h * (4 + a)) + residual_back,
                           6 + 2}));
  EXPECT_EQ(blocks::combine_backward_time(fused, m, t), fused.backward(blocks::combine_time(fused, m, t)));

  // torchtitan's fp32 combine moves 22·k·H + 10·H bytes a token against the fused kernel's
  // 2·(k + 1)·H: more than 8 times as many at k = 4.
  EXPECT_GT(static_cast<double>(unpermute(titan).time), 8.0 * static_cast<double>(unpermute(fused).time));
}

TEST(LayerCosts, UnfusedSwiGluIsTwoKernelsForwardAndThreeBackward) {
  // Two local experts of 300 and 500 rows (C = 800), ffn 512, BF16: B = C·ffn·a bytes.
  const std::vector<double> rows{300, 500};
  const double b = 800 * 512 * 2;
  const auto mb = [&](double bytes) { return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12)); };
  compute::ComputeOptions o;
  const compute::ComputeModel fused(gpu(), o);
  o.fused_activation = false;
  const compute::ComputeModel eager(gpu(), o);
  const auto m = moe_layer(true);
  // Forward: the fused kernel reads both halves and writes the product (3·B); eager SiLU reads and
  // writes the gate half (2·B), the product reads both and writes one (3·B).
  EXPECT_EQ(blocks::expert_activation_time(fused, m, 800, 512), (compute::Work{mb(3 * b), 1}));
  EXPECT_EQ(blocks::expert_activation_time(eager, m, 800, 512), (compute::Work{mb(2 * b) + mb(3 * b), 2}));
  // Backward: fused 5·B in one kernel; eager the product's two gradients and SiLU's, 3·B each.
  const blocks::ExpertsWork f = blocks::experts_work(fused, m, rows, 512), u = blocks::experts_work(eager, m, rows, 512);
  EXPECT_EQ(u.forward.time - f.forward.time, mb(2 * b) + mb(3 * b) - mb(3 * b));
  EXPECT_EQ(u.backward.time - f.backward.time, 3 * mb(3 * b) - mb(5 * b));
  EXPECT_EQ(u.forward.kernels - f.forward.kernels, 1);
  EXPECT_EQ(u.backward.kernels - f.backward.kernels, 2);
  // An MLP expert's GeLU is one kernel either way.
  auto mlp = m;
  mlp.expert_kind = workload::ExpertKind::Mlp;
  EXPECT_EQ(blocks::expert_activation_time(eager, mlp, 800, 512), blocks::expert_activation_time(fused, mlp, 800, 512));
}

TEST(LayerCosts, AnEagerRouterRunsTorchTopkAtItsMeasuredRate) {
  // software.router_fusion false: after the softmax kernel, torch.topk over T = 1000 rows of E = 16
  // scores takes 10.2 us + 1000 · (0.87 + 16 · 0.045) ns = 11.79 us (the H100 fit of
  // h100-memory-bound-kernels.json's topk8 rows); its backward is a scatter, costed as the fused
  // router's: the gate's backward does not change.
  compute::ComputeOptions o;
  const compute::ComputeModel fused(gpu(), o);
  o.fused_router = false;
  const compute::ComputeModel eager(gpu(), o);
  const auto m = moe_layer(true);
  EXPECT_EQ(eager.eager_topk(1000, 16), 11'790'000);
  EXPECT_EQ(blocks::gate_time(eager, m, 1000).time - blocks::gate_time(fused, m, 1000).time, 11'790'000);
  EXPECT_EQ(blocks::gate_time(eager, m, 1000).kernels, blocks::gate_time(fused, m, 1000).kernels);
  EXPECT_EQ(blocks::gate_backward_time(eager, m, 1000), blocks::gate_backward_time(fused, m, 1000));
  EXPECT_EQ(blocks::gate_backward_time(eager, m, 1000, true), blocks::gate_backward_time(fused, m, 1000, true));
}

TEST(LayerCosts, WeightGradientsAreHalfOfEachGemmsBackward) {
  // What a zero-bubble backward leaves to its W (sim/blocks/weight_gradients.hpp): dW = Xᵀ·dY has
  // the forward GeMM's FLOPs, half of its backward at the backward factor 2 (so the forward GeMM's
  // time), one kernel a GeMM. T = 1000 tokens, H = 1024, 8 heads of 128 (Q, K, V 1024 wide each,
  // output 1024 → 1024): the QKV GeMM T × 3072 × 1024 and the output projection's T × 1024 × 1024.
  compute::ComputeModel cm(gpu(), {});
  auto m = moe_layer(true);
  m.heads = 8;
  m.kv_heads = 8;
  workload::TrainingConfig t;
  t.sequence_length = 1000;
  t.micro_batch_size = 1;
  const Time qkv = cm.gemm(1000, 3072, 1024), out = cm.gemm(1000, 1024, 1024);
  EXPECT_EQ(blocks::attention_wgrad_time(cm, m, t), (compute::Work{qkv + out, 2}));
  // Part of the attention block's backward, whose projections cost twice their forward.
  EXPECT_GT(blocks::attention_backward_time(cm, m, t).time, 2 * (qkv + out));
  // A SwiGLU FFN of size 512 over 1000 tokens: fc1 T × 1024 × 1024 (gate and up), fc2 T × 1024 × 512.
  const double rows[1] = {1000};
  EXPECT_EQ(blocks::ffn_wgrad_time(cm, m, 1000, 512),
            (compute::Work{cm.grouped_gemm(rows, 1024, 1024) + cm.grouped_gemm(rows, 1024, 512), 2}));
  // The LM head's logits GeMM over a vocabulary of 32000 split over tp 2.
  m.vocab = 32000;
  EXPECT_EQ(blocks::lm_head_wgrad_time(cm, m, 1000, 2), (compute::Work{cm.gemm(1000, 16000, 1024), 1}));
  // At a backward factor of 3, half of that: 1.5 times the forward GeMM.
  compute::ComputeOptions o;
  o.backward_factor = 3;
  compute::ComputeModel slow(gpu(), o);
  EXPECT_EQ(blocks::lm_head_wgrad_time(slow, m, 1000, 2).time, slow.backward(slow.gemm(1000, 16000, 1024)) / 2);
}

TEST(LayerCosts, RotaryEmbeddingAndQueryKeyNormsAfterTheQkvProjection) {
  // T = 1000 tokens, 8 query heads and 2 KV heads of 128 (H = 1024): queries 1024 wide, keys 256,
  // a = 2 B; each memory-bound kernel kMemoryKernelOverhead + bytes / (kHbmEfficiency · 3e12).
  const auto mb = [](double bytes) {
    return compute::kMemoryKernelOverhead + seconds_to_time(bytes / (compute::kHbmEfficiency * 3e12));
  };
  auto m = moe_layer(true);
  m.heads = 8;
  m.kv_heads = 2;
  compute::ComputeModel fused(gpu(), {});
  const double t = 1000, q = t * 1024, k = t * 256;
  // Neither by default.
  EXPECT_EQ(blocks::rotary_time(fused, m, t), compute::Work{});
  EXPECT_EQ(blocks::qk_norm_time(fused, m, t), compute::Work{});
  const compute::Work bare = blocks::qkv_projection_time(fused, m, t);
  m.rotary = true;
  m.qk_norm = true;
  // Fused RoPE: the queries, then the keys, read and written once: 2 kernels of 2·2 B an element.
  EXPECT_EQ(blocks::rotary_time(fused, m, t), (compute::Work{mb(4 * q) + mb(4 * k), 2}));
  // The per-head RMSNorms read and write the queries, then the keys: the same bytes, 2 kernels.
  EXPECT_EQ(blocks::qk_norm_time(fused, m, t), (compute::Work{mb(4 * q) + mb(4 * k), 2}));
  // Both after the QKV GeMM, in its piece of the attention block.
  EXPECT_EQ(blocks::qkv_projection_time(fused, m, t),
            bare + blocks::rotary_time(fused, m, t) + blocks::qk_norm_time(fused, m, t));
  // Split over tp 2: half the heads, half the bytes.
  EXPECT_EQ(blocks::rotary_time(fused, m, t, 2), (compute::Work{mb(2 * q) + mb(2 * k), 2}));
  // torchtitan's eager CosSinRoPE, per element: cast (2 + 4), ·cos (8), negation of a half (4),
  // cat (8), ·sin (8), sum (12), cast back (6): 48 B in 7 kernels a tensor.
  compute::ComputeOptions o;
  o.fused_rope = false;
  compute::ComputeModel eager(gpu(), o);
  Time expected = 0;
  for (const double x : {q, k})
    for (const double b : {6.0, 8.0, 4.0, 8.0, 8.0, 12.0, 6.0}) expected += mb(b * x);
  EXPECT_EQ(blocks::rotary_time(eager, m, t), (compute::Work{expected, 14}));
  // MLA (DeepSeek-V3's dims, 8 heads): the query's 64 rope dims in place, 2·8·64·a a token; the
  // keys and values from the kv (8·(128 + 128) + 64 read, 8·(128 + 64) + 8·128 written) a token.
  m.mla = workload::LatentAttention{.q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope_head_dim = 128,
                                    .qk_rope_head_dim = 64, .v_head_dim = 128};
  EXPECT_EQ(blocks::rotary_time(fused, m, t),
            (compute::Work{mb(2 * t * 8 * 64 * 2) + mb(t * 2 * (8 * 256 + 64 + 8 * 192 + 8 * 128)), 2}));
}

TEST(LayerCosts, WorkCarriesTheTimeMeasuredTablesGave) {
  // With a GeMM table (400 TFLOP/s at every shape) and attention tables, the local experts'
  // grouped GeMMs and the attention core are costed from them and the SwiGLU between the GeMMs,
  // a memory-bound kernel, by the model: compute::Work::measured is exactly the tables' part.
  compute::KernelTables tables;
  tables.gemm_flops = [](double, double, double) { return 400e12; };
  tables.attention_flops = [](double, double, bool, double) { return 300e12; };
  tables.attention_backward_flops = [](double, double, bool, double) { return 200e12; };
  const compute::ComputeModel cm(gpu(), {}, tables);
  const auto m = moe_layer(true);
  const std::vector<double> rows{300, 500};
  const blocks::ExpertsWork w = blocks::experts_work(cm, m, rows, 512);
  // BF16 without bias: fc1 (H → 2·ffn, gate and up), the activation, fc2 (ffn → H).
  const Time fc1 = cm.grouped_gemm(rows, 1024, 1024), fc2 = cm.grouped_gemm(rows, 1024, 512);
  EXPECT_EQ(w.forward.measured, fc1 + fc2);
  EXPECT_EQ(w.forward.time - w.forward.measured, blocks::expert_activation_time(cm, m, 800, 512).time);
  // Backward: each grouped GeMM's data and weight gradients from the table, the activation's
  // backward by the model; the weight gradients alone are measured whole.
  const Time grads = cm.grouped_gemm(rows, 512, 1024) + cm.grouped_gemm_wgrad(rows, 1024, 512) +
                     cm.grouped_gemm(rows, 1024, 1024) + cm.grouped_gemm_wgrad(rows, 1024, 1024);
  EXPECT_EQ(w.backward.measured, grads);
  EXPECT_LT(w.backward.measured, w.backward.time);
  EXPECT_EQ(w.wgrad.measured, w.wgrad.time);
  // The attention core forward and backward: all measured.
  workload::ModelShape a = m;
  a.heads = 8;
  a.kv_heads = 8;
  workload::TrainingConfig t;
  t.sequence_length = 1000;
  t.micro_batch_size = 1;
  const compute::Work core = blocks::attention_core_time(cm, a, t), back = blocks::attention_core_backward_time(cm, a, t);
  EXPECT_GT(core.time, 0);
  EXPECT_EQ(core.measured, core.time);
  EXPECT_EQ(back.measured, back.time);
  // The same layer without tables: nothing measured.
  const compute::ComputeModel model(gpu(), {});
  EXPECT_EQ(blocks::experts_work(model, m, rows, 512).forward.measured, 0);
  EXPECT_EQ(blocks::attention_core_time(model, a, t).measured, 0);
  // A piece split and a part taken away keep their measured share: 1/4 of the core, and the
  // backward without its weight gradients measured as its data gradients.
  EXPECT_EQ(core.divided(4).measured, core.measured / 4);
  EXPECT_EQ((w.backward - w.wgrad).measured, grads - w.wgrad.measured);
  // A backward at the factor scales the measured part with the time (a GeMM's two gradients).
  const compute::Work g = compute::kernel(cm.gemm(1000, 1024, 1024), true);
  EXPECT_EQ(cm.backward(g), (compute::Work{2 * g.time, 2, 2 * g.time}));
}
