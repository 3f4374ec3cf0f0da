// Gradient synchronisation on the gradient stream (DDP's bucketed all-reduce, Megatron's DP and
// expert-DP groups): per layer the dense parameters' bucket over the plan's data-parallel groups,
// then the layer's expert gradients step by step as its MoE plan says (expert-data-parallel
// all-reduce, HybridEP's reduce-scatters back to the owners); the embedding and LM head last.
// It keeps each GPU's last gradient collective, which the optimizer step waits for.
#pragma once

#include "sim/blocks/context.hpp"

namespace moesim::blocks {

// The distributed optimizer's parameter all-gathers at the start of an iteration, after `anchor`
// (each GPU's optimizer step): the embedding's on the first stage, per layer its dense parameters
// over the dense groups, then the plan's expert parameter gathers, and the LM head's on the last
// stage; `gathered[layer]`, `embedding` and `head` are what their first forward waits for.
// Without sharding only the layers whose MoE plan gathers expert parameters; nothing with FSDP.
void gather_parameters(Emission& em, const Frontier& anchor, std::vector<Frontier>& gathered, Frontier& embedding,
                       Frontier& head);
// FSDP: one layer's parameters all-gathered on the ParamGather stream after `after`, for its
// forward or backward of one microbatch; `out` is when they are whole.
void gather_layer_parameters(Emission& em, int layer, engine::Phase phase, int microbatch, const Frontier& after,
                             Frontier& out);

// FSDP: the embedding's or the LM head's `params` (per GPU) all-gathered on the ParamGather stream
// after `after`, labelled with `layer`; `out` is when they are whole.
void gather_vocabulary_parameters(Emission& em, double params, int layer, engine::Phase phase, int microbatch,
                                  const Frontier& after, Frontier& out);

class GradientSync {
 public:
  explicit GradientSync(std::uint32_t gpus) : last_(gpus, engine::kNone) {}
  // `dense_after`: when the layer's dense gradients are ready (its attention backward);
  // `experts_after`: when its expert gradients are (its last expert backward).
  void layer(Emission& em, int layer, const Frontier& dense_after, const Frontier& experts_after);
  // The embedding's or the LM head's gradients (`params` per GPU), on the current stage.
  void vocabulary(Emission& em, std::string_view name, double params, const Frontier& after);
  const Frontier& last() const { return last_; }

 private:
  void dense(Emission& em, std::string_view name, int layer, double params, const Frontier& after);
  Frontier last_;
};

}  // namespace moesim::blocks
