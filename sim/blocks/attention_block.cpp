#include "sim/blocks/attention_block.hpp"

#include "sim/blocks/collective_step.hpp"
#include "sim/blocks/layer_costs.hpp"

namespace moesim::blocks {

namespace {
void tensor_parallel_step(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f, network::CollectiveKind kind,
                          const std::string& name) {
  const auto& tp = em.plan.tensor_parallel;
  parallel::CollectiveStep step;
  step.name = name;
  step.kind = kind;
  step.algorithm = tp.algorithm;
  const double block = em.ctx.training.tokens_per_microbatch() * em.ctx.model.hidden * em.ctx.dtype_bytes();
  step.bytes = kind == network::CollectiveKind::AllGather ? block / tp.size : block;
  step.groups = tp.groups;
  step.stream = tp.stream;
  run_step(em, step, direction, layer, mb, f, f);
}
}  // namespace

void tensor_parallel_enter(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& tp = em.plan.tensor_parallel;
  if (tp.size > 1 && tp.sequence_parallel)
    tensor_parallel_step(em, direction, layer, mb, f, network::CollectiveKind::AllGather, "TP-AllGather");
}

void tensor_parallel_all_reduce(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& tp = em.plan.tensor_parallel;
  if (tp.size <= 1) return;
  if (tp.sequence_parallel)
    tensor_parallel_step(em, direction, layer, mb, f, network::CollectiveKind::ReduceScatter, "TP-ReduceScatter");
  else
    tensor_parallel_step(em, direction, layer, mb, f, network::CollectiveKind::AllReduce, tp.all_reduce_name);
}

void attention(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  if (!m.attention) return;
  const int tp = em.plan.tensor_parallel.size;
  const auto label = em.label(direction, engine::WorkKind::Attention, "attention", layer, mb);
  tensor_parallel_enter(em, direction, layer, mb, f);
  for (const std::uint32_t g : em.active()) {
    if (!em.runs_attention(g)) continue;
    const auto& cm = em.ctx.compute_of(g);
    const Time t = direction != engine::Phase::Backward ? attention_time(cm, m, em.ctx.training, tp)
                                                       : attention_backward_time(cm, m, em.ctx.training, tp);
    f[g] = em.pb.compute(g, t, label, f[g]);
  }
  tensor_parallel_all_reduce(em, direction, layer, mb, f);
}

}  // namespace moesim::blocks

namespace moesim::blocks {

void recompute_attention_core(Emission& em, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  if (!m.attention) return;
  const auto& t = em.ctx.training;
  const int tp = em.plan.tensor_parallel.size;
  const auto label = em.label(engine::Phase::Recompute, engine::WorkKind::Attention, "attention_core", layer, mb);
  for (const std::uint32_t g : em.active()) {
    if (!em.runs_attention(g) || em.ctx.topology.gpu(g).flash_attention) continue;
    const auto& cm = em.ctx.compute_of(g);
    f[g] = em.pb.compute(g, cm.attention(t.micro_batch_size, m.heads / static_cast<double>(tp), t.sequence_length, m.head_dim(), t.causal),
                         label, f[g]);
  }
}

}  // namespace moesim::blocks
