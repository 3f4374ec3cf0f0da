// Compute durations of the pieces of an MoE transformer layer on one GPU kind, forward (backward
// through the compute model's backward factor, except the attention core whose backward has its
// own measured throughput when a calibration table gives it, and the experts, whose gradients
// are GeMMs of their own shapes: experts_work), kernel by kernel as Megatron-Core
// runs them: attention with its projections, norm and residual add, the router, the local experts
// as grouped GeMMs, the combine, dense FFN blocks, embedding, LM head. Attention, dense FFN and LM
// head split over a tensor-parallel group of `tp` GPUs as Megatron-LM does (heads, projection
// columns, FFN columns, vocabulary per rank). Memory-bound kernels are costed from the bytes they
// move through HBM, derived at each one (T tokens, H hidden, a bytes per activation element:
// cluster::storage_bytes, BF16 under FP8 training). Each piece is compute::Work: its time and the
// kernels the host launches for it, counted where they are costed.
#pragma once

#include <span>

#include "sim/compute/compute_model.hpp"
#include "sim/workload/model_shape.hpp"

namespace moesim::blocks {

// The FFNs of one GPU's local experts, `tokens[i]` token copies through expert i, each of size
// `ffn`, as Megatron-Core's GroupedMLP / TEGroupedMLP runs them: fc1 as one grouped GeMM over all
// of them (H → ffn, or H → 2·ffn for SwiGLU, gate and up projections in one weight), the activation
// over all their copies in one kernel, fc2 as one grouped GeMM (ffn → H); under FP8 training the
// permuted copies are first cast to FP8 (compute::ComputeModel::fp8_cast); a model with
// linear_bias adds each expert's output bias after fc2 as Megatron-Core does, in fp32 and expert by
// expert (layer_costs.cpp: expert_bias_work). The one rule for expert compute, whatever the number
// of local experts.
// The local experts' forward and backward. The backward, unless the scenario sets a backward
// factor (then factor × forward, its weight gradients half of it), runs each grouped GeMM's two
// gradients at their own shapes (compute::ComputeModel::grouped_gemm_wgrad): fc2's data gradient
// (rows × ffn over H) and weight gradient (ffn × H per expert over its rows), the activation's
// backward (SwiGLU reads the output gradient and both halves and writes both halves' gradients:
// 5·copies·ffn·a; GeLU 3·copies·ffn·a), fc1's data gradient (rows × H over its width) and weight
// gradient (H × width per expert over its rows); under FP8 training the output gradient is cast to
// FP8 first (the activation's backward writes fc1's gradient in FP8 itself, as Transformer
// Engine fuses it). `wgrad`: the weight gradients alone, part of `backward` (what
// software.delay_wgrad runs after the exchange back).
struct ExpertsWork {
  compute::Work forward, backward, wgrad;
  // The part of `forward` the launching thread issues after a sync with the GPU in its middle
  // (expert_activation_after_sync and what follows it); empty where the forward has none.
  compute::Work forward_after_sync;
  friend bool operator==(const ExpertsWork&, const ExpertsWork&) = default;
};
ExpertsWork experts_work(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                         double ffn);
// Its forward alone.
compute::Work experts_time(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                  double ffn);
// One FFN of `tokens` tokens and size `ffn` (a dense FFN, the shared experts): the same with one
// group, its input cast to FP8 by the norm before it.
compute::Work ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn);

