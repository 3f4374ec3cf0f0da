// The directed links of the flow model (DESIGN.md §3, issue "flow-level network model"). Every
// link of the cluster is full duplex: two directed links, each with the level's bandwidth.
//  - switch fabric: each worker's uplink to the switch of its parent (up: leaving the worker, down:
//    entering it); an oversubscribed switch (o > 1) also has a core link of count·bandwidth/o that
//    every byte passing through it crosses;
//  - full_mesh fabric: a directed link between every ordered pair of sibling workers;
//  - ring fabric: directed links between ring neighbours, both ways round.
// Links are numbered densely so per-link state lives in flat arrays.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cluster/topology.hpp"

namespace moesim::network {

inline constexpr std::uint32_t kNoLink = UINT32_MAX;

class FlowLinks {
 public:
  explicit FlowLinks(const cluster::Topology& topology);

  std::size_t size() const { return capacity_.size(); }
  // Uplink of the level-`level` worker `worker` (cluster-wide index, Topology::worker), switch levels.
  std::uint32_t uplink(int level, std::uint32_t worker, bool up) const;
  // Core of the switch joining the level-`level` children of `parent`; kNoLink if not oversubscribed.
  std::uint32_t core(int level, std::uint32_t parent) const;
  // Link from sibling worker i to sibling j (indices inside their parent) at a mesh or ring level.
  std::uint32_t sibling(int level, std::uint32_t parent, std::uint32_t i, std::uint32_t j) const;

  double capacity(std::uint32_t link) const { return capacity_[link]; }  // bytes per second
  int level(std::uint32_t link) const { return level_[link]; }
  std::string name(std::uint32_t link) const;
  const cluster::Topology& topology() const { return topology_; }

 private:
  std::uint32_t add(int level, double capacity);
  const cluster::Topology& topology_;
  std::vector<double> capacity_;
  std::vector<int> level_;
  std::vector<std::uint32_t> uplink_base_, core_base_, sibling_base_;  // per level; kNoLink if absent
};

}  // namespace moesim::network
