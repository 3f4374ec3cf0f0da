// What every block reads to cost its work: the cluster, the model, the training settings, the
// routing model and one compute model per GPU kind; and the emission in progress (the program
// builder, the iteration's plan, what the iteration measures).
#pragma once

#include <optional>
#include <type_traits>
#include <vector>

#include "sim/blocks/program_builder.hpp"
#include "sim/cluster/topology.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/parallel/run_state.hpp"
#include "sim/software/software.hpp"
#include "sim/workload/model_shape.hpp"
#include "sim/workload/routing.hpp"

namespace moesim::blocks {

class ActivationOffload;
class WeightGradientStore;

struct Context {
  const cluster::Topology& topology;
  const workload::ModelShape& model;
  const workload::TrainingConfig& training;
  const workload::RoutingModel& routing;
  // One compute model per GPU kind of the topology (index = Topology::kind_index).
  const std::vector<compute::ComputeModel>& compute;
  // What trains the model (null: nothing costs the host, no EP overlap).
  const software::Software* software = nullptr;

  const compute::ComputeModel& compute_of(std::uint32_t gpu) const { return compute[topology.kind_index(gpu)]; }
  // What the training keeps and sends per element (BF16 under FP8: cluster::storage_bytes).
  double dtype_bytes() const { return cluster::storage_bytes(training.dtype); }
};

// A cost (a duration, a compute::Work) that depends only on a GPU's kind, costed once per kind
// however many GPUs ask: `cost(compute model)` for the first GPU of each kind, the same value for
// the others.
template <typename Cost>
class PerKind {
 public:
  using Value = std::invoke_result_t<Cost&, const compute::ComputeModel&>;
  PerKind(const Context& ctx, Cost cost) : ctx_(ctx), cost_(std::move(cost)), memo_(ctx.compute.size()) {}
  Value operator()(std::uint32_t gpu) {
    std::optional<Value>& v = memo_[ctx_.topology.kind_index(gpu)];
    if (!v) v = cost_(ctx_.compute_of(gpu));
    return *v;
  }

 private:
  const Context& ctx_;
  Cost cost_;
  std::vector<std::optional<Value>> memo_;
};

// Per GPU, the task the next piece of work waits for (engine::kNone: only its stream's order).
using Frontier = std::vector<engine::TaskId>;

// One iteration's program being written.
struct Emission {
  ProgramBuilder& pb;
  const Context& ctx;
  const parallel::IterationPlan& plan;
  int iteration;
  parallel::IterationOutcome& outcome;

  engine::Label label(engine::Phase phase, engine::WorkKind kind, std::string_view name, int layer, int microbatch = 0,
                      int chunk = 0) const {
    return pb.label(phase, kind, name, iteration, layer, microbatch, chunk);
  }
  // The pipeline stage whose work is being written, its GPUs, and each GPU's stage.
  int stage = 0;
  const std::vector<std::uint32_t>* stage_gpus = nullptr;
  std::vector<std::uint16_t> stage_of;

  std::uint32_t gpus() const { return ctx.topology.gpu_count(); }
  // The GPUs the work being written runs on: the current stage's (those whose tasks are written).
  const std::vector<std::uint32_t>& active() const { return *stage_gpus; }
  bool in_stage(std::uint32_t g) const { return stage_of[g] == stage; }
  void enter_stage(int s) {
    stage = s;
    stage_gpus = written_stage_gpus.empty() ? &plan.pipeline.stage_gpus[s] : &written_stage_gpus[s];
  }
  // Per stage, its GPUs whose tasks are written, where the builder writes some only
  // (ProgramBuilder::simulate_only; empty: every GPU).
  std::vector<std::vector<std::uint32_t>> written_stage_gpus{};
  // The tokens of one microbatch a GPU holds between blocks: the sequence split over its
  // context-parallel group (and over tp inside the sequence-parallel regions, which the blocks say).
  double rank_tokens() const { return ctx.training.tokens_per_microbatch() / plan.context_parallel.size; }
  bool runs_attention(std::uint32_t g) const { return plan.role(g) & parallel::kRunsAttention; }
  // The software the program runs (its defaults where the context has none).
  const software::Software& software() const {
    static const software::Software none;
    return ctx.software ? *ctx.software : none;
  }
  bool runs_experts(std::uint32_t g) const { return plan.role(g) & parallel::kRunsExperts; }
  // The activations offloaded to the host and not yet back (null: the training offloads none).
  ActivationOffload* offload = nullptr;
  // Set while a zero-bubble backward is written: where its weight gradients go (weight_gradients.hpp).
  WeightGradientStore* weight_gradients = nullptr;
};

}  // namespace moesim::blocks
