// The two ends of the model on the GPUs that hold the tokens: the embedding lookup (a gather of
// the tokens' rows) and the LM head (logits over the vocabulary, split over the tensor-parallel
// group as Megatron-LM's vocabulary-parallel head, and their fp32 softmax). Run only for models
// with a vocabulary.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void embedding(Emission& em, engine::Phase direction, int microbatch, Frontier& f);
void lm_head(Emission& em, engine::Phase direction, int microbatch, Frontier& f);

}  // namespace moesim::blocks
