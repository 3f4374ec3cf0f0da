// One simulation of a scenario: builds the cluster, the compute and network models and the
// strategy, checks that the model fits in GPU memory and that the run fits on this machine, runs
// the engine over every iteration's task program, and measures the result.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "sim/cluster/link_graph.hpp"
#include "sim/network/analytic_executor.hpp"
#include "sim/network/flow_executor.hpp"
#include "sim/report/metrics.hpp"
#include "sim/scenario/scenario.hpp"

namespace moesim::simulation {

class Simulation {
 public:
  explicit Simulation(scenario::Scenario scenario);
  ~Simulation();
  Simulation(const Simulation&) = delete;  // the models hold references into it
  Simulation& operator=(const Simulation&) = delete;

  // Throws InputError (strategy constraints, with the scenario's file) or InfeasibleError
  // (out of GPU memory, too large for this machine). Nothing is built or written before.
  void check();
  void run();

  const scenario::Scenario& scenario() const { return scenario_; }
  const report::Metrics& metrics() const { return *metrics_; }
  const engine::Engine& engine() const { return *engine_; }
  const network::NetworkStats& network_stats() const { return network_stats_; }
  const std::vector<workload::MemoryFootprint>& memory() const { return memory_; }

  Time mean_iteration_time() const;
  double tokens_per_second() const;
  schema::Json results() const;
  std::string summary(double wall_seconds) const;
  // `gpus`: which GPUs to write (empty: all).
  void write_trace(std::ostream& out, const std::vector<bool>& gpus = {}) const;

  // Estimated host memory for the run's task program, in bytes.
  double host_memory_estimate() const;

 private:
  strategies::StrategyContext context() const;

  // The strategy's alternatives (Strategy::alternatives), each simulated on its own: label and
  // mean iteration time, or the reason it could not run.
  struct AlternativeRun {
    std::string label;
    std::optional<Time> iteration_time;
    std::string refused;
  };
  void run_alternatives();
  schema::Json alternatives_json() const;

  scenario::Scenario scenario_;
  std::vector<AlternativeRun> alternatives_;
  cluster::Topology topology_;
  std::unique_ptr<cluster::LinkGraph> graph_;
  std::unique_ptr<network::AnalyticModel> network_;
  std::vector<compute::ComputeModel> compute_;
  std::unique_ptr<workload::RoutingModel> routing_;
  std::unique_ptr<strategies::Strategy> strategy_;
  std::vector<workload::MemoryFootprint> memory_;
  std::unique_ptr<engine::Engine> engine_;
  network::CollectiveProgram program_;
  std::unique_ptr<network::NetworkExecutor> executor_;
  network::NetworkStats network_stats_;
  schema::Json calibration_report_;  // what the scenario's profile set and where defaults stayed
  std::optional<report::Metrics> metrics_;
  bool checked_ = false;
};

}  // namespace moesim::simulation
