// Runs a plan's CollectiveStep: one collective per group of its family (groups of one GPU have
// nothing to exchange and are skipped), on the step's stream, each member after the task its GPU
// gives (`after`), and records each member as its GPU's new frontier (`out`).
#pragma once

#include <vector>

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void run_step(Emission& em, const parallel::CollectiveStep& step, engine::Phase phase, int layer, int microbatch,
              const Frontier& after, Frontier& out);
// Runs `steps` one after the other, each member after its GPU's previous one (`chain`, updated).
void run_steps(Emission& em, const std::vector<parallel::CollectiveStep>& steps, engine::Phase phase, int layer,
               int microbatch, Frontier& chain);

}  // namespace moesim::blocks
