#include "sim/strategies/ep/ep_costs.hpp"

namespace moesim::strategies::ep {

Time ffn_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double ffn) {
  if (tokens <= 0) return 0;
  return (m.ffn_gemms() - 1) * cm.gemm(tokens, ffn, m.hidden) + cm.gemm(tokens, m.hidden, ffn);
}

namespace {
// The attention block without its core: QKV and output projections and the norm.
Time attention_projections(const compute::ComputeModel& cm, const workload::ModelShape& m,
                           const workload::TrainingConfig& t, int tp) {
  const double tokens = t.tokens_per_microbatch();
  const double h = m.hidden;
  const Time norm = cm.memory_bound(2 * tokens * h * cluster::dtype_bytes(t.dtype));  // read and write the activations
  return cm.gemm(tokens, (h + 2 * m.kv_heads * m.head_dim()) / tp, h) + cm.gemm(tokens, h, h / tp) + norm;
}
}  // namespace

Time attention_time(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                    int tp) {
  if (!m.attention) return 0;
  return attention_projections(cm, m, t, tp) +
         cm.attention(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length, m.head_dim(), t.causal);
}

Time attention_backward_time(const compute::ComputeModel& cm, const workload::ModelShape& m,
                             const workload::TrainingConfig& t, int tp) {
  if (!m.attention) return 0;
  return cm.backward(attention_projections(cm, m, t, tp)) +
         cm.attention_backward(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length, m.head_dim(),
                               t.causal);
}

Time gate_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b) {
  // Router GeMM, softmax/top-k over the logits, and permuting the k copies into the send buffer.
  return cm.gemm(tokens, m.experts, m.hidden) + cm.memory_bound(2 * tokens * m.experts * 4) +
         cm.memory_bound(2 * tokens * m.top_k * m.hidden * b);
}

Time combine_time(const compute::ComputeModel& cm, const workload::ModelShape& m, double tokens, double b) {
  // Un-permute, weighted sum of the k expert outputs, residual add (and the norm with attention).
  return cm.memory_bound(2 * tokens * m.top_k * m.hidden * b) +
         (m.attention ? cm.memory_bound(2 * tokens * m.hidden * b) : 0);
}

LayerCosts layer_costs(const compute::ComputeModel& cm, const workload::ModelShape& m, const workload::TrainingConfig& t,
                       double params_on_gpu) {
  LayerCosts c;
  const double tokens = t.tokens_per_microbatch();
  const double b = cluster::dtype_bytes(t.dtype);
  const double h = m.hidden;
  const Time norm = cm.memory_bound(2 * tokens * h * b);  // read and write the activations
  c.embed = cm.memory_bound(2 * tokens * h * b);
  c.lm_head = cm.gemm(tokens, m.vocab, h) + cm.memory_bound(2 * tokens * m.vocab * 4);  // logits + fp32 softmax
  c.attention = attention_time(cm, m, t);
  c.attention_backward = attention_backward_time(cm, m, t);
  c.gate = gate_time(cm, m, tokens, b);
  c.shared = m.shared_experts * ffn_time(cm, m, tokens, m.ffn_hidden);
  c.post = combine_time(cm, m, tokens, b);
  c.dense_ffn = ffn_time(cm, m, tokens, m.dense_ffn_hidden) + norm;
  c.optimizer = cm.optimizer_step(params_on_gpu);
  return c;
}

}  // namespace moesim::strategies::ep
