#include "sim/blocks/gradient_sync.hpp"

#include "sim/blocks/collective_step.hpp"

namespace moesim::blocks {

void GradientSync::dense(Emission& em, std::string_view name, int layer, double params, const Frontier& after) {
  const auto& gp = em.plan.gradients;
  if (gp.timing == parallel::GradientTiming::None || params <= 0 || !gp.dense_groups) return;
  parallel::CollectiveStep step;
  step.name = name;
  step.kind = gp.sharded ? network::CollectiveKind::ReduceScatter : network::CollectiveKind::AllReduce;
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

namespace {
// `params` dense parameters per GPU all-gathered over the dense groups on `stream`, after `chain`
// (updated): each rank brings its 1/shards.
void gather_dense(Emission& em, double params, int layer, engine::Phase phase, int mb, parallel::StreamRole stream,
                  Frontier& chain) {
  const auto& gp = em.plan.gradients;
  if (!gp.sharded) return;
  parallel::CollectiveStep step;
  step.name = "param_gather";
  step.kind = network::CollectiveKind::AllGather;
  step.algorithm = gp.algorithm;
  step.bytes = params * em.ctx.dtype_bytes() / gp.shards;
  step.groups = gp.dense_groups;
  step.stream = stream;
  if (step.bytes > 0 && gp.dense_groups) run_step(em, step, phase, layer, mb, chain, chain);
}

// One layer's parameters all-gathered on `stream`, its dense ones over the dense groups and then
// the experts' as its MoE plan says, each after `chain` (updated).
void gather_layer(Emission& em, int layer, engine::Phase phase, int mb, parallel::StreamRole stream, Frontier& chain) {
  gather_dense(em, em.plan.gradients.dense_params[layer], layer, phase, mb, stream, chain);
  if (!em.plan.moe[layer]) return;
  for (parallel::CollectiveStep expert : em.plan.moe[layer]->expert_param_gather) {
    expert.stream = stream;
    run_step(em, expert, phase, layer, mb, chain, chain);
  }
}
}  // namespace

void gather_parameters(Emission& em, const Frontier& anchor, std::vector<Frontier>& gathered, Frontier& embedding,
                       Frontier& head) {
  const auto& gp = em.plan.gradients;
  const auto& p = em.plan.pipeline;
  gathered.assign(em.plan.moe.size(), {});
  embedding.clear();
  head.clear();
  if (gp.fsdp) return;
  // Without the distributed optimizer only the layers whose plan gathers expert parameters
  // (seed 004's weights sent to the new placement) wait for a gather.
  const auto gathers = [&](std::size_t l) { return gp.sharded || (em.plan.moe[l] && !em.plan.moe[l]->expert_param_gather.empty()); };
  if (gp.sharded && em.plan.vocabulary) {
    em.enter_stage(0);
    embedding = anchor;
    gather_dense(em, gp.embedding_params, 0, engine::Phase::Optimizer, 0, parallel::StreamRole::Gradient, embedding);
  }
  for (std::size_t l = 0; l < gathered.size(); ++l) {
    if (!gathers(l)) continue;
    const int layer = static_cast<int>(l);
    em.enter_stage(p.stage_of_layer(layer));
    gathered[l] = anchor;
    gather_layer(em, layer, engine::Phase::Optimizer, 0, parallel::StreamRole::Gradient, gathered[l]);
  }
  if (gp.sharded && em.plan.vocabulary) {
    em.enter_stage(p.stage_of_virtual(p.virtual_stages() - 1));
    head = anchor;
    gather_dense(em, gp.head_params, static_cast<int>(gathered.size()), engine::Phase::Optimizer, 0,
                 parallel::StreamRole::Gradient, head);
  }
  em.enter_stage(0);
}

void gather_vocabulary_parameters(Emission& em, double params, int layer, engine::Phase phase, int mb,
                                  const Frontier& after, Frontier& out) {
  out = after;
  gather_dense(em, params, layer, phase, mb, parallel::StreamRole::ParamGather, out);
}

void gather_layer_parameters(Emission& em, int layer, engine::Phase phase, int mb, const Frontier& after, Frontier& out) {
  out = after;
  gather_layer(em, layer, phase, mb, parallel::StreamRole::ParamGather, out);
}

}  // namespace moesim::blocks
