#include "sim/report/results.hpp"

#include <algorithm>
#include <tuple>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/core/heap.hpp"

namespace moesim::report {

using schema::Json;

namespace {

double ms(Time t) { return time_to_ms(t); }

struct Stats {
  double mean = 0, min = 0, max = 0;
};

template <typename F>
Stats stats_over(const std::vector<GpuMetrics>& gpus, F value) {
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

double iterations_of(const Results& r) { return static_cast<double>(std::max<std::size_t>(1, r.iterations.size())); }

// Per-GPU busy time of one kind, per iteration (ms), over GPUs.
Stats busy(const Results& r, engine::WorkKind kind) {
  const double iters = iterations_of(r);
  return stats_over(r.metrics.gpus, [&](const GpuMetrics& g) { return ms(g.busy[static_cast<int>(kind)]) / iters; });
}

template <typename F>
Stats per_iteration(const Results& r, F time_of) {
  const double iters = iterations_of(r);
  return stats_over(r.metrics.gpus, [&](const GpuMetrics& g) { return ms(time_of(g)) / iters; });
}

}  // namespace

Time Results::mean_iteration_time() const {
  Time sum = 0;
  for (const auto& it : iterations) sum += it.time;
  return iterations.empty() ? 0 : sum / static_cast<Time>(iterations.size());
}

double Results::tokens_per_second() const {
  double tokens = 0;
  for (const auto& it : iterations) tokens += it.tokens;
  if (!iterations.empty()) tokens /= static_cast<double>(iterations.size());
  const double seconds = time_to_seconds(mean_iteration_time());
  return seconds > 0 ? tokens / seconds : 0.0;
}

double Results::routed_copies() const {
  double sum = 0;
  for (const auto& it : iterations) sum += it.routed_copies;
  return sum;
}

double Results::dropped_copies() const {
  double sum = 0;
  for (const auto& it : iterations) sum += it.dropped_copies;
  return sum;
}

double Results::dropped_fraction() const { return routed_copies() > 0 ? dropped_copies() / routed_copies() : 0.0; }

double Results::memory_estimate(std::uint32_t gpus, std::uint32_t hosts) {
  // metrics.gpus and memory assigned whole; kind_of_gpu and memory_capacity grown by push_back.
  const double g = gpus;
  return g * (sizeof(GpuMetrics) + sizeof(workload::MemoryFootprint)) +
         grown_capacity(g) * (sizeof(std::uint16_t) + sizeof(double)) + hosts * sizeof(double);
}

std::size_t Results::peak_memory_gpu() const {
  std::size_t peak = 0;
  for (std::size_t g = 0; g < memory.size(); ++g)
    if (memory[g].total() > memory[peak].total()) peak = g;
  return peak;
}

std::vector<double> Results::compute_utilisation_by_kind() const {
  std::vector<double> sum(gpu_kinds.size(), 0.0), count(gpu_kinds.size(), 0.0);
  const double period = static_cast<double>(mean_iteration_time()) * static_cast<double>(std::max<std::size_t>(1, iterations.size()));
  for (std::size_t g = 0; g < metrics.gpus.size() && g < kind_of_gpu.size(); ++g) {
    sum[kind_of_gpu[g]] += static_cast<double>(metrics.gpus[g].compute);
    count[kind_of_gpu[g]] += 1;
  }
  for (std::size_t k = 0; k < sum.size(); ++k) sum[k] = count[k] > 0 && period > 0 ? sum[k] / count[k] / period : 0.0;
  return sum;
}

double Results::measured_kernel_share() const {
  double costed = 0, measured = 0;
  for (const auto& k : kernel_sources) {
    costed += static_cast<double>(k.costed);
    measured += static_cast<double>(k.measured);
  }
  return costed > 0 ? measured / costed : 0.0;
}

std::string Results::choice() const {
  return strategy_details.contains("choice") ? strategy_details.at("choice").get<std::string>() : std::string();
}

namespace {

Json iteration_json(const Results& r, std::size_t i) {
  const auto& it = r.iterations[i];
  Json e = Json::object();
  e["index"] = i;
  e["time_ms"] = ms(it.time);
  e["time_ps"] = it.time;
  e["end_ms"] = ms(it.end);
  e["tokens"] = it.tokens;
  e["routed_token_copies"] = it.routed_copies;
  e["dropped_token_copies"] = it.dropped_copies;
  if (it.routed_copies > 0) e["survival"] = 1 - it.dropped_copies / it.routed_copies;
  if (it.replicas) {
    e["migrated_bytes"] = it.migrated_bytes;
    Json layers = Json::array();
    for (std::size_t l = 0; l < it.replicas->size(); ++l) {
      if ((*it.replicas)[l].empty()) continue;
      layers.push_back({{"layer", l}, {"replicas", (*it.replicas)[l]},
                        {"routed", l < it.expert_routed.size() ? Json(it.expert_routed[l]) : Json::array()}});
    }
    e["layers"] = std::move(layers);
  }
  return e;
}

// Everything but the per-iteration entries.
Json skeleton(const Results& r);

}  // namespace

Json to_json(const Results& r) {
  Json j = skeleton(r);
  Json& its = j["iterations"];
  for (std::size_t i = 0; i < r.iterations.size(); ++i) its.push_back(iteration_json(r, i));
  return j;
}

void write_json(std::ostream& out, const Results& r) {
  // The skeleton's dump with the series spliced in where its empty array stands, each entry
  // dumped alone and indented as it sits inside the document (two levels deep).
  const std::string text = skeleton(r).dump(2);
  const std::string empty = "\n  \"iterations\": []";
  const std::size_t at = text.find(empty);
  if (at == std::string::npos || r.iterations.empty()) {
    out << text << "\n";
    return;
  }
  out.write(text.data(), static_cast<std::streamsize>(at));
  out << "\n  \"iterations\": [";
  for (std::size_t i = 0; i < r.iterations.size(); ++i) {
    const std::string entry = iteration_json(r, i).dump(2);
    out << (i ? ",\n    " : "\n    ");
    for (char c : entry) {
      out << c;
      if (c == '\n') out << "    ";
    }
  }
  out << "\n  ]";
  out << text.substr(at + empty.size()) << "\n";
}

namespace {

Json skeleton(const Results& r) {
  Json j;
  j["moesim"] = {{"version", "0.1.0"}, {"results_format", 1}};
  j["scenario"] = r.scenario;
  j["warnings"] = r.warnings;
  Json strategy = {{"name", r.strategy}};
  strategy.update(r.strategy_details);
  if (!r.alternatives.empty()) {
    // Each alternative simulated on its own: was the strategy's choice the fastest of them?
    Json alts = Json::object();
    const AlternativeResult* fastest = nullptr;
    for (const auto& a : r.alternatives) {
      alts[a.label] = a.iteration_time ? Json{{"iteration_time_ms", time_to_ms(*a.iteration_time)}} : Json{{"refused", a.refused}};
      if (a.iteration_time && (!fastest || *a.iteration_time < *fastest->iteration_time)) fastest = &a;
    }
    strategy["simulated_alternatives"] = alts;
    if (fastest && strategy.contains("choice")) {
      strategy["fastest_alternative"] = fastest->label;
      strategy["choice_was_fastest"] = strategy["choice"] == fastest->label || *fastest->iteration_time == r.mean_iteration_time();
    }
  }
  j["strategy"] = strategy;
  Json levels = Json::array();
  for (const auto& l : r.levels)
    levels.push_back({{"name", l.name}, {"count", l.count}, {"fabric", l.fabric}, {"bandwidth", l.bandwidth},
                      {"alpha_us", static_cast<double>(l.alpha) / 1e6}, {"beta_ps_per_byte", l.beta}});
  j["cluster"] = {{"gpus", r.gpus}, {"gpu_kinds", r.gpu_kinds}, {"levels", levels}};
  // Which calibration entries set the models' parameters, which did not and where defaults stayed.
  if (!r.uncalibrated.is_null()) j["uncalibrated"] = r.uncalibrated;
  j["calibration"] = r.calibration.is_null() ? Json{{"profile", nullptr}, {"note", "no profile: topology and GPU catalogue defaults"}}
                                             : r.calibration;

  j["software"] = {{"name", r.software.empty() ? Json(nullptr) : Json(r.software)}, {"host_modelled", r.host_modelled}};

  j["iteration_time_ms"] = ms(r.mean_iteration_time());
  j["iteration_time_ps"] = r.mean_iteration_time();
  j["tokens_per_second"] = r.tokens_per_second();
  j["iterations"] = Json::array();  // the per-iteration entries: to_json, write_json

  // Per-GPU times are per iteration (the run's total divided by its iterations).
  const double iters = iterations_of(r);
  Json busy_json = Json::object();
  for (int k = 0; k < engine::kWorkKinds; ++k) {
    const Stats s = busy(r, static_cast<engine::WorkKind>(k));
    if (s.max > 0) busy_json[std::string(engine::to_string(static_cast<engine::WorkKind>(k)))] = to_json(s);
  }
  j["busy_ms"] = busy_json;
  j["compute_ms"] = to_json(per_iteration(r, [](const GpuMetrics& g) { return g.compute; }));
  j["communication_ms"] = to_json(per_iteration(r, [](const GpuMetrics& g) { return g.communication; }));
  j["exposed_communication_ms"] = to_json(per_iteration(r, [](const GpuMetrics& g) { return g.exposed_communication; }));
  j["collective_wait_ms"] = to_json(per_iteration(r, [](const GpuMetrics& g) { return g.collective_wait; }));
  // Host-bound time: only where the software section models the host's launches.
  if (const Stats lw = per_iteration(r, [](const GpuMetrics& g) { return g.launch_wait; }); lw.max > 0)
    j["launch_wait_ms"] = to_json(lw);
  Json utilisation = Json::object();
  const auto by_kind = r.compute_utilisation_by_kind();
  for (std::size_t k = 0; k < by_kind.size(); ++k) utilisation[r.gpu_kinds[k]] = by_kind[k];
  j["compute_utilisation_by_kind"] = utilisation;
  Json sources = Json::object();
  for (std::size_t k = 0; k < r.kernel_sources.size() && k < r.gpu_kinds.size(); ++k) {
    const auto& ks = r.kernel_sources[k];
    Json families = Json::object();
    for (const auto& [family, source] : ks.families) families[family] = source;
    sources[r.gpu_kinds[k]] = {{"measured_share", ks.costed > 0 ? static_cast<double>(ks.measured) / static_cast<double>(ks.costed) : 0.0},
                               {"costed_ps", ks.costed},
                               {"measured_ps", ks.measured},
                               {"families", families}};
  }
  j["kernel_sources"] = {{"measured_share", r.measured_kernel_share()}, {"by_gpu_kind", sources}};

  const auto& ns = r.network;
  Json by_level = Json::object();
  for (std::size_t l = 0; l < r.levels.size(); ++l) by_level[r.levels[l].name] = ns.bytes_by_level[l] / iters;
  Json colls = Json::object();
  for (std::size_t k = 0; k < ns.by_kind.size(); ++k) {
    const auto& ks = ns.by_kind[k];
    if (ks.collectives == 0) continue;
    colls[std::string(network::to_string(static_cast<network::CollectiveKind>(k)))] = {
        {"count", ks.collectives / iters}, {"gpu_pairs", ks.pairs / iters}, {"bytes", ks.bytes / iters},
        {"summed_duration_ms", ms(ks.time) / iters}};
  }
  j["network"] = {{"model", r.network_model}, {"bytes_by_level", by_level}, {"collectives", colls}};
  if (!ns.link_levels.empty()) {
    const auto link_json = [&](const network::LinkStat& l) {
      return Json{{"name", l.name}, {"bytes", l.bytes / iters}, {"busy_ms", ms(l.busy) / iters}, {"peak_utilization", l.peak_utilization}};
    };
    Json levels_json = Json::object(), hottest = Json::array();
    for (const auto& l : ns.link_levels) {
      Json lj = link_json(l);
      lj.erase("name");
      lj["busy_ms_busiest_link"] = lj["busy_ms"];
      lj.erase("busy_ms");
      levels_json[l.name] = lj;
    }
    for (const auto& l : ns.hottest_links) hottest.push_back(link_json(l));
    j["network"]["links"] = {{"by_level", levels_json}, {"hottest", hottest}};
  }

  j["tokens"] = {{"routed_copies", r.routed_copies()}, {"dropped_copies", r.dropped_copies()}, {"dropped_fraction", r.dropped_fraction()}};

  const std::size_t peak_gpu = r.peak_memory_gpu();
  const auto& f = r.memory[peak_gpu];
  Json per_gpu_mem = Json::array();
  for (const auto& x : r.memory) per_gpu_mem.push_back(x.total());
  j["memory"] = {{"peak_gpu", peak_gpu},
                 {"peak_bytes", f.total()},
                 {"capacity_bytes", r.memory_capacity[peak_gpu]},
                 {"breakdown_bytes",
                  {{"weights", f.weights}, {"gradients", f.gradients}, {"optimizer", f.optimizer}, {"activations", f.activations},
                   {"buffers", f.buffers}}},
                 {"per_gpu_bytes", per_gpu_mem}};
  if (!r.host_memory.empty())
    j["memory"]["hosts"] = {{"peak_bytes", *std::max_element(r.host_memory.begin(), r.host_memory.end())},
                            {"capacity_bytes", r.host_memory_capacity},
                            {"per_host_bytes", r.host_memory}};

  Json compute_ms = Json::array(), comm_ms = Json::array(), exposed_ms = Json::array();
  for (const auto& g : r.metrics.gpus) {
    compute_ms.push_back(ms(g.compute) / iters);
    comm_ms.push_back(ms(g.communication) / iters);
    exposed_ms.push_back(ms(g.exposed_communication) / iters);
  }
  j["per_gpu"] = {{"compute_ms", compute_ms}, {"communication_ms", comm_ms}, {"exposed_communication_ms", exposed_ms}};
  j["engine"] = {{"tasks", r.engine.tasks},
                 {"collectives", r.engine.collectives},
                 {"events", r.engine.events},
                 {"makespan_ps", r.engine.makespan},
                 {"simulated_gpus", r.engine.simulated_gpus},
                 {"replicas_simulated_once", r.engine.replicas}};
  if (r.engine.replicas == 1) j["engine"]["every_gpu_simulated_because"] = r.engine.full_because;
  return j;
}

}  // namespace

Json headline(const Results& r) {
  const double iters = iterations_of(r);
  const auto mean = [&](auto f) { return stats_over(r.metrics.gpus, f).mean / iters; };
  return {{"iteration_time_ms", ms(r.mean_iteration_time())},
          {"tokens_per_second", r.tokens_per_second()},
          {"compute_ms", mean([](const auto& g) { return ms(g.compute); })},
          {"communication_ms", mean([](const auto& g) { return ms(g.communication); })},
          {"exposed_communication_ms", mean([](const auto& g) { return ms(g.exposed_communication); })}};
}

std::string compare_headlines(const Json& calibrated, const Json& uncalibrated) {
  std::string out = fmt::format("  {:<26} {:>14} {:>14} {:>9}\n", "per iteration", "calibrated", "uncalibrated", "change");
  // Key, label, unit and decimals.
  for (const auto& [key, label, unit, digits] : {std::tuple{"iteration_time_ms", "iteration time", "ms", 3},
                                                 std::tuple{"tokens_per_second", "throughput", "/s", 0},
                                                 std::tuple{"compute_ms", "compute busy", "ms", 3},
                                                 std::tuple{"communication_ms", "communication", "ms", 3},
                                                 std::tuple{"exposed_communication_ms", "exposed communication", "ms", 3}}) {
    const double a = calibrated.at(key).get<double>(), b = uncalibrated.at(key).get<double>();
    out += fmt::format("  {:<26} {:>11.{}f} {:<2} {:>11.{}f} {:<2} {:>8}\n", label, a, digits, unit, b, digits, unit,
                       b > 0 ? fmt::format("{:+.1f} %", 100 * (a / b - 1)) : std::string("-"));
  }
  return out;
}

std::string summary(const Results& r, double wall_seconds, double peak_rss_bytes) {
  std::string out;
  const auto row = [&out](std::string_view key, const std::string& value) { out += fmt::format("  {:<26} {}\n", key, value); };
  out += fmt::format("moesim: {} — {} on {} GPUs ({}), {}\n", r.scenario, r.strategy, r.gpus, fmt::join(r.gpu_kinds, " + "), r.model);
  row("iteration time", fmt::format("{} (mean of {})", format_time(r.mean_iteration_time()), r.iterations.size()));
  if (!r.alternatives.empty()) {
    std::string alts;
    for (const auto& a : r.alternatives)
      alts += fmt::format("{}{} {}", alts.empty() ? "" : ", ", a.label, a.iteration_time ? format_time(*a.iteration_time) : "refused");
    row("strategy choice", fmt::format("{} (simulated: {})", r.choice().empty() ? "?" : r.choice(), alts));
  }
  row("throughput", fmt::format("{:.0f} tokens/s", r.tokens_per_second()));
  const double iters = iterations_of(r);
  const auto mean = [&](auto f) { return stats_over(r.metrics.gpus, f).mean; };
  row("compute busy / iteration", fmt::format("{:.3f} ms (mean over GPUs)", mean([](const auto& g) { return ms(g.compute); }) / iters));
  if (r.gpu_kinds.size() > 1) {
    const auto by_kind = r.compute_utilisation_by_kind();
    std::string u;
    for (std::size_t k = 0; k < by_kind.size(); ++k) u += fmt::format("{}{} {:.1f} %", k ? ", " : "", r.gpu_kinds[k], 100 * by_kind[k]);
    row("compute utilisation", u);
  }
  row("communication / iteration", fmt::format("{:.3f} ms", mean([](const auto& g) { return ms(g.communication); }) / iters));
  row("exposed communication", fmt::format("{:.3f} ms", mean([](const auto& g) { return ms(g.exposed_communication); }) / iters));
  if (const double lw = mean([](const auto& g) { return ms(g.launch_wait); }) / iters; lw > 0)
    row("waiting for launches", fmt::format("{:.3f} ms (mean over GPUs: kernels ready, not yet issued by the host)", lw));
  const auto& ns = r.network;
  std::string levels;
  for (std::size_t l = 0; l < r.levels.size(); ++l)
    levels += fmt::format("{}{}: {}", l ? ", " : "", r.levels[l].name, format_bytes(ns.bytes_by_level[l] / iters));
  row("bytes / iteration by level", levels);
  if (!ns.hottest_links.empty()) {
    const auto& h = ns.hottest_links.front();
    row("hottest link", fmt::format("{}: {} / iteration, busy {:.3f} ms, peak {:.0f} % ({} model)", h.name,
                                    format_bytes(h.bytes / iters), time_to_ms(h.busy) / iters, 100 * h.peak_utilization,
                                    r.network_model));
  }
  row("dropped tokens", fmt::format("{:.2f} %", 100 * r.dropped_fraction()));
  if (const auto& cal = r.calibration; cal.contains("profile") && !cal.at("profile").is_null()) {
    // What the profile changed in this run: the collective entries that costed its steps, those
    // that replaced nothing, and the GPU kinds whose GeMM or attention came from its tables.
    int applied = 0, idle = 0;
    std::uint64_t steps = 0;
    if (cal.contains("collectives"))
      for (const auto& u : cal.at("collectives").at("used")) {
        const auto n = u.value("applied_to_steps", std::uint64_t{0});
        if (n > 0) ++applied;
        else if (!u.value("read_by_strategy", false)) ++idle;  // a named group's entry: its strategy reads it
        steps += n;
      }
    int tables = 0;
    if (cal.contains("compute"))
      for (const auto& [kind, parts] : cal.at("compute").items())
        for (const auto& [part, what] : parts.items())
          tables += what.is_string() && !what.get<std::string>().starts_with("roofline default");
    row("calibration", fmt::format("{}: {} collective entr{} costed {} steps, {} replaced nothing; {} kernel table{} used",
                                   cal.at("profile").get<std::string>(), applied, applied == 1 ? "y" : "ies", steps, idle, tables,
                                   tables == 1 ? "" : "s"));
  }
  // What trains the model, and whether its host (and with it the GPUs' clock under their load) was
  // simulated: without it the iteration is the GPUs' alone at their kernels' measured rates, which
  // small kernels (small micro-batches, fine-grained experts) and long busy stretches make too short.
  row("software", r.host_modelled ? fmt::format("{}: the host's launches simulated, and the GPUs' clock under their load (catalogue sustained_clock)",
                                                r.software.empty() ? "custom" : r.software)
                                  : std::string("none: the host is not modelled (every kernel starts when its GPU can run it, "
                                                "at its measured rate); name a preset of software/ to simulate it"));
  // Which kernels measured tables costed, and which the model did.
  {
    std::vector<std::string> measured;
    for (const auto& ks : r.kernel_sources)
      for (const auto& [family, source] : ks.families)
        if (source.starts_with("measured table") && std::find(measured.begin(), measured.end(), family) == measured.end())
          measured.push_back(family);
    row("kernels measured", measured.empty()
                                ? std::string("none: every kernel costed by the model (results.json kernel_sources)")
                                : fmt::format("{:.1f} % of the kernels' time from measured tables ({}); the rest by the model",
                                              100 * r.measured_kernel_share(), fmt::join(measured, ", ")));
  }
  const std::size_t peak = r.peak_memory_gpu();
  row("peak memory", fmt::format("{} of {} (GPU {})", format_bytes(r.memory[peak].total()), format_bytes(r.memory_capacity[peak]), peak));
  row("simulated", fmt::format("{} tasks, {} events in {:.3f} s{}", r.engine.tasks, r.engine.events, wall_seconds,
                               peak_rss_bytes > 0 ? fmt::format(", peak RSS {}", format_bytes(peak_rss_bytes)) : ""));
  if (r.engine.replicas > 1)
    row("symmetry", fmt::format("{} identical replicas of {} GPUs, each simulated once (--every-gpu: all {})",
                                r.engine.replicas, r.engine.simulated_gpus, r.gpus));
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

std::vector<std::string> csv_metric_columns(std::size_t levels) {
  std::vector<std::string> c{"status",           "iteration_time_ms",        "tokens_per_second", "compute_ms",
                             "communication_ms", "exposed_communication_ms", "all_to_all_busy_ms", "all_gather_busy_ms",
                             "all_reduce_busy_ms", "all_to_all_bytes",       "dropped_fraction",  "peak_memory_bytes",
                             "strategy_choice",
                             "compute_utilisation_by_kind"};
  for (std::size_t l = 0; l < levels; ++l) c.push_back(fmt::format("bytes_level{}", l));
  return c;
}

std::string csv_metric_values(const Results& r, std::size_t levels) {
  // Times are per iteration, averaged over GPUs (results.json's "busy_ms").
  const auto busy_mean = [&](engine::WorkKind k) {
    const Stats s = busy(r, k);
    return s.max > 0 ? fmt::format("{}", s.mean) : std::string("0");
  };
  const std::string choice = csv_field(r.choice());
  const double iters = iterations_of(r);
  // What the all-to-alls (the MoE dispatch and combine, Parm's gathers) put on the network.
  const double a2a_bytes = r.network.by_kind[static_cast<std::size_t>(network::CollectiveKind::AllToAll)].bytes / iters;
  std::string row = fmt::format(
      "ok,{},{},{},{},{},{},{},{},{},{},{},{}", ms(r.mean_iteration_time()), r.tokens_per_second(),
      per_iteration(r, [](const GpuMetrics& g) { return g.compute; }).mean,
      per_iteration(r, [](const GpuMetrics& g) { return g.communication; }).mean,
      per_iteration(r, [](const GpuMetrics& g) { return g.exposed_communication; }).mean, busy_mean(engine::WorkKind::AllToAll),
      busy_mean(engine::WorkKind::AllGather), busy_mean(engine::WorkKind::AllReduce), a2a_bytes, r.dropped_fraction(),
      r.memory[r.peak_memory_gpu()].total(), choice);
  // "kind:share" per GPU kind, ';'-separated (one field whatever the number of kinds).
  const auto by_kind = r.compute_utilisation_by_kind();
  std::string utilisation;
  for (std::size_t k = 0; k < by_kind.size(); ++k) utilisation += fmt::format("{}{}:{:.6g}", k ? ";" : "", r.gpu_kinds[k], by_kind[k]);
  row += "," + csv_field(utilisation);
  for (std::size_t l = 0; l < levels; ++l)
    row += l < r.network.bytes_by_level.size() ? fmt::format(",{}", r.network.bytes_by_level[l] / iters) : std::string(",");
  return row;
}

}  // namespace moesim::report
