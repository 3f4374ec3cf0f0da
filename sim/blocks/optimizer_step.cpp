#include "sim/blocks/optimizer_step.hpp"

namespace moesim::blocks {

void optimizer_step(Emission& em, const Frontier& after, const Frontier& last_gradient_sync) {
  const auto label = em.label(engine::Phase::Optimizer, engine::WorkKind::Optimizer, "optimizer", 0);
  for (std::uint32_t g = 0; g < em.gpus(); ++g) {
    const engine::TaskId t =
        em.pb.compute(g, em.ctx.compute_of(g).optimizer_step(em.plan.optimizer_params[g]), label, after[g]);
    em.pb.depend(last_gradient_sync[g], t);
  }
}

}  // namespace moesim::blocks
