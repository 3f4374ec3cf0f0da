#include "sim/sweep/runner.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fmt/format.h>
#include <functional>
#include <mutex>
#include <thread>
#include <unistd.h>
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

// The CSV of a planned sweep: its header, and one row per point. Every rank holds the same.
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

// The CSV on disk, held by one process (rank 0): it keeps the complete rows of an earlier run of
// the same sweep, then appends each row, flushed, as soon as it and every row before it are here.
class Writer {
 public:
  Writer(const Table& table, const SweepOptions& options) : csv_(options.csv), progress_(options.progress) {
    const std::string& header = table.header();
    const std::size_t points = table.points();
    const std::string effective = table.base_effective().dump(2) + "\n";
    // Nothing is written before every point validated and the folder proved writable.
    const fs::path folder = csv_.parent_path().empty() ? fs::path(".") : csv_.parent_path();
    prepare_output_folder(folder, "--out");
    // Before the CSV is read: a second sweep on the folder is refused, not interleaved.
    lock_.emplace(folder, "--out", fmt::format("pid {}: moesim sweep into {}", ::getpid(), csv_.string()));
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
      if (fs::exists(folder / "results.json", exists_error))
        throw InputError("--out", folder.string(),
                         "holds a run's results.json, whose scenario.effective.json the sweep would replace",
                         "give another folder");
      // Both written whole or not at all: a CSV exists only with its header and its scenario beside it.
      std::vector<std::pair<fs::path, OutputWriter>> files;
      if (!options.effective.empty()) files.emplace_back(options.effective, [&](std::ostream& o) { o << effective; });
      files.emplace_back(csv_, [&](std::ostream& o) { o << header << "\n"; });
      write_files(files);
    }
    // Appended to the file itself, never through a link planted in its place.
    const int fd = ::open(csv_.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    out_ = fd >= 0 ? ::fdopen(fd, "ab") : nullptr;
    if (!out_) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw OutputError(fmt::format("cannot append to {}: {}", csv_.string(), std::strerror(err)));
    }
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
  std::optional<OutputFolderLock> lock_;
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

// Messages between the ranks, as whole numbers and strings. A worker rank sends kAsk (rows it
// finished, how many more points it wants; rank 0 answers kPoints) and, when it has nothing left,
// kDone (its last rows); rank 0 ends the sweep with kEnd on every worker.
enum Message : std::uint64_t { kAsk, kDone, kPoints, kEnd };
enum PointsState : std::uint64_t { kMore, kNoMore, kStop };  // kStop: drop the points not started

class Encoder {
 public:
  Encoder& put(std::uint64_t v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Encoder& put(const std::string& s) {
    put(s.size());
    bytes_ += s;
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

class Decoder {
 public:
  explicit Decoder(const std::string& bytes) : bytes_(bytes) {}
  std::uint64_t number() {
    std::uint64_t v = 0;
    need(sizeof v);
    std::memcpy(&v, bytes_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  std::string text() {
    const std::uint64_t n = number();
    need(n);
    std::string s = bytes_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  void need(std::size_t n) const {
    if (n > bytes_.size() - pos_) invariant_failed("sweep: a message between ranks is cut short");
  }
  const std::string& bytes_;
  std::size_t pos_ = 0;
};

// Rows as a message carries them: count, then point, refused, text each.
void put_rows(Encoder& e, const std::vector<std::pair<std::size_t, Row>>& rows) {
  e.put(rows.size());
  for (const auto& [p, row] : rows) e.put(p).put(row.refused ? 1 : 0).put(row.text);
}

// Rank 0, or the only process: owns the CSV, runs points on its own threads and hands the others
// to the worker ranks as they ask, appending every row in point order.
SweepOutcome lead(const Table& table, Writer& writer, const SweepOptions& options, std::size_t jobs, Ranks* ranks) {
  const std::size_t done = writer.done();
  const std::size_t limit = options.stop_after ? std::min(table.points(), done + *options.stop_after) : table.points();
  Dispenser dispenser(done, limit);
  const auto give = [&](std::size_t p, Row row) {
    if (!writer.deliver(p, std::move(row))) dispenser.stop();
  };
  {
    Pool pool(table, std::min(jobs, std::max<std::size_t>(1, limit - done)), [&] { return dispenser.take_one(); }, give);
    for (int busy = ranks ? ranks->size() - 1 : 0; busy > 0;) {
      const auto [from, message] = ranks->receive(Ranks::kAnyRank);
      Decoder in(message);
      const std::uint64_t kind = in.number();
      for (std::uint64_t n = in.number(); n > 0; --n) {
        const std::size_t p = in.number();
        const bool refused = in.number() != 0;
        give(p, Row{in.text(), refused});
      }
      if (kind == kDone) {
        --busy;
        continue;
      }
      const auto [first, count] = dispenser.take(in.number());
      const PointsState state = dispenser.stopped() ? kStop : dispenser.exhausted() ? kNoMore : kMore;
      ranks->send(from, Encoder().put(kPoints).put(first).put(count).put(state).bytes());
    }
  }
  SweepOutcome outcome;
  outcome.points = table.points();
  outcome.already_done = done;
  outcome.ran = writer.committed() - done;
  outcome.refused = writer.refused();
  outcome.stopped_early = writer.committed() < table.points();
  if (ranks)
    for (int r = 1; r < ranks->size(); ++r)
      ranks->send(r, Encoder().put(kEnd).put(writer.failed() ? 1 : 0).put(outcome.stopped_early ? 1 : 0).bytes());
  writer.close();
  return outcome;
}

// A worker rank: asks rank 0 for points, keeps its threads busy with them (one running and one
// waiting per thread, so a thread never waits for the answer) and sends each row to rank 0.
SweepOutcome work(const Table& table, std::size_t jobs, Ranks& ranks) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::size_t> waiting;
  std::vector<std::pair<std::size_t, Row>> finished;
  std::size_t running = 0;
  bool last = false;  // rank 0 has no more points for this rank
  const auto take = [&]() -> std::optional<std::size_t> {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !waiting.empty() || last; });
    if (waiting.empty()) return std::nullopt;
    const std::size_t p = waiting.front();
    waiting.pop_front();
    ++running;
    cv.notify_all();
    return p;
  };
  const auto give = [&](std::size_t p, Row row) {
    std::lock_guard lock(mu);
    finished.emplace_back(p, std::move(row));
    --running;
    cv.notify_all();
  };
  Pool pool(table, jobs, take, give);
  const std::size_t target = 2 * jobs;
  for (;;) {
    std::unique_lock lock(mu);
    const auto idle = [&] { return last && waiting.empty() && running == 0; };
    cv.wait(lock, [&] { return !finished.empty() || idle() || (!last && waiting.size() + running < target); });
    const bool done = idle();
    const std::size_t held = waiting.size() + running;
    Encoder message;
    message.put(done ? kDone : kAsk);
    put_rows(message, finished);
    finished.clear();
    if (!done) message.put(last || held >= target ? 0 : target - held);
    lock.unlock();
    ranks.send(0, message.bytes());
    if (done) break;
    const auto answer = ranks.receive(0);
    Decoder in(answer.second);
    if (in.number() != kPoints) invariant_failed("sweep: rank 0 answered a request for points with something else");
    const std::size_t first = in.number(), count = in.number();
    const std::uint64_t state = in.number();
    lock.lock();
    for (std::size_t p = first; p < first + count; ++p) waiting.push_back(p);
    if (state != kMore) last = true;
    if (state == kStop) waiting.clear();
    cv.notify_all();
  }
  pool.join();
  const auto end = ranks.receive(0);
  Decoder in(end.second);
  if (in.number() != kEnd) invariant_failed("sweep: rank 0 ended the sweep with another message");
  if (in.number() != 0) throw StoppedByPeer(0, 1);  // rank 0 could not write the CSV; it says so
  SweepOutcome outcome;
  outcome.points = table.points();
  outcome.stopped_early = in.number() != 0;
  return outcome;
}

// The exit code of a failure before the sweep runs (as the command line maps them).
int exit_code(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const InputError&) {
    return 2;
  } catch (const InfeasibleError&) {
    return 2;
  } catch (const StoppedByPeer& s) {
    return s.exit_code;
  } catch (...) {
    return 1;
  }
}

}  // namespace

unsigned threads_per_job(unsigned jobs) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return jobs ? std::max(1u, cores / std::min(jobs, cores)) : 1;
}

SweepOutcome run_sweep(const scenario::Loader& loader, const Json& resolved, const std::string& file,
                       const SweepOptions& options, Ranks* ranks) {
  const bool leads = !ranks || ranks->rank() == 0;
  // Every rank plans and validates every point; rank 0 also opens the CSV (resuming it). A failure
  // anywhere stops every rank before any point runs.
  std::optional<Table> table;
  std::optional<Writer> writer;
  agree(
      ranks,
      [&] {
        table.emplace(plan_sweep(loader, resolved, file));
        if (leads) writer.emplace(*table, options);
      },
      exit_code);
  // Threads per rank: --jobs, else this machine's cores shared by the ranks on it.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t jobs = options.jobs ? options.jobs : std::max(1u, cores / (ranks ? std::max(1, ranks->local_size()) : 1));
  if (!ranks || ranks->size() == 1) return lead(*table, *writer, options, jobs, ranks);
  try {
    return leads ? lead(*table, *writer, options, jobs, ranks) : work(*table, jobs, *ranks);
  } catch (const OutputError&) {
    throw;  // rank 0's CSV could not be written: every rank has been told
  } catch (const StoppedByPeer&) {
    throw;
  } catch (const std::exception& e) {
    // Anything else would leave the other ranks waiting for this one.
    std::fprintf(stderr, "moesim: internal error on rank %d: %s (please report it with the scenario)\n", ranks->rank(),
                 e.what());
    ranks->abort(1);
  }
  return {};  // not reached: abort() ends the process
}

}  // namespace moesim::sweep
