#include "sim/sweep/runner.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "sim/core/error.hpp"
#include "sim/core/input_file.hpp"
#include "sim/core/output_file.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/sweep/grid.hpp"

namespace moesim::sweep {

namespace fs = std::filesystem;
using schema::Json;

namespace {

std::string value_text(const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// An earlier run's CSV or effective scenario (a large sweep's CSV is megabytes).
std::string read_text(const fs::path& p) { return read_input_file(p, kMaxInputBytes * 16); }

}  // namespace

SweepPlan plan_sweep(const scenario::Loader& loader, const Json& resolved, const std::string& file, std::size_t limit) {
  const scenario::Scenario base = loader.build(resolved, file);
  if (!base.effective.contains("sweep"))
    throw InputError(file, "$.sweep", "the scenario has no sweep block",
                     "add \"sweep\": {\"axes\": [{\"path\": \"model.experts\", \"values\": [8, 16]}]} or use `moesim run`");
  const std::vector<Axis> axes = parse_axes(base.effective.at("sweep"), file);
  const std::size_t points = std::min(point_count(axes), limit);
  SweepPlan plan;
  plan.base_effective = base.effective;
  plan.axis_paths = column_paths(axes);
  Json plain = resolved;
  plain.erase("sweep");
  plan.scenarios.reserve(points);
  for (std::size_t p = 0; p < points; ++p) {
    Json doc = plain;
    const auto index = point_indices(axes, p);
    for (std::size_t a = 0; a < axes.size(); ++a)
      for (std::size_t k = 0; k < axes[a].paths.size(); ++k)
        set_path(doc, axes[a].paths[k], axes[a].value(index[a], k), file, axes[a].path_where(a, k));
    try {
      plan.scenarios.push_back(loader.build(doc, file));
    } catch (const InputError& e) {
      // Blame the axis value that lands on the offending path (the path itself or inside it),
      // else name the whole point.
      const auto lands = [&](const std::string& path) {
        const std::string target = "$." + path;
        return e.path().rfind(target, 0) == 0 &&
               (e.path().size() == target.size() || e.path()[target.size()] == '.' || e.path()[target.size()] == '[');
      };
      for (std::size_t a = 0; a < axes.size(); ++a) {
        const Axis& axis = axes[a];
        for (std::size_t k = 0; k < axis.paths.size(); ++k) {
          if (!lands(axis.paths[k])) continue;
          std::string with;  // the values that move with it on a zipped axis
          for (std::size_t o = 0; o < axis.paths.size(); ++o)
            if (o != k) with += fmt::format("{}{} = {}", with.empty() ? " (with " : ", ", axis.paths[o], axis.value(index[a], o).dump());
          if (!with.empty()) with += ")";
          throw InputError(e.file(), axis.value_where(a, index[a], k),
                           fmt::format("sets {} to {}{}: {}", axis.paths[k], axis.value(index[a], k).dump(), with, e.problem()),
                           e.fix());
        }
      }
      const auto values = point_values(axes, p);
      std::string where;
      for (std::size_t c = 0; c < values.size(); ++c)
        where += fmt::format("{}{} = {}", c ? ", " : "", plan.axis_paths[c], values[c].dump());
      throw InputError(e.file(), e.path(), fmt::format("{} (at sweep point {}: {})", e.problem(), p, where), e.fix());
    }
    plan.values.push_back(point_values(axes, p));
  }
  return plan;
}

SweepOutcome run_sweep(const scenario::Loader& loader, const Json& resolved, const std::string& file,
                       const SweepOptions& options) {
  SweepPlan plan = plan_sweep(loader, resolved, file);
  const std::size_t points = plan.scenarios.size();
  std::size_t levels = 0;
  for (const auto& s : plan.scenarios) levels = std::max(levels, s.levels.size());
  auto& scenarios = plan.scenarios;

  const std::vector<std::string> metric_columns = report::csv_metric_columns(levels);
  std::string header = "point";
  for (const auto& a : plan.axis_paths) header += "," + report::csv_field(a);
  for (const auto& c : metric_columns) header += "," + c;
  header += ",note";

  // A row starts with its point number and axis values.
  const auto row_prefix = [&](std::size_t p) {
    std::string row = std::to_string(p);
    for (const Json& v : plan.values[p]) row += "," + report::csv_field(value_text(v));
    return row + ",";
  };
  // Resume: keep the complete rows of an earlier run of the same sweep.
  SweepOutcome outcome;
  outcome.points = points;
  std::size_t done = 0;
  const std::string effective = plan.base_effective.dump(2) + "\n";
  // Nothing is written before every point validated and the folder proved writable.
  prepare_output_folder(options.csv.parent_path().empty() ? fs::path(".") : options.csv.parent_path(), "--out");
  std::error_code exists_error;
  if (fs::exists(options.csv, exists_error)) {
    const std::string text = read_text(options.csv);
    const std::size_t first = text.find('\n');
    if (first == std::string::npos || text.substr(0, first) != header)
      throw InputError(options.csv.string(), "", "the file exists but was not written by this sweep (its header differs)",
                       "remove it, or choose another --out folder");
    if (!options.effective.empty() && (!fs::exists(options.effective, exists_error) || read_text(options.effective) != effective))
      throw InputError(options.csv.string(), "",
                       fmt::format("the file was written for another scenario ({} differs or is missing)",
                                   options.effective.filename().string()),
                       "remove the folder, or choose another --out folder");

    std::size_t pos = first + 1, keep = pos;
    while (pos < text.size()) {
      const std::size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) break;  // a partial row from a crash: dropped below
      if (done >= points || text.compare(pos, row_prefix(done).size(), row_prefix(done)) != 0)
        throw InputError(options.csv.string(), "",
                         fmt::format("row {} does not belong to point {} of this sweep (other axis values, or out of order)",
                                     done + 1, done),
                         "remove the file, or choose another --out folder");
      ++done;
      pos = nl + 1;
      keep = pos;
    }
    if (keep < text.size()) {
      std::error_code ec;
      fs::resize_file(options.csv, keep, ec);
      if (ec) throw OutputError(fmt::format("cannot cut the partial last row of {}: {}", options.csv.string(), ec.message()));
    }
  } else {
    // Both written whole or not at all: a CSV exists only with its header and its scenario beside it.
    if (!options.effective.empty()) write_file(options.effective, effective);
    write_file(options.csv, header + "\n");
  }
  outcome.already_done = done;