// The attention block of one microbatch on one GPU (no context parallelism): projections, norm and
// core; `layer`'s attention window (ModelShape::attention_window; -1: a layer of full attention).
compute::Work attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                    int tp = 1, int layer = -1);
compute::Work attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp = 1, int layer = -1);
// The attention block's forward averaged over the model's layers, for a planner that costs one
// representative layer (HybridEP's Lat_PE, HeterMoE's attention side): a sliding-window model's
// windowed and full layers in their proportion; any other model's one layer.
compute::Work mean_attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp = 1);
// Its pieces, forward, for `tokens` tokens: the norm and the Q, K, V projections (with the query and
// key norms and the rotary embedding); the output projection.
compute::Work qkv_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// The output projection and the residual add after it.
compute::Work output_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// The per-head RMSNorm of the queries and keys (ModelShape::qk_norm) and the rotary embedding
// (ModelShape::rotary) of `tokens` tokens, this rank's heads, after the QKV projection: part of
// qkv_projection_time.
compute::Work qk_norm_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
compute::Work rotary_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// Their GeMMs alone (the pieces with weights): the Q, K, V projections (MLA's down and up
// projections); the output projection.
compute::Work qkv_gemms(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
compute::Work output_gemm(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// The weight gradients of forward GeMMs `gemms`, dW = Xᵀ·dY: half of their backward at the compute
// model's backward factor (a GeMM's two gradients, of its input and of its weights, have its FLOPs
// each), one kernel per GeMM. What a zero-bubble backward leaves to its W (weight_gradients.hpp).
compute::Work weight_gradients(const compute::ComputeModel& cm, const compute::Work& gemms);
// The weight gradients of the attention block's projections, of an FFN of `tokens` tokens and size
// `ffn` (a shared expert's), of a dense FFN block (its columns split over tp) and of the LM head's
// logits GeMM: part of each one's backward above.
compute::Work attention_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                   const workload::TrainingConfig& t, int tp = 1);
compute::Work ffn_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn);
compute::Work dense_ffn_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
compute::Work lm_head_wgrad_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// The RMSNorm before the attention or the MLP, over `tokens` tokens.
compute::Work norm_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens);
// MLA's up projections (DeepSeek-V2 §2.1): the query's from its latent (or from the hidden state
// without a query latent) and the keys' and values' from theirs, this rank's heads; none without MLA.
compute::Work mla_up_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                     int tp = 1);
// The experts' activation (SwiGLU, GeLU or the clamped quick-GeGLU) over `copies` token copies of
// FFN size `ffn`: the kernels experts_time runs between its grouped GeMMs (with the clamps, where
// Megatron-Core's TEGroupedMLP runs them apart).
compute::Work expert_activation_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies,
                                     double ffn);
// Of those, what the launching thread issues after it has synced with the GPU (the clamped
// quick-GeGLU under TEGroupedMLP: the fused activation after the clamps); empty where no sync.
compute::Work expert_activation_after_sync(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                           double copies, double ffn);
// The attention core (QK^T, softmax, PV) of a microbatch's whole sequence, heads split over tp,
// forward and backward, within `layer`'s attention window (-1: full attention).
compute::Work attention_core_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                         int tp = 1, int layer = -1);
compute::Work attention_core_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp = 1, int layer = -1);
// The pre-MLP norm (with attention), router GeMM, softmax/top-k and permuting the k copies into the
// send buffer, for `tokens` tokens. `fused_permute`: a fused dispatch (DeepEP, HybridEP) writes the
// rows into the expert-major layout itself, so no permute kernel runs. `router_kernels`: the kernels
// the software's router launches (software::Software::router_kernels); its time is that of the
// router GeMM and the top-k.
compute::Work gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                        bool fused_permute = false, int router_kernels = 2);
// The regroup around one GPU's experts when an all-to-all without a fused permute brought them
// `copies` token copies for more than one local expert: the rows arrive grouped by source rank and
// are gathered into local-expert order before the grouped GeMMs, then scattered back into source
// order before the combine's all-to-all (Megatron-Core's sort_chunks_by_idxs and its inverse,
// torchtitan's _permute/_unpermute). Two kernels, each reading and writing every copy:
// 2 × 2·C·H·a. Its backward costs the same (the gradient of a permutation is its inverse).
compute::Work regroup_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies);
// Un-permute with the weighted sum of the k expert outputs, and the residual add (with attention);
// `fused_permute`: the fused combine un-permutes and reduces, only the residual add is left.
compute::Work combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, bool fused_permute = false);
// Their backwards: the norm's, router's and residual add's as ComputeModel::backward of their
// forward; the permutation's and un-permutation's as the software's kernels run them
// (compute::PermuteKernels: the fused kernels' twice the forward; PyTorch's autograd, kernel by
// kernel, for megatron and torchtitan; layer_costs.cpp).
compute::Work gate_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                 bool fused_permute = false, int router_kernels = 2);
compute::Work combine_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                    bool fused_permute = false);
// A dense FFN block over `tokens` tokens, FFN columns split over `tp` GPUs: its norm, FFN and
// residual add.
compute::Work dense_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
// The embedding lookup of `tokens` tokens (a gather of their rows).
compute::Work embedding_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens);
// The loss over `tokens` rows of `columns` logits, forward and backward, as the software's kernels
// compute it (compute::CrossEntropyKernels).
struct CrossEntropyWork {
  compute::Work forward, backward;
};
CrossEntropyWork cross_entropy_work(const compute::ComputeModel& cm, double tokens, double columns);
// The final norm, the logits of `tokens` tokens over the vocabulary split over `tp` GPUs, and the
// loss over them; and its backward (the norm's and GeMM's at the backward factor, the loss's own).
compute::Work lm_head_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp = 1);
compute::Work lm_head_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                    int tp = 1);

}  // namespace moesim::blocks
