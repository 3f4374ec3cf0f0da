// Runs a sweep: every point of the grid is validated before anything runs; points then run in
// parallel on all cores, and one CSV row per point is appended in point order as soon as it and
// all points before it are done (a crash loses no committed point). Re-running the same sweep
// into the same file resumes after the last complete row, so an interrupted and resumed sweep
// gives the same CSV as an uninterrupted one.
//
// Across machines (`mpirun -np N moesim sweep`), the same runner with ranks: every rank plans and
// validates the whole grid; rank 0 alone holds the CSV (no shared file system is assumed), runs
// points on its own threads and hands the others out to the worker ranks in small batches as they
// ask (each keeps its --jobs threads busy), and appends their rows in point order as they come
// back. The CSV is the one a single process writes, byte for byte. A rank that dies makes the
// launcher end the job; the rows appended so far stay, and the same command, with any number of
// ranks or none, resumes after them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "sim/scenario/scenario.hpp"
#include "sim/sweep/ranks.hpp"

namespace moesim::sweep {

struct SweepOptions {
  std::filesystem::path csv;
  // The base scenario, fully resolved, written before the first row; a resume refuses a CSV whose
  // folder holds a different one (the same grid over another scenario must not mix rows).
  std::filesystem::path effective;
  unsigned jobs = 0;                      // threads per rank; 0: the cores, shared by the ranks on a machine
  std::optional<std::size_t> stop_after;  // stop after committing this many new rows (tests)
  bool progress = false;                  // rank 0 only
};

struct SweepOutcome {
  std::size_t points = 0;
  std::size_t already_done = 0;
  std::size_t ran = 0;
  std::size_t refused = 0;
  bool stopped_early = false;
};

// The scenario of every grid point, validated. An invalid value is reported at the sweep axis
// value that set it ($.sweep.axes[A].values[V], or $.sweep.axes[A].values[V][K] on a zipped axis);
// other problems name the point's axis values.
struct SweepPlan {
  schema::Json base_effective;  // the base scenario, fully resolved (sweep block included)
  std::vector<std::string> axis_paths;            // one per CSV column: every axis' paths, in order
  std::vector<std::vector<schema::Json>> values;  // per point, one per column (as axis_paths)
  std::vector<scenario::Scenario> scenarios;      // per point
};
// `points`: build only the first so many points (the fuzzing harness bounds its work so; the grid
// is still parsed and its size checked whole).
SweepPlan plan_sweep(const scenario::Loader& loader, const schema::Json& resolved, const std::string& file,
                     std::size_t points = SIZE_MAX);

// The threads each of `jobs` parallel points may use for its routing draws: the machine's cores
// divided among them; 1 when `jobs` is 0 (as many jobs as cores).
unsigned threads_per_job(unsigned jobs);

// `ranks`: the processes sharing the sweep (nullptr: this one alone). Every rank returns; only rank
// 0's outcome counts points, the others' say only whether the sweep stopped early. A failure
// before any point runs (a bad scenario, a CSV of another sweep) throws on the rank that tells and
// StoppedByPeer on the others.
SweepOutcome run_sweep(const scenario::Loader& loader, const schema::Json& resolved, const std::string& file,
                       const SweepOptions& options, Ranks* ranks = nullptr);

}  // namespace moesim::sweep
