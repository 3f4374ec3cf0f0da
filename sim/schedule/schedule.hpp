// Schedules: the order in which every GPU runs an iteration's work (DESIGN.md §8). The iteration
// program (iteration_program.hpp) walks it and asks the blocks for each piece's tasks.
//   Pipeline schedules give each pipeline stage its order of units — the forward or backward of
//   one model chunk (a virtual stage) for one microbatch:
//   - GPipe (Huang et al. 2019): every microbatch's forward, then every backward;
//   - 1F1B (PipeDream-Flush, Narayanan et al. 2021 §2.2): stage s of p runs min(p − s − 1, m)
//     warm-up forwards, then alternates one forward and one backward, then drains the backwards;
//     with one stage it is data parallelism with gradient accumulation (microbatch after
//     microbatch, forward then backward);
//   - interleaved 1F1B (Narayanan et al. 2021 §2.2.2, Megatron-Core's
//     forward_backward_pipelining_with_interleaving): v chunks per stage; the k-th forward runs
//     chunk ⌊k/p⌋ mod v of microbatch ⌊k/(p·v)⌋·p + k mod p (backwards the chunks in reverse);
//     (p − s − 1)·2 + (v − 1)·p warm-up forwards, then one forward and one backward, then the rest;
//   - DualPipeV (deepseek-ai/DualPipe dualpipev.py, DualPipe of the DeepSeek-V3 report §3.2.1 cut in
//     half): two chunks per rank in a V (PipelinePlan::virtual_of), the steps of its `step` with
//     rank r of p and m microbatches: 2(p − r − 1) forwards of chunk 0; r + 1 pairs F0 F1; p − r − 1
//     pairs B1 F1; m − 2p + r + 1 times F0&B1 then F1&B0 (a forward written with a backward of the
//     other chunk, overlapped as Megatron-Core's EP overlap writes them; on the last rank the first
//     F0 and B1 apart); p − r − 1 times B1 then F1&B0; r + 1 pairs B1 B0; p − r − 1 B0. Its
//     zero-bubble backwards (Qi et al. 2024) leave their weight gradients to W units: each B1 of
//     step 3 is followed by a W, the second half of step 6's backwards (from its middle pair: the
//     B0 on even ranks, the B1 on odd ones) and step 7's are zero-bubble, each of step 7's B0 comes
//     after a W, and r + 1 W end the iteration (step 8).
//   Layer-major (HeterMoE Theorem 1, §4.1), one stage only. HeterMoE's attention-side task i runs
//   from the end of expert block i − 1 to the start of expert block i (the un-permute of layer
//   i − 1, attention i, router i), and its last one is the LM head and the loss (spec 002 A.3:
//   L = MoE layers + 1). So: every layer's forward layer by layer with the microbatches inner
//   (a block's un-permute written with the next layer's forward of the same microbatch, the
//   experts an attention GPU holds after the layer's attention of every microbatch: Asym-EA,
//   §4.2); then for each microbatch the LM head's forward and backward and the last layer's
//   backward up to its exchange; then backward layer by layer with the microbatches inner (each
//   layer's closing kernels and attention backward written with the next one's opening, and
//   Asym-EA's experts before the layer's attention, spec 002 ambiguity 2); each layer's gradients
//   synchronised once its last microbatch's attention backward is written.
#pragma once

#include <vector>

#include "sim/parallel/iteration_plan.hpp"

namespace moesim::schedule {

// A pipeline unit: the forward or backward of chunk `chunk` of its stage for one microbatch.
// `with_next`: a forward written together with the backward after it (of another microbatch),
// layer by layer (iteration_program.cpp). `zero_bubble`: a backward that leaves its weight
// gradients to a later W (blocks/weight_gradients.hpp). `weight`: a W, the weight gradients of the
// oldest zero-bubble backward of the stage not yet run (no chunk, no microbatch: -1).
struct Unit {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
  bool with_next = false;
  bool zero_bubble = false;
  bool weight = false;
};

// Stage `stage`'s units, in the order it runs them. `ep_overlap` (Megatron-Core's
// overlap_moe_expert_parallel_comm): each forward followed by a backward of another microbatch is
// written with it, and with one stage one forward of warm-up comes before the first backward, as
// combined_1f1b_schedule_for_no_pipelining runs forward i + 1 with backward i. DualPipeV pairs its
// own (above), whatever `ep_overlap` says.
std::vector<Unit> stage_order(parallel::PipelineSchedule schedule, int stage, int stages, int chunks, int microbatches,
                              bool ep_overlap = false);

using parallel::Segment;
using parallel::Work;
using parallel::WorkItem;

// The most units stage `order` holds activations for at once (a forward adds one, a backward
// frees one; a zero-bubble backward's are freed by its W, whose weight gradients need most of them:
// the GeMMs' inputs, an upper bound): under 1F1B stage s of p holds min(p − s, m) microbatches. A forward written with
// the backward after it (Unit::with_next), layer by layer, the forward's ascending and the
// backward's descending (iteration_program.cpp), adds a layer as the backward frees one: the pair
// holds at most `layer` (one layer's share of a unit) more than before it, and as much after it.
double peak_in_flight(const std::vector<Unit>& order, double layer = 0);

// The most microbatches whose loss awaits its backward on the stage whose chunk `chunk` is the last
// virtual stage (the LM head's inputs and logits are kept for them): a forward of that chunk ends
// with the head and the loss, a backward of it starts with the head's backward
// (iteration_program.cpp), so a backward written with a forward frees its microbatch's before the
// forward's loss adds another; a zero-bubble backward's logits' gradient stays until its W (the
// head's weight gradient reads it). One under 1F1B, every microbatch under GPipe.
double peak_at_loss(const std::vector<Unit>& order, int chunk);

// The layer-major order of one stage holding every layer.
std::vector<WorkItem> layer_major(int layers, int microbatches);

}  // namespace moesim::schedule
