// The plan of expert parallelism over all-to-all groups, shared by the strategies built on it
// (`ep`, and `hybridep`, whose p = 1 is exactly `ep`): every GPU runs attention and its experts;
// per MoE layer the dispatch groups with each expert's replicas, the pipelining degree and the
// all-to-all algorithm; dense gradients all-reduced over the data-parallel groups (replicated
// parameters: attention, norms, router, shared experts and whatever the strategy adds to the
// bucket), expert gradients as the strategy says; the optimizer over the parameters each GPU holds.
// With a parallel layout (sim/parallel/layout.hpp) the GPUs form pipeline stages of consecutive
// layers, attention and dense blocks split over tensor-parallel groups, and each stage's MoE
// layers exchange tokens in that stage's all-to-all groups.
#pragma once

#include <optional>

#include "sim/parallel/layout.hpp"
#include "sim/strategies/strategy.hpp"

namespace moesim::strategies::ep {

struct ExpertParallelPlan {
  std::vector<parallel::StreamRole> streams;  // the optimizer's and the pipeline's are added as needed
  std::vector<parallel::DispatchGroup> groups;  // the all-to-all groups of every stage
  network::Algorithm all_to_all = network::Algorithm::Direct;
  int chunks = 1;
  parallel::GradientTiming timing = parallel::GradientTiming::Overlap;
  std::vector<parallel::CollectiveStep> expert_gradients;
  std::vector<parallel::CollectiveStep> expert_param_gather;  // distributed optimizer
  std::shared_ptr<const parallel::ExpertFetch> fetch;
  double extra_moe_dense_params = 0;  // per MoE layer, replicated on every GPU, in the dense bucket
  double params_per_gpu = 0;          // what each GPU's optimizer steps over (0: from the layout and experts_per_gpu)
  double experts_per_gpu = 0;         // routed experts each GPU holds per MoE layer (with params_per_gpu 0)
  int local_experts = 0;              // expert instances a GPU computes per MoE layer (0: experts_per_gpu)
  std::optional<parallel::ParallelLayout> layout;  // none: one stage of every GPU, no tensor parallelism
};

parallel::PlanPtr make_plan(const StrategyContext& ctx, const ExpertParallelPlan& in);

// Rows each local expert's group of a fused backend's permuted buffer is padded to: 32 under
// MXFP8, 16 under FP8, else 8 (torchtitan; spec 001.A.10).
int permute_alignment(const StrategyContext& ctx);

// A fused backend's buffers on each GPU of an EP group of `ep_size` (spec 001.A.4, A.8), zero for
// nccl: the all-to-all buffer once per GPU, N × EP rows of h (N: `tokens` a rank routes per
// microbatch); and per MoE layer the permuted buffer's rows beyond the `busiest_copies` the
// activations already count as expert inputs: its padding when blocking (sized exactly to
// `busiest_rows`, each local expert's rows aligned), the capacity factor's budget over
// `local_experts` when not.
struct FusedBuffers {
  double shared_bytes = 0, per_layer_bytes = 0;
};
FusedBuffers fused_buffers(const StrategyContext& ctx, double tokens, int ep_size, int local_experts, double busiest_copies,
                           double busiest_rows);

// Where the scenario's training steps the optimizer (training.optimizer).
parallel::OptimizerPlacement optimizer_placement(const StrategyContext& ctx);

// The parameters a GPU of pipeline stage `stage` holds besides its routed experts: its layers'
// attention (split over tp), norms, routers, shared experts and dense FFNs (split over tp), the
// embedding on the first stage and the LM head on the last.
double dense_params_on_stage(const workload::ModelShape& m, const parallel::PipelinePlan& pipeline, int stage, int tp);

// The pipeline of a layout: stages, chunks, layer split, schedule and the activation bytes sent
// between stages.
parallel::PipelinePlan pipeline_of(const StrategyContext& ctx, const parallel::ParallelLayout& layout);
// The parameters of layer `layer` every rank of a TP group holds (all but the routed experts'),
// with `extra_moe` more in MoE layers.
double dense_layer_params(const workload::ModelShape& m, int layer, int tp, double extra_moe = 0);
// The context-parallel groups of a layout and the two steps of their K/V ring.
parallel::ContextParallel context_parallel_of(const StrategyContext& ctx, const parallel::ParallelLayout& layout);

// The expert-parallel memory of every GPU: the dense parameters of its stage and `experts_per_gpu`
// experts per MoE layer of it; activations of the busiest rank's routed tokens (the first
// iteration's routing) times the microbatches its stage holds at once under the schedule.
std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx, int ep_size,
                                              const std::optional<parallel::ParallelLayout>& layout = std::nullopt);

}  // namespace moesim::strategies::ep
