#include "sim/simulation/simulation.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>

#include "sim/core/error.hpp"
#include "sim/core/huge_pages.hpp"
#include "sim/core/memory_limit.hpp"
#include "sim/network/traffic_matrix.hpp"
#include "sim/schedule/iteration_program.hpp"
#include "sim/simulation/calibration_binding.hpp"

namespace moesim::simulation {

namespace {

// Which iterations have started, and when each has finished (its last task's end).
class IterationWatch final : public engine::TaskObserver {
 public:
  IterationWatch(engine::Engine& engine, int iterations) : open_(iterations, 0), end_(iterations, -1) {
    engine.add_observer(this);
  }
  void on_start(const engine::Engine&, engine::TaskId, const engine::Task& t) override {
    started_ = std::max(started_, static_cast<int>(t.label.iteration));
  }
  void on_finish(const engine::Engine&, engine::TaskId, const engine::Task& t, Time) override {
    ++finished_tasks_;
    if (--open_[t.label.iteration] == 0) end_[t.label.iteration] = t.end, ++finished_iterations_;
  }
  std::uint64_t finished_tasks() const { return finished_tasks_; }
  int finished_iterations() const { return finished_iterations_; }
  // Tasks written for `iteration` (none of them can have finished yet).
  void written(int iteration, std::uint64_t tasks) { open_[iteration] += static_cast<std::int64_t>(tasks); }
  int started() const { return started_; }
  // Times of the iterations finished so far, in order.
  std::vector<Time> finished_times() const {
    std::vector<Time> out;
    for (std::size_t i = 0; i < end_.size() && end_[i] >= 0; ++i) out.push_back(end_[i] - (i ? end_[i - 1] : 0));
    return out;
  }

