// Kernel cost on one GPU kind. Every kernel pays a fixed cost (launch, ramp-up and tail: the
// scenario's `compute.launch_overhead`, else kKernelOverhead) and then runs as fast as its FLOPs or
// its HBM bytes allow.
//
// GeMM, uncalibrated (the constants and their sources are in compute_model.cpp, in one place):
//     time = fixed cost + max(compute, bytes moved / HBM rate) + split-K reduction
//   - HBM rate: kHbmEfficiency of the datasheet's bandwidth, the rate every kernel here streams
//     HBM at (memory-bound kernels, GeMMs' operands, attention's), measured on this project's H100.
//   - compute: the output is cut into tiles of one shape, chosen as cuBLAS's heuristics aim to
//     (the candidate of kGemmTiles that finishes first: large tiles for large outputs, 64-row
//     tiles for skinny ones); a wave runs one tile per SM; a tile takes 2·tm·tn·(K + ramp) FLOPs
//     at (peak / SMs) · ceiling · tile efficiency. The ramp is the K-equivalent of a tile's
//     prologue and epilogue, a time: its K grows with the GPU's tensor rate per SM. Tile
//     efficiency = min(1, intensity / critical intensity), with the tile's intensity in FLOPs per
//     operand byte, 2·tm·tn / ((tm + tn) · element bytes): small tiles (and wide elements) starve
//     the tensor cores of operands. The last wave leaves SMs idle.
//   - split-K: an output of fewer tiles than SMs is split along K into up to SMs/tiles slices of at
//     least 512 (cuBLAS's split-K); the fp32 partial sums are written and read back once.
//   - ceiling: the fraction of peak a tile's main loop sustains, per GPU kind and dtype, derived
//     from the GPU's published maximum achievable matmul FLOPS (cluster::MatmulMeasurement): the
//     ceiling at which this model takes exactly the measured time at the measured shape. fp16 and
//     tf32 without their own measurement take bf16's (same tensor cores; the XLA sm_90 table's f32
//     column fits with bf16's ceiling); otherwise the GPU's `gemm_efficiency`.
//     `compute.gemm_efficiency` overrides it for every GPU. The measured maximum also bounds every
//     GeMM's rate: no shape runs faster than the best the brute-force search found.
//   - FP8 (Transformer Engine): FP8 operands (1 byte), BF16 output; its own MAMF measurement gives
//     its ceiling (Hopper reaches 71 % of its doubled peak where BF16 reaches 80 %). MXFP8 (block
//     scales of 32) takes its own measurement where the catalogue has one, else FP8's: on a B200
//     the measured MXFP8 grouped GeMM runs a third slower than per-tensor FP8 (topologies/gpus.json).
// A grouped GeMM (Megatron-Core's GroupedMLP / cuBLAS grouped GEMM over the local experts) is one
// kernel: the tiles of all groups fill the waves together, one fixed cost; a batched GeMM (XLA's
// b) is a grouped GeMM of equal groups. Under torch._grouped_mm the tile is PyTorch's, K is never
// split, and a preparation kernel runs first (kTorchGroupedMmCeiling).
//
// Calibration tables (KernelTables, bound from the scenario's profile by
// sim/simulation/calibration_binding) replace the model for the shapes they measure: a GeMM takes
// max(FLOPs / measured FLOP/s, bytes / HBM rate) plus the scenario's explicit launch overhead
// (none by default: a measured time includes its launch), a grouped GeMM the sum of its groups.
// Attention computes in the training's storage dtype (BF16 under FP8 training,
// cluster::storage_dtype) at the GPU's `attention_efficiency` of that dtype's peak (forward) and
// `attention_backward_efficiency` (backward, 2.5× the forward's FLOPs), and without
// FlashAttention it also reads and writes the L×L score matrix through HBM (HeterMoE §2.2: why V100 falls far behind A40 on long
// sequences). Other kernels' backward costs `backward_factor` (2 by default: gradients of inputs
// and of weights) times forward; the attention core's backward has its own FLOP count and rate,
// measured ones when a calibration table holds them (attention_backward).
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sim/cluster/gpu_spec.hpp"
#include "sim/core/enum_names.hpp"

