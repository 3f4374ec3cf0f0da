// α-β cost parameters (Hockney; Parm §V-A): a message of n bytes over a level costs α + β·n.
// One pair per level of the cluster, optionally overridden per collective kind by a calibration
// profile. Defaults come from the topology:
//   α_l = latency of the Boost.Graph route between two GPUs that first differ at level l
//         (a level's latency is GPU-to-GPU one way across it, so α grows with each level crossed);
//   β_l = picoseconds per byte of one worker's share of the level's fabric:
//         switch: oversubscription / bandwidth;   full_mesh: 1 / (bandwidth·(n−1)), exact for even
//         traffic over the n−1 dedicated links;   ring: h / (2·bandwidth), two neighbour links
//         and an average of h = max(1, n/4) hops per byte.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "sim/cluster/link_graph.hpp"
#include "sim/cluster/topology.hpp"
#include "sim/network/collective.hpp"

namespace moesim::network {

struct AlphaBeta {
  Time alpha = 0;
  double beta = 0;  // picoseconds per byte
  Time cost(double bytes) const;
};

class AlphaBetaTable {
 public:
  static AlphaBetaTable from_topology(const cluster::Topology& topology, const cluster::LinkGraph& graph);
  explicit AlphaBetaTable(std::vector<AlphaBeta> per_level) : levels_(std::move(per_level)) {}

  AlphaBeta get(CollectiveKind kind, int level) const;
  void override_for(CollectiveKind kind, int level, AlphaBeta value);
  const AlphaBeta& level_default(int level) const { return levels_[level]; }
  int levels() const { return static_cast<int>(levels_.size()); }

 private:
  std::vector<AlphaBeta> levels_;
  std::vector<std::array<std::optional<AlphaBeta>, 5>> overrides_;
};

}  // namespace moesim::network
