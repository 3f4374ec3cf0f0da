// Schedules: the order in which every GPU runs an iteration's work (DESIGN.md §8), as a list of
// work items — (forward | backward, embedding | layer | LM head, microbatch), the points where
// gradients are synchronised, and the optimizer step. The iteration program (iteration_program.hpp)
// walks the list and asks the blocks for each item's tasks; a plan names its schedule.
//   data_parallel: microbatch after microbatch, each forward through all layers then backward
//   (gradient accumulation, as DDP/DeepSpeed run it); each layer's gradients are synchronised
//   as its last microbatch's backward ends, the rest after the backward.
//   layer_major (HeterMoE Theorem 1, §4.1): forward layer by layer with the microbatches inner; at
//   the last layer each microbatch's forward, LM head and backward back to back; then backward
//   layer by layer with the microbatches inner. Each layer's gradients are synchronised after its
//   last microbatch's backward.
#pragma once

#include <vector>

#include "sim/parallel/iteration_plan.hpp"

namespace moesim::schedule {

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

std::vector<WorkItem> order(parallel::ScheduleKind kind, int layers, int microbatches);

}  // namespace moesim::schedule
