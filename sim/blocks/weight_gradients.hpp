// Zero-bubble pipeline parallelism's split backward (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR 2024, §2: a layer's backward is B, the gradients of its inputs, which the previous stage
// waits for, and W, the gradients of its weights, which nothing waits for until the optimizer, so
// W can fill a bubble later), as DualPipe runs it (deepseek-ai/DualPipe@3da1bbe
// dualpipe/utils.py WeightGradStore, dualpipe/dualpipev.py): a backward marked zero-bubble queues
// each GeMM's weight gradient instead of computing it (put), its end makes them one W (flush), and
// each W step of the schedule runs the oldest W of its rank (pop), first in, first out.
//
// What a zero-bubble backward leaves to its W: the weight gradients of the attention projections
// (MLA's down and up projections too), dense FFNs, shared experts, routed experts
// (ExpertsWork::wgrad) and the LM head (layer_costs.hpp). What stays in B: the router's GeMM (T·E·H,
// 0.3 % of a DeepSeek-V3 layer's parameters), norms' weights, the embedding's gradient and an MTP
// module's projection (assumption: DualPipe's WeightGradStore holds what the model's own linear
// layers put there; its example puts every Linear's).
#pragma once

#include <deque>
#include <vector>

#include "sim/blocks/context.hpp"
#include "sim/blocks/program_builder.hpp"

namespace moesim::blocks {

class WeightGradientStore {
 public:
  // One GeMM group's weight gradients on one GPU: the task W runs for it (its layer: label.layer).
  struct Entry {
    std::uint32_t gpu;
    software::Module module;
    engine::Label label;
    compute::Work work;
  };
  // One zero-bubble backward's weight gradients: a W.
  struct Chunk {
    int microbatch = 0;
    bool last_microbatch = false;  // its layers' gradients are complete once it has run
    std::vector<int> layers;        // the backward's layers
    std::vector<Entry> entries;     // in the order the backward queued them
  };

  void put(Entry e) { cache_.push_back(e); }
  // The backward being written (of `microbatch` on `stage`, over `layers`) has ended: its weight
  // gradients are a W.
  void flush(int stage, int microbatch, bool last_microbatch, std::vector<int> layers);
  // The oldest W of `stage` (the schedule asks for one only after a zero-bubble backward queued it).
  Chunk pop(int stage);
  bool empty() const;

 private:
  std::vector<Entry> cache_;
  std::vector<std::deque<Chunk>> queues_;  // per stage
};

// GPU g's backward piece `work` after `after`, of which `wgrad` are weight gradients: written whole,
// or, in a zero-bubble backward (em.weight_gradients), without them, which are queued for its W
// (labelled as `label` with the name `wgrad_name`, on the compute stream in the current module).
engine::TaskId backward_compute(Emission& em, std::uint32_t g, compute::Work work, const compute::Work& wgrad,
                                const engine::Label& label, std::string_view wgrad_name, engine::TaskId after);

}  // namespace moesim::blocks
