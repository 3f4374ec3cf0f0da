// What a run carries from one iteration to the next (DESIGN.md §8): what the previous iteration
// measured while its program was written (the token copies every expert received, per layer, as
// the popularity all-reduce of a real runtime counts them; drops) and the simulated times of the
// iterations that have finished. A strategy's plan(iteration, state) reads it: a placement that
// follows popularity uses the previous iteration's counts. The run loop writes iteration i + 1
// when iteration i starts running, so that state holds iteration i's counts and the times of
// the iterations before it that have finished by then; only one outcome is kept, so a run of
// any length holds the same.
#pragma once

#include <optional>
#include <vector>

#include "sim/core/units.hpp"
#include "sim/parallel/iteration_plan.hpp"

namespace moesim::parallel {

struct IterationOutcome {
  int iteration = 0;
  // Per layer (empty for dense layers): token copies routed to each expert, summed over the
  // iteration's microbatches and over every source GPU, after capacity drops.
  std::vector<std::vector<double>> expert_tokens;
  // Per layer: token copies the routers assigned to each expert before capacity drops (what the
  // popularity all-reduce of seed 004 counts).
  std::vector<std::vector<double>> expert_routed;
  double routed_copies = 0;   // token copies sent to experts (top-k counted k times)
  double dropped_copies = 0;  // of which dropped over capacity
  double tokens = 0;          // distinct tokens trained on
  PlanPtr plan;               // the plan it ran
};

struct RunState {
  // The last iteration whose program has been written (none before the first).
  std::optional<IterationOutcome> previous;
  // Simulated times of the iterations that have finished so far, in order.
  std::vector<Time> finished_times;
};

}  // namespace moesim::parallel
