#include "sim/blocks/expert_fetch.hpp"

#include "sim/blocks/collective_step.hpp"

namespace moesim::blocks {

void fetch_layer(Emission& em, const parallel::MoeLayerPlan& p, int layer, const Frontier& after, Frontier& ready) {
  ready = after;
  ready.resize(em.gpus(), engine::kNone);
  for (const auto& step : p.fetch->steps) run_step(em, step, engine::Phase::Forward, layer, 0, ready, ready);
}

void fetch_at_iteration_start(Emission& em, const Frontier& anchor, std::vector<Frontier>& ready) {
  const auto& moe = em.plan.moe;
  ready.assign(moe.size(), {});
  const auto fetches_now = [&](std::size_t layer) { return moe[layer] && moe[layer]->fetch; };
  // Preparation of every layer's experts first (all on the compute stream), then the fetches.
  std::vector<Frontier> prepared(moe.size(), anchor);
  const auto label = em.label(engine::Phase::Optimizer, engine::WorkKind::OtherCompute, "sr_encode", 0);
  for (std::size_t layer = 0; layer < moe.size(); ++layer) {
    if (!fetches_now(layer) || moe[layer]->fetch->prepare.empty()) continue;
    for (std::uint32_t g = 0; g < em.gpus(); ++g)
      prepared[layer][g] =
          em.pb.compute(g, compute::kernel(moe[layer]->fetch->prepare[em.ctx.topology.kind_index(g)]), label);
  }
  for (std::size_t layer = 0; layer < moe.size(); ++layer)
    if (fetches_now(layer) && moe[layer]->fetch->at_iteration_start)
      fetch_layer(em, *moe[layer], static_cast<int>(layer), prepared[layer], ready[layer]);
}

}  // namespace moesim::blocks
