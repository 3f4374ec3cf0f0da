// A parallel strategy turns (cluster, model, training settings, routing of this iteration) into
// the task program of one training iteration. Strategies are registered by name with a one-line
// description, the paper they implement and the schema of their options (see registry.hpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/calibration/profile.hpp"
#include "sim/cluster/topology.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/core/schema.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/strategies/program.hpp"
#include "sim/workload/memory.hpp"
#include "sim/workload/model_shape.hpp"
#include "sim/workload/routing.hpp"

namespace moesim::strategies {

struct StrategyContext {
  const cluster::Topology& topology;
  const workload::ModelShape& model;
  const workload::TrainingConfig& training;
  const workload::RoutingModel& routing;
  // One compute model per GPU kind of the topology (index = Topology::kind_index).
  const std::vector<compute::ComputeModel>& compute;
  network::Algorithm all_reduce_algorithm = network::Algorithm::Ring;
  // The α-β network model of the cluster (for strategies that predict collective times, Parm's
  // Algorithm 1) and the scenario's calibration profile; either may be null.
  const network::AnalyticModel* network = nullptr;
  const calibration::Profile* calibration = nullptr;
};

// What a strategy reports besides the timeline.
struct StrategyTotals {
  double routed_token_copies = 0;  // token copies sent to experts (top-k counted k times)
  double dropped_token_copies = 0;
  std::vector<double> dropped_per_iteration;
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
  // Upper bound on the tasks one iteration adds, for the host-memory estimate.
  virtual std::size_t tasks_per_iteration(const StrategyContext& ctx) const = 0;
  virtual void build_iteration(const StrategyContext& ctx, ProgramBuilder& program, int iteration) = 0;
  // Strategy-specific results; a "choice" string, when present, is the sweep's strategy_choice.
  virtual schema::Json describe(const StrategyContext& ctx) const = 0;
  virtual std::vector<Alternative> alternatives(const StrategyContext&) const { return {}; }
  const StrategyTotals& totals() const { return totals_; }

 protected:
  StrategyTotals totals_;
};

}  // namespace moesim::strategies
