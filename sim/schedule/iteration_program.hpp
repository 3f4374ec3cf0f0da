// Writes one training iteration's task program from its plan: walks the plan's schedule
// (schedule.hpp) and asks the blocks (sim/blocks) for each work item's tasks on the GPUs that run
// it. This is the only iteration loop: every strategy is a plan over it (DESIGN.md §8).
// Each microbatch carries its own frontier (the task its next piece of work waits for, per GPU),
// so a schedule may interleave microbatches; the routing of a (layer, microbatch) is drawn at its
// forward and reused by its backward. Returns what the iteration measured (token copies per
// expert, drops, distinct tokens) for the next plan.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::schedule {

parallel::IterationOutcome write_iteration(blocks::ProgramBuilder& pb, const blocks::Context& ctx,
                                           const parallel::PlanPtr& plan, int iteration);

}  // namespace moesim::schedule
