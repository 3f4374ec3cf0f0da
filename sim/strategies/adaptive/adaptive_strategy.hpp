// Per-iteration adaptive expert replication and its baselines (seed 004; spec 004 of
// ../shared/specs/seeds-001-002-004.md; STRATEGIES.md `adaptive`). N ranks (one per GPU) hold s
// expert slots each per MoE layer; each slot is one replica (instance) of an expert class, the
// sN slots of a layer its EP layout. Per iteration and MoE layer (§3.2, Fig. 4):
//   1. after the router, an all-reduce of the E per-class token counts over all ranks (the
//      popularity the next iteration's placement is computed from; adaptive only);
//   2. one all-to-all over all ranks under the current placement: a class's tokens split evenly
//      over its replicas, capped at slot_capacity × r_i (§3.4; per source rank or pooled);
//   3. after the backward, the replicas' gradients synchronised: an all-reduce over the ranks
//      hosting each class (the intra+inter-rank all-reduce, §4.1: local replicas summed on the
//      GPU first, so a rank joins once per class it hosts);
//   4. the optimizer on the hosts (ZeRO-Offload; training.optimizer "host"). Adaptive shards every
//      class's state over all N ranks: each rank's partition collects its G/N shard of every
//      class from one replica (Algorithm 2, §4.3), copies it to the host over PCIe, the CPU steps
//      Adam, the weights come back over PCIe, and each partition sends its W/N shard to every
//      slot of the class in the next placement (§4.4), which the layer's first forward waits for.
//      Static (DeepSpeed) and FlexMoE shard a class's state over its own replicas: each rank keeps
//      its 1/r of the all-reduced gradient, and the replicas all-gather the updated weights.
// `gradient_reduction: "direct"` replaces step 3 and the collection by §3.3's cost model: every
// replica's G/N shard sent straight to its owner (adaptive) or a reduce-scatter over the replicas
// (static), which is what the paper's analytic comparison (C2) assumes.
// FlexMoE-k's rebalance moves weights (2 B/param) and optimizer state (16 B/param) of every moved
// replica before the iteration's first forward (blocking, spec A.9).
#pragma once

#include <memory>
#include <optional>

#include "sim/strategies/adaptive/replication_policy.hpp"
#include "sim/strategies/registry.hpp"

namespace moesim::strategies::adaptive {

StrategyInfo info();

struct AdaptiveOptions {
  PolicyOptions policy;
  int slots_per_gpu = 4;
  bool pooled_capacity = true;
  bool direct_reduction = false;  // §3.3's reduce-to-owner instead of all-reduce + collection
};

class AdaptiveStrategy final : public Strategy {
 public:
  explicit AdaptiveStrategy(AdaptiveOptions options) : options_(options) {}
  std::string name() const override { return "adaptive"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  ProgramSize program_per_iteration(const StrategyContext& ctx) const override;
  parallel::PlanPtr plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) override;
  schema::Json describe(const StrategyContext& ctx) const override;

 private:
  MoveCost move_cost(const StrategyContext& ctx) const;
  parallel::PlanPtr build(const StrategyContext& ctx, const std::vector<Move>& moves) const;

  AdaptiveOptions options_;
  std::unique_ptr<ReplicationPolicy> policy_;
  MoveCost move_cost_;  // of the run's scenario, costed when the policy starts (iteration 0)
  double migrated_bytes_ = 0;
  int moves_ = 0;
};

}  // namespace moesim::strategies::adaptive
