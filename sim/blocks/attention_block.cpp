#include "sim/blocks/attention_block.hpp"

#include "sim/blocks/collective_step.hpp"
#include "sim/blocks/layer_costs.hpp"

namespace moesim::blocks {

void tensor_parallel_all_reduce(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& tp = em.plan.tensor_parallel;
  if (tp.size <= 1) return;
  parallel::CollectiveStep step;
  step.name = tp.all_reduce_name;
  step.kind = network::CollectiveKind::AllReduce;
  step.algorithm = tp.algorithm;
  step.bytes = em.ctx.training.tokens_per_microbatch() * em.ctx.model.hidden * em.ctx.dtype_bytes();
  step.groups = tp.groups;
  step.stream = tp.stream;
  run_step(em, step, direction, layer, mb, f, f);
}

void attention(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  if (!m.attention) return;
  const int tp = em.plan.tensor_parallel.size;
  const auto label = em.label(direction, engine::WorkKind::Attention, "attention", layer, mb);
  for (std::uint32_t g = 0; g < em.gpus(); ++g) {
    if (!em.runs_attention(g)) continue;
    const auto& cm = em.ctx.compute_of(g);
    const Time t = direction == engine::Phase::Forward ? attention_time(cm, m, em.ctx.training, tp)
                                                       : attention_backward_time(cm, m, em.ctx.training, tp);
    f[g] = em.pb.compute(g, t, label, f[g]);
  }
  tensor_parallel_all_reduce(em, direction, layer, mb, f);
}

}  // namespace moesim::blocks
