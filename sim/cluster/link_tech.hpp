// How NCCL drives a link technology (NVLink 4, InfiniBand NDR, PCIe Gen4, ...): the protocols it
// picks between and what each costs, as NCCL's own tuner models them (NVIDIA/nccl
// src/graph/tuning.cc): a collective costs
//     base latency + steps · hop latency + bytes on the busiest link / (line rate · efficiency)
// under each protocol, and NCCL runs the cheapest. LL ("low latency": 8-byte flag with every 8
// bytes of data, NCCL derates it to 1/4 of the bandwidth for all-reduce) wins small messages,
// Simple large ones. The tuner's latencies come from tuning.cc; the Simple protocol's efficiency
// and hop latency of each technology are fitted to the nccl-tests logs of realdata
// (topologies/links.json says which). NVLS (NVLink SHARP: the NVSwitch reduces and multicasts)
// is an all-reduce of its own on NVSwitch generations that have it.
// A level without a link technology is an ideal link: one protocol, its own latency per step,
// the full line rate (the papers' testbeds, which state their own α-β).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sim/core/units.hpp"

namespace moesim::cluster {

enum class Protocol : std::uint8_t { LL, Simple };
inline constexpr int kProtocols = 2;
inline constexpr std::array<Protocol, kProtocols> kAllProtocols{Protocol::LL, Protocol::Simple};
std::string_view to_string(Protocol p);

struct ProtocolCost {
  Time base = 0;          // once per collective (launch and handshake)
  Time hop = 0;           // per step of the algorithm over this link
  double efficiency = 0;  // fraction of the line rate the protocol moves; 0: NCCL does not use it here
};

// NVLS all-reduce inside one NVSwitch: each GPU's link carries S bytes each way (the switch reads
// every GPU's shard and multicasts the reduced one; network::InSwitchPhase::port_bytes) at
// `efficiency` of the line rate.
// Across NVLink domains NCCL runs NVLS-tree (src/graph/tuning.cc NCCL_ALGO_NVLS_TREE): the same
// in-switch reduction and multicast in each domain, pipelined with a tree of the domains' NICs. Its
// channels do more per byte than NVLS alone, and NCCL's tuner caps their bandwidth
// (perChMaxNVLSTreeBws) lower beyond two nodes than at two (Blackwell 80 against 96 GB/s a
// channel, Hopper 45.5 against 57.7). `tree_efficiency` scales the in-switch phase's efficiency
// when it spans two domains (fitted to the cross-domain all-reduce logs, topologies/links.json),
// and `beyond_two_domains` (NCCL's ratio) scales it again beyond two.
struct InSwitchReduction {
  Time latency = 0;
  double efficiency = 0;
  double tree_efficiency = 1.0;
  double beyond_two_domains = 1.0;
  // The in-switch phase's efficiency when the all-reduce spans `domains` NVLink domains (1: NVLS
  // alone); the one rule both network models read.
  double efficiency_across(int domains) const {
    if (domains <= 1) return efficiency;
    return efficiency * tree_efficiency * (domains > 2 ? beyond_two_domains : 1.0);
  }
};

struct LinkTech {
  std::string name;
  std::array<ProtocolCost, kProtocols> protocols{};
  std::optional<InSwitchReduction> nvls;
  // What an all-to-all (every GPU sending to many peers at once) moves relative to a ring's
  // protocol efficiency (topologies/links.json, fitted to the all-to-all logs of each technology:
  // over InfiniBand one Vultr pair reaches 45 % of the NIC rate, OCI's racks 84-90 %; realdata 19,
  // 25). Above 1 where an all-to-all keeps more of the line rate busy than a ring; times each
  // protocol's efficiency at most 1 (the loader refuses more).
  double exchange_factor = 1.0;
  std::string source;
  const ProtocolCost& protocol(Protocol p) const { return protocols[static_cast<std::size_t>(p)]; }
};
using LinkTechPtr = std::shared_ptr<const LinkTech>;

}  // namespace moesim::cluster
