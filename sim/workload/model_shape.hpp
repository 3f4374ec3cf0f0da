// The shape of an MoE transformer (tensor sizes, parameters, per-token work) and the training
// settings that turn it into work per GPU. Presets in models/ cite their papers.
#pragma once

#include <string>

#include "sim/cluster/gpu_spec.hpp"

namespace moesim::workload {

enum class ExpertKind { Mlp, SwiGlu };

struct ModelShape {
  std::string name;
  int layers = 1;
  int dense_layers = 0;  // leading layers with a dense FFN instead of an MoE block
  double hidden = 0;     // H
  double ffn_hidden = 0; // M, per expert
  double dense_ffn_hidden = 0;
  int experts = 1;  // E, routed experts per MoE layer
  int top_k = 1;
  int shared_experts = 0;
  ExpertKind expert_kind = ExpertKind::Mlp;
  int heads = 1;
  int kv_heads = 1;
  double vocab = 0;
  // false: a bare MoE layer without attention (the layer benchmarks of Parm Table III, FasterMoE).
  bool attention = true;

  double explicit_head_dim = 0;  // 0: hidden / heads (Qwen3 MoE uses 128 with hidden 2048 and 32 heads)

  double head_dim() const { return explicit_head_dim > 0 ? explicit_head_dim : hidden / heads; }
  double query_width() const { return heads * head_dim(); }  // columns of Q (and rows of the output projection)
  double kv_width() const { return kv_heads * head_dim(); }   // columns of K (and of V)
  int ffn_gemms() const { return expert_kind == ExpertKind::SwiGlu ? 3 : 2; }
  int moe_layers() const { return layers - dense_layers; }
  bool is_moe(int layer) const { return layer >= dense_layers; }

  double expert_params() const { return ffn_gemms() * hidden * ffn_hidden; }  // P_E of HybridEP
  // Q, K, V projections (GQA: kv_heads key/value heads) and the output projection.
  double attention_params() const {
    return !attention ? 0 : hidden * (query_width() + 2 * kv_heads * head_dim()) + query_width() * hidden;
  }
  double gate_params() const { return hidden * experts; }
  double dense_ffn_params() const { return ffn_gemms() * hidden * dense_ffn_hidden; }
  double norm_params() const { return 2 * hidden; }
  double embedding_params() const { return 2 * vocab * hidden; }  // input embedding and LM head, untied
  // Parameters every data-parallel rank holds: everything but the routed experts.
  double replicated_params() const;
  double routed_expert_params() const { return moe_layers() * experts * expert_params(); }
  double total_params() const { return replicated_params() + routed_expert_params(); }
};

// Activation recomputation (Korthikanti et al. 2022 §5): none; selective (the attention core's
// softmax, dropout and QK^T recomputed in the backward instead of kept: the 5·a·s/h term of the
// activations; FlashAttention always does this); full (each layer's input kept, the whole layer's
// forward run again before its backward: Megatron's --recompute-granularity full, uniform, 1 layer).
enum class Recompute : std::uint8_t { None, Selective, Full };

struct TrainingConfig {
  int sequence_length = 1;
  int micro_batch_size = 1;  // sequences per GPU per microbatch
  int microbatches = 1;      // gradient accumulation steps per iteration
  int iterations = 1;
  cluster::Dtype dtype = cluster::Dtype::bf16;
  double capacity_factor = 0;  // 0: no capacity limit (dropless)
  bool causal = true;
  bool optimizer_on_host = false;
  Recompute recompute = Recompute::None;  // the optimizer state lives and steps on the host (ZeRO-Offload)
  double tokens_per_microbatch() const { return static_cast<double>(sequence_length) * micro_batch_size; }
};

}  // namespace moesim::workload
