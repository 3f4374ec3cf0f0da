// The wire traffic of a fused EP dispatch and combine (parallel.ep_backend deepep or hybridep;
// seed 001, spec seeds-001-002-004.md 001.A.3 and 001.A.2 "Hierarchy"):
//  - per-rank de-duplication: a token travels once to every rank that holds one of its experts,
//    however many of them it selected there;
//  - across NVLink domains (an EP group over several racks or nodes; DeepEP's internode kernels,
//    HybridEP with nodes = EP / ranks_per_node > 1): a token crosses the network once per
//    destination domain, to the relay rank there that has the source's local index (DeepEP's
//    RDMA peer of the same NVLink rank), and is fanned out over NVLink to the domain's ranks that
//    need it; RDMA and NVLink forwarding are pipelined in chunks. The combine is the reverse: each
//    rank's outputs go over NVLink to the relay, which reduces them, and one row per token goes
//    back over the network. The backward of each is the other's pattern on gradients.
// A domain is a worker of the tier just above the GPUs' own fabric (cluster/topology.hpp): an
// NVLink domain where a level has domains, else the node or rack the innermost fabric joins.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/cluster/topology.hpp"
#include "sim/network/traffic_matrix.hpp"

namespace moesim::blocks {

// Per rank (or domain) of share q of a source's token copies, with `experts` experts and top-k
// `top_k`: the distinct tokens per copy. A token's K experts are drawn without repeat, so it
// selects none of the holder's with probability Π_{i<K} (1 − q·E/(E − i)), exactly
// C(E − E_r, K)/C(E, K) when the holder's E_r experts are as popular as the rest (DeepSeek-V3 at
// EP 64: 0.8801); the distinct tokens per copy are (1 − that)/(K·q).
std::vector<double> distinct_per_copy(const std::vector<double>& share, int experts, int top_k);

// The ranks of a group by domain: each rank's domain (0..domains−1, in order of first member) and
// its index among its domain's members; `members[d]`: domain d's ranks in group order.
struct DomainLayout {
  std::vector<std::uint32_t> domain, local;
  std::vector<std::vector<std::uint32_t>> members;
  std::size_t domains() const { return members.size(); }
};
DomainLayout domain_layout(const cluster::Topology& topology, std::span<const std::uint32_t> gpus);

// One exchange's traffic: the end-to-end bytes each rank sends each rank, and, when the group
// spans domains, the pipelined stages the bytes take on the wire (empty: one exchange).
struct FusedTraffic {
  network::TrafficPtr dispatch, combine;
  std::vector<network::TrafficPtr> dispatch_stages, combine_stages;
};

// From the bytes of token copies each source routes to each rank (`copies`, before
// de-duplication; factored or dense) and each rank's share of a source's copies (`rank_share`).
// Throws InfeasibleError when a group spanning domains has more than 2048 ranks (its stage
// matrices are dense).
FusedTraffic fused_traffic(const network::TrafficMatrix& copies, const std::vector<double>& rank_share, int experts,
                           int top_k, const DomainLayout& layout);

}  // namespace moesim::blocks
