// The cluster's links as a Boost.Graph: one vertex per GPU, one hub per worker of each tier above
// the GPUs (a switch, or the gateway of a mesh/ring; topology.hpp), and the hosts: with hosts
// described, each host's CPU and PCIe switches, every GPU joined to its switch by its PCIe host
// link and every switch to the CPU (level kHostLevel); without, one host vertex per GPU at the end
// of its host link. Edges carry level, bandwidth and latency.
// Routes are shortest paths by latency (Dijkstra); the analytic model derives its default α per
// level from the latency of the route between two GPUs that first differ at that level.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <vector>

#include "sim/cluster/topology.hpp"

namespace moesim::cluster {

inline constexpr int kHostLevel = -1;

struct LinkProps {
  int level = 0;
  double bytes_per_second = 0;
  Time latency = 0;
};

struct Route {
  std::vector<int> levels;  // level of each link on the way
  Time latency = 0;
  double bottleneck_bytes_per_second = 0;
};

class LinkGraph {
 public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property, LinkProps>;

  explicit LinkGraph(const Topology& topology);
  const Graph& graph() const { return graph_; }
  std::size_t vertex_count() const { return boost::num_vertices(graph_); }
  std::size_t link_count() const { return boost::num_edges(graph_); }
  Route route(std::uint32_t from_gpu, std::uint32_t to_gpu) const;
  // The PCIe link between a GPU and its host (for offload: optimizer state, weights).
  Route host_route(std::uint32_t gpu) const;

 private:
  Route route_between(std::size_t from, std::size_t to) const;
  Graph graph_;
  std::vector<std::size_t> host_of_gpu_;  // the CPU vertex each GPU's host copies reach
};

}  // namespace moesim::cluster
