#include "sim/blocks/gradient_sync.hpp"

#include "sim/blocks/collective_step.hpp"

namespace moesim::blocks {

void GradientSync::dense(Emission& em, std::string_view name, int layer, double params, const Frontier& after) {
  const auto& gp = em.plan.gradients;
  if (gp.timing == parallel::GradientTiming::None || params <= 0 || !gp.dense_groups) return;
  parallel::CollectiveStep step;
  step.name = name;
  step.kind = network::CollectiveKind::AllReduce;
  step.algorithm = gp.algorithm;
  step.bytes = params * em.ctx.dtype_bytes();
  step.groups = gp.dense_groups;
  step.stream = parallel::StreamRole::Gradient;
  run_step(em, step, engine::Phase::GradSync, layer, 0, after, last_);
}

void GradientSync::layer(Emission& em, int layer, const Frontier& dense_after, const Frontier& experts_after) {
  dense(em, "dense_grads", layer, em.plan.gradients.dense_params[layer], dense_after);
  const auto& moe = em.plan.moe[layer];
  if (!moe || moe->expert_gradients.empty()) return;
  Frontier chain = experts_after;
  for (const auto& step : moe->expert_gradients) {
    run_step(em, step, engine::Phase::GradSync, layer, 0, chain, chain);
    for (std::uint32_t g = 0; g < chain.size(); ++g)
      if (chain[g] != experts_after[g]) last_[g] = chain[g];
  }
}

void GradientSync::vocabulary(Emission& em, std::string_view name, double params, const Frontier& after) {
  dense(em, name, 0, params, after);
}

}  // namespace moesim::blocks
