#include "sim/sweep/runner.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

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

namespace {

// One point's CSV row; refused: the point could not run (infeasible, invalid or failed).
struct Row {
  std::string text;
  bool refused = false;
};

// The CSV of a planned sweep: its header, and one row per point.
class Table {
 public:
  explicit Table(SweepPlan plan) : plan_(std::move(plan)) {
    for (const auto& s : plan_.scenarios) levels_ = std::max(levels_, s.levels.size());
    metric_columns_ = report::csv_metric_columns(levels_);
    header_ = "point";
    for (const auto& a : plan_.axis_paths) header_ += "," + report::csv_field(a);
    for (const auto& c : metric_columns_) header_ += "," + c;
    header_ += ",note";
  }
  std::size_t points() const { return plan_.scenarios.size(); }
  const std::string& header() const { return header_; }
  const Json& base_effective() const { return plan_.base_effective; }

  // A row starts with its point number and axis values.
  std::string prefix(std::size_t p) const {
    std::string row = std::to_string(p);
    for (const Json& v : plan_.values[p]) row += "," + report::csv_field(value_text(v));
    return row + ",";
  }

  // Simulates point p. A point that cannot run, for whatever reason, is a row saying why.
  Row row(std::size_t p) const {
    Row row{prefix(p)};
    const auto refused = [&](const char* status, const std::string& why) {
      row.text += status + std::string(metric_columns_.size() - 1, ',') + "," + report::csv_field(why);
      row.refused = true;
    };
    try {
      simulation::Simulation sim(plan_.scenarios[p]);
      sim.run();
      row.text += report::csv_metric_values(sim.results(), levels_) + ",";
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
    return row;
  }

 private:
  SweepPlan plan_;
  std::size_t levels_ = 0;
  std::vector<std::string> metric_columns_;
  std::string header_;
};

// The CSV on disk: it keeps the complete rows of an earlier run of
// the same sweep, then appends each row, flushed, as soon as it and every row before it are here.
class Writer {
 public:
  Writer(const Table& table, const SweepOptions& options) : csv_(options.csv), progress_(options.progress) {
    const std::string& header = table.header();
    const std::size_t points = table.points();
    const std::string effective = table.base_effective().dump(2) + "\n";
    // Nothing is written before every point validated and the folder proved writable.
    prepare_output_folder(csv_.parent_path().empty() ? fs::path(".") : csv_.parent_path(), "--out");
    std::error_code exists_error;
    if (fs::exists(csv_, exists_error)) {
      const std::string text = read_text(csv_);
      const std::size_t first = text.find('\n');
      if (first == std::string::npos || text.substr(0, first) != header)
        throw InputError(csv_.string(), "", "the file exists but was not written by this sweep (its header differs)",
                         "remove it, or choose another --out folder");
      if (!options.effective.empty() &&
          (!fs::exists(options.effective, exists_error) || read_text(options.effective) != effective))
        throw InputError(csv_.string(), "",
                         fmt::format("the file was written for another scenario ({} differs or is missing)",
                                     options.effective.filename().string()),
                         "remove the folder, or choose another --out folder");

      std::size_t pos = first + 1, keep = pos;
      while (pos < text.size()) {
        const std::size_t nl = text.find('\n', pos);
        if (nl == std::string::npos) break;  // a partial row from a crash: dropped below
        if (done_ >= points || text.compare(pos, table.prefix(done_).size(), table.prefix(done_)) != 0)
          throw InputError(csv_.string(), "",
                           fmt::format("row {} does not belong to point {} of this sweep (other axis values, or out of order)",
                                       done_ + 1, done_),
                           "remove the file, or choose another --out folder");
        ++done_;
        pos = nl + 1;
        keep = pos;
      }
      if (keep < text.size()) {
        std::error_code ec;
        fs::resize_file(csv_, keep, ec);
        if (ec) throw OutputError(fmt::format("cannot cut the partial last row of {}: {}", csv_.string(), ec.message()));
      }
    } else {
      // Both written whole or not at all: a CSV exists only with its header and its scenario beside it.
      if (!options.effective.empty()) write_file(options.effective, effective);
      write_file(csv_, header + "\n");
    }
    out_ = std::fopen(csv_.string().c_str(), "ab");
    if (!out_) throw OutputError(fmt::format("cannot append to {}: {}", csv_.string(), std::strerror(errno)));
    std::error_code size_error;
    good_size_ = fs::file_size(csv_, size_error);
    committed_ = done_;
    rows_.resize(points);
  }
  ~Writer() {
    if (out_) std::fclose(out_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Rows already in the file when the sweep started.
  std::size_t done() const { return done_; }

  // Takes point p's row and appends every row now ready, in point order. Any thread may call it.
  // False once a write failed: the sweep should stop (its rows are dropped from then on).
  bool deliver(std::size_t p, Row row) {
    std::lock_guard lock(mu_);
    if (failure_) return false;
    rows_[p] = std::move(row);
    while (committed_ < rows_.size() && rows_[committed_]) {
      const Row& ready = *rows_[committed_];
      errno = 0;
      if (std::fputs(ready.text.c_str(), out_) == EOF || std::fputc('\n', out_) == EOF || std::fflush(out_) != 0) {
        failure_ = fmt::format("cannot write {}: {}", csv_.string(), std::strerror(errno ? errno : EIO));
        return false;
      }
      good_size_ += ready.text.size() + 1;
      refused_ += ready.refused ? 1 : 0;
      rows_[committed_].reset();
      ++committed_;
      if (progress_) {
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
        const double per = elapsed / static_cast<double>(committed_ - done_);
        std::fprintf(stderr, "\rsweep: %zu/%zu points, %.0f s left   ", committed_, rows_.size(),
                     per * static_cast<double>(rows_.size() - committed_));
      }
    }
    return true;
  }

  bool failed() const {
    std::lock_guard lock(mu_);
    return failure_.has_value();
  }
  std::size_t committed() const { return committed_; }
  std::size_t refused() const { return refused_; }

  // Closes the file. After a failed write, cuts any partial row (a resume would drop it too, but
  // the file stays a valid CSV) and throws OutputError.
  void close() {
    std::FILE* out = std::exchange(out_, nullptr);
    if (std::fclose(out) != 0 && !failure_)
      failure_ = fmt::format("cannot write {}: {}", csv_.string(), std::strerror(errno));
    if (progress_) std::fputc('\n', stderr);
    if (failure_) {
      std::error_code ec;
      fs::resize_file(csv_, good_size_, ec);
      throw OutputError(*failure_);
    }
  }

 private:
  fs::path csv_;
  bool progress_ = false;
  std::FILE* out_ = nullptr;
  mutable std::mutex mu_;
  std::vector<std::optional<Row>> rows_;  // per point: done, not yet appended
  std::size_t done_ = 0, committed_ = 0, refused_ = 0;
  std::uintmax_t good_size_ = 0;  // bytes of complete rows: a failed append is cut back to it
  std::optional<std::string> failure_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// The points still to run, handed out in point order up to a limit (--stop-after).
class Dispenser {
 public:
  Dispenser(std::size_t first, std::size_t limit) : next_(first), limit_(limit) {}
  // Up to `n` consecutive points: {first, count}.
  std::pair<std::size_t, std::size_t> take(std::size_t n) {
    std::lock_guard lock(mu_);
    const std::size_t count = stopped_ ? 0 : std::min(n, limit_ - next_);
    next_ += count;
    return {next_ - count, count};
  }
  std::optional<std::size_t> take_one() {
    const auto [first, count] = take(1);
    return count ? std::optional(first) : std::nullopt;
  }
  void stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  bool stopped() const {
    std::lock_guard lock(mu_);
    return stopped_;
  }
  bool exhausted() const {
    std::lock_guard lock(mu_);
    return stopped_ || next_ >= limit_;
  }

 private:
  mutable std::mutex mu_;
  std::size_t next_, limit_;
  bool stopped_ = false;
};

// Simulates points on `threads` threads: each takes a point from `take` until it gives none, and
// hands its row to `give`.
class Pool {
 public:
  Pool(const Table& table, std::size_t threads, std::function<std::optional<std::size_t>()> take,
       std::function<void(std::size_t, Row)> give)
      : take_(std::move(take)), give_(std::move(give)) {
    for (std::size_t t = 0; t < threads; ++t)
      threads_.emplace_back([this, &table] {
        while (const auto p = take_()) give_(*p, table.row(*p));
      });
  }
  ~Pool() { join(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  void join() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

 private:
  std::function<std::optional<std::size_t>()> take_;
  std::function<void(std::size_t, Row)> give_;
  std::vector<std::thread> threads_;
};

// Owns the CSV and the points still to run; runs them on `jobs` threads and appends every row in
// point order.
SweepOutcome lead(const Table& table, Writer& writer, const SweepOptions& options, std::size_t jobs) {
  const std::size_t done = writer.done();
  const std::size_t limit = options.stop_after ? std::min(table.points(), done + *options.stop_after) : table.points();
  Dispenser dispenser(done, limit);
  const auto give = [&](std::size_t p, Row row) {
    if (!writer.deliver(p, std::move(row))) dispenser.stop();
  };
  Pool(table, std::min(jobs, std::max<std::size_t>(1, limit - done)), [&] { return dispenser.take_one(); }, give).join();
  SweepOutcome outcome;
  outcome.points = table.points();
  outcome.already_done = done;
  outcome.ran = writer.committed() - done;
  outcome.refused = writer.refused();
  outcome.stopped_early = writer.committed() < table.points();
  writer.close();
  return outcome;
}

}  // namespace

SweepOutcome run_sweep(const scenario::Loader& loader, const Json& resolved, const std::string& file,
                       const SweepOptions& options) {
  const Table table(plan_sweep(loader, resolved, file));
  Writer writer(table, options);
  const std::size_t jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  return lead(table, writer, options, jobs);
}

}  // namespace moesim::sweep
