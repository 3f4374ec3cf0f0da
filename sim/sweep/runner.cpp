#include "sim/sweep/runner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/sweep/grid.hpp"

namespace moesim::sweep {

namespace fs = std::filesystem;
using schema::Json;

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

std::string value_text(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

const std::vector<std::string> kMetricColumns{
    "status",           "iteration_time_ms",        "tokens_per_second", "compute_ms",
    "communication_ms", "exposed_communication_ms", "all_to_all_ms",     "all_gather_ms",
    "all_reduce_ms",    "dropped_fraction",         "peak_memory_bytes"};

std::string metric_row(const simulation::Simulation& sim, std::size_t levels) {
  const Json r = sim.results();
  const double iters = static_cast<double>(r.at("iterations").size());
  const auto coll = [&](const char* k) {
    const Json& c = r.at("network").at("collectives");
    return c.contains(k) ? fmt::format("{}", c.at(k).at("time_ms").get<double>() / iters) : std::string("0");
  };
  std::string row = fmt::format("ok,{},{},{},{},{},{},{},{},{},{}", r.at("iteration_time_ms").get<double>(),
                                r.at("tokens_per_second").get<double>(), r.at("compute_ms").at("mean").get<double>() / iters,
                                r.at("communication_ms").at("mean").get<double>() / iters,
                                r.at("exposed_communication_ms").at("mean").get<double>() / iters, coll("all_to_all"),
                                coll("all_gather"), coll("all_reduce"), r.at("tokens").at("dropped_fraction").get<double>(),
                                r.at("memory").at("peak_bytes").get<double>());
  const Json& by_level = r.at("network").at("bytes_by_level");
  std::size_t l = 0;
  for (auto it = by_level.begin(); it != by_level.end(); ++it, ++l) row += fmt::format(",{}", it.value().get<double>() / iters);
  for (; l < levels; ++l) row += ",";
  return row + ",";
}

}  // namespace

SweepOutcome run_sweep(const scenario::Loader& loader, const Json& resolved, const std::string& file,
                       const SweepOptions& options) {
  const scenario::Scenario base = loader.build(resolved, file);
  if (!base.effective.contains("sweep"))
    throw InputError(file, "$.sweep", "the scenario has no sweep block",
                     "add \"sweep\": {\"axes\": [{\"path\": \"model.experts\", \"values\": [8, 16]}]} or use `moesim run`");
  const std::vector<Axis> axes = parse_axes(base.effective.at("sweep"));
  const std::size_t points = point_count(axes);

  // Validate every point before running any.
  Json plain = resolved;
  plain.erase("sweep");
  std::vector<scenario::Scenario> scenarios;
  scenarios.reserve(points);
  std::size_t levels = 0;
  for (std::size_t p = 0; p < points; ++p) {
    Json doc = plain;
    const auto values = point_values(axes, p);
    for (std::size_t a = 0; a < axes.size(); ++a)
      set_path(doc, axes[a].path, values[a], file, fmt::format("$.sweep.axes[{}].path", a));
    scenarios.push_back(loader.build(doc, file));
    levels = std::max(levels, scenarios.back().levels.size());
  }

  std::string header = "point";
  for (const auto& a : axes) header += "," + csv_field(a.path);
  for (const auto& c : kMetricColumns) header += "," + c;
  for (std::size_t l = 0; l < levels; ++l) header += fmt::format(",bytes_level{}", l);
  header += ",note";

  // Resume: keep the complete rows of an earlier run of the same sweep.
  SweepOutcome outcome;
  outcome.points = points;
  std::size_t done = 0;
  if (fs::exists(options.csv)) {
    std::ifstream in(options.csv, std::ios::binary);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    const std::size_t first = text.find('\n');
    if (first == std::string::npos || text.substr(0, first) != header)
      throw InputError(options.csv.string(), "", "the file exists but was not written by this sweep (its header differs)",
                       "remove it, or choose another --out folder");
    std::size_t pos = first + 1, keep = pos;
    while (pos < text.size()) {
      const std::size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // a partial row from a crash: dropped below
      if (text.substr(pos, text.find(',', pos) - pos) != std::to_string(done))
        throw InputError(options.csv.string(), "", fmt::format("row {} is out of order", done + 1),
                         "remove the file and run the sweep again");
      ++done;
      pos = nl + 1;
      keep = pos;
    }
    if (keep < text.size()) fs::resize_file(options.csv, keep);
  } else {
    fs::create_directories(options.csv.parent_path().empty() ? fs::path(".") : options.csv.parent_path());
    std::ofstream(options.csv, std::ios::binary) << header << '\n';
  }
  outcome.already_done = done;

  std::FILE* out = std::fopen(options.csv.string().c_str(), "ab");
  if (!out) throw InputError(options.csv.string(), "", "cannot append to the file", "check that the folder is writable");

  const unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  std::mutex mu;
  std::vector<std::optional<std::string>> rows(points);
  std::atomic<std::size_t> next{done};
  std::atomic<bool> stop{false};
  std::size_t committed = done;
  const std::size_t limit = options.stop_after ? std::min(points, done + *options.stop_after) : points;
  const auto started = std::chrono::steady_clock::now();

  const auto worker = [&] {
    for (;;) {
      const std::size_t p = next.fetch_add(1);
      if (p >= limit || stop) return;
      std::string row = std::to_string(p);
      for (const Json& v : point_values(axes, p)) row += "," + csv_field(value_text(v));
      try {
        simulation::Simulation sim(scenarios[p]);
        sim.run();
        row += "," + metric_row(sim, levels);
      } catch (const InfeasibleError& e) {
        row += ",infeasible" + std::string(kMetricColumns.size() - 1 + levels, ',') + "," + csv_field(e.what());
        std::lock_guard lock(mu);
        ++outcome.refused;
      } catch (const InputError& e) {
        row += ",invalid" + std::string(kMetricColumns.size() - 1 + levels, ',') + "," + csv_field(e.what());
        std::lock_guard lock(mu);
        ++outcome.refused;
      }
      std::lock_guard lock(mu);
      rows[p] = std::move(row);
      // Commit every row that is ready, in point order.
      while (committed < limit && rows[committed]) {
        std::fputs(rows[committed]->c_str(), out);
        std::fputc('\n', out);
        std::fflush(out);
        rows[committed].reset();
        ++committed;
        ++outcome.ran;
        if (options.progress) {
          const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          const double per = elapsed / static_cast<double>(committed - done);
          std::fprintf(stderr, "\rsweep: %zu/%zu points, %.0f s left   ", committed, points,
                       per * static_cast<double>(points - committed));
        }
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 0; j < std::min<std::size_t>(jobs, std::max<std::size_t>(1, limit - done)); ++j) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  std::fclose(out);
  if (options.progress) std::fputc('\n', stderr);
  outcome.stopped_early = committed < points;
  return outcome;
}

}  // namespace moesim::sweep
