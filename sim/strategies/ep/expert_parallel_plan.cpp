#include "sim/strategies/ep/expert_parallel_plan.hpp"

#include <algorithm>
#include <numeric>

namespace moesim::strategies::ep {

parallel::PlanPtr make_plan(const StrategyContext& ctx, const ExpertParallelPlan& in) {
  const auto& m = ctx.model;
  const auto& t = ctx.training;
  const std::uint32_t gpus = ctx.topology.gpu_count();
  auto plan = std::make_shared<parallel::IterationPlan>();
  plan->optimizer = optimizer_placement(ctx);
  plan->streams = parallel::streams_for(in.streams, plan->optimizer);
  plan->vocabulary = m.vocab > 0;

  auto moe = std::make_shared<parallel::MoeLayerPlan>();
  moe->dispatch = in.groups;
  moe->all_to_all = in.all_to_all;
  moe->chunks = in.chunks;
  moe->gate_tokens = moe->combine_tokens = t.tokens_per_microbatch();
  moe->expert_ffn_hidden = m.ffn_hidden;
  moe->fetch = in.fetch;
  moe->expert_gradients = in.expert_gradients;
  plan->moe.resize(m.layers);
  for (int l = 0; l < m.layers; ++l)
    if (m.is_moe(l)) plan->moe[l] = moe;

  // Dense parameters are replicated on every GPU: one data-parallel group.
  std::vector<std::uint32_t> all(gpus);
  std::iota(all.begin(), all.end(), 0u);
  auto& gp = plan->gradients;
  gp.timing = in.timing;
  gp.dense_groups = parallel::family({std::move(all)});
  gp.algorithm = ctx.all_reduce_algorithm;
  const double layer_dense = m.attention_params() + m.norm_params();
  const double moe_dense = m.gate_params() + m.shared_experts * m.expert_params() + in.extra_moe_dense_params;
  for (int l = 0; l < m.layers; ++l) gp.dense_params.push_back(layer_dense + (m.is_moe(l) ? moe_dense : m.dense_ffn_params()));
  gp.embedding_params = m.embedding_params();

  plan->optimizer_params.assign(gpus, in.params_per_gpu);
  plan->tokens = static_cast<double>(gpus) * t.tokens_per_microbatch() * t.microbatches;
  return plan;
}

parallel::OptimizerPlacement optimizer_placement(const StrategyContext& ctx) {
  return ctx.training.optimizer_on_host ? parallel::OptimizerPlacement::Host : parallel::OptimizerPlacement::Gpu;
}

std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx, int n) {
  const auto& m = ctx.model;
  const int per_rank = m.experts / n;
  const double tokens = ctx.training.tokens_per_microbatch();
  // The busiest rank's routed token copies per MoE layer, over the first iteration's routing.
  double busiest = 0;
  for (int layer = m.dense_layers; layer < m.layers; ++layer) {
    const auto plan = workload::plan_dispatch(ctx.routing.popularity(0, layer), tokens, m.top_k, ctx.training.capacity_factor);
    for (int r = 0; r < n; ++r) {
      double copies = 0;
      for (int e = r * per_rank; e < (r + 1) * per_rank; ++e) copies += plan.kept_per_expert[e] * n;
      busiest = std::max(busiest, copies);
    }
  }
  std::vector<workload::MemoryFootprint> out(ctx.topology.gpu_count());
  for (std::uint32_t g = 0; g < ctx.topology.gpu_count(); ++g) {
    workload::MemoryInputs in;
    in.params = m.replicated_params() + m.moe_layers() * per_rank * m.expert_params();
    in.tokens = tokens;
    in.expert_tokens_per_layer = busiest;
    in.flash_attention = ctx.topology.gpu(g).flash_attention;
    out[g] = workload::memory_footprint(m, ctx.training, in);
  }
  return out;
}

}  // namespace moesim::strategies::ep
