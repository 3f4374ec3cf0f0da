// The analytic network model: each collective costs α + β·bytes per phase (collective_plan.hpp
// says which phases an algorithm has), per level.
//  - direct all-to-all(v): all sends run at once; at each level l the busiest worker (most bytes
//    leaving or entering it, from the traffic matrix) needs load·β_l; the collective lasts the α of
//    the coarsest level it crosses plus its slowest level's load·β (HybridEP Eq. 3: D·(G−1)/G per
//    GPU for even routing).
//  - hierarchical (2-D) all-to-all: an intra-node phase that regroups data by destination local
//    rank, then an inter-node phase between GPUs of equal local rank; phases add up.
//  - ring all-gather / reduce-scatter / all-reduce: (n−1), (n−1), 2(n−1) steps of P, S/n, S/n
//    bytes (HybridEP Eq. 4: P_E·(G−1) per GPU; all-reduce 2(G−1)/G·S); each step costs the α of
//    the coarsest level the ring crosses plus the slowest level's chunk·β, counting the ring edges
//    that share a worker's uplink.
//  - hierarchical all-reduce: reduce-scatter in the node, all-reduce across nodes on S/k,
//    all-gather in the node, pipelined: latencies add up, and each tier drains what all three put
//    on it, the slowest tier setting the time (the flow model drains them as one flow).
//  - NVLS all-reduce: the link's NVLS latency plus S bytes on each GPU's port (InSwitchPhase) at the NVLS
//    efficiency of the line rate.
// On tiers whose links name a technology every step runs under the cheapest NCCL protocol
// (AlphaBetaTable::steps_cost).
//  - point-to-point: α of the coarsest level crossed plus bytes times the slowest β on the way.
//  - host copy: the GPU's PCIe latency (and its switch's uplink latency, with hosts described)
//    plus bytes over the slower of the two.
// Levels here are the topology's tiers (a level, or the links between a level's NVLink domains);
// a worker with several ports (NICs) is loaded per port. With hosts described, traffic that
// leaves a host also crosses each GPU's PCIe link to the NIC, which may be the slowest link.
// Where a calibration profile set the coarsest level a phase crosses for its kind, that level
// alone costs the phase: its α-β come from timing the whole collective on real hardware
// (calibration_binding.hpp), finer levels included, so the finer levels' own α-β (topology
// defaults, or a smaller entry's) are not charged again; the entry's own shape then reproduces its
// measurement.
// Collectives are costed alone: contention between concurrent collectives is the flow model's.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sim/cluster/topology.hpp"
#include "sim/network/alpha_beta.hpp"
#include "sim/network/collective.hpp"
#include "sim/network/collective_plan.hpp"

namespace moesim::network {

struct CollectiveCost {
  Time duration = 0;
  Time latency = 0;                    // the part of duration that is latency, not draining bytes
  std::vector<double> bytes_by_level;  // bytes whose coarsest crossed tier is t
  std::uint64_t pairs = 0;             // ordered GPU pairs that exchange data (HybridEP Table VII)
  double max_bytes_sent_per_gpu = 0;
  double host_bytes = 0;               // bytes copied between GPUs and their hosts
  // How it ran (`moesim collective --compare` prints it): the NCCL protocols its steps took (bit
  // 1 << cluster::Protocol), and the NVLink domains of its in-switch phase (0: none; 1: NVLS alone;
  // more: NVLS-tree across them).
  std::uint8_t protocols = 0;
  int in_switch_domains = 0;
};
// "nvls", "nvls-tree + ring Simple", "ring LL", "direct Simple", ...: a collective's resolved
// `algorithm` and what its cost says ran.
std::string describe(Algorithm algorithm, const CollectiveCost& cost);

class AnalyticModel {
 public:
  AnalyticModel(const cluster::Topology& topology, AlphaBetaTable params);
  CollectiveCost cost(const CollectiveOp& op, std::span<const std::uint32_t> members) const;
  // The algorithm an op runs: Auto becomes the cheapest of ring, hierarchical and NVLS for an
  // all-reduce (ring for the others), Nvls becomes ring where no NVSwitch with NVLS joins the group.
  Algorithm resolve(const CollectiveOp& op, std::span<const std::uint32_t> members) const;
  const AlphaBetaTable& params() const { return params_; }
  const cluster::Topology& topology() const { return topology_; }

 private:
  // One direct exchange: every sender at once; the busiest worker of each level sets its drain.
  // Phases fill `tier_drains` (one per tier and one for the PCIe links) when they are pipelined.
  CollectiveCost exchange(CollectiveKind kind, const TrafficMatrix& t, std::span<const std::uint32_t> members,
                          std::span<double> tier_drains = {}) const;
  // Concurrent rings (each a list of GPUs), `steps` steps of `chunk` bytes per ring edge.
  CollectiveCost rings(CollectiveKind kind, const std::vector<std::vector<std::uint32_t>>& rings, double steps,
                       double chunk, std::span<double> tier_drains = {}) const;
  CollectiveCost p2p(double bytes, std::uint32_t from, std::uint32_t to, std::span<double> tier_drains = {}) const;
  CollectiveCost host_copy(double bytes, std::uint32_t gpu) const;
  CollectiveCost in_switch(const InSwitchPhase& phase, std::span<double> tier_drains = {}) const;
  CollectiveCost cost_resolved(const CollectiveOp& op, std::span<const std::uint32_t> members) const;

  const cluster::Topology& topology_;
  AlphaBetaTable params_;
};

void accumulate(CollectiveCost& into, const CollectiveCost& phase);

}  // namespace moesim::network
