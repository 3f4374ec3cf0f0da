// The tensor-parallel collectives around a block whose GeMMs are split over a TP group
// (Megatron-LM's column- then row-parallel pair, Shoeybi et al. 2019 §3), on the plan's TP stream.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

// The tensor-parallel collectives around a block (nothing with one GPU per group): with sequence
// parallelism (Korthikanti et al. 2022 §4.2.2) an all-gather of the sequence shards before it
// (each rank brings s/tp tokens) and a reduce-scatter of its output after it; without, an
// all-reduce of the output after it. The backward runs the same pair in the same order (the
// all-gather's backward is a reduce-scatter and the other way round, the data just reversed).
// On the plan's TP stream, or on `stream` when one is given (a block overlapped with others).
void tensor_parallel_enter(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f,
                           parallel::StreamRole stream = parallel::StreamRole::Count);
void tensor_parallel_exit(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f,
                          parallel::StreamRole stream = parallel::StreamRole::Count);

}  // namespace moesim::blocks