namespace moesim::compute {

// The fixed cost of every GeMM and attention kernel the model costs (launch, ramp-up, tail), unless
// the scenario sets `compute.launch_overhead`: fitted with the GeMM constants to the OpenXLA sm_90
// table as a whole (tests/data/realdata/20_*; its smallest GeMM, 256³ bf16, 34 MFLOP or 0.04 us at
// peak, takes 5.2 us; this project's cuBLASLt table on an H100 measured 6.2 us). Taken for every
// GPU kind (assumption: no public table of other GPUs' fixed cost).
inline constexpr Time kKernelOverhead = 5'300'000;  // 5.3 us
// Memory-bound kernels (copies, the permutation's row gathers, norms, activations, softmax, casts)
// take fixed cost + bytes / (kHbmEfficiency · HBM bandwidth): both fitted together, by relative
// least squares, to this project's H100 measurements of such kernels as a whole
// (tests/data/measured/h100-memory-bound-kernels.json: copy, row gather, RMSNorm, eager SwiGLU and
// router softmax over 4096–65536 tokens × 2048–7168; 15 % mean time error where datasheet bandwidth
// and the GeMM fixed cost missed by 22 %). The efficiency is taken for every GPU kind (assumption:
// STREAM-like copies reach 85–90 % of the datasheet on every HBM generation; norms and activations
// less).
inline constexpr Time kMemoryKernelOverhead = 2'340'000;  // 2.34 us
inline constexpr double kHbmEfficiency = 0.814;
// PyTorch's scatter_add_ / index_add_ into 16-bit rows: one atomicAdd per element, which on
// Hopper issue far slower than HBM moves the bytes (pytorch/pytorch#84981, #74487). Fitted, by
// relative least squares, to the forward un-permute's scatter-add of this project's H100 layer
// steps (tests/data/measured/h100-moe-layer-step.json, un-permute "scatter": Qwen3-30B-A3B-like at
// 4096 and 8192 tokens, k = 8, H = 2048; Mixtral-like at 4096 tokens, k = 2, H = 4096): 110, 104 and
// 92·10⁹ adds/s once the other kernels of the combine are taken away; the same file's backward
// parts, whose index_add_ is the permute's gradient, are left to check it. Other GPUs: in
// proportion to their HBM bandwidth (assumption: no other measurement).
inline constexpr double kAtomicAddsPerSecond = 99e9;
inline constexpr double kAtomicReferenceHbm = 3.35e12;  // the H100 SXM's HBM3 bytes/s it was measured on
// PyTorch's torch.topk(k = 8) over T rows of E fp32 scores, far from HBM-bound (0.06-0.09 TB/s):
// kTopkFixed + T·(kTopkPerRow + E·kTopkPerScore), fitted by relative least squares to this
// project's H100 measurements (tests/data/measured/h100-memory-bound-kernels.json, topk8: T 4096,
// 16384, 65536 × E 64, 256): 2.5 % mean time error, worst 5.2 %. Taken for every GPU kind
// (assumption: no other measurement).
inline constexpr Time kTopkFixed = 10'200'000;      // 10.2 us
inline constexpr double kTopkPerRowSeconds = 0.87e-9;
inline constexpr double kTopkPerScoreSeconds = 0.045e-9;

// Self-attention core FLOPs: QKᵀ and P·V, two GeMMs of 2·L·L·d per head; causal masking halves
// the useful work. A sliding window of `window` tokens (causal; 0: none) leaves the kernel the
// query × key tiles the band crosses (attention_window_scores).
double attention_forward_flops(double batch, double heads, double seq, double head_dim, bool causal, double window = 0);
// The query-key scores a FlashAttention-style kernel computes over one sequence of `seq` tokens
// when each query sees its last `window` keys: every kAttentionTile × kAttentionTile tile the band
// crosses is computed whole and fully masked ones are skipped; the diagonal tile counts half, as
// the causal count L²/2 does (so a window of L or more gives L²/2). GPT-OSS's 128-token window at
// L = 4096: a query block of 128 rows computes its diagonal tile and the one before it, 1.5 tiles'
// worth, 47 · 128² in all against 32² · 128² / 2 for the full causal core (0.092 of it).
double attention_window_scores(double seq, double window);
// The query and key block of FlashAttention-2/3's and cuDNN's fused attention kernels at head dims
// up to 128 (Dao 2023 §3.1 and FlashAttention-3's kernels: 128 × 128 tiles on Hopper).
inline constexpr double kAttentionTile = 128;
// Backward: dV, dP, dQ, dK and the recomputed QKᵀ, 5 GeMMs against the forward's 2.
constexpr double kAttentionBackwardFlopRatio = 2.5;
// The fused attention backward reaches a lower fraction of peak than its forward (more GeMMs per
// softmax element, dQ accumulated across key blocks): 0.80 of the forward's efficiency, the mean
// over sequence lengths 2048–8192 of cuDNN's fused attention (what Transformer Engine runs), BF16,
// head dim 128, causal, measured by this project on an H100 (tests/data/measured/
// h100-fused-attention.json: 0.74, 0.81, 0.86). The GPU's own `attention_backward_efficiency`,
// where the catalogue has one, replaces it.
constexpr double kAttentionBackwardToForward = 0.80;

// A piece of one GPU's work as the blocks cost it: its time with the GPU to itself, and the kernels
// the host launches for it (engine.hpp: the launch thread). Every GeMM, attention and memory-bound
// kernel the compute model costs is one; a backward launches two per forward kernel (a GeMM's
// gradients of its input and of its weights; an elementwise kernel's backward and the reduction of
// its parameter's gradient, where it has one: an assumption, as few are single kernels).
// `measured`: of `time`, what a measured kernel table gave (KernelTables: a calibration profile's,
// the GPU catalogue's measured attention kernels) rather than the analytic model; results.json's
// kernel_sources adds it up over the kernels a run launches.
struct Work {
  Time time = 0;
  int kernels = 0;
  Time measured = 0;

