// The attention block of one layer and microbatch on the GPUs that run attention: QKV and output
// projections, the attention core and the norm, split over the plan's tensor-parallel group
// (heads and projection columns per rank), followed by the group's all-reduce of the block
// output (forward) or input gradient (backward), as Megatron-LM's row-parallel output projection
// needs (or the sequence-parallel pair around it). With context parallelism the core runs as a
// ring over the CP group (parallel::ContextParallel). Models without attention (bare MoE layers)
// have none.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void attention(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);
}  // namespace moesim::blocks
