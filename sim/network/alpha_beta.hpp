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
// A tier whose links name a technology (cluster/link_tech.hpp) is driven as NCCL drives it: each
// protocol has its base and hop latencies and moves its efficiency of the line rate, and a step
// runs under the cheapest protocol (steps_cost). An ideal tier has one protocol: α_t per step at
// the line rate.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
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

// One tier's part in a step of an algorithm: the bytes its busiest link carries in the step,
// counted against the worker's β (a port's load times the ports), and the weight of its hop
// latency (rings: the share of ring edges crossing it, as NCCL's tuner adds intra- and inter-node
// steps; an exchange or a transfer: 1 on the coarsest tier crossed), and the peers an exchange
// reaches across it: NCCL's grouped send/recv pays each peer one hop of its lowest-latency
// protocol (LL's, tuning.cc) on top.
struct TierLoad {
  int tier = 0;
  double bytes = 0;
  double hops = 0;
  double peers = 0;
};

// What `steps` steps cost: `duration` = base + steps·(latency per step + drain per step).
struct StepsCost {
  Time duration = 0;
  Time latency = 0;  // base + steps·hop latencies: what the flow model waits before draining
  cluster::Protocol protocol = cluster::Protocol::Simple;
};

// An override for messages of at least `from_bytes` (up to the next piece's from_bytes).
struct AlphaBetaPiece {
  double from_bytes = 0;
  AlphaBeta value;
};

class AlphaBetaTable {
 public:
  static AlphaBetaTable from_topology(const cluster::Topology& topology, const cluster::LinkGraph& graph);
  explicit AlphaBetaTable(std::vector<AlphaBeta> per_tier, std::vector<cluster::LinkTechPtr> links = {})
      : levels_(std::move(per_tier)), links_(std::move(links)) {
    links_.resize(levels_.size());
  }

  // Steps loading the tiers as `loads` say (coarsest first), under the cheapest protocol every
  // loaded tier runs. Where a profile calibrated `kind` on a loaded tier, that tier costs its
  // measured α + bytes·β and the finer ones are not charged again (analytic_model.hpp).
  // `extra_drain`: picoseconds per step on links outside the tiers (PCIe to the NIC). `drains`, if
  // not empty (one per tier), receives how much slower than its line rate each tier drains.
  // `exchange`: the step sends to many peers at once (an all-to-all), at the link's exchange
  // efficiency.
  // `tier_drains`, if not empty (one per tier and one more for the links outside the tiers), gets
  // each tier's drain over all steps under the chosen protocol, in picoseconds (pipelined phases
  // add them up tier by tier).
  StepsCost steps_cost(CollectiveKind kind, std::span<const TierLoad> loads, double steps, double extra_drain = 0,
                       std::span<double> drains = {}, bool exchange = false, std::span<double> tier_drains = {}) const;
  // The tier's NVLS all-reduce, if its links have one.
  const std::optional<cluster::InSwitchReduction>& in_switch(int tier) const;
  // The parameters for a step that moves `message_bytes` over a worker's link at tier `level`.
  AlphaBeta get(CollectiveKind kind, int level, double message_bytes = 0) const;
  // How much slower than the topology's own β a calibrated collective drains a level's links
  // (β_calibrated / β_default; 1 without an override): the flow model scales link demand by it.
  double drain_factor(CollectiveKind kind, int level, double message_bytes) const;
  // Pieces sorted by from_bytes, the first from 0.
  void override_for(CollectiveKind kind, int level, std::vector<AlphaBetaPiece> pieces);
  bool overridden(CollectiveKind kind, int level) const;
  // Whether a profile overrides `kind` at some level.
  bool calibrated(CollectiveKind kind) const;
  // How many collective steps (one steps_cost call each: a phase, or one of a pipeline's rounds)
  // were costed with the calibrated `kind` on `level` since the last reset_applied(): what a run
  // reports of each profile entry it bound (simulation/calibration_binding.hpp).
  std::uint64_t applied(CollectiveKind kind, int level) const;
  void reset_applied() const;
  const AlphaBeta& tier_default(int tier) const { return levels_[tier]; }
  int levels() const { return static_cast<int>(levels_.size()); }

 private:
  std::vector<AlphaBeta> levels_;
  std::vector<cluster::LinkTechPtr> links_;  // per tier; null: ideal
  std::vector<std::array<std::vector<AlphaBetaPiece>, kCollectiveKinds>> overrides_;
  // Per tier and kind, the calibrated costs applied (a tally, not part of the table's value: one
  // simulation's thread costs its collectives through its own table).
  mutable std::vector<std::array<std::uint64_t, kCollectiveKinds>> applied_;
};

}  // namespace moesim::network
