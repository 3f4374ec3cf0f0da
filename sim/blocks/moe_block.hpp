// The MoE block of one layer and microbatch (GShard/DeepSpeed-MoE/Tutel; STRATEGIES.md `ep`):
//   forward:  [plan's steps before the gate] → router (gate, top-k, permute) → shared experts →
//             per chunk: dispatch all-to-all → the GPU's experts → [after-experts steps] → combine
//             all-to-all (or the plan's phased all-gather beside it) → [after-combine steps] →
//             un-permute and weighted sum → [after-output steps];
//   backward: [before-output steps] → un-permute' → shared experts' → per chunk: all-to-all of the
//             output gradients (the dispatch pattern) → experts' → [steps] → all-to-all back (the
//             combine pattern) → [steps] → router' → [after-gate steps].
// The tokens of each chunk are 1/P of the microbatch (pipelining degree P: chunk c's all-to-all
// overlaps chunk c−1's experts). The router, shared experts and un-permute run where tokens live
// (GPUs that run attention), the experts where the plan places them. The dispatch all-to-all
// waits for the router, the experts for their chunk's dispatch (and, when the plan fetches
// expert weights, for the fetch), the un-permute for every chunk's combine. Traffic and expert
// compute come from token_routing.hpp. The first expert compute of the iteration (microbatch 0,
// chunk 0), forward and backward, carries the fetch's prologue (HybridEP's SRDecode).
#pragma once

#include "sim/blocks/context.hpp"
#include "sim/blocks/token_routing.hpp"

namespace moesim::blocks {

// One MoE block of one microbatch, opened and not yet closed.
struct MoeInFlight {
  const parallel::MoeLayerPlan* plan = nullptr;
  const LayerRouting* routing = nullptr;
  engine::Phase phase = engine::Phase::Forward;  // Forward, Recompute or Backward
  bool backward = false;
  int layer = 0, microbatch = 0;
  const Frontier* fetched = nullptr;  // per GPU, the task the layer's expert weights arrive with (null: none)
  Frontier* experts_done = nullptr;   // per GPU, its last expert task of the block (written)
  // Written by moe_open: each chunk's frontier, the phased gather's, the shared experts'.
  std::vector<Frontier> chunks;
  Frontier join, shared;
  bool deferred = false;  // experts on attention GPUs and the second exchange not yet written
  // Backward under full recomputation in a layer-major schedule (HeterMoE's activation
  // checkpointing on each side of the exchanges): each GPU runs its part of the block's forward
  // again just before its backward — the experts from the copies they received, the router from
  // its recomputed input — instead of the whole block with its exchanges (spec 002 A.7: backward
  // = 2 + 1 forwards). The un-permute is not recomputed (its inputs, the combined expert outputs,
  // are kept in the receive buffers).
  bool recompute_locally = false;

  // A block of `plan` for one layer and microbatch, in `phase` (Backward: the backward pass).
  static MoeInFlight of(const parallel::MoeLayerPlan& plan, const LayerRouting& routing, engine::Phase phase, int layer,
                        int microbatch, const Frontier* fetched, Frontier& experts_done);
};

// `defer`: leave the experts of GPUs that also run attention, and the second exchange, to
// moe_return (which moe_close calls if nothing did).
void moe_open(Emission& em, MoeInFlight& block, Frontier& f, bool defer);
void moe_return(Emission& em, MoeInFlight& block);
void moe_close(Emission& em, MoeInFlight& block, Frontier& f);

// `fetched`: per GPU, the task the layer's expert weights arrive with (null: none).
// `phase` Recompute: the same forward again during the backward (activation recomputation; the
// fetch's prologue is not paid twice).
void moe_forward(Emission& em, const parallel::MoeLayerPlan& plan, int layer, int microbatch, const LayerRouting& routing,
                 const Frontier* fetched, Frontier& f, engine::Phase phase = engine::Phase::Forward);
// `experts_done`: per GPU, the layer's last expert-backward task (its expert gradients are ready).
void moe_backward(Emission& em, const parallel::MoeLayerPlan& plan, int layer, int microbatch, const LayerRouting& routing,
                  Frontier& f, Frontier& experts_done);

}  // namespace moesim::blocks