 private:
  std::vector<std::int64_t> open_;
  std::vector<Time> end_;
  int started_ = -1;
  std::uint64_t finished_tasks_ = 0;
  int finished_iterations_ = 0;
};

// Calls RunOptions::progress every progress_seconds of wall time: polled from the engine's stop
// condition, reading the clock once every 4096 events.
class ProgressReporter {
 public:
  ProgressReporter(const RunOptions& options, const engine::Engine& engine, const IterationWatch& watch, int iterations)
      : options_(options), engine_(engine), watch_(watch), started_(std::chrono::steady_clock::now()), last_(started_) {
    progress_.iterations = iterations;
  }
  bool enabled() const { return static_cast<bool>(options_.progress); }
  void written(int iterations) { progress_.iterations_written = iterations; }
  void poll() {
    if ((++polls_ & 4095) != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (std::chrono::duration<double>(now - last_).count() < options_.progress_seconds) return;
    last_ = now;
    progress_.iterations_done = watch_.finished_iterations();
    progress_.tasks_done = watch_.finished_tasks();
    progress_.tasks_written = engine_.task_count();
    progress_.simulated = engine_.now();
    progress_.wall_seconds = std::chrono::duration<double>(now - started_).count();
    options_.progress(progress_);
  }

 private:
  const RunOptions& options_;
  const engine::Engine& engine_;
  const IterationWatch& watch_;
  std::chrono::steady_clock::time_point started_, last_;
  std::uint64_t polls_ = 0;
  Progress progress_;
};

// A strategy names the JSON path of a bad option, not the file: the scenario's.
template <typename F>
decltype(auto) naming_the_file(const std::string& file, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    if (!e.file().empty()) throw;
    throw InputError(file, e.path(), e.problem(), e.fix());
  }
}

}  // namespace

Simulation::Simulation(scenario::Scenario scenario) : Simulation(std::move(scenario), nullptr) {}

Simulation::Simulation(scenario::Scenario scenario, std::unique_ptr<strategies::Strategy> strategy)
    : scenario_(std::move(scenario)), topology_(scenario_.topology()) {
  // The strategy first: a profile's group entries are bound where its groups sit.
  scenario_strategy_ = !strategy;
  strategy_ = strategy ? std::move(strategy)
                      : naming_the_file(scenario_.file, [&] { return scenario_.strategy->make(scenario_.strategy_options); });
  graph_ = std::make_unique<cluster::LinkGraph>(topology_);
  auto params = network::AlphaBetaTable::from_topology(topology_, *graph_);
  if (const auto* profile = scenario_.calibration.get()) {
    calibration_report_ = {{"profile", profile->name}, {"file", profile->file}};
    calibration_report_["collectives"] =
        bind_collectives(*profile, topology_, scenario_.all_reduce, strategy_->named_groups(topology_), params, &calibrated_levels_);
    calibration_report_["compute"] = schema::Json::object();
  }
  network_ = std::make_unique<network::AnalyticModel>(topology_, std::move(params));
  network_->params().reset_applied();  // the binding's own checks are no use of the run's
  for (const auto& kind : topology_.kinds()) {
    compute::KernelTables tables;
    if (const auto* profile = scenario_.calibration.get())
      tables = bind_kernels(*profile, kind, scenario_.compute.dtype, calibration_report_["compute"][kind.key]);
    std::string used;
    compute_.push_back(bound_compute_model(kind, scenario_.compute, std::move(tables), &used));
    if (!used.empty() && scenario_.calibration) calibration_report_["compute"][kind.key]["attention"] = used;
  }
  routing_ = std::make_unique<workload::RoutingModel>(scenario_.routing, scenario_.model.experts, scenario_.model.layers,
                                                     scenario_.training.iterations, scenario_.seed);
}

Simulation::~Simulation() = default;

strategies::StrategyContext Simulation::context() const {
  return strategies::StrategyContext{{topology_, scenario_.model, scenario_.training, *routing_, compute_, &scenario_.software},
                                     scenario_.all_reduce,
                                     network_.get(),
                                     scenario_.calibration.get(),
                                     scenario_.parallel};
}

Time Simulation::time_collective(network::CollectiveOp op, const std::vector<std::uint32_t>& gpus) const {
  engine::Engine engine(topology_.gpu_count(), 1);
  network::CollectiveProgram program;
  op.group = program.groups.intern(gpus);
  const auto kind = op.kind == network::CollectiveKind::P2P ? engine::WorkKind::P2P : engine::WorkKind::AllReduce;
  const auto id = engine.add_collective(static_cast<std::uint32_t>(gpus.size()), kind);
  program.add(id, std::move(op));
  for (const std::uint32_t g : gpus) engine.add_member(id, g, 0, {});
  std::unique_ptr<network::NetworkExecutor> executor;
  if (scenario_.network_model == "flow")
    executor = std::make_unique<network::FlowExecutor>(topology_, network_->params(), program);
  else
    executor = std::make_unique<network::AnalyticExecutor>(*network_, program);
  engine.run(*executor);
  return engine.makespan();
}

std::string Simulation::describe_collective(const network::CollectiveOp& op, const std::vector<std::uint32_t>& gpus) const {
  network::CollectiveOp resolved = op;
  resolved.algorithm = network_->resolve(op, gpus);
  return network::describe(resolved.algorithm, network_->cost(resolved, gpus));
}

const MemoryEstimate& Simulation::memory_estimate() const {
  if (estimate_) return *estimate_;
  const bool huge_pages = transparent_huge_pages();
  // Iteration 0 is planned on an instance of the scenario's strategy of its own: planning may
  // change a strategy's state (plan_test's recorders). A strategy of the caller's is planned itself
  // only where the routing matrices need its plan.
  const auto ctx = context();
  std::unique_ptr<strategies::Strategy> own;
  strategies::Strategy* planned = nullptr;
  if (scenario_strategy_) planned = (own = scenario_.strategy->make(scenario_.strategy_options)).get();
  else if (ctx.routing.sampled()) planned = strategy_.get();
  MemoryEstimate e = estimate_run(topology_, shape_of(*strategy_, planned), huge_pages);
  // The alternatives run one after another once the main run is done (run_alternatives), its
  // memory held meanwhile; one its strategy refuses runs nothing.
  for (const auto& alt : strategy_->alternatives(ctx)) {
    schema::Json options = scenario_.strategy_options;
    options.merge_patch(alt.options_patch);
    try {
      const auto variant = scenario_.strategy->make(options);
      variant->check(ctx);
      const MemoryEstimate alternative = estimate_run(topology_, shape_of(*variant, variant.get()), huge_pages);
      e.alternatives = std::max(e.alternatives, alternative.run());
      e.tasks += alternative.tasks;
    } catch (const InputError&) {
    }
  }
  estimate_ = e;
  return *estimate_;
}

RunShape Simulation::shape_of(const strategies::Strategy& strategy, strategies::Strategy* planned) const {
  const auto ctx = context();
  RunShape run;
  run.per_iteration = strategy.program_per_iteration(ctx);
  run.iterations = scenario_.training.iterations;
  run.flow_model = scenario_.network_model == "flow";
  // The launch threads stop at the EP dispatch's device-to-host reads (blocks/moe_block.cpp).
  run.host_reads = scenario_.software.models_host() || scenario_.parallel.ep_backend.host_sync.has_value();
  run.streams = parallel::kStreamRoles;  // unplanned: every role a plan may ask for
  if (!planned) return run;
  parallel::RunState state;
  const parallel::PlanPtr plan = planned->plan(ctx, 0, state);
  run.streams = plan->streams->roles().size();
  // Identical replicas simulated once write one replica's program (a collective spanning replicas
  // keeps its one op: counted as if it were a replica's own, a bound near enough).
  if (const ReplicaSymmetry s = replica_symmetry({}, *plan); s.reduced())
    run.per_iteration = (1.0 / s.copies) * run.per_iteration;
  // Sampled routing (blocks/token_routing) gives every all-to-all group of n GPUs a dense n × n
  // matrix of doubles for the dispatch and its transpose for the combine, per MoE layer and
  // microbatch, or above network::kMaxDenseRanks a tiered one (out and in per rank and tier, each
  // matrix with its transpose); all are written with their iteration and live until its
  // collectives retire (one set per iteration where the microbatches repeat the first's routing).
  // Expected routing shares one factored matrix (2n doubles): negligible.
  if (!ctx.routing.sampled()) return run;
  double per_microbatch = 0;
  for (const auto& layer : plan->moe) {
    if (!layer || layer->padded) continue;
    for (const auto& group : layer->dispatch) {
      const double n = static_cast<double>(group.gpus.size());
      per_microbatch += group.gpus.size() > network::kMaxDenseRanks && !layer->backend.fused()
                            ? 2 * 2 * n * topology_.tier_count() * sizeof(double)
                            : 2 * n * n * sizeof(double);
    }
  }
  const int drawn = scenario_.routing.repeat_microbatches ? 1 : scenario_.training.microbatches;
  run.routing = per_microbatch * drawn * std::min(2, scenario_.training.iterations);
  return run;
}

namespace {
// "a, b or c" of the non-empty items.
std::string one_of(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " or " : ", ") + items[i];
  return out;
}
}  // namespace

