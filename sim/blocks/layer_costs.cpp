#include "sim/blocks/layer_costs.hpp"

namespace moesim::blocks {

Time ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn) {
  if (tokens <= 0) return 0;
  return (m.ffn_gemms() - 1) * cm.gemm(tokens, ffn, m.hidden) + cm.gemm(tokens, m.hidden, ffn);
}

Time qkv_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b, int tp) {
  if (!m.attention) return 0;
  const Time norm = cm.memory_bound(2 * tokens * m.hidden * b);  // read and write the activations
  if (!m.mla) return cm.gemm(tokens, (m.query_width() + m.key_width() + m.value_width()) / tp, m.hidden) + norm;
  // MLA: the down projections whole on every rank, each latent normed, the up projections of this
  // rank's heads.
  const workload::LatentAttention& a = *m.mla;
  const double heads = m.heads / static_cast<double>(tp);
  const Time q = a.q_lora_rank > 0 ? cm.gemm(tokens, a.q_lora_rank, m.hidden) +
                                         cm.memory_bound(2 * tokens * a.q_lora_rank * b) +
                                         cm.gemm(tokens, heads * m.qk_head_dim(), a.q_lora_rank)
                                   : cm.gemm(tokens, heads * m.qk_head_dim(), m.hidden);
  const Time kv = cm.gemm(tokens, a.kv_lora_rank + a.qk_rope_head_dim, m.hidden) +
                  cm.memory_bound(2 * tokens * a.kv_lora_rank * b) +
                  cm.gemm(tokens, heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank);
  return q + kv + norm;
}

Time output_projection_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  if (!m.attention) return 0;
  return cm.gemm(tokens, m.hidden, m.output_width() / tp);
}

Time attention_core_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                         int tp) {
  if (!m.attention) return 0;
  return cm.attention(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length, m.core_head_dim(), t.causal);
}

Time attention_core_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                                  const workload::TrainingConfig& t, int tp) {
  if (!m.attention) return 0;
  return cm.attention_backward(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length,
                               m.core_head_dim(), t.causal);
}

namespace {
// The attention block without its core.
Time attention_projections(const compute::ComputeModel& cm, const workload::ModelShape& m,
                           const workload::TrainingConfig& t, int tp) {
  const double tokens = t.tokens_per_microbatch();
  return qkv_projection_time(cm, m, tokens, cluster::dtype_bytes(t.dtype), tp) + output_projection_time(cm, m, tokens, tp);
}
}  // namespace

Time attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                    int tp) {
  if (!m.attention) return 0;
  return attention_projections(cm, m, t, tp) + attention_core_time(cm, m, t, tp);
}

Time attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp) {
  if (!m.attention) return 0;
  return cm.backward(attention_projections(cm, m, t, tp)) + attention_core_backward_time(cm, m, t, tp);
}

Time gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b) {
  return cm.gemm(tokens, m.experts, m.hidden) + cm.memory_bound(2 * tokens * m.experts * 4) +
         cm.memory_bound(2 * tokens * m.top_k * m.hidden * b);
}

Time combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b) {
  return cm.memory_bound(2 * tokens * m.top_k * m.hidden * b) +
         (m.attention ? cm.memory_bound(2 * tokens * m.hidden * b) : 0);
}

Time dense_ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b, int tp) {
  const Time norm = cm.memory_bound(2 * tokens * m.hidden * b);  // read and write the activations
  return ffn_time(cm, m, tokens, m.dense_ffn_hidden / tp) + norm;
}

Time embedding_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b) {
  return cm.memory_bound(2 * tokens * m.hidden * b);
}

Time lm_head_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, int tp) {
  return cm.gemm(tokens, m.vocab / tp, m.hidden) + cm.memory_bound(2 * tokens * m.vocab / tp * 4);
}

}  // namespace moesim::blocks
