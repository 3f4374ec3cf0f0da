// Fine-grained selective recomputation as Megatron-Core runs it (TransformerConfig.recompute_modules,
// megatron/core/transformer/transformer_config.py; workload::RecomputeModule): a recomputed module's
// forward runs again, phase Recompute, on the GPUs that ran it, just before the backward that needs
// its output. The attention side's (the input norm, MLA's up projections, the core on GPUs without
// FlashAttention) before the attention's backward; the MLP side's (the pre-MLP norm; a dense layer's
// FFN with its tensor-parallel collectives) before the FFN's or MoE block's backward. Inside the MoE
// block, the shared experts' forward before their backward and the experts' activation before each
// chunk's expert backward (moe_block.cpp, with the costs below). The memory they free:
// workload::memory_footprint.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

void recompute_before_attention_backward(Emission& em, int layer, int microbatch, Frontier& f);
// `moe`: layer `layer` is an MoE layer (its pre-MLP norm feeds the router), else a dense FFN's.
void recompute_before_mlp_backward(Emission& em, int layer, int microbatch, bool moe, Frontier& f);

}  // namespace moesim::blocks
