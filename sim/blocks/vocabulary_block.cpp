#include "sim/blocks/vocabulary_block.hpp"

#include "sim/blocks/tensor_parallel_block.hpp"
#include "sim/blocks/layer_costs.hpp"

namespace moesim::blocks {

namespace {
template <typename Cost>
void on_token_holders(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f,
                      Cost cost) {
  const auto label = em.label(direction, engine::WorkKind::OtherCompute, name, layer, mb);
  auto duration = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
    const compute::Work forward = cost(cm);
    return direction != engine::Phase::Backward ? forward : cm.backward(forward);
  });
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = em.pb.compute(g, duration(g), label, f[g]);
}
}  // namespace

void embedding(Emission& em, engine::Phase direction, int mb, Frontier& f) {
  const double tokens = em.rank_tokens();
  const bool backward = direction == engine::Phase::Backward;
  if (backward) tensor_parallel_enter(em, direction, 0, mb, f);
  on_token_holders(em, direction, "embedding", 0, mb, f,
                   [&](const compute::ComputeModel& cm) { return embedding_time(cm, em.ctx.model, tokens); });
  if (!backward) tensor_parallel_exit(em, direction, 0, mb, f);
}

void lm_head(Emission& em, engine::Phase direction, int mb, Frontier& f) {
  const double tokens = em.rank_tokens();
  const int tp = em.plan.tensor_parallel.size, layer = em.ctx.model.layers;
  const bool backward = direction == engine::Phase::Backward;
  if (!backward) tensor_parallel_enter(em, direction, layer, mb, f);
  on_token_holders(em, direction, "lm_head", layer, mb, f,
                   [&](const compute::ComputeModel& cm) { return lm_head_time(cm, em.ctx.model, tokens, tp); });
  if (backward) tensor_parallel_exit(em, direction, layer, mb, f);
}

}  // namespace moesim::blocks
