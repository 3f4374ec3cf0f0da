// α-β cost parameters (Hockney; Parm §V-A): a message of n bytes over a tier costs α + β·n.
// One pair per tier of the cluster (topology.hpp: a level, or the links between a level's NVLink
// domains), optionally overridden per collective kind by a calibration profile
// (sim/simulation/calibration_binding.hpp), piecewise over the bytes one step puts on a worker's
// link (NCCL changes protocol with the message size). Defaults come from the topology:
//   α_t = latency of the Boost.Graph route between two GPUs that first differ at tier t
//         (a level's latency is GPU-to-GPU one way across it, so α grows with each tier crossed);
//   β_t = picoseconds per byte of what one worker drives into the tier with even traffic
//         (cluster::TierFabric::worker_bandwidth: a switch's ports over its oversubscription, a
//         mesh's n − 1 links, a ring's two neighbour links at max(1, n/4) hops per byte).
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
  explicit AlphaBetaTable(std::vector<AlphaBeta> per_tier) : levels_(std::move(per_tier)) {}

  // The parameters for a step that moves `message_bytes` over a worker's link at tier `level`.
  AlphaBeta get(CollectiveKind kind, int level, double message_bytes = 0) const;
  // How much slower than the topology's own β a calibrated collective drains a level's links
  // (β_calibrated / β_default; 1 without an override): the flow model scales link demand by it.
  double drain_factor(CollectiveKind kind, int level, double message_bytes) const;
  // Pieces sorted by from_bytes, the first from 0.
  void override_for(CollectiveKind kind, int level, std::vector<AlphaBetaPiece> pieces);
  bool overridden(CollectiveKind kind, int level) const;
  const AlphaBeta& tier_default(int tier) const { return levels_[tier]; }
  int levels() const { return static_cast<int>(levels_.size()); }

 private:
  std::vector<AlphaBeta> levels_;
  std::vector<std::array<std::vector<AlphaBetaPiece>, kCollectiveKinds>> overrides_;
};

}  // namespace moesim::network
