// `moesim search`: see search_command.hpp.
#include "sim/cli/search_command.hpp"
#include "sim/cli/comma_list.hpp"
#include "sim/cli/exit_code.hpp"

#include <boost/program_options.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fmt/ranges.h>
#include <optional>
#include <fmt/format.h>
#include <iostream>
#include <unistd.h>

#include "sim/core/error.hpp"
#include "sim/core/output_file.hpp"
#include "sim/core/parallel.hpp"
#include "sim/parallel/layout.hpp"
#include "sim/search/search.hpp"
#include "sim/simulation/time_estimate.hpp"
#include "sim/sweep/mpi_ranks.hpp"
#include "sim/sweep/runner.hpp"
#include "sim/workload/model_shape.hpp"

namespace moesim::cli {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

// "1,2,4" as numbers, each at least 1.
std::vector<int> int_list(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (const std::string& item : comma_items(text)) {
    if (item.empty() || item.size() > 6 || item.find_first_not_of("0123456789") != std::string::npos || std::stoi(item) < 1)
      throw InputError(flag, text, fmt::format("has \"{}\", not a whole number of at least 1", item),
                       fmt::format("give a comma-separated list, e.g. {} 1,2,4", flag));
    out.push_back(std::stoi(item));
  }
  return out;
}

// "none,full" as names, each one of `allowed`.
std::vector<std::string> name_list(const std::string& flag, const std::string& text, const std::vector<std::string>& allowed) {
  const std::vector<std::string> items = comma_items(text);
  for (const std::string& item : items)
    if (std::find(allowed.begin(), allowed.end(), item) == allowed.end())
      throw InputError(flag, text, fmt::format("has \"{}\"", item),
                       fmt::format("give {}, e.g. {} {},{}", fmt::join(allowed, ", "), flag, allowed.front(), allowed.back()));
  return items;
}

// The layout as the terminal shows it: the dimensions the scenario or the search varied.
std::string layout_text(const search::Layout& l) {
  std::string s = fmt::format("tp {} pp {} vp {}", l.tp, l.pp, l.vp);
  if (l.cp > 1) s += fmt::format(" cp {}", l.cp);
  s += fmt::format(" ep {}", l.ep);
  if (l.etp > 1) s += fmt::format(" etp {}", l.etp);
  s += fmt::format(" mbs {} recompute {}", l.mbs, l.recompute);
  if (l.sharding != "none") s += " " + l.sharding;
  if (l.dispatcher != "nccl") s += " " + l.dispatcher;
  return s;
}

// Runs `doc`'s sweep into `dir` (its results.csv, resumable) on every rank and returns its rows on
// rank 0, which writes the folder (none on the others).
std::vector<search::Figures> run_rung(const scenario::Loader& loader, const schema::Json& doc, const fs::path& dir, unsigned jobs,
                                      bool progress, std::size_t points, sweep::Ranks* ranks) {
  const bool leads = !ranks || ranks->rank() == 0;
  const std::string file = (dir / "search.json").string();
  sweep::agree(
      ranks,
      [&] {
        if (!leads) return;
        prepare_output_folder(dir, "--out");
        write_file(file, doc.dump(2) + "\n");
      },
      [](const std::exception_ptr& e) { return exit_code(e, false); });
  sweep::SweepOptions opt;
  opt.csv = dir / "results.csv";
  opt.effective = dir / "scenario.effective.json";
  opt.jobs = jobs;
  opt.progress = progress && leads;
  sweep::run_sweep(loader, loader.resolve(doc, file), file, opt, ranks);
  return leads ? search::read_rows(opt.csv, points) : std::vector<search::Figures>{};
}

// Rank 0's finalists to every rank (they run the second rung with it).
std::vector<std::size_t> shared(std::vector<std::size_t> finalists, sweep::Ranks* ranks) {
  if (!ranks) return finalists;
  if (ranks->rank() == 0) {
    const std::string message = fmt::format("{}", fmt::join(finalists, ","));
    for (int r = 1; r < ranks->size(); ++r) ranks->send(r, message);
    return finalists;
  }
  finalists.clear();
  for (const std::string& item : comma_items(ranks->receive(0).second))
    if (!item.empty()) finalists.push_back(std::stoul(item));
  return finalists;
}

int search_on(const std::vector<std::string>& args, sweep::Ranks* ranks);

}  // namespace

