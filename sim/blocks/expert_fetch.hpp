// Expert weights that travel to where they are computed before the layer's experts run (HybridEP
// §IV-B: the domain's experts all-gathered, SR-compressed, on the side stream). With the
// asynchronous communicator every layer's preparation (SREncode, fused with the optimizer step
// that ends the previous iteration) and then every layer's fetch are queued when the iteration
// starts, overlapping the pre-expert compute; without it a layer's fetch starts when its MoE
// block is first reached. A fetch never starts before the GPU's previous optimizer step: the
// weights it moves are the updated ones.
#pragma once

#include <vector>

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

// At iteration start, for every layer whose plan fetches at iteration start: `ready[layer][g]` is
// the task GPU g's fetched experts of the layer arrive with. `anchor[g]`: GPU g's last task of the
// previous iteration (kNone: none).
void fetch_at_iteration_start(Emission& em, const Frontier& anchor, std::vector<Frontier>& ready);
// One layer's fetch after `after`.
void fetch_layer(Emission& em, const parallel::MoeLayerPlan& plan, int layer, const Frontier& after, Frontier& ready);

}  // namespace moesim::blocks
