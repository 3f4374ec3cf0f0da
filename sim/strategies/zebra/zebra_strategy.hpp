// Zebra parallelism with asymmetric expert assignment (HeterMoE, Wu, Liu et al.; spec 002 of
// ../shared/specs/seeds-001-002-004.md; STRATEGIES.md `zebra`). A ZP group replaces an EP group:
// its M attention GPUs (the newer kind, faster on attention) hold every non-expert part of the
// model and do data parallelism among themselves; its N expert GPUs (the older kind) hold the
// experts, n/N per layer each. Per MoE layer and microbatch the attention GPUs route their tokens
// to the expert GPUs (dispatch, a bipartite all-to-all) and receive the outputs (combine), each
// direction on its own communication stream (the backward's towards the experts on the dispatch
// stream, §4.1), one compute stream per GPU. With R microbatches the schedule is Theorem 1's
// (schedule/schedule.hpp, layer-major): the attention of microbatch j + 1 runs while microbatch
// j's experts run on the other kind. Asym-EA (§4.2): each expert GPU hands o_l of its experts of
// layer l to the attention GPUs (Algorithm 1, asym_ea.hpp, from forward times this strategy costs
// on both kinds and memory bounds from the memory model), which compute them after the layer's
// attention of every microbatch. Several ZP groups train data-parallel: dense gradients
// all-reduced over every attention GPU, expert gradients over the GPUs holding the same experts.
// `overlap: "none"` is DistEP, the paper's disaggregated baseline: the same placement and
// exchanges, microbatch after microbatch with no overlap (§6.1).
#pragma once

#include <optional>

#include "sim/strategies/ep/ep_strategy.hpp"
#include "sim/strategies/registry.hpp"
#include "sim/strategies/zebra/asym_ea.hpp"

namespace moesim::strategies::zebra {

StrategyInfo info();

enum class AsymEaMode : std::uint8_t { Auto, On, Off, Given };

struct ZebraOptions {
  std::string attention_gpu;  // the GPU kind that runs attention (empty: the faster at it)
  int zp_groups = 1;
  bool overlap = true;  // false: DistEP
  AsymEaMode asym_ea = AsymEaMode::Auto;
  std::vector<int> offloaded;  // AsymEaMode::Given: o_l per MoE layer
  SqueezeFormula formula = SqueezeFormula::Paper;
  ep::EpOptions iteration;  // what every EP-based plan takes: pipelining degree, gradient sync
};

// The GPUs of every ZP group.
struct ZpGroups {
  std::uint16_t attention_kind = 0, expert_kind = 0;
  int m = 0, n = 0;  // attention and expert GPUs per group
  std::vector<std::vector<std::uint32_t>> attention, experts;  // per group, in GPU order
};

// Algorithm 1's inputs and its memory bounds, as this strategy costs them.
struct OffloadCosts {
  OffloadInputs inputs;
  double tokens_per_expert_gpu = 0;  // B: token copies an expert GPU computes per microbatch
  double expert_capacity = 0;        // experts (of all layers) each expert GPU can hold
};

class ZebraStrategy final : public Strategy {
 public:
  explicit ZebraStrategy(ZebraOptions options) : options_(std::move(options)) {}
  std::string name() const override { return "zebra"; }
  void check(const StrategyContext& ctx) const override;
  std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const override;
  ProgramSize program_per_iteration(const StrategyContext& ctx) const override;
  parallel::PlanPtr plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) override;
  schema::Json describe(const StrategyContext& ctx) const override;

  // What the options resolve to on the scenario's cluster and model.
  struct Placement {
    ZpGroups groups;
    OffloadCosts costs;                     // Algorithm 1's inputs as moesim costs them
    std::optional<OffloadPlan> algorithm;   // Algorithm 1's result, where Asym-EA applies (zebra overlap, M and N dividing)
    std::vector<int> offloaded;             // o_l per MoE layer (from each expert GPU) as the options say
    std::string mode;                       // how `offloaded` was decided ("algorithm 1", "given", "off: why")
  };
  Placement placement(const StrategyContext& ctx) const;
  ZpGroups groups(const StrategyContext& ctx) const;
  OffloadCosts offload_costs(const StrategyContext& ctx, const ZpGroups& z) const;

 private:
  ZebraOptions options_;
  parallel::PlanPtr plan_;  // the same every iteration
};

}  // namespace moesim::strategies::zebra
