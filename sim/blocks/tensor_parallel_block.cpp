#include "sim/blocks/tensor_parallel_block.hpp"

#include "sim/blocks/collective_step.hpp"

namespace moesim::blocks {

namespace {
void tensor_parallel_step(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f, network::CollectiveKind kind,
                          const std::string& name, parallel::StreamRole stream) {
  const auto& tp = em.plan.tensor_parallel;
  parallel::CollectiveStep step;
  step.name = name;
  step.kind = kind;
  step.algorithm = tp.algorithm;
  const double block = em.rank_tokens() * em.ctx.model.hidden * em.ctx.dtype_bytes();
  step.bytes = kind == network::CollectiveKind::AllGather ? block / tp.size : block;
  step.groups = tp.groups;
  step.stream = stream == parallel::StreamRole::Count ? tp.stream : stream;
  run_step(em, step, direction, layer, mb, f, f);
}
}  // namespace

void tensor_parallel_enter(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f, parallel::StreamRole stream) {
  const auto& tp = em.plan.tensor_parallel;
  if (tp.size > 1 && tp.sequence_parallel)
    tensor_parallel_step(em, direction, layer, mb, f, network::CollectiveKind::AllGather, "TP-AllGather", stream);
}

void tensor_parallel_exit(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f, parallel::StreamRole stream) {
  const auto& tp = em.plan.tensor_parallel;
  if (tp.size <= 1) return;
  if (tp.sequence_parallel)
    tensor_parallel_step(em, direction, layer, mb, f, network::CollectiveKind::ReduceScatter, "TP-ReduceScatter", stream);
  else
    tensor_parallel_step(em, direction, layer, mb, f, network::CollectiveKind::AllReduce, tp.all_reduce_name, stream);
}

}  // namespace moesim::blocks
