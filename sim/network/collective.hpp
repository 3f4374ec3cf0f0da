// A collective operation as the strategies describe it: kind, algorithm, the group of GPUs in rank
// order, and its size (bytes per rank, or a traffic matrix for all-to-all(v) and for the uneven
// all-gather(v) and reduce-scatter(v)). Groups are interned
// so thousands of collectives over the same EP or DP group share one member list.
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/core/enum_names.hpp"
#include "sim/network/traffic_matrix.hpp"

namespace moesim::network {

// HostCopy: one GPU's copy to (or from) its host's memory over PCIe (a group of one GPU).
enum class CollectiveKind : std::uint8_t { AllToAll, AllGather, ReduceScatter, AllReduce, P2P, HostCopy, Count };
inline constexpr int kCollectiveKinds = static_cast<int>(CollectiveKind::Count);
// Tree: all-reduce as NCCL's (double binary) trees: the ring's bytes, but 2·⌈log2 n⌉ latency steps
// instead of 2(n−1); inside nodes it reduces and gathers by rings, as Hierarchical.
// Nvls: all-reduce inside one NVSwitch by NVLink SHARP (cluster/link_tech.hpp), where the links
// have it (else a ring). Auto: as NCCL's tuner, the cheapest the analytic model finds of ring,
// hierarchical (pipelined, NVLS inside nodes where it exists) and NVLS.
enum class Algorithm : std::uint8_t { Direct, Ring, Hierarchical, Tree, Nvls, Auto };
// In the order scenario.all_reduce offers them.
inline constexpr auto kAlgorithmNames =
    enum_names<Algorithm>({{Algorithm::Auto, "auto"}, {Algorithm::Ring, "ring"}, {Algorithm::Hierarchical, "hierarchical"},
                           {Algorithm::Tree, "tree"}, {Algorithm::Nvls, "nvls"}, {Algorithm::Direct, "direct"}});
std::string_view to_string(CollectiveKind k);
std::string_view to_string(Algorithm a);

using GroupId = std::uint32_t;

class GroupTable {
 public:
  GroupId intern(std::vector<std::uint32_t> gpus);
  const std::vector<std::uint32_t>& members(GroupId id) const { return groups_[id]; }
  std::size_t size() const { return groups_.size(); }

 private:
  std::vector<std::vector<std::uint32_t>> groups_;
  std::unordered_map<std::string, GroupId> index_;
};

struct CollectiveOp {
  CollectiveKind kind = CollectiveKind::AllToAll;
  Algorithm algorithm = Algorithm::Direct;
  GroupId group = 0;
  // AllGather: bytes each rank contributes. ReduceScatter/AllReduce: the full buffer on each rank.
  // P2P: bytes sent from rank 0 to rank 1 of the group. HostCopy: bytes copied.
  double bytes = 0;
  // AllToAll: who sends what to whom. AllGather/ReduceScatter with uneven shares (NCCL's grouped
  // send/recv, as PyTorch runs all_gather with unequal output splits): each rank's bytes to every
  // other rank, exchanged directly; `bytes` is then unused.
  TrafficPtr traffic;
  // AllToAll in explicit stages over the group, each pipelined into the next (a fused EP dispatch
  // across NVLink domains, blocks/fused_dispatch.hpp: RDMA to one relay per destination domain,
  // then the NVLink fan-out). `traffic` then holds the end-to-end bytes (its pairs are counted).
  std::vector<TrafficPtr> stages{};
  bool to_host = true;   // HostCopy: device to host (else host to device)
  // The identical collectives of the run this one stands for: where identical replicas are
  // simulated once (simulation/replica_symmetry.hpp), one over a replica's own group stands for one
  // per replica; its statistics count that many.
  std::uint32_t copies = 1;
};

}  // namespace moesim::network
