// The optimizer step on each GPU (Adam, memory-bound: compute::ComputeModel::optimizer_step over
// the parameters the GPU holds), after the GPU's backward and its last gradient collective.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void optimizer_step(Emission& em, const Frontier& after, const Frontier& last_gradient_sync);

}  // namespace moesim::blocks
