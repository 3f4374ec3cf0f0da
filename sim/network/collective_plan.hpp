// How a collective runs, independent of how its time is computed: a sequence of phases, each a
// direct exchange given by a traffic matrix, a set of concurrent rings stepping in lockstep, or one
// point-to-point transfer. The analytic model costs each phase with α-β; the flow model turns each
// into link demands that compete with other collectives.
//  - all-to-all direct: one exchange; hierarchical (2-D): an exchange inside each node that
//    regroups data by destination local rank, then one between GPUs of equal local rank; staged
//    (CollectiveOp::stages): the caller's exchanges, pipelined;
//  - all-gather / reduce-scatter / all-reduce: ring (n−1, n−1, 2(n−1) steps of P, S/n, S/n), direct
//    (every rank to every rank: P per pair; S/n per pair; both), or hierarchical (reduce-scatter in
//    the node, the collective across nodes on S/k, all-gather in the node; for all-reduce the three
//    pipelined, the node's part by NVLS where its switch has it);
//  - all-reduce by NVLS: one in-switch phase;
//  - point-to-point: one transfer;
//  - host copy: one copy between a GPU and its host.
#pragma once

#include <span>
#include <variant>
#include <vector>

#include "sim/cluster/topology.hpp"
#include "sim/network/alpha_beta.hpp"
#include "sim/network/collective.hpp"

namespace moesim::network {

struct ExchangePhase {
  TrafficPtr traffic;  // ranks of the collective's group
};

struct RingPhase {
  std::vector<std::vector<std::uint32_t>> rings;  // GPUs of each ring, all running at once
  double steps = 0;
  double chunk = 0;  // bytes per ring edge per step
};

struct TransferPhase {
  std::uint32_t from = 0, to = 0;  // GPUs
  double bytes = 0;
};

struct HostCopyPhase {
  std::uint32_t gpu = 0;
  double bytes = 0;
  bool to_host = true;
};

// NVLS all-reduce of `bytes` per GPU inside each group; a group's GPUs are workers of `tier`
// (one NVSwitch) and each GPU's port carries port_bytes() each way.
struct InSwitchPhase {
  std::vector<std::vector<std::uint32_t>> groups;
  int tier = 0;
  double bytes = 0;
  // The NVLink domains the all-reduce spans: 1 for NVLS alone, the domain count when this phase is
  // the in-domain part of an all-reduce across them (NCCL's NVLS-tree;
  // cluster::InSwitchReduction::efficiency_across).
  int domains = 1;
  // What one GPU's port carries each way, the one rule both network models follow: its whole
  // buffer out once (the switch's multimem reductions read every shard of it) and the whole reduced
  // buffer in once (the multicast of every shard), S. The shard the GPU reduces for itself and its
  // own copy of the multicast (S/n each way, which the physical path also carries) are left out:
  // NCCL's own tuner gives NVLS a bus bandwidth independent of the rank count
  // (src/graph/tuning.cc), and OCI's NVL72 racks measure it growing 1.02-1.11x from 8 to 64 ranks
  // (realdata 25), where S gives 2(n-1)/n of the port's rate (1.125x) and S(n+1)/n gave 1.25x.
  double port_bytes() const { return bytes; }
};

struct CollectivePhase {
  CollectiveKind kind = CollectiveKind::AllToAll;  // whose α-β parameters apply
  std::variant<ExchangePhase, RingPhase, TransferPhase, HostCopyPhase, InSwitchPhase> work;
  // Pipelined with the next phase (NCCL's hierarchical all-reduce streams chunks through the
  // node's reduce, the cross-node all-reduce and the node's gather): their latencies add up and
  // their bytes drain together.
  bool overlaps_next = false;
};

// The tier whose single switch joins all `members` as workers of one GPU each and has NVLS: where
// an NVLS all-reduce can run; −1 if none.
int nvls_tier(std::span<const std::uint32_t> members, const cluster::Topology& topology, const AlphaBetaTable& params);

// Algorithm::Auto and Nvls are resolved before planning (AnalyticModel::resolve); plan_collective
// treats Nvls over `nvls_at` (a tier from nvls_tier) and everything else as named.
// Throws InfeasibleError for a hierarchical all-to-all over more than 2048 GPUs (its phase
// matrices are dense).
std::vector<CollectivePhase> plan_collective(const CollectiveOp& op, std::span<const std::uint32_t> members,
                                             const cluster::Topology& topology, const AlphaBetaTable& params);

// Members grouped by node (the level above GPUs), in member order; empty if the groups are uneven
// or the cluster has one level.
std::vector<std::vector<std::uint32_t>> local_groups(std::span<const std::uint32_t> members,
                                                     const cluster::Topology& topology);

// Renumbers the tier-`tier` workers of `members` as 0..k−1 (ids[r]); returns k. `global`, if
// given, receives the cluster-wide index of each renumbered worker.
std::uint32_t compress_workers(const cluster::Topology& topology, std::span<const std::uint32_t> members, int tier,
                               std::vector<std::uint32_t>& ids, std::vector<std::uint32_t>* global = nullptr);
// Every tier's ids of `members` (the tiered traffic matrix's RankTiers).
RankTiers rank_tiers(const cluster::Topology& topology, std::span<const std::uint32_t> members);
// The same for the ports of those workers the members use (global index: worker·ports + port).
std::uint32_t compress_ports(const cluster::Topology& topology, std::span<const std::uint32_t> members, int tier,
                             std::vector<std::uint32_t>& ids, std::vector<std::uint32_t>* global = nullptr);
// The same for the members' hosts.
std::uint32_t compress_hosts(const cluster::Topology& topology, std::span<const std::uint32_t> members,
                             std::vector<std::uint32_t>& ids);

// What one step of concurrent rings puts on each tier (coarsest first, tiers the rings cross):
// the busiest worker's leaving ring edges times `chunk`. NCCL runs a ring as several channels that
// leave a worker through different GPUs, so a worker's crossing edges spread over the ports
// (NICs) its ring members use: a 16-GPU ring over two 8-NIC nodes drives all 8 NICs, not the one
// of the GPU that closes the ring. Hop weights: the share of ring edges whose coarsest crossed
// tier is this one.
std::vector<TierLoad> ring_loads(const cluster::Topology& topology, const std::vector<std::vector<std::uint32_t>>& rings,
                                 double chunk);
// The ports (NICs) of each tier-`tier` worker that the rings' members use, in order of first use:
// NCCL's ring channels leave a worker through all of them. Empty when the tier's workers have one
// port each.
std::vector<std::vector<std::uint32_t>> ring_ports(const cluster::Topology& topology,
                                                   const std::vector<std::vector<std::uint32_t>>& rings, int tier);
// What one point-to-point transfer of `bytes` puts on each tier: every tier from the coarsest
// crossed down, through one port of each worker (a port's load counted against the worker's β).
std::vector<TierLoad> transfer_loads(const cluster::Topology& topology, std::uint32_t from, std::uint32_t to, double bytes);
// For a direct exchange among `members`: per tier, the most peers a member has whose coarsest
// tier crossed is this one. NCCL runs an all-to-all as grouped send/recv, so the exchange pays a
// latency per peer (AlphaBetaTable::steps_cost).
std::vector<double> peers_by_tier(const cluster::Topology& topology, std::span<const std::uint32_t> members);
// Bytes whose coarsest crossed tier is t when every ring edge carries `bytes`.
std::vector<double> ring_bytes_by_tier(const cluster::Topology& topology,
                                       const std::vector<std::vector<std::uint32_t>>& rings, double bytes);

}  // namespace moesim::network
