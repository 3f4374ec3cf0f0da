// The attention block of one layer and microbatch on the GPUs that run attention: QKV and output
// projections, the attention core and the norm, split over the plan's tensor-parallel group
// (heads and projection columns per rank), followed by the group's all-reduce of the block
// output (forward) or input gradient (backward), as Megatron-LM's row-parallel output projection
// needs (or the sequence-parallel pair around it). Models without attention (bare MoE layers) have none.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void attention(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);
// Selective recomputation (Korthikanti et al. 2022 §5): the attention core's forward again before
// its backward, on GPUs without FlashAttention (whose backward recomputes it anyway).
void recompute_attention_core(Emission& em, int layer, int microbatch, Frontier& f);
// The tensor-parallel collectives around a block (nothing with one GPU per group): with sequence
// parallelism (Korthikanti et al. 2022 §4.2.2) an all-gather of the sequence shards before it
// (each rank brings s/tp tokens) and a reduce-scatter of its output after it; without, an
// all-reduce of the output after it. The backward runs the same pair in the same order (the
// all-gather's backward is a reduce-scatter and the other way round, the data just reversed).
void tensor_parallel_enter(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);
void tensor_parallel_all_reduce(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);

}  // namespace moesim::blocks