  Work& operator+=(const Work& o) {
    time += o.time;
    kernels += o.kernels;
    measured += o.measured;
    return *this;
  }
  friend Work operator+(Work a, const Work& b) { return a += b; }
  // `a` without the part `b` of it (its time, kernels and measured time).
  friend Work operator-(Work a, const Work& b) { return {a.time - b.time, a.kernels - b.kernels, a.measured - b.measured}; }
  // The same kernels taking 1/`parts` of the time (a share of a split piece of work).
  Work divided(Time parts) const { return {time / parts, kernels, measured / parts}; }
  friend bool operator==(const Work&, const Work&) = default;
};
// One kernel of `time`; `measured`: its time came from a measured kernel table.
inline Work kernel(Time time, bool measured = false) { return {time, 1, measured ? time : 0}; }

// How the local experts' grouped GeMM runs (a kernel backend of the software): one grouped kernel
// over all of them at cuBLAS's rate (moesim's idealised default), a GeMM kernel per expert with
// rows (Transformer Engine's GroupedLinear over cuBLAS, its GeMMs spread over streams:
// kTransformerEngineGemmStreams), or PyTorch's torch._grouped_mm (one CUTLASS grouped kernel, at
// its measured rate: kTorchGroupedMmCeiling).
enum class GroupedGemmKernels : std::uint8_t { One, PerExpert, TorchGroupedMm };
inline constexpr auto kGroupedGemmNames =
    enum_names<GroupedGemmKernels>({{GroupedGemmKernels::One, "grouped"}, {GroupedGemmKernels::PerExpert, "per_expert"},
                                    {GroupedGemmKernels::TorchGroupedMm, "torch_grouped_mm"}});

// Transformer Engine's GroupedLinear runs its per-expert cuBLAS GeMMs on this many streams, GeMM i
// on stream i mod 4, each stream's GeMMs in order (transformer_engine/common/gemm/cublaslt_gemm.cu
// multi_stream_cublas_gemm, what nvte_multi_tensor_gemm runs unless NVTE_USE_CUTLASS_GROUPED_GEMM
// is set on Hopper; common/util/multi_stream.cpp get_num_compute_streams: 4). Each GeMM is a kernel
// as cuBLAS runs it alone: the streams hide each kernel's fixed cost behind the kernels of the
// others, but not its waves: the kernels take the GPU one after another (ComputeModel::
// kernels_on_streams). What says so: Transformer Engine's own measurement of this path
// (NVIDIA/TransformerEngine PR #2045, H100, TE 2.7, BF16) ran 8 GeMMs of 4096×768×2048 at
// 627.9 TFLOP/s and 16 of 2048×768×2048 at 553.9, where one CUTLASS grouped kernel ran 650.6 and
// 636.9: only 1.19× and 1.27× faster than the same cuBLAS GeMMs one after another on one stream
// (this project's cuBLASLt table, tests/data/measured/h100-cublaslt-gemm.json: 24.4 and 14.8 us
// each, interpolated in N between 512 and 1024), about the fixed cost each kernel no longer pays.
// Hopper's and Blackwell's cuBLAS kernels spread one GeMM over every SM, so kernels of other
// streams find none free until its last wave. compute_test.cpp TransformerEngineMultiStreamGroupedGemm.
inline constexpr int kTransformerEngineGemmStreams = 4;

// How the software permutes token copies into expert order before the experts and un-permutes and
// sums them after (blocks::gate_time, blocks::combine_time; kernel by kernel there): Transformer
// Engine's fused moe_permute / moe_unpermute kernels (Megatron-Core's moe_permute_fusion), Megatron-
// Core's unfused PyTorch path (moe_utils.permute / unpermute with fused=False: argsort of the
// routing map, index_select; multiply by the probabilities, scatter_add), or torchtitan's (argsort
// of the expert ids and a row gather; the outputs cast to fp32, scaled, cast back and summed by a
// deterministic, sort-based scatter_add).
enum class PermuteKernels : std::uint8_t { Fused, Megatron, Torchtitan };
inline constexpr auto kPermuteNames = enum_names<PermuteKernels>(
    {{PermuteKernels::Fused, "fused"}, {PermuteKernels::Megatron, "megatron"}, {PermuteKernels::Torchtitan, "torchtitan"}});

// How the software computes the loss over the logits (blocks::cross_entropy_work, byte by byte
// there): Transformer Engine's fused Triton kernels (Megatron-Core's cross_entropy_loss_fusion with
// cross_entropy_fusion_impl "te": an online softmax, then the loss with the gradient written over
// the 16-bit logits, scaled in the backward), Megatron-Core's unfused vocab_parallel_cross_entropy
// (fp32 copy, max, subtract, exp, sum, divide, each a PyTorch op), or PyTorch's
// F.cross_entropy over an fp32 copy (torchtitan: log_softmax and nll_loss).
enum class CrossEntropyKernels : std::uint8_t { TransformerEngine, Megatron, PyTorch };
inline constexpr auto kCrossEntropyNames =
    enum_names<CrossEntropyKernels>({{CrossEntropyKernels::TransformerEngine, "te"},
                                     {CrossEntropyKernels::Megatron, "megatron"},
                                     {CrossEntropyKernels::PyTorch, "pytorch"}});

// torch._grouped_mm as PyTorch runs it (aten/src/ATen/native/cuda/GroupMM.cu,
// dispatch_bf16_grouped_kernel_on_tile_size, pytorch/pytorch@06c0cf0): one CUTLASS grouped kernel
// over every group's tiles, persistent, without split-K, its tile fixed by the call's shape rather
// than chosen as cuBLAS's heuristics choose: on sm_90, 64 × 128 (the ping-pong schedule) when the
// groups' mean rows or the output's columns are at most 128, else 128 × 256 (cooperative); on
// sm_100, 64 × 128 whatever the shape (the GPUs with block-scaled MXFP8 tensor cores here). Before
// it, prepare_grouped_gemm_data (one block) writes each group's pointers and shape: two kernels a
// call. Its main loop sustains this fraction of the GeMM ceiling cuBLAS's does: fitted, by least
// squares of the log time ratio (optimum 0.796), to this project's 198 measurements of it (bf16,
// H100; tests/data/measured/h100-grouped-gemm.json: the expert fc1/fc2 shapes of Mixtral-8x7B,
// DeepSeek-V3 and Qwen3-30B-A3B, 1-64 groups, even and skewed rows), with the weight reads at the
// HBM's achievable rate (kHbmEfficiency): mean |time error| 7.8 % (12.3 % with cuBLAS's tile
// choice and split-K at 0.75; 23.1 % at cuBLAS's rate). Taken for every GPU kind, as a fraction of
// each GPU's own cuBLAS ceiling. Held out on the H200 and on a second H100 run, forward and both
// backward passes, DeepSeek-V2's 20 groups added (h200-grouped-gemm.json,
// h100-grouped-gemm-passes.json): 5.6-8.6 % mean time error per pass; each model family left out
// of the fit in turn, 6.1-9.6 % (compute_test.cpp MeasuredGroupedExpertGemmPasses,
// GroupedExpertGemmFamiliesLeftOut); no Blackwell measurement.
inline constexpr double kTorchGroupedMmCeiling = 0.80;

// The optimizer step's kernels (software.optimizer):
//  - Fused: moesim's idealised step, one pass of ComputeOptions::optimizer_bytes_per_param;
//  - Megatron: Megatron-Core's DistributedOptimizer.step (core_v0.17.0 optimizer/optimizer.py
//    MixedPrecisionOptimizer.step, distrib_optimizer.py): the main gradients' L2 norm
//    (clip_grads.get_grad_norm_fp32, one multi_tensor_l2norm), Transformer Engine's FusedAdam
//    over the master weights, the master weights copied into the 16-bit weights
//    (_copy_main_params_to_model_params), and, before the next iteration's first forward, the
//    whole gradient buffer zeroed (param_and_grad_buffer reset: grad_data.zero_(), every parameter
//    the GPU trains, not only its optimizer's shard). The clip's multi_tensor_scale runs only when
//    the norm exceeds clip_grad: not costed;
//  - Torch: torch.nn.utils.clip_grad_norm_ (torch._foreach_norm, then _foreach_mul_ by the clamped
//    coefficient, always applied) and torch.optim.AdamW(fused=True) over the fp32 weights
//    (torchtitan: FSDP2 keeps fp32 shards and casts on gather: no master copy), zero_grad setting
//    the gradients to None (no kernel).
// Each kernel is memory-bound (ComputeModel::memory_bound); this project measured these kernels at
// 76–79 % of HBM on an H100 and 72 % on an H200 (tests/data/measured/h100-optimizer.json,
// h200-memory-bound-kernels.json "optimizer").
enum class OptimizerKernels : std::uint8_t { Fused, Megatron, Torch };
inline constexpr auto kOptimizerKernelNames = enum_names<OptimizerKernels>(
    {{OptimizerKernels::Fused, "fused"}, {OptimizerKernels::Megatron, "megatron"}, {OptimizerKernels::Torch, "torch"}});

// Bytes per parameter of the optimizer step's kernels (OptimizerKernels::Megatron and Torch), from
// the optimizer's state dtypes (workload::OptimizerStates).
struct OptimizerBytes {
  double adam = 28;        // Adam: the weights it updates (master or FP32) and both moments read and written, the main gradient read
  double main_grad = 4;    // the main gradient: what the norm reads and the zeroing writes
  double master_copy = 6;  // the master weights read and the 16-bit weights written (0: no master copy)
};

struct ComputeOptions {
  cluster::Dtype dtype = cluster::Dtype::bf16;
  // FP8 with per-tensor current scaling (training.fp8_scaling "current"): each cast of its own
  // reads its tensor once more for the amax (fp8_cast).
  bool fp8_current_scaling = false;
  // Every kernel's fixed cost; unset: kKernelOverhead for modelled GeMM and attention kernels,
  // kMemoryKernelOverhead for memory-bound ones, none added to the measured times of calibration
  // tables.
  std::optional<Time> launch_overhead;
  // Backward compute / forward compute of every kernel; unset: 2 (the gradients of the input and
  // of the weights), except the experts' grouped GeMMs, whose gradients are costed by their own
  // shapes (blocks::experts_work).
  std::optional<double> backward_factor;
  std::optional<double> gemm_efficiency;       // overrides every GPU's GeMM ceiling
  std::optional<double> attention_efficiency;  // overrides the GPU's
  double optimizer_bytes_per_param = 32;        // Adam: read/write fp32 master, moments, gradient
  OptimizerKernels optimizer_kernels = OptimizerKernels::Fused;
  OptimizerBytes optimizer_bytes;
  GroupedGemmKernels grouped_gemm_kernels = GroupedGemmKernels::One;
  // torch._grouped_mm's fraction of cuBLAS's GeMM ceiling; unset: kTorchGroupedMmCeiling (a fit's
  // own value where it is refitted, as compute_test's families left out).
  std::optional<double> torch_grouped_mm_ceiling;
  PermuteKernels permute_kernels = PermuteKernels::Fused;
  // The router's softmax and top-k as one fused kernel (Megatron-Core's moe_router_fusion,
  // Transformer Engine's fused_topk_with_score_function); false: torch.topk after the softmax, at
  // its measured rate (ComputeModel::eager_topk).
  bool fused_router = true;
  // The gated experts' activation as one fused kernel (Megatron-Core's bias_activation_fusion,
  // Transformer Engine's); false: SiLU and the product as two eager PyTorch kernels (torchtitan's
  // GroupedExperts), blocks::expert_activation_time.
  bool fused_activation = true;
  // The time of the experts' dGLU backward kernel with fc1's bias gradient in its epilogue over the
  // same kernel without it, for a model with linear biases whose experts run as one grouped kernel
  // (blocks::experts_work): the software's fused grouped MLP (Transformer Engine's op fuser over
  // cudnn-frontend's grouped_gemm_dglu) computes fc2's data gradient, the activation's backward and
  // the bias gradient in one kernel. 1: the bias gradient rides in the epilogue at no cost.
  double dglu_dbias_slowdown = 1.0;
  // The rotary embedding of the queries and keys as one kernel a tensor (Megatron-Core's
  // apply_rope_fusion, Transformer Engine's fused_rope); false: torchtitan's eager CosSinRoPE,
  // blocks::rotary_time.
  bool fused_rope = true;
  CrossEntropyKernels cross_entropy = CrossEntropyKernels::TransformerEngine;
};

// Calibration hooks: the FLOP/s measured for a shape in the model's dtype (empty: roofline default).
// Attention FLOPs are counted as attention_forward_flops and, backward, kAttentionBackwardFlopRatio
// times that: the fitter (calibrate/fit) and the GPU catalogue's measured kernels
// (simulation::bind_catalogue_attention) turn measured times into FLOP/s with the same counts.
// `window`: the keys each query sees under a causal sliding window (0: all).
// `memory_bound`: the memory-bound kernels' line measured (a profile's fixed cost and HBM rate):
// they, and every kernel's HBM streaming, take it instead of kMemoryKernelOverhead and
// kHbmEfficiency (the model's rule, its constants measured on the user's GPU).
// `gemm_source`, `attention_source`, `memory_bound_source`: what each is, as the binder that set it
// says (the report).
struct KernelTables {
  std::function<double(double m, double n, double k)> gemm_flops;
  std::function<double(double seq, double head_dim, bool causal, double window)> attention_flops;
  std::function<double(double seq, double head_dim, bool causal, double window)> attention_backward_flops;
  struct MemoryBoundLine {
    Time fixed = 0;
    double bytes_per_second = 0;
  };
  std::optional<MemoryBoundLine> memory_bound;
  std::string gemm_source, attention_source, memory_bound_source;
};

// The optimizer step of `params` parameters on a host CPU (ZeRO-Offload's CPU Adam): bytes-bound
// like the GPU's, `bytes_per_param` through host memory (Adam reads and writes the fp32 master
// weights and both moments and reads the gradient) at the host's measured streaming rate
// (cluster::HostSpec::optimizer_bytes_per_second; DeepSpeed's CPU-Adam steps 11.6 B parameters in
// 8.2 s, deepspeedai/DeepSpeed PR #735: 45 GB/s at 32 B per parameter).
Time host_optimizer_step(double params, double bytes_per_param, double bytes_per_second);

class ComputeModel {
 public:
  ComputeModel(cluster::GpuSpec gpu, ComputeOptions options, KernelTables tables = {});

