#include "sim/workload/memory.hpp"

#include <algorithm>
#include <utility>

namespace moesim::workload {

MemoryFootprint memory_footprint(const ModelShape& m, const TrainingConfig& t, const MemoryInputs& in) {
  MemoryFootprint f;
  const double b = cluster::storage_bytes(t.dtype);
  f.weights = (in.weight_params >= 0 ? in.weight_params : in.params) * b;
  f.gradients = (in.gradient_params >= 0 ? in.gradient_params : in.params) * t.optimizer_states.gradient_bytes(b);
  f.optimizer = (in.optimizer_params >= 0 ? in.optimizer_params : in.params) * t.optimizer_states.state_bytes(b);
  f.buffers = in.shared_buffer_bytes;
  if (t.optimizer_on_host) {
    f.host = f.optimizer + f.gradients;
    f.optimizer = 0;
  }
  // Korthikanti et al. count bytes for 16-bit activations; scale by the dtype's width over 2:
  // under FP8 by 1/2, as Transformer Engine keeps the FP8 casts of its GeMM inputs, most of
  // these bytes, for the backward (an approximation: norms and softmax keep BF16 inputs).
  const double scale = cluster::dtype_bytes(t.dtype) / 2.0;
  const double sbh = in.tokens * m.hidden;
  // The attention scores (5·a·s²·b) are kept unless FlashAttention or recomputation of the
  // attention core (selective, core_attn) recomputes them in the backward.
  const bool keep_scores = !in.flash_attention && t.recompute != Recompute::Full && !t.recomputes(RecomputeModule::CoreAttn);
  const double scores = keep_scores ? 5.0 * m.heads * t.sequence_length * in.tokens : 0.0;
  // Korthikanti's 11·sbh of attention, by what it keeps per token: the QKV projection's input
  // (2h), Q, K and V (2 bytes per column each), the output projection's input (2 per column) and
  // its dropout mask (h): 3h + 2·(query + key + value + output widths), 11h for multi-head
  // attention of head_dim h/a, less for GQA's narrower K and V, more for wider heads (Qwen3's
  // 128 at h 2048 and 32 heads). MLA (DeepSeek-V2 §2.1) also keeps its latents before and after
  // their norms, 2·(2·q_lora + 2·kv_lora + rope), whole on every TP rank (the down projections
  // are not split); the 4·sbh of the norms stay as they are. Qwen3's per-head query and key norms
  // (qk_norm) keep their inputs, 2·(query + key widths); the fused rotary embedding keeps nothing.
  const double qk_norm = m.qk_norm ? 2.0 * (m.query_width() + m.key_width()) : 0.0;
  const double core =
      3.0 * m.hidden + 2.0 * (m.query_width() + m.key_width() + m.value_width() + m.output_width()) + qk_norm;
  const double latent = m.mla ? 4.0 * m.mla->q_lora_rank + 4.0 * m.mla->kv_lora_rank + 2.0 * m.mla->qk_rope_head_dim : 0.0;
  const double tp = in.tensor_parallel;
  const double attention_and_norms =
      !m.attention           ? 0.0
      : in.sequence_parallel ? ((core + 4.0 * m.hidden) / tp + latent) * in.tokens + scores / tp
                             : (core / tp + 4.0 * m.hidden + latent) * in.tokens + scores / tp;
  const double expert_ffn = in.expert_ffn_hidden > 0 ? in.expert_ffn_hidden : m.ffn_hidden;
  // Dense MLP (19·sbh for a 4h FFN: input 2, fc1 out 8, activation 8, dropout mask 1), written
  // for FFN size d: 2h + 4d + h per token, plus 2d more for the gate of SwiGLU.
  const auto mlp_per_token = [&](double d) { return 3.0 * m.hidden + (m.ffn_gemms() == 3 ? 6.0 : 4.0) * d; };
  // What the recomputed modules (TrainingConfig::recompute_modules) do not keep, per token of one
  // layer: layernorm the norms' outputs (the QKV projection's input, 2h of the attention's, split
  // like it; a dense FFN's or the shared experts' input, 2h); mla_up_proj the up projections'
  // Q, K and V; moe_act each routed copy's activation output (2·ffn); routed_experts each routed
  // copy's activations but its input (torchtitan's selective checkpointing); mlp a dense FFN's
  // activations but its input; shared_experts the shared experts' likewise. The router's input,
  // the pre-MLP norm's output, is not counted here (it shares its storage with the shared experts'
  // input, and a layer without shared experts keeps only it).
  const auto recomputes = [&](RecomputeModule r) { return t.recomputes(r); };
  const double attention_freed =
      !m.attention ? 0.0
                   : ((recomputes(RecomputeModule::Layernorm) ? 2.0 * m.hidden : 0.0) +
                      (m.mla && recomputes(RecomputeModule::MlaUpProj)
                           ? 2.0 * (m.query_width() + m.key_width() + m.value_width())
                           : 0.0)) * in.tokens / tp;
  const double ffn_input = m.attention && recomputes(RecomputeModule::Layernorm) ? 2.0 * m.hidden : 0.0;
  // One microbatch's activations of layer l and, of them, the bytes its recomputed modules do not
  // keep (bytes).
  const auto layer_bytes = [&](int l) -> std::pair<double, double> {
    double a = attention_and_norms, freed = attention_freed;
    // An MTP module's input: its two norms' inputs (the embedding and the hidden state, 2h each)
    // and the projection's input, their concatenation (4h).
    if (m.is_mtp(l)) a += 8.0 * m.hidden * in.tokens;
    if (m.is_moe(l)) {
      a += in.expert_tokens_per_layer * mlp_per_token(expert_ffn);
      a += m.shared_experts * in.tokens * mlp_per_token(m.ffn_hidden);
      a += 2.0 * in.tokens * m.experts;  // router logits
      // routed_experts keeps only the experts' input (2h a copy), moe_act all but the activation.
      if (recomputes(RecomputeModule::RoutedExperts))
        freed += in.expert_tokens_per_layer * (mlp_per_token(expert_ffn) - 2.0 * m.hidden);
      else if (recomputes(RecomputeModule::MoeAct))
        freed += in.expert_tokens_per_layer * 2.0 * expert_ffn;
      if (m.shared_experts > 0) {
        const double shared = m.shared_experts * in.tokens * (mlp_per_token(m.ffn_hidden) - 2.0 * m.hidden);
        freed += recomputes(RecomputeModule::SharedExperts) ? shared : 0.0;
        freed += in.tokens * ffn_input;
      }
      return {a * scale + in.moe_buffer_bytes, freed * scale};
    }
    a += in.tokens * mlp_per_token(m.dense_ffn_hidden);
    freed += in.tokens * (recomputes(RecomputeModule::Mlp) ? mlp_per_token(m.dense_ffn_hidden) - 2.0 * m.hidden : 0.0);
    freed += in.tokens * ffn_input;
    return {a * scale, freed * scale};
  };
  std::vector<int> all;
  if (in.layers.empty())
    for (int l = 0; l < m.layers; ++l) all.push_back(l);
  // What the offloaded modules move to the host of one microbatch's layer (bytes).
  const OffloadedBytes off = offloaded_bytes(m, t, in.tensor_parallel, in.sequence_parallel, expert_ffn);
  const auto layer_offloaded = [&](int l) {
    if (!offloads_layer(m, t, l)) return 0.0;
    return in.tokens * off.per_token() + (m.is_moe(l) ? in.expert_tokens_per_layer * off.per_expert_copy : 0.0);
  };
  double layers_total = 0, largest = 0, largest_freed = 0, offloaded = 0, largest_offloaded = 0;
  for (const int l : in.layers.empty() ? all : in.layers) {
    const auto [bytes, freed] = layer_bytes(l);
    layers_total += bytes - freed;
    largest = std::max(largest, bytes);
    largest_freed = std::max(largest_freed, freed);
    offloaded += layer_offloaded(l);
    largest_offloaded = std::max(largest_offloaded, layer_offloaded(l));
  }
  if (t.recompute == Recompute::Full) {
    // Each layer keeps its input, 2·sbh (split over tp with sequence parallelism), for every
    // microbatch in flight; the layer being recomputed holds its whole activations once.
    const double inputs = 2.0 * sbh / (in.sequence_parallel ? in.tensor_parallel : 1) * scale;
    const auto held = static_cast<double>(in.layers.empty() ? all.size() : in.layers.size());
    double moe_held = 0;
    for (const int l : in.layers.empty() ? all : in.layers) moe_held += m.is_moe(l) ? 1 : 0;
    const double expert_inputs = 2.0 * in.kept_expert_inputs * m.hidden * scale;
    f.activations = in.in_flight * (held * inputs + moe_held * expert_inputs) + largest;
  } else {
    // The recomputed modules' activations live again during one layer's backward at a time, and
    // so do the offloaded ones, brought back one layer ahead of their backward; the host holds
    // the rest, pinned.
    f.activations = in.in_flight * (layers_total - offloaded) + largest_freed + largest_offloaded;
    f.host += in.in_flight * offloaded;
  }
  if (m.vocab > 0) {
    // The embedding keeps its tokens' ids (8 bytes each) and dropout mask (1 byte per element)
    // for every microbatch in flight; the head keeps the final norm's input and the output
    // projection's (2h each, 16-bit) and the logits the cross entropy keeps: 4 bytes each in fp32,
    // as Megatron-LM's estimate counts them, or the storage dtype's 2 where the loss keeps them
    // there (TrainingConfig::logits_in_storage_dtype: Transformer Engine's fused cross entropy); the
    // vocabulary split over tp (Megatron's vocabulary-parallel head), the norm's input too with
    // sequence parallelism. Megatron counts these once per microbatch whose loss awaits its
    // backward: one under 1F1B, every microbatch under GPipe (lm_head_in_flight, which the
    // pipeline plans count from their schedule's order: schedule::peak_at_loss).
    if (in.embedding) f.activations += in.in_flight * in.tokens * (8.0 + m.hidden);
    if (in.lm_head) {
      const double inputs = 4.0 * sbh * scale / (in.sequence_parallel ? tp : 1.0);
      const double logit_bytes = t.logits_in_storage_dtype ? b : 4.0;
      const double logits = logit_bytes * in.tokens * m.vocab / tp;
      // Each MTP module on this GPU runs the head once more, with its own loss (DeepSeek-V3 §2.2).
      double heads = 1;
      for (const int l : in.layers.empty() ? all : in.layers) heads += m.is_mtp(l) ? 1 : 0;
      f.activations += (in.lm_head_in_flight >= 0 ? in.lm_head_in_flight : in.in_flight) * heads * (inputs + logits);
    }
  }
  return f;
}

OffloadedBytes offloaded_bytes(const ModelShape& m, const TrainingConfig& t, int tensor_parallel, bool sequence_parallel,
                               double expert_ffn_hidden) {
  OffloadedBytes b;
  if (t.offload_modules == 0) return b;
  const double tp = tensor_parallel, h = m.hidden;
  const auto on = [&](OffloadModule o) { return t.offloads(o); };
  if (m.attention) {
    const double norm_input = sequence_parallel ? 2.0 * h / tp : 2.0 * h;
    b.attention += on(OffloadModule::AttnNorm) ? norm_input : 0.0;
    if (on(OffloadModule::QkvLinear) && !t.recomputes(RecomputeModule::Layernorm)) b.attention += 2.0 * h / tp;
    if (on(OffloadModule::CoreAttn) && !(m.mla && t.recomputes(RecomputeModule::MlaUpProj)))
      b.attention += 2.0 * (m.query_width() + m.key_width() + m.value_width()) / tp;
    b.attention += on(OffloadModule::AttnProj) ? 2.0 * m.output_width() / tp : 0.0;
    b.mlp_norm = on(OffloadModule::MlpNorm) ? norm_input : 0.0;
  }
  const double ffn = expert_ffn_hidden > 0 ? expert_ffn_hidden : m.ffn_hidden;
  b.per_expert_copy += on(OffloadModule::ExpertFc1) ? 2.0 * h : 0.0;
  if (on(OffloadModule::MoeAct) && !t.recomputes(RecomputeModule::RoutedExperts))
    b.per_expert_copy += (m.ffn_gemms() == 3 ? 4.0 : 2.0) * ffn;
  const double scale = cluster::dtype_bytes(t.dtype) / 2.0;
  b.attention *= scale;
  b.mlp_norm *= scale;
  b.per_expert_copy *= scale;
  return b;
}

bool offloads_layer(const ModelShape& m, const TrainingConfig& t, int layer) {
  return t.offload_modules != 0 && layer != m.layers - 1;
}

}  // namespace moesim::workload
