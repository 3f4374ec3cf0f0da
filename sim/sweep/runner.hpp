// Runs a sweep: every point of the grid is validated before anything runs; points then run in
// parallel on all cores, and one CSV row per point is appended in point order as soon as it and
// all points before it are done (a crash loses no committed point). Re-running the same sweep
// into the same file resumes after the last complete row, so an interrupted and resumed sweep
// gives the same CSV as an uninterrupted one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "sim/scenario/scenario.hpp"

namespace moesim::sweep {

struct SweepOptions {
  std::filesystem::path csv;
  // The base scenario, fully resolved, written before the first row; a resume refuses a CSV whose
  // folder holds a different one (the same grid over another scenario must not mix rows).
  std::filesystem::path effective;
  unsigned jobs = 0;                      // 0: all cores
  std::optional<std::size_t> stop_after;  // stop after committing this many new rows (tests)
  bool progress = false;
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

SweepOutcome run_sweep(const scenario::Loader& loader, const schema::Json& resolved, const std::string& file,
                       const SweepOptions& options);

}  // namespace moesim::sweep
