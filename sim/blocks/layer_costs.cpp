// Kernel-by-kernel costs of an MoE transformer layer (see layer_costs.hpp). Byte counts of the
// memory-bound kernels are derived where each is costed.
#include "sim/blocks/layer_costs.hpp"

#include <cmath>

namespace moesim::blocks {

namespace {
// Bytes per activation element in the compute model's training dtype.
double act(const compute::ComputeModel& cm) { return cluster::storage_bytes(cm.options().dtype); }

// RMSNorm of `tokens` rows of `width`: reads the rows, writes the normed rows (the weight vector
// is negligible): 2·T·width·a.
compute::Work norm(const compute::ComputeModel& cm, double tokens, double width) {
  return compute::kernel(cm.memory_bound(2 * tokens * width * act(cm)));
}

// Residual add (Megatron-Core's bias-dropout-add, no bias or dropout in these models): reads the
// block's output and the residual, writes their sum: 3·T·H·a.
compute::Work residual_add(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  return compute::kernel(cm.memory_bound(3 * tokens * m.hidden * act(cm)));
}

compute::Work gemm(const compute::ComputeModel& cm, double m, double n, double k) { return compute::kernel(cm.gemm(m, n, k)); }

// A grouped GeMM over the local experts: its kernels as the backend launches them.
compute::Work grouped_gemm(const compute::ComputeModel& cm, std::span<const double> rows, double n, double k) {
  return {cm.grouped_gemm(rows, n, k), cm.grouped_gemm_kernels(rows)};
}

// Under FP8 training, the cast of a GeMM's activation operand that no earlier kernel fuses
// (ComputeModel::fp8_cast): one kernel per GeMM it feeds (`gemms`: a grouped GeMM launched per
// expert casts each expert's rows on their own, as Transformer Engine's GroupedLinear splits its
// input before quantizing), none otherwise.
compute::Work fp8_cast(const compute::ComputeModel& cm, double elements, int gemms = 1) {
  const Time t = cm.fp8_cast(elements);
  return t > 0 ? compute::Work{t, gemms} : compute::Work{};
}

// The FFNs of experts_time; `cast_input`: fc1's input comes from no norm, so under FP8 training
// it is cast in a kernel of its own (the permuted tokens of routed experts).
compute::Work grouped_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                               std::span<const double> tokens, double ffn, bool cast_input) {
  double copies = 0;
  for (const double t : tokens)
    if (t > 0) copies += t;
  if (copies <= 0) return {};
  const bool gated = m.ffn_gemms() == 3;
  const compute::Work fc1 = grouped_gemm(cm, tokens, (gated ? 2 : 1) * ffn, m.hidden);
  const compute::Work cast = cast_input ? fp8_cast(cm, copies * m.hidden, fc1.kernels) : compute::Work{};
  return cast + fc1 + expert_activation_time(cm, m, copies, ffn) + grouped_gemm(cm, tokens, m.hidden, ffn);
}
}  // namespace

compute::Work expert_activation_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies,
                                     double ffn) {
  if (copies <= 0) return {};
  // SwiGLU reads the gate and up halves (2·ffn) and writes ffn; an MLP's GeLU reads ffn and writes
  // ffn: (3 or 2)·copies·ffn·a (its FP8 output for fc2 is written instead of the BF16 one).
  return compute::kernel(cm.memory_bound((m.ffn_gemms() == 3 ? 3.0 : 2.0) * copies * ffn * act(cm)));
}

compute::Work norm_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  return norm(cm, tokens, m.hidden);
}

