// A parallel strategy is a plan maker (DESIGN.md §8): from the cluster, the model, the training
// settings and what earlier iterations left, it decides each iteration's IterationPlan (roles,
// expert replicas and their token shares, groups and collectives, streams, schedule); the blocks
// and the schedule turn the plan into tasks. No strategy writes an iteration loop. Strategies are
// registered by name with a one-line description, the paper they implement and the schema of
// their options (registry.hpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/blocks/context.hpp"
#include "sim/calibration/profile.hpp"
#include "sim/core/schema.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/parallel/run_state.hpp"
#include "sim/strategies/program_size.hpp"
#include "sim/workload/memory.hpp"

namespace moesim::strategies {

struct StrategyContext : blocks::Context {
  network::Algorithm all_reduce_algorithm = network::Algorithm::Ring;
  // The α-β network model of the cluster (for strategies that predict collective times, Parm's
  // Algorithm 1) and the scenario's calibration profile; either may be null.
  const network::AnalyticModel* network = nullptr;
  const calibration::Profile* calibration = nullptr;
  // The scenario's parallel layout, pipeline schedule and layer split (ep 0: the strategy's).
  parallel::ParallelConfig parallel;
};

// A variant of the strategy's options that a run also simulates, so its results can say whether
// the strategy's own choice was the fastest (Parm's "auto" simulates each schedule).
struct Alternative {
  std::string label;           // compared with describe()'s "choice"
  schema::Json options_patch;  // merged into the strategy options
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  // Checks the strategy's constraints against the cluster and model. Throws InputError with a
  // JSON path under $.strategy (the caller adds the file name).
  virtual void check(const StrategyContext& ctx) const = 0;
  // Memory each GPU needs (index = global GPU index).
  virtual std::vector<workload::MemoryFootprint> memory(const StrategyContext& ctx) const = 0;
  // What one iteration writes into the engine (a bound), for the host-memory estimate.
  virtual ProgramSize program_per_iteration(const StrategyContext& ctx) const = 0;
  // The plan of `iteration`, knowing what the earlier ones measured (`state`). Every plan of one
  // run asks for the same streams.
  virtual parallel::PlanPtr plan(const StrategyContext& ctx, int iteration, const parallel::RunState& state) = 0;
  // Strategy-specific results; a "choice" string, when present, is the sweep's strategy_choice.
  virtual schema::Json describe(const StrategyContext& ctx) const = 0;
  virtual std::vector<Alternative> alternatives(const StrategyContext&) const { return {}; }
  // The parallel groups a calibration profile may name ("mp", "ep_esp": Parm §V-A measures α-β
  // per collective and group), each by the GPUs of one of its groups in rank order. A profile
  // entry of a group named here is bound to the network where those GPUs sit
  // (sim/simulation/calibration_binding.hpp), so the simulated collective costs what Algorithm 1
  // reads; groups of one GPU are not bound.
  using NamedGroups = std::map<std::string, std::vector<std::uint32_t>>;
  virtual NamedGroups named_groups(const cluster::Topology&) const { return {}; }
};

}  // namespace moesim::strategies
