// α-β cost parameters (Hockney; Parm §V-A): a message of n bytes over a level costs α + β·n.
// One pair per level of the cluster, optionally overridden per collective kind by a calibration
// profile (sim/simulation/calibration_binding.hpp), piecewise over the bytes one step puts on a
// worker's link (NCCL changes protocol with the message size). Defaults come from the topology:
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

// An override for messages of at least `from_bytes` (up to the next piece's from_bytes).
struct AlphaBetaPiece {
  double from_bytes = 0;
  AlphaBeta value;
};

class AlphaBetaTable {
 public:
  static AlphaBetaTable from_topology(const cluster::Topology& topology, const cluster::LinkGraph& graph);
  explicit AlphaBetaTable(std::vector<AlphaBeta> per_level) : levels_(std::move(per_level)) {}

  // The parameters for a step that moves `message_bytes` over a worker's link at `level`.
  AlphaBeta get(CollectiveKind kind, int level, double message_bytes = 0) const;
  // How much slower than the topology's own β a calibrated collective drains a level's links
  // (β_calibrated / β_default; 1 without an override): the flow model scales link demand by it.
  double drain_factor(CollectiveKind kind, int level, double message_bytes) const;
  // Pieces sorted by from_bytes, the first from 0.
  void override_for(CollectiveKind kind, int level, std::vector<AlphaBetaPiece> pieces);
  bool overridden(CollectiveKind kind, int level) const;
  const AlphaBeta& level_default(int level) const { return levels_[level]; }
  int levels() const { return static_cast<int>(levels_.size()); }

 private:
  std::vector<AlphaBeta> levels_;
  std::vector<std::array<std::vector<AlphaBetaPiece>, 5>> overrides_;
};

}  // namespace moesim::network