std::string Simulation::activation_hint() const {
  std::vector<std::string> ways;
  switch (scenario_.training.recompute) {
    case workload::Recompute::None: ways.push_back("set training.recompute to \"full\" (or \"selective\")"); break;
    case workload::Recompute::Selective: ways.push_back("set training.recompute to \"full\""); break;
    case workload::Recompute::Full: break;
  }
  ways.push_back("a smaller micro_batch_size or sequence_length");
  if (scenario_.strategy && scenario_.strategy->takes_layout) ways.push_back("more pipeline stages (parallel.pp)");
  return "activations: " + one_of(ways);
}

std::string Simulation::optimizer_hint() const {
  std::vector<std::string> ways;
  const bool layout = scenario_.strategy && scenario_.strategy->takes_layout;
  if (layout && scenario_.parallel.sharding == parallel::Sharding::None)
    ways.push_back("set parallel.sharding to \"distributed_optimizer\" (or \"fsdp\")");
  else if (layout && scenario_.parallel.sharding == parallel::Sharding::DistributedOptimizer)
    ways.push_back("set parallel.sharding to \"fsdp\"");
  if (!scenario_.training.optimizer_on_host) ways.push_back("training.optimizer \"host\" (with cluster.hosts)");
  ways.push_back("more GPUs");
  return "optimizer state: " + one_of(ways);
}

std::string Simulation::parameter_hint() const {
  if (!scenario_.strategy || !scenario_.strategy->takes_layout) return "more GPUs (its strategy takes no parallel layout)";
  std::vector<std::string> ways{"a larger ep", "tensor or pipeline parallelism (parallel.tp, parallel.pp)"};
  if (scenario_.parallel.sharding != parallel::Sharding::Fsdp) ways.push_back("parallel.sharding \"fsdp\"");
  return one_of(ways);
}

