// The plan of expert parallelism over all-to-all groups, shared by the strategies built on it
// (`ep`, and `hybridep`, whose p = 1 is exactly `ep`): every GPU runs attention and its experts;
// per MoE layer the dispatch groups with each expert's replicas, the pipelining degree and the
// all-to-all algorithm; dense gradients all-reduced over all GPUs (replicated parameters: attention,
// norms, router, shared experts and whatever the strategy adds to the bucket), expert gradients as
// the strategy says; the optimizer over the parameters each GPU holds.
#pragma once

#include "sim/strategies/strategy.hpp"

namespace moesim::strategies::ep {

struct ExpertParallelPlan {
  std::vector<parallel::StreamRole> streams;  // the optimizer's are added when it steps on the host
  std::vector<parallel::DispatchGroup> groups;
  network::Algorithm all_to_all = network::Algorithm::Direct;
  int chunks = 1;
  parallel::GradientTiming timing = parallel::GradientTiming::Overlap;
  std::vector<parallel::CollectiveStep> expert_gradients;
  std::shared_ptr<const parallel::ExpertFetch> fetch;
  double extra_moe_dense_params = 0;  // per MoE layer, replicated on every GPU, in the dense bucket
  double params_per_gpu = 0;          // what each GPU's optimizer steps over
};

parallel::PlanPtr make_plan(const StrategyContext& ctx, const ExpertParallelPlan& in);

// Where the scenario's training steps the optimizer (training.optimizer).
parallel::OptimizerPlacement optimizer_placement(const StrategyContext& ctx);

// The expert-parallel memory of every GPU: replicated parameters and `experts_per_gpu` experts
// per MoE layer; activations of the busiest rank's routed tokens (the first iteration's routing).
std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx, int ep_size);

}  // namespace moesim::strategies::ep
