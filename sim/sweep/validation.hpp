// `moesim validate`: every check a run or a sweep makes before it starts, nothing run or written.
// The scenario is loaded, its presets expanded and built, the strategy's constraints and the
// memory checks applied; with a sweep block, every grid point is built and checked the same way
// (a value the schema refuses fails validation; a point a strategy or the memory check refuses is
// listed, as the sweep would record it). The CLI and the fuzzing harness share it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/scenario/scenario.hpp"

namespace moesim::sweep {

struct Validation {
  std::string strategy, model;
  std::uint64_t gpus = 0;
  int iterations = 0;
  double peak_gpu_bytes = 0;     // the fullest GPU's memory
  double host_bytes = 0;         // the run's memory estimate on this machine (simulation/memory_estimate.hpp)
  std::string host_terms;        // its terms in words (simulation::describe)
  double tasks = 0;              // the tasks the run writes (simulation::MemoryEstimate::tasks)
  double cpu_seconds = 0;        // the CPU time they take (simulation/time_estimate.hpp)
  double resident_bytes = 0;     // what the process held before (binary, libraries, data)
  std::size_t points = 0;        // sweep points (0: no sweep block)
  double sweep_cpu_seconds = 0;  // the CPU time of every point that can run, summed
  // "sweep point P would be refused: why", the first kListed of them; how many in all.
  std::vector<std::string> refused;
  std::size_t refused_count = 0;
  // Plausibility warnings of the scenario and, once each, of its points: the first kListed of the
  // points'; how many more differed.
  std::vector<std::string> warnings;
  std::size_t warnings_unlisted = 0;
  // What planning and checking the grid took here: what a sweep pays before its first point runs.
  double plan_seconds = 0;
  double plan_bytes = 0;  // the growth of the process's resident memory meanwhile
  static constexpr std::size_t kListed = 10;
};

// Throws InputError or InfeasibleError for the scenario itself. `points` bounds the sweep points
// built and checked (the fuzzing harness: a sanitized build checks a point in ~1.5 ms).
Validation validate(const scenario::Loader& loader, const schema::Json& raw, const std::string& file,
                    std::size_t points = SIZE_MAX);

}  // namespace moesim::sweep
