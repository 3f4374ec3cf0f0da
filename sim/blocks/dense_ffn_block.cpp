#include "sim/blocks/dense_ffn_block.hpp"

#include "sim/blocks/tensor_parallel_block.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/weight_gradients.hpp"

namespace moesim::blocks {

void dense_ffn(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto label = em.label(direction, engine::WorkKind::DenseFfn, "dense_ffn", layer, mb);
  const double tokens = em.rank_tokens();
  const ProgramBuilder::InModule in(em.pb, software::Module::DenseMlp);
  tensor_parallel_enter(em, direction, layer, mb, f);
  auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
    const compute::Work forward = dense_ffn_time(cm, em.ctx.model, tokens, em.plan.tensor_parallel.size);
    return direction != engine::Phase::Backward ? forward : cm.backward(forward);
  });
  auto wgrad = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
    return direction == engine::Phase::Backward && em.weight_gradients
               ? dense_ffn_wgrad_time(cm, em.ctx.model, tokens, em.plan.tensor_parallel.size)
               : compute::Work{};
  });
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = backward_compute(em, g, cost(g), wgrad(g), label, "dense_ffn_wgrad", f[g]);
  tensor_parallel_exit(em, direction, layer, mb, f);
}

}  // namespace moesim::blocks
