#include "sim/simulation/simulation.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <unistd.h>

#include "sim/core/error.hpp"
#include "sim/report/chrome_trace.hpp"
#include "sim/simulation/calibration_binding.hpp"

namespace moesim::simulation {

Simulation::Simulation(scenario::Scenario scenario)
    : scenario_(std::move(scenario)), topology_(scenario_.topology()) {
  graph_ = std::make_unique<cluster::LinkGraph>(topology_);
  auto params = network::AlphaBetaTable::from_topology(topology_, *graph_);
  if (const auto* profile = scenario_.calibration.get()) {
    calibration_report_ = {{"profile", profile->name}, {"file", profile->file}};
    calibration_report_["collectives"] = bind_collectives(*profile, topology_, scenario_.all_reduce, params);
    calibration_report_["compute"] = schema::Json::object();
  }
  network_ = std::make_unique<network::AnalyticModel>(topology_, std::move(params));
  for (const auto& kind : topology_.kinds()) {
    compute::KernelTables tables;
    if (const auto* profile = scenario_.calibration.get())
      tables = bind_kernels(*profile, kind, scenario_.compute.dtype, calibration_report_["compute"][kind.key]);
    compute_.emplace_back(kind, scenario_.compute, std::move(tables));
  }
  routing_ = std::make_unique<workload::RoutingModel>(scenario_.routing, scenario_.model.experts, scenario_.seed);
  strategy_ = scenario_.strategy->make(scenario_.strategy_options);
}

Simulation::~Simulation() = default;

strategies::StrategyContext Simulation::context() const {
  return strategies::StrategyContext{topology_,      scenario_.model,           scenario_.training,
                                     *routing_,      compute_,                  scenario_.all_reduce,
                                     network_.get(), scenario_.calibration.get()};
}

double Simulation::host_memory_estimate() const {
  // Per task: the record (≈64 B), one or two dependency edges in and out, collective bookkeeping.
  const double tasks = static_cast<double>(strategy_->tasks_per_iteration(context())) * scenario_.training.iterations;
  return tasks * 120.0;
}

void Simulation::check() {
  const auto ctx = context();
  try {
    strategy_->check(ctx);
  } catch (const InputError& e) {
    throw InputError(scenario_.file, e.path(), e.problem(), e.fix());
  }
  memory_ = strategy_->memory(ctx);
  for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) {
    const double need = memory_[g].total();
    const double have = topology_.gpu(g).memory_bytes;
    if (need > have) {
      const auto& f = memory_[g];
      throw InfeasibleError(fmt::format(
          "{}: the model does not fit in GPU memory: GPU {} ({}) needs {} (weights {}, gradients {}, optimizer {}, "
          "activations {}) but has {}; use more GPUs or a larger ep_size, a smaller micro_batch_size or "
          "sequence_length, or fewer layers",
          scenario_.file, g, topology_.gpu(g).key, format_bytes(need), format_bytes(f.weights), format_bytes(f.gradients),
          format_bytes(f.optimizer), format_bytes(f.activations), format_bytes(have)));
    }
  }
  const double host = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  const double need = host_memory_estimate();
  if (need > 0.8 * host)
    throw InfeasibleError(fmt::format("{}: the run needs about {} of host memory for its task program but this machine has "
                                      "{}; simulate fewer iterations or microbatches, or a smaller cluster",
                                      scenario_.file, format_bytes(need), format_bytes(host)));
  checked_ = true;
}

void Simulation::run() {
  if (!checked_) check();
  const auto ctx = context();
  engine_ = std::make_unique<engine::Engine>(topology_.gpu_count(), strategies::kStreamsPerGpu);
  const std::size_t tasks = strategy_->tasks_per_iteration(ctx) * scenario_.training.iterations;
  engine_->reserve(tasks, tasks * 2);
  strategies::ProgramBuilder builder(*engine_, program_);
  for (int it = 0; it < scenario_.training.iterations; ++it) strategy_->build_iteration(ctx, builder, it);
  if (scenario_.network_model == "flow")
    executor_ = std::make_unique<network::FlowExecutor>(topology_, network_->params(), program_);
  else
    executor_ = std::make_unique<network::AnalyticExecutor>(*network_, program_);
  engine_->run(*executor_);
  network_stats_ = executor_->stats();
  metrics_ = report::measure(*engine_, scenario_.training.iterations);
  run_alternatives();
}

void Simulation::run_alternatives() {
  alternatives_.clear();
  for (const auto& alt : strategy_->alternatives(context())) {
    scenario::Scenario variant = scenario_;
    variant.strategy_options.merge_patch(alt.options_patch);
    variant.effective["strategy"] = variant.strategy_options;
    AlternativeRun run{alt.label, std::nullopt, {}};
    try {
      Simulation sim(std::move(variant));
      sim.run();
      run.iteration_time = sim.mean_iteration_time();
    } catch (const InfeasibleError& e) {
      run.refused = e.what();
    } catch (const InputError& e) {
      run.refused = e.what();
    }
    alternatives_.push_back(std::move(run));
  }
}

schema::Json Simulation::alternatives_json() const {
  schema::Json out = schema::Json::object();
  for (const auto& a : alternatives_)
    out[a.label] = a.iteration_time ? schema::Json{{"iteration_time_ms", time_to_ms(*a.iteration_time)}} : schema::Json{{"refused", a.refused}};
  return out;
}

Time Simulation::mean_iteration_time() const {
  const auto& it = metrics_->iteration_time;
  Time sum = 0;
  for (Time t : it) sum += t;
  return it.empty() ? 0 : sum / static_cast<Time>(it.size());
}

double Simulation::tokens_per_second() const {
  const double tokens = static_cast<double>(topology_.gpu_count()) * scenario_.training.tokens_per_microbatch() *
                        scenario_.training.microbatches;
  const double seconds = time_to_seconds(mean_iteration_time());
  return seconds > 0 ? tokens / seconds : 0.0;
}

void Simulation::write_trace(std::ostream& out, const std::vector<bool>& gpus) const {
  report::TraceNames names;
  names.include = gpus;
  for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g)
    names.gpu.push_back(fmt::format("GPU {} ({})", g, topology_.gpu(g).key));
  names.stream = {"compute", "comm: dispatch", "comm: combine", "comm: gradients", "comm: side (expert migration, SAA all-gather)"};
  report::write_chrome_trace(out, *engine_, names);
}

}  // namespace moesim::simulation
