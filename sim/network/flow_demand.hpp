// Link demands of a collective phase for the flow model: the bytes each directed link must carry.
// Transfers are aggregated at the coarsest level that keeps every link's load exact: a direct
// exchange is reduced to each port's bytes leaving and entering its worker at each tier (O(GPUs)
// for a factored traffic matrix, not O(GPU pairs)), sibling pairs only where the fabric is a mesh
// or ring; rings and point-to-point transfers add their bytes along the tree route. With hosts
// described, what leaves a host also crosses the GPUs' PCIe links, and a host copy crosses its
// GPU's PCIe link and its switch's uplink. The phase's latency and each tier's drain factor (how
// much slower than its line rate it drains) come from AlphaBetaTable::steps_cost, which picks the
// protocol as the analytic model does; a host copy's latency is the PCIe latencies.
#pragma once

#include <span>
#include <vector>

#include "sim/network/alpha_beta.hpp"
#include "sim/network/collective_plan.hpp"
#include "sim/network/flow_links.hpp"

namespace moesim::network {

struct LinkDemand {
  std::uint32_t link = 0;
  double bytes = 0;
};

struct FlowPhase {
  Time latency = 0;
  std::vector<LinkDemand> demand;
  std::vector<double> bytes_by_level;  // bytes whose coarsest crossed tier is t
  double host_bytes = 0;               // bytes copied between a GPU and its host
};

class FlowDemands {
 public:
  FlowDemands(const FlowLinks& links, const AlphaBetaTable& params);
  FlowPhase demand(const CollectivePhase& phase, std::span<const std::uint32_t> members) const;

 private:
  void exchange(CollectiveKind kind, const TrafficMatrix& t, std::span<const std::uint32_t> members, FlowPhase& out) const;
  // Adds `bytes` from GPU u to GPU v along the tree; returns the coarsest tier crossed (−1: none).
  // With `spread` (a ring's channels), a switch tier with several ports carries the bytes that
  // cross it evenly over the ports the ring's members use in the sending and receiving workers.
  using PortSpread = std::vector<std::vector<std::uint32_t>>;  // per tier worker: ports used
  int add_path(std::uint32_t u, std::uint32_t v, double bytes, const std::vector<PortSpread>* spread = nullptr) const;
  void add(std::uint32_t link, double bytes) const;
  // Sibling workers i → j of `parent` at a mesh or ring tier.
  void add_sibling(int tier, std::uint32_t parent, std::uint32_t i, std::uint32_t j, double bytes) const;
  void host_copy(const HostCopyPhase& copy, FlowPhase& out) const;
  void collect(FlowPhase& out) const;
  mutable std::vector<std::uint32_t> route_;  // scratch for sibling routes

  const FlowLinks& links_;
  const cluster::Topology& topology_;
  const AlphaBetaTable& params_;
  mutable std::vector<double> scratch_;          // per link, zero between calls
  mutable std::vector<std::uint32_t> touched_;   // links with scratch_ != 0
  // Per tier (and one more for host links), the drain factor of the phase being added
  // (AlphaBetaTable::steps_cost): a protocol, or a profile's measurement, that drains a tier at a
  // fraction of its links' bandwidth puts bytes / fraction of demand on them; applied in collect().
  mutable std::vector<double> drain_;
};

}  // namespace moesim::network
