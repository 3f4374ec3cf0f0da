// The dense FFN block of a layer without experts, on the GPUs that run attention: the FFN (2 or 3
// GeMMs) and its norm, FFN columns split over the tensor-parallel group, then the group's
// all-reduce (Megatron-LM).
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void dense_ffn(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);

}  // namespace moesim::blocks
