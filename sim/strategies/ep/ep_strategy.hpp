// Plain expert parallelism (GShard/DeepSpeed-MoE/Tutel), the baseline every MoE system compares
// against (STRATEGIES.md `ep`): EP groups of `ep_size` consecutive GPUs, rank r holding experts
// [r·E/n, (r+1)·E/n); per MoE layer and microbatch attention and the gate on every GPU, dispatch
// all-to-all(v) inside the EP group, the local experts, combine all-to-all(v), the backward
// mirroring it (blocks/moe_block.hpp). Pipelining degree P splits the tokens in P chunks so
// chunk i's all-to-all overlaps chunk i−1's experts (Tutel, FasterMoE). Dense gradients are
// all-reduced over all GPUs and expert gradients over the expert-data-parallel group (the GPUs of
// equal EP rank), each layer's as its last microbatch's backward ends or all after the backward;
// then the optimizer steps.
#pragma once

#include <optional>

#include "sim/core/bound_options.hpp"
#include "sim/strategies/registry.hpp"

namespace moesim::strategies::ep {

StrategyInfo info();

struct EpOptions {
  int ep_size = 0;  // 0: all GPUs
  int pipelining_degree = 1;
  network::Algorithm all_to_all = network::Algorithm::Direct;
  bool overlap_gradient_sync = true;
};

// Options every strategy built on the EP plan takes, each bound to the EpOptions its own options
// hold (`ep` reaches it in T).
template <class T, class Access>
schema::Option<T> pipelining_degree_option(Access ep) {
  return schema::option<T>("pipelining_degree", [ep](T& t) -> int& { return std::invoke(ep, t).pipelining_degree; },
                           schema::integer(1, 64), "chunks the tokens are split into so all-to-all overlaps expert compute");
}
template <class T, class Access>
schema::Option<T> gradient_sync_option(Access ep) {
  return schema::switch_option<T>("gradient_sync", [ep](T& t) -> bool& { return std::invoke(ep, t).overlap_gradient_sync; },
                                  {"overlap", "after_backward"}, "overlap",
                                  "synchronise each layer's gradients as its backward ends, or all after backward");
}
parallel::GradientTiming timing(const EpOptions& options);

class EpStrategy final : public Strategy {
 public:
  explicit EpStrategy(EpOptions options) : options_(options) {}
  std::string name() const override { return "ep"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  ProgramSize program_per_iteration(const StrategyContext& ctx) const override;
  parallel::PlanPtr plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) override;
  schema::Json describe(const StrategyContext& ctx) const override;

  // parallel.ep, else the option ep_size, else every GPU of a pipeline stage (over etp).
  int ep_size(const StrategyContext& ctx) const;
  parallel::ParallelLayout layout(const StrategyContext& ctx) const;

 private:
  EpOptions options_;
  parallel::PlanPtr plan_;  // the same every iteration
};

// What one iteration of the EP plan with pipelining degree `chunks` on `layout` (none: every GPU
// in one stage, data parallel) writes, counted block by block as the blocks write it; the
// all-to-all groups are of `exchange_group` GPUs (0: the layout's EP size, without a layout every
// GPU).
ProgramSize program_per_iteration(const StrategyContext& ctx, int chunks,
                                  const std::optional<parallel::ParallelLayout>& layout = std::nullopt,
                                  double exchange_group = 0);

}  // namespace moesim::strategies::ep
