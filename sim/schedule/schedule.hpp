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
//     (p − s − 1)·2 + (v − 1)·p warm-up forwards, then one forward and one backward, then the rest.
//   Layer-major (HeterMoE Theorem 1, §4.1), one stage only: forward layer by layer with the
//   microbatches inner; at the last layer each microbatch's forward, LM head and backward back to
//   back; then backward layer by layer with the microbatches inner; each layer's gradients are
//   synchronised after its last microbatch's backward.
#pragma once

#include <vector>

#include "sim/parallel/iteration_plan.hpp"

namespace moesim::schedule {

// A pipeline unit: the forward or backward of chunk `chunk` of its stage for one microbatch.
struct Unit {
  bool forward = true;
  int chunk = 0;
  int microbatch = 0;
};

// Stage `stage`'s units, in the order it runs them.
std::vector<Unit> stage_order(parallel::PipelineSchedule schedule, int stage, int stages, int chunks, int microbatches);

enum class Segment : std::uint8_t { Embedding, Layer, Head };
enum class Work : std::uint8_t {
  Forward,
  Backward,
  SyncLayer,  // the layer's gradients, when the plan overlaps them with the backward
  SyncRest,   // what is left after the backward: the layers' (when not overlapped), the embedding's
  Optimizer
};

struct WorkItem {
  Work work = Work::Forward;
  Segment segment = Segment::Layer;
  int layer = 0;
  int microbatch = 0;
};

// The most units stage `order` holds activations for at once (a forward adds one, a backward
// frees one): under 1F1B stage s of p holds min(p − s, m) microbatches.
int peak_in_flight(const std::vector<Unit>& order);

// The layer-major order of one stage holding every layer.
std::vector<WorkItem> layer_major(int layers, int microbatches);

}  // namespace moesim::schedule
