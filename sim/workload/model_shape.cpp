#include "sim/workload/model_shape.hpp"

namespace moesim::workload {

double ModelShape::attention_params() const {
  if (!attention) return 0;
  if (!mla) return hidden * (query_width() + key_width() + value_width()) + output_width() * hidden;
  const LatentAttention& a = *mla;
  const double q = a.q_lora_rank > 0 ? hidden * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * query_width()
                                     : hidden * query_width();
  const double kv = hidden * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
                    a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim);
  return q + kv + output_width() * hidden;
}

double ModelShape::replicated_params() const {
  const double per_layer = attention_params() + norm_params();
  const double moe_extra = gate_params() + shared_experts * expert_params();
  return layers * per_layer + moe_layers() * moe_extra + dense_layers * dense_ffn_params() + embedding_params() +
         mtp_layers * mtp_extra_params();
}

}  // namespace moesim::workload
