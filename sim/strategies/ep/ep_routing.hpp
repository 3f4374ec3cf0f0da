// The routing of one MoE layer and microbatch under expert parallelism: the dispatch traffic
// matrix of each EP group after capacity drops (combine is its transpose) and the expert compute
// of each GPU for one chunk. Sources draw their routing per layer and microbatch (dense matrix per
// group) or send their expected shares (one factored matrix shared by all groups), as
// RoutingModel::sampled decides.
#pragma once

#include <vector>

#include "sim/network/traffic_matrix.hpp"
#include "sim/strategies/strategy.hpp"

namespace moesim::strategies::ep {

struct EpLayout {
  int ep_size = 1;          // GPUs per EP group; groups are consecutive GPUs
  int groups = 1;
  int experts_per_rank = 1;  // EP rank r holds experts [r·experts_per_rank, (r+1)·experts_per_rank)
  int chunks = 1;            // pipelining degree
};

struct EpLayerRouting {
  std::vector<network::TrafficPtr> dispatch, combine;  // per EP group, or one shared by all
  std::vector<Time> expert_fwd;                        // per GPU, one chunk
  double routed_copies = 0;                            // token copies routed by all GPUs (top-k counted k times)
  double dropped_copies = 0;                           // of which dropped over capacity
};

EpLayerRouting route_layer(const StrategyContext& ctx, const EpLayout& layout, int iteration, int layer, int microbatch);

}  // namespace moesim::strategies::ep
