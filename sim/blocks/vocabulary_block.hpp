// The two ends of the model on the GPUs that hold the tokens: the embedding lookup (a gather of
// the tokens' rows) and the LM head (logits over the vocabulary, split over the tensor-parallel
// group as Megatron-LM's vocabulary-parallel head, and their fp32 softmax). Run only for models
// with a vocabulary. With tensor parallelism each rank looks the tokens up in its vocabulary shard
// and the partial rows are summed (all-reduce, or reduce-scatter into sequence shards), and the
// head's input is all-gathered from the sequence shards first (with sequence parallelism); the
// backward runs the collectives' backward in reverse. The cross-entropy's all-reduces of s floats
// per rank (max and sum over the vocabulary shards) are left out: s·4 bytes against the s·h·2 of
// the block.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void embedding(Emission& em, engine::Phase direction, int microbatch, Frontier& f);
void lm_head(Emission& em, engine::Phase direction, int microbatch, Frontier& f);

// A multi-token prediction module's ends (DeepSeek-V3 §2.2, Megatron-Core's
// MultiTokenPredictionLayer), around its layer `layer`: before it, the embedding of the tokens one
// step further (the shared embedding, looked up as above), the RMSNorms of that embedding and of
// the hidden state, and the projection of their concatenation (2h → h); after it, the shared LM
// head and its loss once more. Backward in reverse.
void mtp_input(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);
void mtp_head(Emission& em, engine::Phase direction, int layer, int microbatch, Frontier& f);

}  // namespace moesim::blocks