ExpertsWork experts_work(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                         double ffn) {
  ExpertsWork w;
  w.forward = grouped_ffn_time(cm, m, tokens, ffn, true);
  if (w.forward.time == 0 && w.forward.kernels == 0) return w;
  if (cm.options().backward_factor) {  // the scenario's factor for every kernel
    w.backward = cm.backward(w.forward);
    w.wgrad = {w.backward.time / 2, w.backward.kernels / 2};
    return w;
  }
  double copies = 0;
  for (const double t : tokens)
    if (t > 0) copies += t;
  const bool gated = m.ffn_gemms() == 3;
  const double width = (gated ? 2 : 1) * ffn;  // fc1's output
  const compute::Work fc2_dgrad = grouped_gemm(cm, tokens, ffn, m.hidden);
  const compute::Work fc2_wgrad{cm.grouped_gemm_wgrad(tokens, m.hidden, ffn), cm.grouped_gemm_kernels(tokens)};
  const compute::Work fc1_dgrad = grouped_gemm(cm, tokens, m.hidden, width);
  const compute::Work fc1_wgrad{cm.grouped_gemm_wgrad(tokens, width, m.hidden), cm.grouped_gemm_kernels(tokens)};
  const compute::Work activation = compute::kernel(cm.memory_bound((gated ? 5.0 : 3.0) * copies * ffn * act(cm)));
  const compute::Work cast = fp8_cast(cm, copies * m.hidden, fc2_dgrad.kernels);
  w.wgrad = fc2_wgrad + fc1_wgrad;
  w.backward = cast + fc2_dgrad + activation + fc1_dgrad + w.wgrad;
  return w;
}

compute::Work experts_time(const compute::ComputeModel& cm, const workload::ModelShape& m, std::span<const double> tokens,
                           double ffn) {
  return grouped_ffn_time(cm, m, tokens, ffn, true);
}

compute::Work ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn) {
  const double rows[1] = {tokens};
  return grouped_ffn_time(cm, m, rows, ffn, false);
}

compute::Work qkv_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return {};
  const compute::Work pre_norm = norm(cm, tokens, m.hidden);  // the pre-attention RMSNorm
  if (!m.mla) return gemm(cm, tokens, (m.query_width() + m.key_width() + m.value_width()) / tp, m.hidden) + pre_norm;
  // MLA: the down projections whole on every rank, each latent normed, the up projections of this
  // rank's heads.
  const workload::LatentAttention& a = *m.mla;
  const compute::Work q_down =
      a.q_lora_rank > 0 ? gemm(cm, tokens, a.q_lora_rank, m.hidden) + norm(cm, tokens, a.q_lora_rank) : compute::Work{};
  const compute::Work kv_down =
      gemm(cm, tokens, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden) + norm(cm, tokens, a.kv_lora_rank);
  return q_down + kv_down + mla_up_projection_time(cm, m, tokens, tp) + pre_norm;
}

compute::Work mla_up_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens,
                                     int tp) {
  if (!m.attention || !m.mla) return {};
  const workload::LatentAttention& a = *m.mla;
  const double heads = m.heads / static_cast<double>(tp);
  return gemm(cm, tokens, heads * m.qk_head_dim(), a.q_lora_rank > 0 ? a.q_lora_rank : m.hidden) +
         gemm(cm, tokens, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank);
}

compute::Work output_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return {};
  // Its input, the attention core's output, is cast to FP8 on its own under FP8 training.
  const double width = m.output_width() / tp;
  return fp8_cast(cm, tokens * width) + gemm(cm, tokens, m.hidden, width) + residual_add(cm, m, tokens);
}

compute::Work attention_core_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return compute::kernel(cm.attention(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length,
                                      m.core_head_dim(), t.causal, m.attention_window(layer)));
}

// The fused attention backward: one kernel of dQ, dK, dV (cuDNN's and FlashAttention's, with the
// small pre- and post-processing kernels they add counted as a second: dO·O and dQ's conversion).
compute::Work attention_core_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                           const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return {cm.attention_backward(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length,
                                m.core_head_dim(), t.causal, m.attention_window(layer)),
          2};
}