  // C[m×n] = A[m×k]·B[k×n].
  Time gemm(double m, double n, double k) const;
  // One grouped GeMM kernel: C_i[rows_i×n] = A_i[rows_i×k]·B_i[k×n] for every group i (each its
  // own B, as each expert its own weights); groups without rows do nothing.
  Time grouped_gemm(std::span<const double> rows, double n, double k) const;
  // The weight gradient of that grouped GeMM, dB_i = A_iᵀ·dC_i: per group an output of k × n
  // whose inner dimension is the group's rows (its data gradient, dA_i = dC_i·B_iᵀ, is the grouped
  // GeMM grouped_gemm(rows, k, n)). Few rows per expert make short main loops: each tile pays its
  // ramp over a K of only the group's rows.
  Time grouped_gemm_wgrad(std::span<const double> rows, double n, double k) const;
  // The kernels one grouped GeMM over `rows` launches (ComputeOptions::grouped_gemm_kernels): one
  // grouped kernel or a GeMM per expert with rows. torch._grouped_mm counts as one: its
  // preparation kernel is timed inside the call, and the presets' host costs are per op as their
  // measured steps were counted (software/README.md).
  int grouped_gemm_kernels(std::span<const double> rows) const;
  // Self-attention core (QKᵀ, softmax, ·V) for `batch` sequences, `heads` heads of `head_dim`.
  Time attention(double batch, double heads, double seq, double head_dim, bool causal, double window = 0) const;
  // Its backward (dQ, dK, dV): kAttentionBackwardFlopRatio × the forward's FLOPs at the measured
  // backward FLOP/s when a table gives them, else at the GPU's attention backward efficiency.
  Time attention_backward(double batch, double heads, double seq, double head_dim, bool causal, double window = 0) const;
  // A memory-bound kernel that moves `bytes` through HBM (norms, activations, permutations).
  Time memory_bound(double bytes) const;
  // A scatter-add of `adds` 16-bit elements by atomics (scatter_add_, index_add_) moving `bytes`:
  // the slower of the bytes through HBM and the atomics (kAtomicAddsPerSecond).
  Time atomic_scatter_add(double bytes, double adds) const;
  // torch.topk over `rows` rows of `experts` scores (kTopkFixed and the per-row rates).
  Time eager_topk(double rows, double experts) const;
  // Under FP8 training, the kernel that casts a GeMM's activation operand of `elements` elements
  // from BF16 to FP8 where no earlier kernel fuses the cast (Transformer Engine fuses it into a
  // norm before the GeMM, LayerNormLinear, and into the activation before an FFN's fc2 in its fused
  // MLPs; its GroupedLinear quantizes its own inputs, blocks::experts_work): it reads
  // the BF16 tensor and writes two FP8 copies, one scaled along each axis (the wgrad GeMM reads
  // the input transposed: TE's FP8 transpose on Hopper, MXFP8's column-wise blocks on Blackwell),
  // 2 + 2·1 bytes per element (the block scales, 1/32 byte per copy, neglected). Under per-tensor
  // current scaling (fp8_current_scaling) its amax is computed first, one more read of the BF16
  // tensor (Transformer Engine v2.10 Float8CurrentScalingQuantizer::quantize: nvte_compute_amax, the
  // amax all-reduce, nvte_compute_scale_from_amax, then nvte_quantize_v2): 2 + 2 + 2·1 = 6 bytes per element in
  // all, and fp8_cast_kernels kernels. 0 otherwise.
  Time fp8_cast(double elements) const;
  // Kernels of one such cast: 1, or 3 under current scaling (the amax, the scale, the cast).
  int fp8_cast_kernels() const { return options_.fp8_current_scaling ? 3 : 1; }
  Time optimizer_step(double params) const;
  // The optimizer step's kernels (ComputeOptions::optimizer_kernels) on a GPU whose optimizer
  // steps `params` parameters and whose gradient buffers hold `gradient_buffer_params`.
  Work optimizer_kernels(double params, double gradient_buffer_params) const;
  Time backward(Time forward) const;
  // A piece's backward: its time as backward(Time), twice its kernels (Work).
  // Its measured part scales with it: a measured GeMM's two gradients are GeMMs of its FLOPs.
  Work backward(const Work& forward) const {
    const Time t = backward(forward.time);
    return {t, 2 * forward.kernels,
            forward.time > 0 ? static_cast<Time>(static_cast<double>(t) * static_cast<double>(forward.measured) /
                                                 static_cast<double>(forward.time))
                             : 0};
  }
  // Whether GeMMs (dense and grouped), the attention core's forward and its backward are costed
  // from measured tables (KernelTables) rather than by the model.
  bool gemm_measured() const { return static_cast<bool>(tables_.gemm_flops); }
  bool attention_measured() const { return static_cast<bool>(tables_.attention_flops); }
  bool attention_backward_measured() const { return static_cast<bool>(tables_.attention_backward_flops); }
  // Where each kernel family's cost comes from, for the report: family → source, in a fixed order
  // (gemm, grouped_gemm, attention, attention_backward, memory_bound).
  std::vector<std::pair<std::string, std::string>> kernel_sources() const;

