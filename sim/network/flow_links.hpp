// The directed links of the flow model (DESIGN.md §3). Every link of the cluster is full duplex:
// two directed links, each with its bandwidth. Per tier of the topology (cluster/fabric.hpp):
//  - switch: each worker's port links to the switch of its parent (up: leaving the worker, down:
//    entering it; one per port: a node's NICs), and, when oversubscribed, a core link per parent
//    of ports·count·bandwidth/o that every byte passing the switch crosses;
//  - full_mesh / ring: the links of their own between siblings, as the fabric numbers them.
// Then each GPU's PCIe link to its host and, with hosts described, each PCIe switch's uplink to
// the CPU.
// Links are numbered densely so per-link state lives in flat arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster/topology.hpp"

namespace moesim::network {

using cluster::kNoLink;

class FlowLinks {
 public:
  explicit FlowLinks(const cluster::Topology& topology);
  // The links the constructor numbers, without numbering them (the host-memory estimate).
  static std::size_t count(const cluster::Topology& topology);
  // Bytes per link of the tables below, grown by push_back.
  static constexpr double kBytesPerLink = sizeof(double) + sizeof(int);

  std::size_t size() const { return capacity_.size(); }
  // Port link of the tier-`tier` worker `worker` (cluster-wide index, Topology::tier_worker), switch tiers.
  std::uint32_t port(int tier, std::uint32_t worker, std::uint32_t port, bool up) const;
  // Core of the switch joining the tier-`tier` children of `parent`; kNoLink if not oversubscribed.
  std::uint32_t core(int tier, std::uint32_t parent) const;
  // The links a transfer between siblings i and j (indices inside `parent`) crosses at a mesh or
  // ring tier, appended to `out`.
  void siblings(int tier, std::uint32_t parent, std::uint32_t i, std::uint32_t j, std::vector<std::uint32_t>& out) const;
  // GPU m's PCIe link (up: towards its host) and a PCIe switch's uplink to the CPU (hosts described).
  std::uint32_t pcie(std::uint32_t gpu, bool up) const;
  std::uint32_t switch_uplink(std::uint32_t pcie_switch, bool up) const;

  double capacity(std::uint32_t link) const { return capacity_[link]; }  // bytes per second
  // The tier of a link; Topology::tier_count() for PCIe links.
  int tier(std::uint32_t link) const { return tier_[link]; }
  std::string name(std::uint32_t link) const;
  const cluster::Topology& topology() const { return topology_; }

 private:
  std::uint32_t add(int tier, double capacity);
  const cluster::Topology& topology_;
  std::vector<double> capacity_;
  std::vector<int> tier_;
  std::vector<std::uint32_t> port_base_, core_base_, sibling_base_;  // per tier; kNoLink if absent
  std::uint32_t pcie_base_ = kNoLink, switch_base_ = kNoLink;
};

}  // namespace moesim::network
