// The parallel layouts `moesim search` considers for one model on one cluster: every combination
// of tensor (TP), pipeline (PP), virtual pipeline (VP), context (CP), expert (EP) and expert tensor
// (ETP) parallel sizes, micro-batch size, recomputation, optimizer sharding and EP dispatcher that
// Megatron-Core would accept for the global batch. The rules are
// Megatron-Core's (megatron/training/arguments.py, megatron/core/parallel_state.py), taken where
// moesim already states them: parallel::layout_problems (TP × CP × PP divides the GPUs; EP × ETP
// divides a pipeline stage; EP divides the experts), parallel::stage_layers (the layers split over
// PP × VP virtual stages), plus the ones a layout search needs on top:
//   - TP stays inside the innermost level (the NVLink domain), the only place Megatron's
//     recipes put it, and divides the attention heads and the key-value heads (num_query_groups);
//   - VP > 1 only with PP > 1 (the interleaved schedule), and the microbatches per data-parallel
//     rank a multiple of PP (Megatron's interleaved schedule asks for it);
//   - CP splits each sequence into 2·CP chunks (Megatron-Core's load-balanced causal split): the
//     sequence a multiple of 2·CP;
//   - ETP inside the NVLink domain, as TP, and dividing the experts' FFN width;
//   - the global batch a multiple of micro-batch × DP (DP = GPUs / (TP × CP × PP)).
// Every layout names its first and last virtual stage's layers (stage_split), the way Megatron's
// recipes write `num_layers_in_first/last_pipeline_stage` where the layers do not split evenly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moesim::search {

// What the rules read from the scenario.
struct LayoutInputs {
  std::uint64_t gpus = 1;
  int domain_gpus = 1;  // GPUs of the innermost level (one NVLink domain)
  int layers = 1, experts = 1, heads = 1, kv_heads = 1;
  int global_batch = 1;  // sequences per iteration
  int sequence = 1;      // tokens per sequence
  int expert_ffn = 1;    // the experts' FFN width
};

// The values each dimension may take (the search's grid before the rules).
struct SearchSpace {
  std::vector<int> tp, pp, vp, cp, ep, etp, mbs;
  std::vector<std::string> recompute, sharding, dispatcher;
};

// What the scenario itself sets for the dimensions the search keeps unless asked.
struct ScenarioChoices {
  int cp = 1, etp = 1;
  std::string recompute = "none", sharding = "none", dispatcher = "nccl";
};

// TP 1, 2, 4, 8 up to the NVLink domain; PP and VP 1, 2, 4, 8, 16 (VP up to 8); EP every power of
// two up to the experts; micro-batch 1, 2, 4, 8; CP, ETP, recomputation, sharding and dispatcher
// as the scenario has them.
SearchSpace default_space(const LayoutInputs& in, const ScenarioChoices& own);

struct Layout {
  int tp = 1, pp = 1, vp = 1, ep = 1, mbs = 1;
  std::string recompute;
  int cp = 1, etp = 1;
  std::string sharding = "none", dispatcher = "nccl";  // parallel.sharding, parallel.ep_backend
  int first_stage_layers = 0, last_stage_layers = 0;  // decoder layers (MTP modules follow the last)
  // A non-blocking dispatcher's buffer (parallel.ep_capacity_factor; 0: the scenario has none): the
  // scenario's, as the same multiple of balanced routing's share at this EP (balanced_capacity).
  double capacity_factor = 0;
  friend bool operator==(const Layout&, const Layout&) = default;
};

// The buffer share that holds balanced routing at EP `ep` (docs/scenario.md, ep_capacity_factor):
// k / (EP × min(k, local experts)); DeepSeek-V3 (256 experts, top-8): 0.03125 at EP 64, 0.125 at 8.
double balanced_capacity(int experts, int top_k, int ep);

// Every layout of `space` the rules accept, TP slowest, then PP, VP, CP, EP, ETP, micro-batch,
// recompute, sharding, dispatcher.
std::vector<Layout> enumerate_layouts(const LayoutInputs& in, const SearchSpace& space);

// The first and last virtual stage's layers of `layers` over `stages`: the even share when they
// split evenly (all of them for one stage); else the longest first stage (at most the others'
// length) that leaves a last stage of at least one layer and the rest even; {0, 0} when no such
// split exists. DeepSeek-V3's 61 layers over 16: first 4, last 1, 4 each between.
std::pair<int, int> stage_split(int layers, int stages);

}  // namespace moesim::search