namespace {
// The attention block without its core.
compute::Work attention_projections(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                    const workload::TrainingConfig& t, int tp) {
  const double tokens = t.tokens_per_microbatch();
  return qkv_projection_time(cm, m, tokens, tp) + output_projection_time(cm, m, tokens, tp);
}
}  // namespace

compute::Work attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return attention_projections(cm, m, t, tp) + attention_core_time(cm, m, t, tp, layer);
}

compute::Work mean_attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp) {
  compute::Work w = attention_time(cm, m, t, tp, 0);
  if (m.sliding_window <= 0 || m.layers <= 1) return w;
  double total = 0;
  for (int l = 0; l < m.layers; ++l) total += static_cast<double>(attention_time(cm, m, t, tp, l).time);
  w.time = static_cast<Time>(std::llround(total / m.layers));
  return w;
}

compute::Work attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                      const workload::TrainingConfig& t, int tp, int layer) {
  if (!m.attention) return {};
  return cm.backward(attention_projections(cm, m, t, tp)) + attention_core_backward_time(cm, m, t, tp, layer);
}

compute::Work gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, bool fused_permute,
                        int router_kernels) {
  if (tokens <= 0) return {};
  const double a = act(cm);
  // The pre-MLP RMSNorm (a layer with attention; expert-only models have none).
  const compute::Work pre_norm = m.attention ? norm(cm, tokens, m.hidden) : compute::Work{};
  // Router logits: a GeMM of the tokens against the E router columns.
  const Time router = cm.gemm(tokens, m.experts, m.hidden);
  // Softmax and top-k in one kernel over fp32 logits: reads T·E·4, writes the dense routing
  // probabilities T·E·4 (Megatron-Core's routing map and probs are T×E): 2·T·E·4.
  const Time top_k = cm.memory_bound(2 * tokens * m.experts * 4);
  // Permute: reads each token once, writes its k copies grouped by expert: (1 + k)·T·H·a.
  const compute::Work permute =
      fused_permute ? compute::Work{} : compute::kernel(cm.memory_bound((1 + m.top_k) * tokens * m.hidden * a));
  // The router's time is its two large kernels; its launches are the software's count (score
  // function, top-k, auxiliary losses and their small kernels), at least those two.
  return pre_norm + compute::Work{router + top_k, std::max(2, router_kernels)} + permute;
}

compute::Work combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, bool fused_permute) {
  if (tokens <= 0) return {};
  if (fused_permute) return m.attention ? residual_add(cm, m, tokens) : compute::Work{};
  // Un-permute: reads the k expert outputs of each token and writes their probability-weighted sum
  // (the k probabilities per token are negligible): (k + 1)·T·H·a.
  const compute::Work unpermute = compute::kernel(cm.memory_bound((m.top_k + 1) * tokens * m.hidden * act(cm)));
  return unpermute + (m.attention ? residual_add(cm, m, tokens) : compute::Work{});
}

compute::Work regroup_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double copies) {
  if (copies <= 0) return {};
  return {2 * cm.memory_bound(2 * copies * m.hidden * act(cm)), 2};
}

compute::Work dense_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (tokens <= 0) return {};
  return norm(cm, tokens, m.hidden) + ffn_time(cm, m, tokens, m.dense_ffn_hidden / tp) + residual_add(cm, m, tokens);
}

compute::Work embedding_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens) {
  // A gather: reads the tokens' rows of the table, writes them: 2·T·H·a.
  return compute::kernel(cm.memory_bound(2 * tokens * m.hidden * act(cm)));
}

compute::Work lm_head_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  // The final RMSNorm, the logits GeMM, and the fp32 softmax over the rank's vocabulary columns
  // (reads and writes T·V/tp·4).
  return (m.attention ? norm(cm, tokens, m.hidden) : compute::Work{}) + gemm(cm, tokens, m.vocab / tp, m.hidden) +
         compute::kernel(cm.memory_bound(2 * tokens * m.vocab / tp * 4));
}

}  // namespace moesim::blocks
