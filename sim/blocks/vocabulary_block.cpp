#include "sim/blocks/vocabulary_block.hpp"

#include "sim/blocks/tensor_parallel_block.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/weight_gradients.hpp"

namespace moesim::blocks {

namespace {
// `forward(cm)` or, backward, `backward(cm)` on each GPU that holds the microbatch's tokens;
// `wgrad(cm)`: the backward's weight gradients a zero-bubble backward leaves to its W.
template <typename Forward, typename Backward, typename Wgrad>
void on_token_holders(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f,
                      Forward forward, Backward backward, Wgrad wgrad) {
  const auto label = em.label(direction, engine::WorkKind::OtherCompute, name, layer, mb);
  const bool back = direction == engine::Phase::Backward;
  // Named only where a zero-bubble backward queues them (weight_gradients.hpp).
  const std::string wgrad_name = back && em.weight_gradients ? std::string(name) + "_wgrad" : std::string();
  auto duration = PerKind(em.ctx, [&](const compute::ComputeModel& cm) { return back ? backward(cm) : forward(cm); });
  auto weights = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
    return back && em.weight_gradients ? wgrad(cm) : compute::Work{};  // only for a zero-bubble backward's W
  });
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = backward_compute(em, g, duration(g), weights(g), label, wgrad_name, f[g]);
}

template <typename Forward, typename Backward>
void on_token_holders(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f,
                      Forward forward, Backward backward) {
  on_token_holders(em, direction, name, layer, mb, f, forward, backward,
                   [](const compute::ComputeModel&) { return compute::Work{}; });
}

// The same with the backward at the backward factor of the forward.
template <typename Cost>
void on_token_holders(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f,
                      Cost cost) {
  on_token_holders(em, direction, name, layer, mb, f, cost,
                   [&](const compute::ComputeModel& cm) { return cm.backward(cost(cm)); });
}

// The embedding lookup of the rank's tokens, labelled `name` at `layer`.
void lookup(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f) {
  const double tokens = em.rank_tokens();
  const bool backward = direction == engine::Phase::Backward;
  if (backward) tensor_parallel_enter(em, direction, layer, mb, f);
  on_token_holders(em, direction, name, layer, mb, f,
                   [&](const compute::ComputeModel& cm) { return embedding_time(cm, em.ctx.model, tokens); });
  if (!backward) tensor_parallel_exit(em, direction, layer, mb, f);
}

// The LM head and its loss over the rank's tokens, labelled `name` at `layer`.
void head(Emission& em, engine::Phase direction, std::string_view name, int layer, int mb, Frontier& f) {
  const double tokens = em.rank_tokens();
  const int tp = em.plan.tensor_parallel.size;
  const bool backward = direction == engine::Phase::Backward;
  if (!backward) tensor_parallel_enter(em, direction, layer, mb, f);
  on_token_holders(
      em, direction, name, layer, mb, f,
      [&](const compute::ComputeModel& cm) { return lm_head_time(cm, em.ctx.model, tokens, tp); },
      [&](const compute::ComputeModel& cm) { return lm_head_backward_time(cm, em.ctx.model, tokens, tp); },
      [&](const compute::ComputeModel& cm) { return lm_head_wgrad_time(cm, em.ctx.model, tokens, tp); });
  if (backward) tensor_parallel_exit(em, direction, layer, mb, f);
}
}  // namespace

void embedding(Emission& em, engine::Phase direction, int mb, Frontier& f) { lookup(em, direction, "embedding", 0, mb, f); }

void lm_head(Emission& em, engine::Phase direction, int mb, Frontier& f) {
  head(em, direction, "lm_head", em.ctx.model.layers, mb, f);
}

void mtp_input(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const double tokens = em.rank_tokens();
  const auto& m = em.ctx.model;
  // The two norms and the projection M of [norm(h); norm(emb)] (2h → h; Megatron-Core's eh_proj
  // is column-parallel: its columns split over tp).
  const auto projection = [&](const compute::ComputeModel& cm) {
    return norm_time(cm, m, tokens) + norm_time(cm, m, tokens) +
           compute::kernel(cm.gemm(tokens, m.hidden / em.plan.tensor_parallel.size, 2 * m.hidden), cm.gemm_measured());
  };
  if (direction == engine::Phase::Backward) {
    on_token_holders(em, direction, "mtp_projection", layer, mb, f, projection);
    lookup(em, direction, "mtp_embedding", layer, mb, f);
  } else {
    lookup(em, direction, "mtp_embedding", layer, mb, f);
    on_token_holders(em, direction, "mtp_projection", layer, mb, f, projection);
  }
}

void mtp_head(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  head(em, direction, "mtp_head", layer, mb, f);
}

}  // namespace moesim::blocks
