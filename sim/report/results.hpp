// The results of one simulation as a typed object, rendered to the terminal summary, results.json
// (docs/results.md) and a sweep's CSV row, so no output is re-parsed from another.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/schema.hpp"
#include "sim/network/executor.hpp"
#include "sim/report/metrics.hpp"
#include "sim/workload/memory.hpp"

namespace moesim::report {

struct IterationResult {
  Time time = 0;  // from the end of the previous iteration's last task to the end of its own
  Time end = 0;
  double routed_copies = 0;   // token copies sent to experts (top-k counted k times)
  double dropped_copies = 0;  // of which dropped over capacity
  double tokens = 0;          // distinct tokens trained on
  // Strategies that place replicas per iteration (IterationPlan::replicas): per layer, each
  // expert's replicas and the copies its routers sent it before drops; bytes rebalancing moved.
  std::shared_ptr<const std::vector<std::vector<int>>> replicas;
  std::vector<std::vector<double>> expert_routed;
  double migrated_bytes = 0;
};

// A variant of the strategy's options simulated on its own (Strategy::alternatives).
struct AlternativeResult {
  std::string label;
  std::optional<Time> iteration_time;
  std::string refused;  // why it could not run
};

struct LevelResult {
  std::string name;
  std::uint32_t count = 0;
  std::string fabric;
  std::string bandwidth;
  Time alpha = 0;           // default α in use
  double beta = 0;          // default β in use, picoseconds per byte
};

struct EngineStats {
  std::uint64_t tasks = 0, collectives = 0, events = 0;
  Time makespan = 0;
  // Identical replicas simulated once (simulation/replica_symmetry.hpp): how many each simulated
  // GPU stands for (1: every GPU simulated, `full_because` says why) and the GPUs simulated.
  std::uint32_t replicas = 1;
  std::uint32_t simulated_gpus = 0;
  std::string full_because;
};

struct Results {
  std::string scenario, model, strategy;
  std::vector<std::string> warnings;  // the scenario's plausibility warnings
  schema::Json strategy_details;  // the strategy's own description (resolved options, choices)
  std::vector<AlternativeResult> alternatives;
  std::uint32_t gpus = 0;
  std::vector<std::string> gpu_kinds;
  std::vector<std::uint16_t> kind_of_gpu;  // per GPU, its index in gpu_kinds
  std::vector<LevelResult> levels;
  schema::Json calibration;  // what the scenario's profile set (null: none)
  // The software section's name, and whether it costs the host's launches (none: every kernel
  // starts as soon as its GPU can run it).
  std::string software;
  bool host_modelled = false;
  // `moesim run --compare-uncalibrated`: the same scenario's headline without its profile.
  schema::Json uncalibrated;
  std::vector<IterationResult> iterations;
  Metrics metrics;
  std::string network_model;
  network::NetworkStats network;
  std::vector<workload::MemoryFootprint> memory;  // per GPU
  std::vector<double> memory_capacity;            // per GPU
  std::vector<double> host_memory;                // per host, when the cluster describes hosts
  double host_memory_capacity = 0;
  EngineStats engine;
  // Per GPU kind (gpu_kinds' order): the time of the compute kernels the run launched as costed,
  // with the GPU to themselves, and of it what measured kernel tables gave
  // (blocks::ProgramBuilder::kernel_time_by_kind), and where each kernel family's cost comes from
  // (compute::ComputeModel::kernel_sources: family, source).
  struct KernelSources {
    Time costed = 0, measured = 0;
    std::vector<std::pair<std::string, std::string>> families;
  };
  std::vector<KernelSources> kernel_sources;

  Time mean_iteration_time() const;
  // Of all the run's compute kernels' costed time, the share measured tables gave (0 without any).
  double measured_kernel_share() const;
  double tokens_per_second() const;  // distinct tokens per second
  double routed_copies() const;
  double dropped_copies() const;
  double dropped_fraction() const;
  std::size_t peak_memory_gpu() const;
  // Per GPU kind (gpu_kinds' order): the mean over its GPUs of the share of an iteration they
  // compute (the union of their compute kernels over the mean iteration time; HeterMoE Table 3's
  // utilisation, 1 − the bubbles).
  std::vector<double> compute_utilisation_by_kind() const;
  // The strategy's choice among alternatives it can make (Parm's schedule); empty if none.
  std::string choice() const;
  // Host bytes of the per-GPU and per-host series of a run of `gpus` GPUs and `hosts` hosts, as
  // Simulation::collect fills them: for the host-memory estimate.
  static double memory_estimate(std::uint32_t gpus, std::uint32_t hosts);
};

schema::Json to_json(const Results& r);
// results.json: to_json(r).dump(2) and a newline, written with the per-iteration series streamed
// entry by entry (a long run's series is never held as a JSON tree).
void write_json(std::ostream& out, const Results& r);
// `peak_rss_bytes`: the process's peak resident memory, shown beside the wall time (0: not shown).
std::string summary(const Results& r, double wall_seconds, double peak_rss_bytes = 0);

// The run's headline figures per iteration (iteration_time_ms, tokens_per_second, and the means
// over GPUs of compute_ms, communication_ms, exposed_communication_ms), as results.json's
// "uncalibrated" holds them.
schema::Json headline(const Results& r);
// Two headlines side by side, calibrated first, with the calibrated run's change against the other.
std::string compare_headlines(const schema::Json& calibrated, const schema::Json& uncalibrated);

// A sweep's CSV: the metric columns (after the point and its axis values) and one row's values
// for a cluster of `levels` levels (bytes per level, coarsest first).
std::vector<std::string> csv_metric_columns(std::size_t levels);
// A CSV field: quoted (quotes doubled, newlines as spaces) when it holds a comma, quote or newline.
std::string csv_field(const std::string& s);
// The fields of one CSV line as csv_field writes them (quotes removed, doubled quotes single).
std::vector<std::string> csv_fields(const std::string& line);
std::string csv_metric_values(const Results& r, std::size_t levels);

}  // namespace moesim::report