std::string Simulation::remedy_figures() const {
  const bool layout = scenario_.strategy && scenario_.strategy->takes_layout;
  std::vector<std::pair<std::string, std::pair<workload::TrainingConfig, parallel::ParallelConfig>>> remedies;
  // The scenario with full recomputation and/or the given sharding.
  const auto with = [&](const std::string& what, bool recompute, std::optional<parallel::Sharding> sharding) {
    auto training = scenario_.training;
    auto par = scenario_.parallel;
    if (recompute) training.recompute = workload::Recompute::Full;
    if (sharding) par.sharding = *sharding;
    remedies.push_back({what, {training, par}});
  };
  const bool recomputes = scenario_.training.recompute == workload::Recompute::Full;
  if (!recomputes) with("training.recompute \"full\"", true, std::nullopt);
  if (layout && scenario_.parallel.sharding == parallel::Sharding::None)
    with("parallel.sharding \"distributed_optimizer\"", false, parallel::Sharding::DistributedOptimizer);
  const bool shards_fully = !layout || scenario_.parallel.sharding == parallel::Sharding::Fsdp;
  if (!shards_fully) with("parallel.sharding \"fsdp\"", false, parallel::Sharding::Fsdp);
  // And all of them at once: full recomputation with FSDP.
  if (remedies.size() > 1)
    with("all of them", true, layout ? std::optional(parallel::Sharding::Fsdp) : std::nullopt);
  std::vector<std::string> figures;
  for (const auto& [what, change] : remedies) {
    const auto& [training, par] = change;
    strategies::StrategyContext ctx{{topology_, scenario_.model, training, *routing_, compute_, &scenario_.software},
                                    scenario_.all_reduce,
                                    network_.get(),
                                    scenario_.calibration.get(),
                                    par};
    try {
      const auto strategy = scenario_.strategy->make(scenario_.strategy_options);
      strategy->check(ctx);
      const auto memory = strategy->memory(ctx);
      double peak = 0;
      bool fits = true;
      for (std::uint32_t g = 0; g < memory.size(); ++g) {
        peak = std::max(peak, memory[g].total());
        fits = fits && memory[g].total() <= topology_.gpu(g).memory_bytes;
      }
      figures.push_back(fmt::format("{} {} ({})", what, format_bytes(peak), fits ? "fits" : "does not fit"));
    } catch (const InputError&) {  // a remedy the strategy refuses is no remedy
    }
  }
  std::string out;
  for (const auto& f : figures) out += (out.empty() ? "" : ", ") + f;
  return out;
}