  const cluster::GpuSpec& gpu() const { return gpu_; }
  const ComputeOptions& options() const { return options_; }
  // The fraction of the dtype's peak one GeMM of this shape achieves, fixed cost included.
  double gemm_efficiency(double m, double n, double k) const;
  // The GeMM ceiling of this GPU kind and dtype (see the header comment).
  double gemm_ceiling() const { return ceiling_; }
  // The fixed cost of a modelled kernel.
  Time kernel_overhead() const { return overhead_; }

 private:
  // A dtype's peak and GeMM element widths.
  struct Precision {
    double peak, operand_bytes, output_bytes;
    double critical_intensity;  // FLOPs per operand byte at which a tile reaches the ceiling
    double ramp_k;              // a tile's prologue and epilogue in K elements of its main loop
  };
  static Precision precision(const cluster::GpuSpec& gpu, cluster::Dtype d);
  // How a GeMM kernel is built: the output tiles it may run (the model takes the one that
  // finishes first, as cuBLAS's heuristics aim to) and whether it splits K across SMs.
  struct Kernel {
    std::span<const std::array<double, 2>> tiles;
    bool split_k = true;
    bool prepared = false;  // a kernel of its own runs before it (a memory-bound kernel's fixed cost)
  };
  // cuBLAS's: every tile of kGemmTiles, split-K.
  static Kernel cublas();
  // The grouped backend's (ComputeOptions::grouped_gemm_kernels) for a call whose groups have
  // `mean_rows` rows and whose output has `columns`: torch._grouped_mm's (kTorchGroupedMmCeiling),
  // else cuBLAS's.
  Kernel kernel_for(double mean_rows, double columns) const;
  double modelled_gemm_seconds(std::span<const double> rows, double n, double k, double ceiling, const Precision& p,
                               const Kernel& kernel) const;
  // grouped_gemm_wgrad's model: the tiles of every group's k × n output, each as long as its rows.
  double modelled_wgrad_seconds(std::span<const double> rows, double n, double k, double scale, const Kernel& kernel) const;
  // A kernel's fixed cost: the modelled kernels' and, before a prepared one, a memory-bound kernel's.
  double fixed_seconds(const Kernel& kernel) const;
  // Bytes per second a kernel streams through HBM (kHbmEfficiency of the datasheet's, or the rate
  // of a profile's memory-bound line: KernelTables::memory_bound).
  double hbm_rate() const { return hbm_rate_; }
  // GroupedGemmKernels::PerExpert: one GeMM kernel per group with rows, kernel i on stream
  // i mod kTransformerEngineGemmStreams, each stream's kernels one after another and each launched
  // a fixed cost after its predecessor ends; each kernel holds the whole GPU for its time alone
  // (`alone(rows)`, fixed cost included) less the fixed cost, the GPU running them in launch order.
  double kernels_on_streams(std::span<const double> rows, const std::function<double(double rows)>& alone) const;
  double gemm_seconds(double m, double n, double k) const;
  // The modelled time, never faster than the published maximum achievable rate (max_flops_).
  // `scale`: of the ceiling and of that rate (the grouped backend's, grouped_scale()).
  double capped_gemm_seconds(std::span<const double> rows, double n, double k, double scale, const Kernel& kernel) const;
  // One grouped call of the ComputeOptions' grouped_gemm_kernels backend, forward or data gradient
  // (rows × n over k), fixed costs included.
  double grouped_call_seconds(std::span<const double> rows, double n, double k) const;
  double grouped_scale() const;
  cluster::Dtype measurement_dtype() const;  // whose MAMF sets the ceiling
  double derive_ceiling() const;
  double derive_max_flops() const;
  // The attention core: FLOPs at `efficiency` of the attention peak, or its HBM bytes.
  Time attention_roofline(double flops, double efficiency, double bytes, Time fixed) const;
  cluster::GpuSpec gpu_;
  ComputeOptions options_;
  KernelTables tables_;
  double peak_;            // GeMMs: the dtype's peak
  double attention_peak_;  // the attention core: its storage dtype's (cluster::storage_dtype)
  double element_bytes_;   // activations and attention operands
  Precision precision_;   // GeMMs
  Time overhead_;         // modelled kernels' fixed cost
  Time memory_overhead_;  // memory-bound kernels' fixed cost
  double hbm_rate_;       // kHbmEfficiency of the datasheet's, or a profile's measured rate
  double attention_backward_efficiency_;
  Time measured_overhead_;  // added to measured (table) kernels
  double ceiling_;
  // The maximum achievable matmul FLOP/s of the dtype (its MAMF, or bf16's scaled by the peaks;
  // 0: none published, or the scenario sets the ceiling): by definition, the best any shape
  // reached, so no modelled GeMM runs faster (the tile model alone lets long-K shapes pass it).
  double max_flops_;
};

}  // namespace moesim::compute
