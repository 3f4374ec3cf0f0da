// The routing of one MoE layer and microbatch under expert parallelism: the dispatch traffic
// matrix of each all-to-all group after capacity drops (combine is its transpose) and the expert
// compute of each GPU for one chunk. Sources draw their routing per layer and microbatch (dense
// matrix per group) or send their expected shares (one factored matrix shared by all groups), as
// RoutingModel::sampled decides. The layout is general: plain EP (groups of consecutive GPUs,
// rank r computes experts [r·E/n, (r+1)·E/n)) and HybridEP (same-offset groups whose member j
// computes every expert of expert domain j) both describe themselves as an EpLayout.
#pragma once

#include <vector>

#include "sim/network/traffic_matrix.hpp"
#include "sim/strategies/strategy.hpp"

namespace moesim::strategies::ep {

struct EpLayout {
  // All-to-all groups, each of the same size n; members[j] is the GPU of rank j.
  std::vector<std::vector<std::uint32_t>> groups;
  std::vector<int> rank_of_gpu;                  // rank of each GPU inside its group
  std::vector<std::vector<int>> experts_of_rank;  // experts rank j computes (tokens routed to them go to j)
  int chunks = 1;                                // pipelining degree
  int size() const { return static_cast<int>(experts_of_rank.size()); }
  // Plain EP: groups of `ep_size` consecutive GPUs, rank r computes E/ep_size consecutive experts.
  static EpLayout consecutive(std::uint32_t gpus, int ep_size, int experts, int chunks);
};

struct EpLayerRouting {
  std::vector<network::TrafficPtr> dispatch, combine;  // per EP group, or one shared by all
  std::vector<Time> expert_fwd;                        // per GPU, one chunk
  double routed_copies = 0;                            // token copies routed by all GPUs (top-k counted k times)
  double dropped_copies = 0;                           // of which dropped over capacity
};

EpLayerRouting route_layer(const StrategyContext& ctx, const EpLayout& layout, int iteration, int layer, int microbatch);

}  // namespace moesim::strategies::ep