void Simulation::check() {
  const auto ctx = context();
  naming_the_file(scenario_.file, [&] { strategy_->check(ctx); });
  memory_ = strategy_->memory(ctx);
  for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) {
    const double need = memory_[g].total();
    const double have = topology_.gpu(g).memory_bytes;
    if (need > have) {
      const auto& f = memory_[g];
      // The largest term, and what shrinks it: only what this scenario has not done yet and its
      // strategy takes.
      const std::pair<double, std::string> terms[] = {{f.activations, activation_hint()},
                                                      {f.optimizer, optimizer_hint()},
                                                      {f.weights, "weights: " + parameter_hint()},
                                                      {f.gradients, "gradients: " + parameter_hint()},
                                                      {f.buffers, "the fused EP backend's all-to-all buffer (micro_batch_size x "
                                                                  "sequence_length x ep tokens): a smaller micro_batch_size or "
                                                                  "ep, or parallel.ep_backend \"nccl\""}};
      const auto largest = *std::max_element(std::begin(terms), std::end(terms),
                                             [](const auto& a, const auto& b) { return a.first < b.first; });
      throw InfeasibleError(fmt::format(
          "{}: the model does not fit in GPU memory: GPU {} ({}) needs {} (weights {}, gradients {}, optimizer {}, "
          "activations {}{}) but has {}; the largest term is {}{}",
          scenario_.file, g, topology_.gpu(g).key, format_bytes(need), format_bytes(f.weights), format_bytes(f.gradients),
          format_bytes(f.optimizer), format_bytes(f.activations),
          f.buffers > 0 ? ", buffers " + format_bytes(f.buffers) : std::string(), format_bytes(have), largest.second,
          [&] {
            const std::string figures = remedy_figures();
            return figures.empty() ? std::string() : "; the fullest GPU would need, simulated with " + figures;
          }()));
    }
  }
  // Host memory (the optimizer state offloaded there) per host.
  if (const auto& hosts = topology_.hosts()) {
    std::vector<double> on_host(topology_.host_count(), 0.0);
    for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) on_host[topology_.host_of(g)] += memory_[g].host;
    for (std::uint32_t h = 0; h < on_host.size(); ++h)
      if (on_host[h] > hosts->memory_bytes)
        throw InfeasibleError(fmt::format("{}: the optimizer state does not fit in host memory: host {} (GPUs {}-{}) needs {} "
                                          "but has {}; use more hosts or GPUs, or keep the optimizer on the GPUs",
                                          scenario_.file, h, h * hosts->gpus, (h + 1) * hosts->gpus - 1,
                                          format_bytes(on_host[h]), format_bytes(hosts->memory_bytes)));
  }
  // Against what this process may use (cgroup and ulimit included) less what it holds already,
  // with a fifth left for the allocator. (The message leaves the resident bytes out: `run` and
  // `validate` say the same words.)
  const MemoryLimit limit = memory_limit();
  const MemoryEstimate& estimate = memory_estimate();
  const double need = estimate.total(), resident = resident_bytes();
  if (resident + need > 0.8 * limit.bytes)
    throw InfeasibleError(fmt::format(
        "{}: the run needs about {} of memory ({}) but this process may use {} ({}); {}", scenario_.file,
        format_bytes(need), describe(estimate), format_bytes(limit.bytes), limit.source,
        estimate.routing > 0.5 * need ? "use \"routing\": {\"sampling\": \"expected\"}, fewer microbatches or layers, or smaller "
                                        "all-to-all groups"
                                      : "simulate fewer microbatches or layers, or a smaller cluster"));
  const double tasks = strategy_->program_per_iteration(ctx).tasks * scenario_.training.iterations;
  if (tasks >= 4.0e9)
    throw InfeasibleError(fmt::format("{}: the run has about {:.3g} tasks, more than the 4.29e9 one simulation holds; "
                                      "simulate fewer iterations",
                                      scenario_.file, tasks));
  checked_ = true;
}

