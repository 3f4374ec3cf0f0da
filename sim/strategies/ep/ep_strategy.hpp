// Plain expert parallelism (GShard/DeepSpeed-MoE/Tutel), the baseline every MoE system compares
// against (STRATEGIES.md `ep`). Per MoE layer and microbatch, forward: attention and the gate on
// every GPU → dispatch all-to-all(v) inside the EP group → the local experts' FFNs → combine
// all-to-all(v); backward mirrors it at twice the compute. With pipelining degree P the tokens are
// split into P chunks so chunk i's all-to-all overlaps chunk i−1's expert compute (Tutel,
// FasterMoE). After the last microbatch's backward of each layer, dense gradients are all-reduced
// over all GPUs and expert gradients over the expert-data-parallel group (GPUs holding the same
// experts); then the optimizer steps. The all-to-all traffic comes from the routing of each layer
// and iteration, after capacity drops.
#pragma once

#include "sim/strategies/registry.hpp"

namespace moesim::strategies::ep {

StrategyInfo info();

struct EpOptions {
  int ep_size = 0;  // 0: all GPUs
  int pipelining_degree = 1;
  network::Algorithm all_to_all = network::Algorithm::Direct;
  bool overlap_gradient_sync = true;
};

class EpStrategy final : public Strategy {
 public:
  explicit EpStrategy(EpOptions options) : options_(options) {}
  std::string name() const override { return "ep"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  std::size_t tasks_per_iteration(const StrategyContext& ctx) const override;
  void build_iteration(const StrategyContext& ctx, ProgramBuilder& program, int iteration) override;
  schema::Json describe(const StrategyContext& ctx) const override;

  int ep_size(const StrategyContext& ctx) const;

 private:
  EpOptions options_;
};

}  // namespace moesim::strategies::ep
