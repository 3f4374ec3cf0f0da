#include "sim/workload/model_shape.hpp"

namespace moesim::workload {

double ModelShape::replicated_params() const {
  const double per_layer = attention_params() + norm_params();
  const double moe_extra = gate_params() + shared_experts * expert_params();
  return layers * per_layer + moe_layers() * moe_extra + dense_layers * dense_ffn_params() + embedding_params();
}

}  // namespace moesim::workload