void Simulation::run(const RunOptions& options) {
  if (!checked_) check();
  const auto ctx = context();
  const int iterations = scenario_.training.iterations;
  parallel::RunState state;
  parallel::PlanPtr plan = strategy_->plan(ctx, 0, state);
  const auto streams = plan->streams;
  std::vector<engine::StreamSpec> specs;
  for (const parallel::StreamRole role : streams->roles())
    specs.push_back({std::string(parallel::trace_name(role)), role == parallel::StreamRole::Compute,
                     role == parallel::StreamRole::HostCpu});
  engine_ = std::make_unique<engine::Engine>(topology_.gpu_count(), std::move(specs));
  if (topology_.hosts()) {
    std::vector<std::uint32_t> host_of(topology_.gpu_count());
    for (std::uint32_t g = 0; g < host_of.size(); ++g) host_of[g] = topology_.host_of(g);
    engine_->set_hosts(std::move(host_of));
  }
  // A run of real software (a software section) runs its GPUs at the clock their load sustains;
  // moesim's idealised schedule keeps the kernels' measured rates.
  if (scenario_.software.models_host())
    for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g)
      if (const auto& k = topology_.gpu(g); k.sustained_clock < 1)
        engine_->set_sustained_clock(g, k.sustained_clock, k.sustained_clock_time_constant);
  report::MetricsRecorder metrics(*engine_, iterations);
  IterationWatch watch(*engine_, iterations);
  ProgressReporter progress(options, *engine_, watch, iterations);
  if (options.trace) trace_ = std::make_unique<report::TraceRecorder>(*engine_, options.trace_gpus);
  if (options.task_log) task_log_ = std::make_unique<engine::TaskLog>(*engine_);
  if (scenario_.network_model == "flow")
    executor_ = std::make_unique<network::FlowExecutor>(topology_, network_->params(), program_);
  else
    executor_ = std::make_unique<network::AnalyticExecutor>(*network_, program_);

  blocks::ProgramBuilder builder(*engine_, program_, streams, blocks::HostLaunch(scenario_.software, topology_));
  builder.count_kernels_by_kind(topology_);
  symmetry_ = replica_symmetry(options, *plan);
  const parallel::IterationPlan* symmetric_plan = plan.get();
  if (symmetry_.reduced()) {
    std::vector<bool> simulated(topology_.gpu_count());
    for (std::uint32_t g = 0; g < simulated.size(); ++g) simulated[g] = symmetry_.simulated(g);
    builder.simulate_only(std::move(simulated),
                          [this](std::size_t members, std::size_t written) { return symmetry_.collective_copies(members, written); });
    // The flow model runs the other copies' exchanges on their links, as the full run would.
    if (auto* flow = dynamic_cast<network::FlowExecutor*>(executor_.get()))
      flow->run_images([this](const std::vector<std::uint32_t>& members, std::uint32_t copies) {
        return symmetry_.images(members, copies);
      });
  }
  std::vector<report::IterationResult> iteration_results;
  const auto write = [&](int it) {
    if (plan->streams->roles() != streams->roles())
      invariant_failed(fmt::format("{}: iteration {}'s plan asks for other streams than the first", strategy_->name(), it));
    if (symmetry_.reduced() && plan.get() != symmetric_plan) {
      const ReplicaSymmetry again = find_replica_symmetry(topology_, *plan);
      if (again.copies != symmetry_.copies || again.unit != symmetry_.unit)
        invariant_failed(fmt::format("{}: iteration {}'s plan breaks the replicas' symmetry its first had", strategy_->name(), it));
      symmetric_plan = plan.get();
    }
    const std::uint64_t before = engine_->task_count();
    parallel::IterationOutcome outcome = schedule::write_iteration(builder, ctx, plan, it);
    watch.written(it, engine_->task_count() - before);
    progress.written(it + 1);
    report::IterationResult result;
    result.routed_copies = outcome.routed_copies;
    result.dropped_copies = outcome.dropped_copies;
    result.tokens = outcome.tokens;
    if (plan->replicas) {
      result.replicas = plan->replicas;
      result.expert_routed = outcome.expert_routed;
      result.migrated_bytes = plan->migrated_bytes;
    }
    iteration_results.push_back(std::move(result));
    state.previous = std::move(outcome);
  };
  write(0);
  engine_->begin(*executor_);
  for (int it = 1; it < iterations; ++it) {
    // Iteration it is written when iteration it − 1 starts: its tasks all wait for those.
    engine_->advance([&] {
      if (progress.enabled()) progress.poll();
      return watch.started() >= it - 1;
    });
    state.finished_times = watch.finished_times();
    plan = strategy_->plan(ctx, it, state);
    builder.forget_unused_families();
    write(it);
  }
  if (progress.enabled())
    engine_->advance([&] {
      progress.poll();
      return false;
    });
  else
    engine_->advance();
  engine_->finish();
  collect(metrics.result(*engine_), std::move(iteration_results));
  results_.kernel_sources.assign(topology_.kinds().size(), {});
  for (std::size_t k = 0; k < results_.kernel_sources.size(); ++k) {
    auto& ks = results_.kernel_sources[k];
    if (k < builder.kernel_time_by_kind().size()) {  // each simulated GPU's kernels ran on every replica
      ks.costed = builder.kernel_time_by_kind()[k].costed * symmetry_.copies;
      ks.measured = builder.kernel_time_by_kind()[k].measured * symmetry_.copies;
    }
    ks.families = compute_[k].kernel_sources();
  }
  run_alternatives();
  results_.alternatives = alternatives_;
  results_.strategy_details = strategy_->describe(ctx);
}

