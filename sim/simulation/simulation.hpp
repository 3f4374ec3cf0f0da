// One simulation of a scenario: builds the cluster, the compute and network models and the
// strategy, checks that the model fits in GPU memory and that the run fits on this machine, then
// runs iteration after iteration — the strategy plans each one from what the run carries, the
// schedule writes its program into the engine while the previous one runs — and records the
// results as the tasks finish (report/results.hpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <vector>

#include "sim/cluster/link_graph.hpp"
#include "sim/engine/task_log.hpp"
#include "sim/network/analytic_executor.hpp"
#include "sim/network/flow_executor.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/report/results.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/simulation/memory_estimate.hpp"
#include "sim/simulation/replica_symmetry.hpp"

namespace moesim::simulation {

// Where a long run stands, reported every RunOptions::progress_seconds of wall time.
struct Progress {
  int iterations_done = 0, iterations = 0;
  int iterations_written = 0;           // the run loop writes iteration i + 1 when i starts
  std::uint64_t tasks_done = 0, tasks_written = 0;
  Time simulated = 0;                   // the engine's clock
  double wall_seconds = 0;              // since run() began
};

struct RunOptions {
  bool trace = false;             // record tasks for write_trace
  std::vector<bool> trace_gpus;   // per GPU, whether it is traced (empty: all)
  bool task_log = false;          // keep every finished task (task_log(); tests and small runs)
  std::function<void(const Progress&)> progress;  // none: no progress reports
  double progress_seconds = 1.0;
  // Simulate every GPU even where identical replicas could be simulated once (replica_symmetry.hpp).
  bool every_gpu = false;
};

class Simulation {
 public:
  explicit Simulation(scenario::Scenario scenario);
  // With a strategy of the caller's instead of the scenario's (a plan under test, an embedding
  // program's own); its options in the scenario are not read.
  Simulation(scenario::Scenario scenario, std::unique_ptr<strategies::Strategy> strategy);
  ~Simulation();
  Simulation(const Simulation&) = delete;  // the models hold references into it
  Simulation& operator=(const Simulation&) = delete;

  // Throws InputError (strategy constraints, with the scenario's file) or InfeasibleError
  // (out of GPU memory, too large for this machine). Nothing is built or written before.
  void check();
  void run(const RunOptions& options = {});

  const scenario::Scenario& scenario() const { return scenario_; }
  const report::Results& results() const { return results_; }
  // `moesim run --compare-uncalibrated`: `other` ran this scenario without its profile; results.json
  // gets its headline as "uncalibrated".
  void attach_uncalibrated(const Simulation& other) { results_.uncalibrated = report::headline(other.results()); }
  schema::Json results_json() const { return report::to_json(results_); }
  std::string summary(double wall_seconds, double peak_rss_bytes = 0) const {
    return report::summary(results_, wall_seconds, peak_rss_bytes);
  }
  const report::Metrics& metrics() const { return results_.metrics; }
  const network::NetworkStats& network_stats() const { return results_.network; }
  const std::vector<workload::MemoryFootprint>& memory() const { return memory_; }
  const engine::Engine& engine() const { return *engine_; }
  // Every finished task, when run with RunOptions::task_log.
  const engine::TaskLog& task_log() const;
  Time mean_iteration_time() const { return results_.mean_iteration_time(); }
  double tokens_per_second() const { return results_.tokens_per_second(); }
  // The traced GPUs' tasks, when run with RunOptions::trace.
  void write_trace(std::ostream& out) const;

  // How long one collective takes alone on the scenario's cluster, network model and calibration
  // (every member ready at time 0, as nccl-tests times it); `op.group` is ignored for `gpus`.
  Time time_collective(network::CollectiveOp op, const std::vector<std::uint32_t>& gpus) const;
  // What that collective runs as the analytic model resolves and costs it (network::describe):
  // "nvls", "nvls-tree + ring Simple", "ring LL", ...
  std::string describe_collective(const network::CollectiveOp& op, const std::vector<std::uint32_t>& gpus) const;
  const cluster::Topology& topology() const { return topology_; }

  // Estimated host memory of the run (memory_estimate.hpp), in bytes; planned once (check() and
  // validate both ask).
  const MemoryEstimate& memory_estimate() const;
  double host_memory_estimate() const { return memory_estimate().total(); }
  // What the strategy says one iteration writes into the engine (a bound).
  strategies::ProgramSize program_per_iteration() const { return strategy_->program_per_iteration(context()); }

 private:
  // What would shrink each term of an out-of-memory GPU's footprint, given what the scenario
  // already does and what its strategy takes (check()'s message).
  std::string activation_hint() const;
  std::string optimizer_hint() const;
  std::string parameter_hint() const;
  // What the fullest GPU would need with each remedy the scenario has not applied yet (full
  // recomputation, the distributed optimizer, FSDP) and with all of them, each costed by the
  // strategy's own memory model on this cluster: "training.recompute \"full\" 61.2 GiB (fits), ..."
  // (check()'s message; fits: on every GPU).
  std::string remedy_figures() const;

  strategies::StrategyContext context() const;
  // The replicas of `plan` a run with `options` simulates once, or copies 1 and why none.
  ReplicaSymmetry replica_symmetry(const RunOptions& options, const parallel::IterationPlan& plan) const;
  void run_alternatives();
  // What a run of `strategy` (this one's, or an alternative's) allocates, its iteration 0 planned
  // on `planned` (its streams and routing matrices; null: not planned, every stream role counted).
  RunShape shape_of(const strategies::Strategy& strategy, strategies::Strategy* planned) const;
  void collect(const report::Metrics& metrics, std::vector<report::IterationResult> iterations);

  scenario::Scenario scenario_;
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
  std::unique_ptr<report::TraceRecorder> trace_;
  std::unique_ptr<engine::TaskLog> task_log_;
  schema::Json calibration_report_;  // what the scenario's profile set and where defaults stayed
  // The collective kind and tier each of the report's used collective entries set, in order.
  std::vector<std::pair<network::CollectiveKind, int>> calibrated_levels_;
  std::vector<report::AlternativeResult> alternatives_;
  ReplicaSymmetry symmetry_;  // of the last run
  report::Results results_;
  bool checked_ = false;
  bool scenario_strategy_ = true;  // strategy_ is the scenario's (not the caller's)
  mutable std::optional<MemoryEstimate> estimate_;
};

}  // namespace moesim::simulation
