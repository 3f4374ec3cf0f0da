#include "sim/blocks/vocabulary_block.hpp"

#include "sim/blocks/layer_costs.hpp"

namespace moesim::blocks {

namespace {
template <typename Cost>
void on_token_holders(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f,
                      Cost cost) {
  const auto label = em.label(direction, engine::WorkKind::OtherCompute, name, layer, mb);
  for (const std::uint32_t g : em.active()) {
    if (!em.runs_attention(g)) continue;
    const auto& cm = em.ctx.compute_of(g);
    const Time forward = cost(cm);
    f[g] = em.pb.compute(g, direction != engine::Phase::Backward ? forward : cm.backward(forward), label, f[g]);
  }
}
}  // namespace

void embedding(Emission& em, engine::Phase direction, int mb, Frontier& f) {
  const double tokens = em.ctx.training.tokens_per_microbatch();
  on_token_holders(em, direction, "embedding", 0, mb, f,
                   [&](const compute::ComputeModel& cm) { return embedding_time(cm, em.ctx.model, tokens, em.ctx.dtype_bytes()); });
}

void lm_head(Emission& em, engine::Phase direction, int mb, Frontier& f) {
  const double tokens = em.ctx.training.tokens_per_microbatch();
  const int tp = em.plan.tensor_parallel.size;
  on_token_holders(em, direction, "lm_head", em.ctx.model.layers, mb, f,
                   [&](const compute::ComputeModel& cm) { return lm_head_time(cm, em.ctx.model, tokens, tp); });
}

}  // namespace moesim::blocks
