// moesim — the command line: run, validate, sweep, presets.
// Exit codes: 0 success, 2 bad input or a scenario that cannot run (the message names the file,
// the JSON path and the fix; nothing is written), 1 anything else.
#include <boost/program_options.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <optional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

#include "sim/cli/calibrate_command.hpp"
#include "sim/cli/comma_list.hpp"
#include "sim/cli/collective_command.hpp"
#include "sim/cli/exit_code.hpp"
#include "sim/cli/import_command.hpp"
#include "sim/cli/search_command.hpp"
#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"
#include "sim/core/parallel.hpp"
#include "sim/scenario/scenario_schema.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/simulation/time_estimate.hpp"
#include "sim/strategies/registry.hpp"
#include "sim/sweep/mpi_ranks.hpp"
#include "sim/sweep/runner.hpp"
#include "sim/sweep/validation.hpp"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace moesim;

namespace {

constexpr const char* kUsage = R"(usage: moesim COMMAND [options]

commands:
  run SCENARIO.json [--out|-o DIR] [--trace [--trace-gpus LIST]] [--compare-uncalibrated] [--point P] [--every-gpu]
                                            simulate; write results.json, scenario.effective.json
                                            (and trace.json for Perfetto with --trace) to DIR
                                            (default out/NAME); LIST like 0-7,16 picks the GPUs
                                            traced (default: all up to 512 GPUs, else 0-15);
                                            --compare-uncalibrated runs it again without its
                                            calibration profile and prints both side by side;
                                            --point P runs point P of the scenario's sweep
                                            grid alone (as numbered in the sweep's results.csv);
                                            --every-gpu simulates every GPU where identical
                                            replicas would be simulated once (same results)
  validate SCENARIO.json                    check the scenario (and every sweep point), run nothing;
                                            estimate its memory and CPU time
  sweep SCENARIO.json [--out|-o DIR] [--jobs N]
                                            run the scenario's sweep grid in parallel, append one
                                            row per point to DIR/results.csv; re-run to resume;
                                            under mpirun -np N the ranks share the points, rank
                                            0 writes the CSV (N is the jobs' threads per rank)
  search SCENARIO.json [--out|-o DIR] [--jobs N] [--top K] [--finalists F] [--no-screening]
         [--dry-run] [--tp LIST] [--pp LIST] [--vp LIST] [--cp LIST] [--ep LIST] [--etp LIST]
         [--mbs LIST] [--recompute LIST] [--sharding LIST] [--dispatcher LIST]
                                            every parallel layout of the scenario's model,
                                            cluster and global batch Megatron-Core accepts
                                            (LIST like 1,2,4 narrows a dimension; CP, ETP,
                                            recompute (none,selective,full), sharding
                                            (none,distributed_optimizer,fsdp) and dispatcher
                                            (nccl,deepep,hybridep) stay the scenario's unless
                                            listed); those the
                                            memory model refuses set aside, the others screened
                                            with few microbatches and the F best (default 8)
                                            run in full, as sweeps into DIR (default
                                            out/NAME-search): DIR/ranked.csv, refused.csv,
                                            best.json; --dry-run counts and estimates only;
                                            under mpirun, as sweep, the ranks share the runs
  schema [--markdown] [--out|-o FILE]       the scenario file's JSON Schema (draft 2020-12), for
                                            editors and Python tools (docs/scenario.schema.json
                                            is this), or with --markdown its reference, a table
                                            per section (docs/scenario-reference.md); printed,
                                            or written to FILE
  presets [--json]                          list models, topologies, GPU kinds, software and
                                            strategies (--json: one JSON array of {kind, name,
                                            description})
  collective NAME --cluster PRESET|SCENARIO.json [-n GPUS] [-b MIN] [-e MAX] [-f FACTOR]
             [--network flow|analytic] [--algorithm A] [--profile PROFILE.json]
             [--compare LOG [--table T] [--gpus-per-node N]]
                                            what nccl-tests would measure (NAME: all_reduce,
                                            all_gather, reduce_scatter, alltoall, sendrecv),
                                            printed as nccl-tests prints it; LOG: its sizes
                                            and ranks simulated beside the measured busbw;
                                            A: all-reduce algorithm (default auto, as
                                            NCCL's tuner; ring as NCCL_ALGO=Ring)
  calibrate fit INPUT... --out PROFILE.json [--name NAME] [--collective C] [--gpus-per-node N]
                [--ranks N] [--nodes N] [--table T] [--gpu NAME] [--dtype-as FROM=TO]
                [--attention IMPL]
                                            fit a calibration profile from measurements JSON
                                            (calibrate/ binaries and calibrate/torch: GeMMs,
                                            attention, memory-bound kernels), nccl-tests logs
                                            (T: one result table of a log; N: ranks and nodes
                                            where the log does not list them) or GeMM tables
                                            (.csv); FROM=TO files one dtype's tables under
                                            another (fp32=tf32 for XLA's f32 matmuls); IMPL: the
                                            attention kernel whose timings make the tables when
                                            the inputs time several (cudnn-fused-sdpa, ...)
  import hf CONFIG.json [--name NAME] [-o MODEL.json]
                                            a Hugging Face config.json of an MoE model (Mixtral,
                                            Qwen2/3-MoE, DeepSeek-V2/V3, GPT-OSS, OLMoE) as a
                                            moesim model (for models/ or a scenario's "model"),
                                            printed or written to MODEL.json
  import megatron CONFIG.yaml --cluster PRESET [--model PRESET] [--software PRESET] [--name NAME]
                 [-o SCENARIO.json]         a Megatron-Bridge configuration (ConfigContainer
                                            YAML: a recipe's dry-run config, a run's
                                            run_config.yaml) as a scenario on PRESET: model,
                                            layout, batch, precision, recompute, CUDA graphs,
                                            dispatcher and overlaps; --model takes a model
                                            preset (the file's shape must agree), --software a
                                            Megatron-Bridge release's preset under its switches;
                                            what is approximated and what has no moesim key are
                                            listed on stderr
  import megatron --cluster PRESET [--model PRESET] [--software PRESET] [--name NAME]
                 [-o SCENARIO.json] -- ARGS...
                                            the same from a Megatron-LM training command line
                                            (ARGS: its --num-layers,
                                            --expert-model-parallel-size, ...)
  import torchtitan CONFIG.toml --cluster PRESET [--name NAME] [-o SCENARIO.json]
                                            a torchtitan training configuration
                                            (train_configs/*.toml) as a scenario on PRESET with
                                            the torchtitan software preset; the keys moesim has
                                            no counterpart for are listed on stderr

options (a command refuses those it does not take):
  --help        after a command: its usage alone (`moesim run --help`)
  --data DIR    run, validate, sweep, search, presets, collective: folder holding models/ and topologies/
                (default: $MOESIM_DATA or the source tree)
  --threads N   run, sweep: threads for the per-source routing draws of EP groups above 2048 GPUs
                (default: all cores; a sweep: its cores divided among its jobs); results do not
                depend on it
  --quiet       run, validate, sweep, search, calibrate fit: no summary on stdout (the exit code says)
)";

// Parses "0-7,16" into a per-GPU mask; a bad list is a usage error.
std::vector<bool> gpu_mask(const std::string& spec, std::uint32_t gpus) {
  std::vector<bool> mask(gpus, false);
  for (const std::string& item : cli::comma_items(spec)) {
    const std::size_t dash = item.find('-');
    try {
      std::size_t used = 0;
      const unsigned long first = std::stoul(item.substr(0, dash), &used);
      const unsigned long last = dash == std::string::npos ? first : std::stoul(item.substr(dash + 1));
      if (first > last || last >= gpus) throw std::out_of_range("range");
      for (unsigned long g = first; g <= last; ++g) mask[g] = true;
    } catch (const std::logic_error&) {
      throw po::error(fmt::format("--trace-gpus: \"{}\" is not a GPU or range of GPUs 0-{}", item, gpus - 1));
    }
  }
  return mask;
}

// A positive count given on the command line: digits only (boost would read "-1" as 4294967295).
std::uint64_t count_flag(const std::string& flag, const std::string& text, std::uint64_t max, const std::string& example,
                         std::uint64_t min = 1) {
  const bool digits = !text.empty() && text.size() <= 15 &&
                      std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  const std::uint64_t v = digits ? std::stoull(text) : 0;
  if (!digits || v < min || v > max)
    throw InputError(flag, text, fmt::format("is not a whole number between {} and {}", min, max), fmt::format("give {}", example));
  return v;
}

// Plausibility warnings go to stderr (and into results.json): the run goes on.
void print_warnings(const std::vector<std::string>& warnings) {
  for (const auto& w : warnings) std::cerr << "moesim: warning: " << w << "\n";
}

// "iteration 3/10, 1.2M of 4.5M tasks, 350k tasks/s, simulated 2.41 s, about 12 s left"
std::string progress_line(const simulation::Progress& p) {
  const auto count = [](double n) {
    return n >= 1e6 ? fmt::format("{:.1f}M", n / 1e6) : n >= 1e3 ? fmt::format("{:.0f}k", n / 1e3) : fmt::format("{:.0f}", n);
  };
  const double rate = p.wall_seconds > 0 ? static_cast<double>(p.tasks_done) / p.wall_seconds : 0;
  // Tasks the whole run will have: those written, scaled by the iterations not written yet.
  const double total = p.iterations_written > 0 ? static_cast<double>(p.tasks_written) * p.iterations / p.iterations_written : 0;
  const std::string left = rate > 0 && total > 0 ? fmt::format(", about {:.0f} s left", (total - p.tasks_done) / rate) : "";
  return fmt::format("moesim: iteration {}/{}, {} of {} tasks, {} tasks/s, simulated {}{}", std::min(p.iterations_done + 1, p.iterations),
                     p.iterations, count(static_cast<double>(p.tasks_done)), count(total), count(rate),
                     format_time(p.simulated), left);
}

struct Common {
  fs::path scenario;
  fs::path out;
  fs::path data;
  bool trace = false;
  std::string trace_gpus;
  bool quiet = false;
  bool compare_uncalibrated = false;  // run: the scenario again without its calibration profile
  bool every_gpu = false;             // run: no replica simulated once for the others
  bool json = false;                  // presets: one JSON array instead of the listing
  bool markdown = false;              // schema: the Markdown reference instead of the JSON Schema
  std::optional<std::size_t> point;   // run: this point of the scenario's sweep grid instead of its base
  unsigned jobs = 0;
  unsigned threads = 0;  // 0: the default of the command
  std::optional<std::size_t> stop_after;
};

// The options each command takes: any other is refused, never accepted and ignored.
const std::map<std::string, std::set<std::string>> kCommandOptions{
    {"run", {"scenario", "out", "data", "trace", "trace-gpus", "quiet", "threads", "compare-uncalibrated", "point", "every-gpu"}},
    {"validate", {"scenario", "data", "quiet"}},
    {"sweep", {"scenario", "out", "data", "jobs", "threads", "quiet", "stop-after"}},
    {"presets", {"data", "json"}},
    {"schema", {"out", "markdown"}}};

Common parse(const std::string& command, const std::vector<std::string>& args, bool needs_scenario) {
  Common c;
  std::string data, out;
  po::options_description opts;
  std::string jobs, stop_after, threads, point;
  opts.add_options()("threads", po::value(&threads))("out,o", po::value(&out))("data", po::value(&data))("trace", po::bool_switch(&c.trace))("trace-gpus", po::value(&c.trace_gpus))("compare-uncalibrated", po::bool_switch(&c.compare_uncalibrated))("json", po::bool_switch(&c.json))("markdown", po::bool_switch(&c.markdown))("point", po::value(&point))("every-gpu", po::bool_switch(&c.every_gpu))(
      "quiet", po::bool_switch(&c.quiet))("jobs", po::value(&jobs))("stop-after", po::value(&stop_after))(
      "scenario", po::value<std::string>());
  po::positional_options_description pos;
  pos.add("scenario", 1);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
  po::notify(vm);
  for (const auto& [option, value] : vm)
    if (!value.defaulted() && !kCommandOptions.at(command).count(option))
      throw po::error(option == "scenario" ? fmt::format("{} takes no SCENARIO.json", command)
                                           : fmt::format("{} does not take --{}", command, option));
  if (needs_scenario && !vm.count("scenario")) throw po::error("missing SCENARIO.json");
  if (vm.count("scenario")) c.scenario = vm["scenario"].as<std::string>();
  if (vm.count("jobs")) c.jobs = static_cast<unsigned>(count_flag("--jobs", jobs, 1024, "worker threads, e.g. --jobs 2"));
  if (vm.count("threads"))
    c.threads = static_cast<unsigned>(count_flag("--threads", threads, 1024, "routing threads, e.g. --threads 2"));
  if (vm.count("stop-after")) c.stop_after = count_flag("--stop-after", stop_after, 1ULL << 40, "rows, e.g. --stop-after 3");
  if (vm.count("point"))
    c.point = count_flag("--point", point, 1ULL << 40, "the point column of the sweep's results.csv, e.g. --point 3", 0);
  if (vm.count("out") && out.empty()) throw InputError("--out", "\"\"", "is empty", "give a folder, e.g. --out out/run1");
  c.out = out;
  c.data = data.empty() ? scenario::Loader::default_data_dir() : fs::path(data);
  return c;
}

// The scenario `moesim run` runs: the file's, or with --point the scenario of that point of its
// sweep grid (numbered as the sweep's results.csv numbers them).
scenario::Scenario scenario_to_run(const scenario::Loader& loader, const Common& c) {
  if (!c.point) return loader.load(c.scenario);
  const std::string file = c.scenario.string();
  const schema::Json resolved = loader.resolve(loader.read_json(c.scenario), file);
  if (!resolved.contains("sweep"))
    throw InputError(file, "$.sweep", "is not set: --point runs one point of a sweep grid", "drop --point to run the scenario");
  sweep::SweepPlan plan = sweep::plan_sweep(loader, resolved, file, *c.point + 1);
  if (plan.scenarios.size() <= *c.point)
    throw InputError("--point", std::to_string(*c.point), fmt::format("is beyond the sweep's {} points", plan.scenarios.size()),
                     fmt::format("give a point from 0 to {}", plan.scenarios.size() - 1));
  scenario::Scenario sc = std::move(plan.scenarios[*c.point]);
  sc.name = fmt::format("{}-point{}", sc.name, *c.point);
  return sc;
}

int cmd_run(const Common& c) {
  if (c.threads) core::set_worker_threads(c.threads);
  scenario::Loader loader(c.data);
  scenario::Scenario sc = scenario_to_run(loader, c);
  print_warnings(sc.warnings);
  // --compare-uncalibrated: the same scenario without its profile, run after the calibrated one.
  std::optional<scenario::Scenario> uncalibrated;
  if (c.compare_uncalibrated) {
    if (!sc.calibration)
      throw InputError(c.scenario.string(), "$.calibration", "is not set: --compare-uncalibrated compares a calibrated run with it",
                       "add \"calibration\": \"calibrations/NAME.json\" to the scenario, or drop --compare-uncalibrated");
    uncalibrated = sc;
    uncalibrated->calibration.reset();
  }
  const fs::path out = c.out.empty() ? fs::path("out") / sc.name : c.out;
  const std::string out_flag = c.out.empty() ? "--out (default out/NAME)" : "--out";
  const auto t0 = std::chrono::steady_clock::now();
  simulation::Simulation sim(std::move(sc));
  std::vector<bool> traced;
  const auto gpus = static_cast<std::uint32_t>(sim.scenario().gpu_count());
  if (c.trace) {
    traced = c.trace_gpus.empty() ? std::vector<bool>() : gpu_mask(c.trace_gpus, gpus);
    if (c.trace_gpus.empty() && gpus > 512) {
      traced = gpu_mask("0-15", gpus);
      std::cerr << fmt::format("moesim: tracing GPUs 0-15 of {} (choose others with --trace-gpus)\n", gpus);
    }
  }
  sim.check();
  // The output folder is checked before the run: a bad --out costs no simulation. A run that then
  // fails removes the folder it created.
  const bool created = prepare_output_folder(out, out_flag);
  struct Cleanup {
    const fs::path& folder;
    bool armed;
    RemovedOnSignal on_signal;  // a run stopped by a signal removes it too
    ~Cleanup() {
      if (armed) remove_if_empty(folder);
    }
  } cleanup{out, created, created ? RemovedOnSignal(out, true) : RemovedOnSignal()};
  // Released (its file removed) before the cleanup above looks at the folder.
  const OutputFolderLock lock(out, out_flag, fmt::format("pid {}: moesim run {}", ::getpid(), c.scenario.string()));
  // A sweep's folder keeps its scenario beside its CSV for resuming: a run must not replace it.
  if (std::error_code ec; fs::exists(out / "results.csv", ec))
    throw InputError(out_flag, out.string(), "holds a sweep's results.csv, whose scenario.effective.json the run would replace",
                     "give another folder");
  simulation::RunOptions options;
  options.trace = c.trace;
  options.trace_gpus = traced;
  options.every_gpu = c.every_gpu;
  // Progress on stderr when a person watches it (a terminal), never in a pipe or a log.
  bool shown = false;
  if (isatty(STDERR_FILENO) && !c.quiet) {
    if (const char* every = std::getenv("MOESIM_PROGRESS_SECONDS"); every && std::atof(every) > 0)
      options.progress_seconds = std::atof(every);
    options.progress = [&](const simulation::Progress& p) {
      shown = true;
      std::cerr << "\r" << progress_line(p) << "   " << std::flush;
    };
  }
  try {
    sim.run(options);
  } catch (const InfeasibleError& e) {  // found while simulating: which scenario
    if (shown) std::cerr << "\n";
    throw InfeasibleError(fmt::format("{}: {}", c.scenario.string(), e.what()));
  }
  if (shown) std::cerr << "\n";
  std::optional<simulation::Simulation> plain;
  if (uncalibrated) {
    plain.emplace(std::move(*uncalibrated));
    plain->check();
    plain->run();
    sim.attach_uncalibrated(*plain);
  }
  // Warnings the run found (a calibration entry that replaced nothing), after the scenario's.
  const auto& found = sim.results().warnings;
  print_warnings({found.begin() + static_cast<std::ptrdiff_t>(std::min(found.size(), sim.scenario().warnings.size())), found.end()});
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Everything succeeded: now write, results.json last (its presence says the run is complete).
  // All three or none: results.json is never beside another run's trace or scenario.
  std::vector<std::pair<fs::path, OutputWriter>> files;
  if (c.trace) files.emplace_back(out / "trace.json", [&](std::ostream& o) { sim.write_trace(o); });
  const std::string effective = sim.scenario().effective.dump(2) + "\n";
  files.emplace_back(out / "scenario.effective.json", [&](std::ostream& o) { o << effective; });
  files.emplace_back(out / "results.json", [&](std::ostream& o) { report::write_json(o, sim.results()); });
  write_files(files);
  cleanup.armed = false;
  if (!c.quiet) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::cout << sim.summary(wall, static_cast<double>(usage.ru_maxrss) * 1024);  // Linux: ru_maxrss in KiB
    if (plain)
      std::cout << fmt::format("moesim: {} with its profile and without (--compare-uncalibrated)\n", sim.scenario().name)
                << report::compare_headlines(report::headline(sim.results()), sim.results().uncalibrated);
    std::cout << fmt::format("  {:<26} {}\n", "results", out.string());
  }
  return 0;
}

int cmd_validate(const Common& c) {
  scenario::Loader loader(c.data);
  const sweep::Validation v = sweep::validate(loader, loader.read_json(c.scenario), c.scenario.string());
  print_warnings(v.warnings);
  if (c.quiet) return 0;
  const std::string run = fmt::format("run memory about {} ({})", format_bytes(v.host_bytes), v.host_terms);
  // The peak a run reaches: what this process holds already (binary, libraries, data) and the run's.
  const std::string host = fmt::format("{}; peak memory about {} with the {} moesim holds", run,
                                       format_bytes(v.host_bytes + v.resident_bytes), format_bytes(v.resident_bytes));
  std::cout << fmt::format("{}: valid ({} on {} GPUs, {}, {} iteration(s); peak GPU memory {}, {})\n", c.scenario.string(),
                           v.strategy, v.gpus, v.model, v.iterations, format_bytes(v.peak_gpu_bytes), host);
  std::cout << fmt::format("  time: about {} of CPU for its {:.3g} tasks ({})\n", simulation::format_cpu_time(v.cpu_seconds), v.tasks,
                           simulation::cpu_time_caveat());
  for (const auto& r : v.refused) std::cout << "  " << r << "\n";
  if (v.refused_count > v.refused.size())
    std::cout << fmt::format("  ... and {} more points would be refused\n", v.refused_count - v.refused.size());
  if (v.warnings_unlisted) std::cout << fmt::format("  ... and {} more warnings of sweep points\n", v.warnings_unlisted);
  if (v.points)
    std::cout << fmt::format("  sweep: {} points, {} can run, {} would be refused; planning and checking the grid took "
                             "{:.1f} s and about {} here (a sweep pays it before its first point)\n",
                             v.points, v.points - v.refused_count, v.refused_count, v.plan_seconds, format_bytes(v.plan_bytes));
  if (v.points)
    std::cout << fmt::format("  sweep time: its {} points that can run take about {} of CPU in all, spread over the sweep's jobs\n",
                             v.points - v.refused_count, simulation::format_cpu_time(v.sweep_cpu_seconds));
  return 0;
}

// Under mpirun every rank runs this; rank 0 alone prints (warnings, progress, summary) and writes.
int cmd_sweep(const std::vector<std::string>& args) {
  const auto ranks = sweep::mpi_ranks_from_launcher();
  try {
    const bool leads = !ranks || ranks->rank() == 0;
    Common c;
    std::optional<scenario::Loader> loader;
    schema::Json resolved;
    std::string name;
    std::vector<std::string> warnings;
    // Every rank reads the same command line and scenario; a failure on any stops them all.
    sweep::agree(
        ranks.get(),
        [&] {
          c = parse("sweep", args, true);
          loader.emplace(c.data);
          resolved = loader->resolve(loader->read_json(c.scenario), c.scenario.string());
          const scenario::Scenario base = loader->build(resolved, c.scenario.string());
          name = base.name;
          warnings = base.warnings;
        },
        [](const std::exception_ptr& e) { return cli::exit_code(e, false); });
    if (leads) print_warnings(warnings);
    const fs::path out = c.out.empty() ? fs::path("out") / name : c.out;
    // Points already run in parallel (all cores' jobs unless --jobs says): each gets the cores
    // its job leaves, unless --threads says.
    core::set_worker_threads(c.threads ? c.threads : sweep::threads_per_job(c.jobs));
    sweep::SweepOptions opt;
    opt.csv = out / "results.csv";
    opt.jobs = c.jobs;
    opt.stop_after = c.stop_after;
    opt.progress = leads && isatty(STDERR_FILENO) && !c.quiet;
    opt.effective = out / "scenario.effective.json";
    const auto outcome = sweep::run_sweep(*loader, resolved, c.scenario.string(), opt, ranks.get());
    if (leads && !c.quiet)
      std::cout << fmt::format("sweep {}: {} points, {} already done, {} run now ({} refused){}{}; results in {}\n", name,
                               outcome.points, outcome.already_done, outcome.ran, outcome.refused,
                               outcome.stopped_early ? ", stopped early (run again to resume)" : "",
                               ranks ? fmt::format(", {} ranks", ranks->size()) : "", opt.csv.string())
                << std::flush;  // before the ranks are finalised, as below
    if (outcome.stopped_early) return 3;
    // A grid none of whose points could run answered nothing: said, and exit 2 as a scenario that
    // cannot run (the CSV keeps every point's reason).
    if (outcome.ran > 0 && outcome.already_done == 0 && outcome.refused == outcome.ran) {
      if (leads)
        std::cerr << fmt::format("moesim: cannot run: every point of the sweep was refused; {} gives each point's reason "
                                 "(`moesim validate {}` checks the grid without running it)\n",
                                 opt.csv.string(), c.scenario.string())
                  << std::flush;
      return 2;
    }
    return 0;
  } catch (...) {
    // Said here, before the ranks are finalised: the first rank to leave the job makes the
    // launcher end the others, and what they had yet to print with them.
    return cli::exit_code(std::current_exception(), true);
  }
}

int cmd_presets(const Common& c) {
  scenario::Loader loader(c.data);
  if (c.json) {
    schema::Json all = schema::Json::array();
    for (const auto& p : loader.presets()) all.push_back({{"kind", p.kind}, {"name", p.name}, {"description", p.description}});
    std::cout << all.dump(1) << "\n";
    return 0;
  }
  std::string kind;
  for (const auto& p : loader.presets()) {
    if (p.kind != kind) {
      const std::string plural = p.kind == "topology"   ? "topologies"
                                 : p.kind == "strategy" ? "strategies"
                                 : p.kind == "software" ? "software"
                                                        : p.kind + "s";
      std::cout << (kind.empty() ? "" : "\n") << plural << ":\n";
    }
    kind = p.kind;
    std::cout << fmt::format("  {:<22} {}\n", p.name, p.description);
  }
  return 0;
}

int cmd_schema(const Common& c) {
  const std::string text =
      c.markdown ? scenario::scenario_reference_markdown() : scenario::scenario_json_schema().dump(2) + "\n";
  if (c.out.empty())
    std::cout << text;
  else
    write_file(c.out, text);
  return 0;
}

// The usage of one command: its lines of kUsage (from the line that names it to the next
// command's) and the options it takes (those whose first line names it); empty for a command
// kUsage does not name.
std::string command_usage(const std::string& command) {
  std::string block, options;
  bool in_options = false, taking = false;
  std::istringstream usage(kUsage);
  for (std::string line; std::getline(usage, line);) {
    if (line.starts_with("options")) {
      in_options = true, taking = false;
      continue;
    }
    if (in_options) {
      if (line.starts_with("  --"))
        taking = line.find(command) != std::string::npos || line.find("after a command") != std::string::npos;
      if (taking) options += line + "\n";
      continue;
    }
    // A command's first line: two spaces, then its name.
    if (line.size() > 2 && line.starts_with("  ") && std::islower(static_cast<unsigned char>(line[2])))
      taking = line.substr(2, command.size() + 1) == command + " " || line.substr(2) == command;
    if (taking && !line.empty()) block += line + "\n";
  }
  if (block.empty()) return {};
  return "usage: moesim " + block.substr(2) + (options.empty() ? "" : "\noptions:\n" + options);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  install_output_signal_handlers();
  if (args.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (args[0] == "--version") {
    std::cout << "moesim 0.1.0\npresets: " << scenario::Loader::default_data_dir().string() << "\n";
    return 0;
  }
  const std::string command = args[0];
  args.erase(args.begin());
  // `moesim COMMAND --help`: that command's usage alone, whatever else is on the line.
  if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    const std::string usage = command_usage(command);
    if (!usage.empty()) {
      std::cout << usage;
      return 0;
    }
  }
  try {
    if (command == "run") return cmd_run(parse(command, args, true));
    if (command == "validate") return cmd_validate(parse(command, args, true));
    if (command == "sweep") return cmd_sweep(args);
    if (command == "presets") return cmd_presets(parse(command, args, false));
    if (command == "schema") return cmd_schema(parse(command, args, false));
    if (command == "calibrate") return cli::cmd_calibrate(args);
    if (command == "collective") return cli::cmd_collective(args);
    if (command == "import") return cli::cmd_import(args);
    if (command == "search") return cli::cmd_search(args);
    std::cerr << "moesim: error: unknown command \"" << command
              << "\"; use run, validate, sweep, search, presets, schema, collective, calibrate or import (`moesim --help` shows the usage)\n";
    return 2;
  } catch (...) {
    return cli::exit_code(std::current_exception(), true);
  }
}

