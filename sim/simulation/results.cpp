// results.json and the terminal summary of a simulation.
#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "sim/simulation/simulation.hpp"

namespace moesim::simulation {

using schema::Json;

namespace {

double ms(Time t) { return time_to_ms(t); }

struct Stats {
  double mean = 0, min = 0, max = 0;
};

template <typename F>
Stats stats_over(const std::vector<report::GpuMetrics>& gpus, F value) {
  Stats s;
  if (gpus.empty()) return s;
  s.min = s.max = value(gpus[0]);
  double sum = 0;
  for (const auto& g : gpus) {
    const double v = value(g);
    sum += v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  s.mean = sum / static_cast<double>(gpus.size());
  return s;
}

Json to_json(const Stats& s) { return Json{{"mean", s.mean}, {"min", s.min}, {"max", s.max}}; }

}  // namespace

Json Simulation::results() const {
  const auto& m = *metrics_;
  const auto& sc = scenario_;
  Json r;
  r["moesim"] = {{"version", "0.1.0"}, {"results_format", 1}};
  r["scenario"] = sc.name;
  Json strategy = {{"name", sc.strategy->name}};
  strategy.update(strategy_->describe(context()));
  if (!alternatives_.empty()) {
    // Each alternative simulated on its own: was the strategy's choice the fastest of them?
    strategy["simulated_alternatives"] = alternatives_json();
    const AlternativeRun* fastest = nullptr;
    for (const auto& a : alternatives_)
      if (a.iteration_time && (!fastest || *a.iteration_time < *fastest->iteration_time)) fastest = &a;
    if (fastest && strategy.contains("choice")) {
      strategy["fastest_alternative"] = fastest->label;
      strategy["choice_was_fastest"] = strategy["choice"] == fastest->label || *fastest->iteration_time == mean_iteration_time();
    }
  }
  r["strategy"] = strategy;
  Json levels = Json::array();
  for (int l = 0; l < topology_.level_count(); ++l) {
    const auto& lv = topology_.levels()[l];
    const auto& ab = network_->params().level_default(l);
    levels.push_back({{"name", lv.name}, {"count", lv.count}, {"fabric", std::string(cluster::to_string(lv.fabric))},
                      {"bandwidth", format_bandwidth(lv.bandwidth)}, {"alpha_us", static_cast<double>(ab.alpha) / 1e6},
                      {"beta_ps_per_byte", ab.beta}});
  }
  Json kinds = Json::array();
  for (const auto& k : topology_.kinds()) kinds.push_back(k.key);
  r["cluster"] = {{"gpus", topology_.gpu_count()}, {"gpu_kinds", kinds}, {"levels", levels}};
  // Which calibration entries set the models' parameters, which did not and where defaults stayed.
  r["calibration"] = calibration_report_.is_null() ? Json{{"profile", nullptr}, {"note", "no profile: topology and GPU catalogue defaults"}}
                                                   : calibration_report_;

  r["iteration_time_ms"] = ms(mean_iteration_time());
  r["iteration_time_ps"] = mean_iteration_time();
  r["tokens_per_second"] = tokens_per_second();
  Json its = Json::array();
  const auto& totals = strategy_->totals();
  for (std::size_t i = 0; i < m.iteration_time.size(); ++i)
    its.push_back({{"index", i},
                   {"time_ms", ms(m.iteration_time[i])},
                   {"time_ps", m.iteration_time[i]},
                   {"end_ms", ms(m.iteration_end[i])},
                   {"dropped_token_copies", i < totals.dropped_per_iteration.size() ? totals.dropped_per_iteration[i] : 0.0}});
  r["iterations"] = its;

  // Per-GPU times are per iteration (the run's total divided by its iterations).
  const double iters = static_cast<double>(std::max<std::size_t>(1, m.iteration_time.size()));
  const auto per_it = [iters](Time t) { return ms(t) / iters; };
  Json busy = Json::object();
  for (int k = 0; k < engine::kWorkKinds; ++k) {
    const Stats s = stats_over(m.gpus, [&](const report::GpuMetrics& g) { return per_it(g.busy[k]); });
    if (s.max > 0) busy[std::string(engine::to_string(static_cast<engine::WorkKind>(k)))] = to_json(s);
  }
  r["busy_ms"] = busy;
  r["compute_ms"] = to_json(stats_over(m.gpus, [&](const auto& g) { return per_it(g.compute); }));
  r["communication_ms"] = to_json(stats_over(m.gpus, [&](const auto& g) { return per_it(g.communication); }));
  r["exposed_communication_ms"] = to_json(stats_over(m.gpus, [&](const auto& g) { return per_it(g.exposed_communication); }));
  r["collective_wait_ms"] = to_json(stats_over(m.gpus, [&](const auto& g) { return per_it(g.collective_wait); }));

  const auto& ns = network_stats_;
  Json by_level = Json::object();
  for (int l = 0; l < topology_.level_count(); ++l) by_level[topology_.levels()[l].name] = ns.bytes_by_level[l] / iters;
  Json colls = Json::object();
  for (std::size_t k = 0; k < ns.by_kind.size(); ++k) {
    const auto& ks = ns.by_kind[k];
    if (ks.collectives == 0) continue;
    colls[std::string(network::to_string(static_cast<network::CollectiveKind>(k)))] = {
        {"count", ks.collectives / iters}, {"gpu_pairs", ks.pairs / iters}, {"bytes", ks.bytes / iters},
        {"summed_duration_ms", ms(ks.time) / iters}};
  }
  r["network"] = {{"model", executor_->model_name()}, {"bytes_by_level", by_level}, {"collectives", colls}};
  if (!ns.link_levels.empty()) {
    const auto link_json = [&](const network::LinkStat& l) {
      return Json{{"name", l.name},
                  {"bytes", l.bytes / iters},
                  {"busy_ms", ms(l.busy) / iters},
                  {"peak_utilization", l.peak_utilization}};
    };
    Json levels_json = Json::object(), hottest = Json::array();
    for (const auto& l : ns.link_levels) {
      Json j = link_json(l);
      j.erase("name");
      j["busy_ms_busiest_link"] = j["busy_ms"];
      j.erase("busy_ms");
      levels_json[l.name] = j;
    }
    for (const auto& l : ns.hottest_links) hottest.push_back(link_json(l));
    r["network"]["links"] = {{"by_level", levels_json}, {"hottest", hottest}};
  }

  r["tokens"] = {{"routed_copies", totals.routed_token_copies},
                 {"dropped_copies", totals.dropped_token_copies},
                 {"dropped_fraction", totals.routed_token_copies > 0 ? totals.dropped_token_copies / totals.routed_token_copies : 0.0}};

  std::size_t peak_gpu = 0;
  for (std::size_t g = 0; g < memory_.size(); ++g)
    if (memory_[g].total() > memory_[peak_gpu].total()) peak_gpu = g;
  const auto& f = memory_[peak_gpu];
  Json per_gpu_mem = Json::array();
  for (const auto& x : memory_) per_gpu_mem.push_back(x.total());
  r["memory"] = {{"peak_gpu", peak_gpu},
                 {"peak_bytes", f.total()},
                 {"capacity_bytes", topology_.gpu(static_cast<std::uint32_t>(peak_gpu)).memory_bytes},
                 {"breakdown_bytes",
                  {{"weights", f.weights}, {"gradients", f.gradients}, {"optimizer", f.optimizer}, {"activations", f.activations}}},
                 {"per_gpu_bytes", per_gpu_mem}};

  Json compute_ms = Json::array(), comm_ms = Json::array(), exposed_ms = Json::array();
  for (const auto& g : m.gpus) {
    compute_ms.push_back(per_it(g.compute));
    comm_ms.push_back(per_it(g.communication));
    exposed_ms.push_back(per_it(g.exposed_communication));
  }
  r["per_gpu"] = {{"compute_ms", compute_ms}, {"communication_ms", comm_ms}, {"exposed_communication_ms", exposed_ms}};
  r["engine"] = {{"tasks", engine_->tasks().size()},
                 {"collectives", engine_->collectives().size()},
                 {"events", engine_->events_processed()},
                 {"makespan_ps", engine_->makespan()}};
  return r;
}

std::string Simulation::summary(double wall_seconds) const {
  const auto& m = *metrics_;
  const auto& sc = scenario_;
  std::string out;
  const auto row = [&out](std::string_view key, const std::string& value) { out += fmt::format("  {:<26} {}\n", key, value); };
  std::string kinds;
  for (const auto& k : topology_.kinds()) kinds += (kinds.empty() ? "" : " + ") + k.key;
  out += fmt::format("moesim: {} — {} on {} GPUs ({}), {}\n", sc.name, sc.strategy->name, topology_.gpu_count(), kinds,
                     sc.model.name);
  row("iteration time", fmt::format("{} (mean of {})", format_time(mean_iteration_time()), m.iteration_time.size()));
  if (!alternatives_.empty()) {
    std::string alts;
    for (const auto& a : alternatives_)
      alts += fmt::format("{}{} {}", alts.empty() ? "" : ", ", a.label, a.iteration_time ? format_time(*a.iteration_time) : "refused");
    const Json d = strategy_->describe(context());
    row("strategy choice", fmt::format("{} (simulated: {})", d.value("choice", std::string("?")), alts));
  }
  row("throughput", fmt::format("{:.0f} tokens/s", tokens_per_second()));
  const auto mean = [&](auto f) { return stats_over(m.gpus, f).mean; };
  const double iters = static_cast<double>(std::max<std::size_t>(1, m.iteration_time.size()));
  row("compute busy / iteration", fmt::format("{:.3f} ms (mean over GPUs)", mean([](const auto& g) { return ms(g.compute); }) / iters));
  row("communication / iteration", fmt::format("{:.3f} ms", mean([](const auto& g) { return ms(g.communication); }) / iters));
  row("exposed communication", fmt::format("{:.3f} ms", mean([](const auto& g) { return ms(g.exposed_communication); }) / iters));
  const auto& ns = network_stats_;
  std::string levels;
  for (int l = 0; l < topology_.level_count(); ++l)
    levels += fmt::format("{}{}: {}", l ? ", " : "", topology_.levels()[l].name, format_bytes(ns.bytes_by_level[l] / iters));
  row("bytes / iteration by level", levels);
  if (!ns.hottest_links.empty()) {
    const auto& h = ns.hottest_links.front();
    row("hottest link", fmt::format("{}: {} / iteration, busy {:.3f} ms, peak {:.0f} % ({} model)", h.name,
                                    format_bytes(h.bytes / iters), time_to_ms(h.busy) / iters, 100 * h.peak_utilization,
                                    executor_->model_name()));
  }
  const auto& totals = strategy_->totals();
  row("dropped tokens", fmt::format("{:.2f} %", totals.routed_token_copies > 0 ? 100 * totals.dropped_token_copies / totals.routed_token_copies : 0.0));
  std::size_t peak = 0;
  for (std::size_t g = 0; g < memory_.size(); ++g)
    if (memory_[g].total() > memory_[peak].total()) peak = g;
  row("peak memory", fmt::format("{} of {} (GPU {})", format_bytes(memory_[peak].total()),
                                 format_bytes(topology_.gpu(static_cast<std::uint32_t>(peak)).memory_bytes), peak));
  row("simulated", fmt::format("{} tasks, {} events in {:.3f} s", engine_->tasks().size(), engine_->events_processed(), wall_seconds));
  return out;
}

}  // namespace moesim::simulation