void Simulation::collect(const report::Metrics& metrics, std::vector<report::IterationResult> iterations) {
  report::Results& r = results_;
  r.scenario = scenario_.name;
  r.warnings = scenario_.warnings;
  r.model = scenario_.model.name;
  r.strategy = strategy_->name();
  r.gpus = topology_.gpu_count();
  r.gpu_kinds.clear();
  for (const auto& k : topology_.kinds()) r.gpu_kinds.push_back(k.key);
  r.kind_of_gpu.clear();
  for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) r.kind_of_gpu.push_back(topology_.kind_index(g));
  r.levels.clear();
  for (int l = 0; l < topology_.level_count(); ++l) {
    const auto& lv = topology_.levels()[l];
    const auto& ab = network_->params().tier_default(topology_.tier_of_level(l));
    r.levels.push_back({lv.name, lv.count, std::string(cluster::to_string(lv.fabric)), format_bandwidth(lv.bandwidth), ab.alpha, ab.beta});
  }
  r.calibration = calibration_report_;
  r.software = scenario_.software.name;
  r.host_modelled = scenario_.software.models_host();
  if (r.calibration.contains("collectives"))
    for (const auto& line : report_collectives_applied(r.calibration["collectives"], calibrated_levels_, network_->params(), topology_))
      r.warnings.push_back(fmt::format("calibration {}: {}", r.calibration.at("profile").get<std::string>(), line));
  r.iterations = std::move(iterations);
  for (std::size_t i = 0; i < r.iterations.size(); ++i) {
    r.iterations[i].time = metrics.iteration_time[i];
    r.iterations[i].end = metrics.iteration_end[i];
  }
  r.metrics = metrics;
  if (symmetry_.reduced())  // every GPU as its representative
    for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) r.metrics.gpus[g] = r.metrics.gpus[symmetry_.representative[g]];
  r.network_model = executor_->model_name();
  r.network = executor_->stats();
  // Bytes per description level: the tiers of a level (its own links and those between its
  // NVLink domains) add up.
  std::vector<double> by_level(topology_.level_count(), 0.0);
  for (int t = 0; t < topology_.tier_count(); ++t) by_level[topology_.level_of_tier(t)] += r.network.bytes_by_level[t];
  r.network.bytes_by_level = std::move(by_level);
  r.memory = memory_;
  r.memory_capacity.clear();
  for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) r.memory_capacity.push_back(topology_.gpu(g).memory_bytes);
  r.host_memory.clear();
  if (const auto& hosts = topology_.hosts()) {
    r.host_memory.assign(topology_.host_count(), 0.0);
    for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) r.host_memory[topology_.host_of(g)] += memory_[g].host;
    r.host_memory_capacity = hosts->memory_bytes;
  }
  r.engine = {engine_->task_count(),
              engine_->collective_count(),
              engine_->events_processed(),
              engine_->makespan(),
              symmetry_.copies,
              symmetry_.reduced() ? symmetry_.simulated_gpus() : topology_.gpu_count(),
              symmetry_.full_because};
}

ReplicaSymmetry Simulation::replica_symmetry(const RunOptions& options, const parallel::IterationPlan& plan) const {
  // What the scenario is first, then what the run asks for.
  ReplicaSymmetry none;
  if (!scenario_strategy_ || !scenario_.strategy->takes_layout)
    none.full_because = fmt::format("the {} strategy's plans are not checked for symmetry", strategy_->name());
  else if (routing_->sampled()) none.full_because = "sampled routing draws each GPU's own tokens";
  else if (options.every_gpu) none.full_because = "asked to (--every-gpu)";
  else if (options.task_log) none.full_because = "a task log records every GPU's tasks";
  else {
    ReplicaSymmetry found = find_replica_symmetry(topology_, plan);
    // A trace records its GPUs' own tasks: only simulated ones have them.
    if (options.trace && found.reduced())
      for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g)
        if ((options.trace_gpus.empty() || options.trace_gpus[g]) && !found.simulated(g)) {
          none.full_because = fmt::format(
              "the trace records GPU {}, whose replica is not simulated (--trace-gpus within 0-{} keeps the {} replicas "
              "simulated once)",
              g, found.unit - 1, found.copies);
          return none;
        }
    return found;
  }
  return none;
}

const engine::TaskLog& Simulation::task_log() const {
  if (!task_log_) invariant_failed("task_log() of a run without RunOptions::task_log");
  return *task_log_;
}

void Simulation::run_alternatives() {
  alternatives_.clear();
  for (const auto& alt : strategy_->alternatives(context())) {
    scenario::Scenario variant = scenario_;
    variant.strategy_options.merge_patch(alt.options_patch);
    variant.effective["strategy"] = variant.strategy_options;
    report::AlternativeResult run{alt.label, std::nullopt, {}};
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

void Simulation::write_trace(std::ostream& out) const {
  if (!trace_) invariant_failed("write_trace() of a run without RunOptions::trace");
  std::vector<std::string> names;
  for (std::uint32_t g = 0; g < topology_.gpu_count(); ++g) names.push_back(fmt::format("GPU {} ({})", g, topology_.gpu(g).key));
  trace_->write(out, *engine_, names);
}

}  // namespace moesim::simulation