// Under mpirun every rank runs the rungs' points; rank 0 alone prints, writes and chooses the finalists.
int cmd_search(const std::vector<std::string>& args) {
  const auto ranks = sweep::mpi_ranks_from_launcher();
  try {
    return search_on(args, ranks.get());
  } catch (...) {
    // Said here, before the ranks are finalised (as `moesim sweep` does).
    return exit_code(std::current_exception(), true);
  }
}

namespace {

int search_on(const std::vector<std::string>& args, sweep::Ranks* ranks) {
  const bool leads = !ranks || ranks->rank() == 0;
  std::string scenario, out, data, jobs, top = "10", finalists = "8", tp, pp, vp, cp, ep, etp, mbs, recompute, sharding, dispatcher;
  bool dry_run = false, quiet = false, no_screening = false;
  po::options_description opts;
  opts.add_options()("scenario", po::value(&scenario))("out,o", po::value(&out))("data", po::value(&data))(
      "jobs", po::value(&jobs))("top", po::value(&top))("finalists", po::value(&finalists))("tp", po::value(&tp))(
      "pp", po::value(&pp))("vp", po::value(&vp))("cp", po::value(&cp))("ep", po::value(&ep))("etp", po::value(&etp))(
      "mbs", po::value(&mbs))("recompute", po::value(&recompute))("sharding", po::value(&sharding))(
      "dispatcher", po::value(&dispatcher))("dry-run", po::bool_switch(&dry_run))("no-screening", po::bool_switch(&no_screening))(
      "quiet", po::bool_switch(&quiet));
  unsigned job_count = 0;
  std::size_t shown = 0, finalist_count = 0;
  std::optional<scenario::Loader> loader;
  search::SearchPlan plan;
  // Every rank reads the same command line and scenario; a failure on any stops them all.
  sweep::agree(
      ranks,
      [&] {
        po::positional_options_description pos;
        pos.add("scenario", 1);
        po::variables_map vm;
        po::store(po::command_line_parser(args).options(opts).positional(pos).run(), vm);
        po::notify(vm);
        if (scenario.empty()) throw po::error("missing SCENARIO.json");
        job_count = jobs.empty() ? 0u : static_cast<unsigned>(int_list("--jobs", jobs).front());
        shown = static_cast<std::size_t>(int_list("--top", top).front());
        finalist_count = static_cast<std::size_t>(int_list("--finalists", finalists).front());
        search::SearchSpace space;
        if (!tp.empty()) space.tp = int_list("--tp", tp);
        if (!pp.empty()) space.pp = int_list("--pp", pp);
        if (!vp.empty()) space.vp = int_list("--vp", vp);
        if (!cp.empty()) space.cp = int_list("--cp", cp);
        if (!ep.empty()) space.ep = int_list("--ep", ep);
        if (!etp.empty()) space.etp = int_list("--etp", etp);
        if (!mbs.empty()) space.mbs = int_list("--mbs", mbs);
        if (!recompute.empty()) space.recompute = name_list("--recompute", recompute, names_of(workload::kRecomputeNames));
        if (!sharding.empty()) space.sharding = name_list("--sharding", sharding, names_of(parallel::kShardingNames));
        if (!dispatcher.empty()) space.dispatcher = name_list("--dispatcher", dispatcher, names_of(parallel::kEpBackendNames));
        loader.emplace(data.empty() ? scenario::Loader::default_data_dir() : fs::path(data));
        plan = search::plan_search(*loader, loader->read_json(scenario), scenario, space);
      },
      [](const std::exception_ptr& e) { return exit_code(e, false); });
  // What each way costs, from the runs' estimated CPU time (a run's tasks grow with its microbatches).
  const search::Screening screen = no_screening ? search::Screening{} : search::screening(plan);
  double full = 0, screened = 0, finals = 0;
  std::vector<double> sorted = plan.cpu_seconds;
  for (double c : plan.cpu_seconds) full += c;
  for (std::size_t p = 0; p < screen.layout.size(); ++p)
    screened += plan.cpu_seconds[screen.layout[p]] * screen.microbatches[p] / plan.microbatches[screen.layout[p]];
  std::sort(sorted.rbegin(), sorted.rend());
  for (std::size_t i = 0; i < std::min(finalist_count + 1, sorted.size()); ++i) finals += sorted[i];
  std::size_t memory = 0;
  for (const auto& r : plan.refused) memory += r.out_of_memory ? 1 : 0;
  if (leads && !quiet) {
    std::cout << fmt::format("search {}: {} layouts on {} GPUs; {} set aside before simulating ({} out of memory, {} refused by "
                             "the scenario or its strategy); {} can run\n",
                             plan.name, plan.enumerated, plan.gpus, plan.refused.size(), memory, plan.refused.size() - memory,
                             plan.fitting.size());
    std::cout << fmt::format("  {}: about {} of CPU ({})\n",
                             no_screening ? "every layout in full"
                                          : fmt::format("screening them with few microbatches, then the {} best in full", finalist_count),
                             simulation::format_cpu_time(no_screening ? full : screened + finals), simulation::cpu_time_caveat());
  }
  if (dry_run) return 0;

  const fs::path dir = out.empty() ? fs::path("out") / (plan.name + "-search") : fs::path(out);
  sweep::agree(
      ranks,
      [&] {
        if (!leads) return;
        prepare_output_folder(dir, "--out");  // not a file, `/` or a system folder; writable
        write_file(dir / "refused.csv", search::refused_csv(plan, {}));
      },
      [](const std::exception_ptr& e) { return exit_code(e, false); });
  core::set_worker_threads(sweep::threads_per_job(job_count));
  const bool progress = !quiet && isatty(STDERR_FILENO);
  std::vector<search::Figures> estimates;
  std::vector<std::size_t> finals_list;
  if (no_screening) {
    for (std::size_t i = 0; i < plan.fitting.size(); ++i) finals_list.push_back(i);
  } else {
    const auto rows = run_rung(*loader, search::sweep_of(plan, screen.layout, screen.global_batch, true), dir / "screening", job_count,
                               progress, screen.layout.size(), ranks);
    if (leads) {
      estimates = search::extrapolate(plan, screen, rows);
      finals_list = search::finalists(plan, estimates, finalist_count);
    }
    finals_list = shared(std::move(finals_list), ranks);
  }
  std::vector<int> batches(finals_list.size(), plan.global_batch);
  const auto final_rows =
      run_rung(*loader, search::sweep_of(plan, finals_list, batches, false), dir, job_count, progress, finals_list.size(), ranks);
  if (!leads) return 0;
  if (estimates.empty()) estimates = final_rows;
  const search::Ranking ranking = search::rank(plan, estimates, finals_list, final_rows);
  search::write_ranking(plan, ranking, scenario, dir);
  if (quiet) return ranking.ranked.empty() ? 2 : 0;

  std::cout << fmt::format("{:>4}  {:<66} {:>14} {:>11} {:>9}  {}\n", "rank", "layout", "tokens/s/GPU", "iteration", "peak GiB",
                           "simulated");
  double worst = 0;  // the screening's error on the finalists
  for (std::size_t i = 0; i < ranking.ranked.size(); ++i) {
    const auto& x = ranking.ranked[i];
    if (x.in_full && !no_screening)
      worst = std::max(worst, std::abs(x.screened_tokens_per_second / x.figures.tokens_per_second - 1));
    if (i >= shown && ranking.own != i) continue;
    std::cout << fmt::format("{:>4}  {:<66} {:>14.0f} {:>9.0f}ms {:>9.1f}  {}{}\n", i + 1, layout_text(plan.fitting[x.layout]),
                             x.figures.tokens_per_second / static_cast<double>(plan.gpus), x.figures.iteration_ms,
                             x.figures.peak_memory_bytes / (1024.0 * 1024 * 1024), x.in_full ? "in full" : "extrapolated",
                             ranking.own == i ? "  (the scenario's own)" : "");
  }
  if (plan.own && !ranking.own)
    std::cout << fmt::format("the scenario's own layout ({}) did not run; {} says why\n", layout_text(*plan.own),
                             (dir / "refused.csv").string());
  if (!no_screening)
    std::cout << fmt::format("the screening (one iteration, expected routing, few microbatches) was within {:.1f}% of the full "
                             "runs' throughput on the {} finalists\n",
                             100 * worst, finals_list.size());
  std::cout << fmt::format("{} layouts ranked in {}, {} set aside in {}, the fastest as a scenario in {}\n", ranking.ranked.size(),
                           (dir / "ranked.csv").string(), plan.refused.size() + ranking.failed.size(),
                           (dir / "refused.csv").string(), (dir / "best.json").string());
  if (ranking.ranked.empty()) {
    std::cerr << fmt::format("moesim: cannot run: no layout ran; {} gives each reason\n", (dir / "refused.csv").string());
    return 2;
  }
  return 0;
}

}  // namespace

}  // namespace moesim::cli