  std::FILE* out = std::fopen(options.csv.string().c_str(), "ab");
  if (!out) throw OutputError(fmt::format("cannot append to {}: {}", options.csv.string(), std::strerror(errno)));
  // Bytes of complete rows: a failed append is cut back to it, so no partial row stays behind.
  std::error_code size_error;
  std::uintmax_t good_size = fs::file_size(options.csv, size_error);
  std::optional<std::string> write_failure;

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
      std::string row = row_prefix(p);
      // A point that cannot run, for whatever reason, is a row saying why; the sweep goes on.
      const auto refused = [&](const char* status, const std::string& why) {
        row += status + std::string(metric_columns.size() - 1, ',') + "," + report::csv_field(why);
        std::lock_guard lock(mu);
        ++outcome.refused;
      };
      try {
        simulation::Simulation sim(scenarios[p]);
        sim.run();
        row += report::csv_metric_values(sim.results(), levels) + ",";
      } catch (const InfeasibleError& e) {
        refused("infeasible", e.what());
      } catch (const InputError& e) {
        refused("invalid", e.what());
      } catch (const std::bad_alloc&) {
        refused("failed", "out of memory (the point needs more memory than the process may use beside the other jobs; "
                          "fewer --jobs leave it more)");
      } catch (const std::exception& e) {
        refused("failed", fmt::format("internal error: {}", e.what()));
      }
      std::lock_guard lock(mu);
      rows[p] = std::move(row);
      // Commit every row that is ready, in point order.
      while (committed < limit && rows[committed] && !write_failure) {
        const std::string& line = *rows[committed];
        errno = 0;
        if (std::fputs(line.c_str(), out) == EOF || std::fputc('\n', out) == EOF || std::fflush(out) != 0) {
          write_failure = fmt::format("cannot write {}: {}", options.csv.string(), std::strerror(errno ? errno : EIO));
          stop = true;
          break;
        }
        good_size += line.size() + 1;
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
  if (std::fclose(out) != 0 && !write_failure)
    write_failure = fmt::format("cannot write {}: {}", options.csv.string(), std::strerror(errno));
  if (write_failure) {
    // Cut any partial row (a resume would drop it too, but the file stays a valid CSV).
    fs::resize_file(options.csv, good_size, size_error);
    if (options.progress) std::fputc('\n', stderr);
    throw OutputError(*write_failure);
  }
  if (options.progress) std::fputc('\n', stderr);
  outcome.stopped_early = committed < points;
  return outcome;
}

}  // namespace moesim::sweep
