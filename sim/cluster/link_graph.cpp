#include "sim/cluster/link_graph.hpp"

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/property_map/transform_value_property_map.hpp>
#include <limits>

namespace moesim::cluster {

LinkGraph::LinkGraph(const Topology& topo) : graph_(topo.gpu_count()) {
  // child_vertex[w]: the vertex standing for worker w of the tier being joined (GPUs first).
  std::vector<std::size_t> child_vertex(topo.gpu_count());
  for (std::uint32_t m = 0; m < topo.gpu_count(); ++m) child_vertex[m] = m;
  for (int t = topo.tier_count() - 1; t >= 0; --t) {
    const Tier& tier = topo.tiers()[t];
    // A tier's latency is GPU-to-GPU one way across it: half on each side of a switch or gateway.
    const double bw = tier.ports * tier.bandwidth.bytes_per_second / tier.oversubscription;
    const int level = topo.level_of_tier(t);
    const LinkProps uplink{level, bw, tier.latency / 2};
    const LinkProps direct{level, bw, tier.latency};
    const auto pairs = topo.fabric(t).direct_links();
    const std::uint32_t parents = t == 0 ? 1 : topo.tier_workers(t - 1);
    std::vector<std::size_t> hubs(parents);
    for (std::uint32_t p = 0; p < parents; ++p) {
      const std::size_t hub = boost::add_vertex(graph_);
      hubs[p] = hub;
      const std::uint32_t first = p * tier.count;
      // Uplink to the switch, or gateway out of a mesh/ring; then the links of their own.
      for (std::uint32_t c = 0; c < tier.count; ++c) boost::add_edge(child_vertex[first + c], hub, uplink, graph_);
      for (const auto& [a, b] : pairs) boost::add_edge(child_vertex[first + a], child_vertex[first + b], direct, graph_);
    }
    child_vertex = std::move(hubs);
  }
  if (!topo.hosts()) {
    // Without hosts described: each GPU's own host end of its PCIe link.
    for (std::uint32_t m = 0; m < topo.gpu_count(); ++m) {
      const GpuSpec& g = topo.gpu(m);
      host_of_gpu_.push_back(boost::add_vertex(graph_));
      boost::add_edge(m, host_of_gpu_.back(), LinkProps{kHostLevel, g.host_bandwidth.bytes_per_second, g.host_latency}, graph_);
    }
    return;
  }
  // Each host's CPU, its PCIe switches, and each GPU's link to its switch.
  const HostSpec& h = *topo.hosts();
  std::vector<std::size_t> cpu(topo.host_count()), sw(topo.pcie_switch_count());
  for (auto& v : cpu) v = boost::add_vertex(graph_);
  for (std::uint32_t s = 0; s < sw.size(); ++s) {
    sw[s] = boost::add_vertex(graph_);
    boost::add_edge(sw[s], cpu[s / h.pcie_switches], LinkProps{kHostLevel, h.switch_uplink.bytes_per_second, h.switch_latency}, graph_);
  }
  for (std::uint32_t m = 0; m < topo.gpu_count(); ++m) {
    const GpuSpec& g = topo.gpu(m);
    boost::add_edge(m, sw[topo.pcie_switch_of(m)], LinkProps{kHostLevel, g.host_bandwidth.bytes_per_second, g.host_latency}, graph_);
    host_of_gpu_.push_back(cpu[topo.host_of(m)]);
  }
}

Route LinkGraph::host_route(std::uint32_t gpu) const { return route_between(gpu, host_of_gpu_.at(gpu)); }

Route LinkGraph::route(std::uint32_t from, std::uint32_t to) const { return route_between(from, to); }

Route LinkGraph::route_between(std::size_t from, std::size_t to) const {
  Route r;
  if (from == to) return r;
  const std::size_t n = boost::num_vertices(graph_);
  std::vector<std::size_t> pred(n);
  std::vector<Time> dist(n);
  // Weight: latency plus one picosecond per hop, so equal-latency routes prefer fewer links.
  auto weight = boost::make_transform_value_property_map(
      [](const LinkProps& p) { return p.latency + 1; }, boost::get(boost::edge_bundle, graph_));
  // The search stops when it settles `to` (Boost's visitor idiom: throw from examine_vertex), so
  // a route costs the vertices nearer than its end, not the whole cluster: a million-GPU
  // topology's α table no longer walks every GPU once per tier.
  struct Reached {};
  struct StopAt : boost::default_dijkstra_visitor {
    std::size_t target;
    void examine_vertex(std::size_t u, const Graph&) const {
      if (u == target) throw Reached{};
    }
  };
  try {
    boost::dijkstra_shortest_paths(
        graph_, from,
        boost::predecessor_map(boost::make_iterator_property_map(pred.begin(), boost::get(boost::vertex_index, graph_)))
            .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, graph_)))
            .weight_map(weight)
            .visitor(StopAt{{}, to}));
  } catch (const Reached&) {
  }
  r.bottleneck_bytes_per_second = std::numeric_limits<double>::infinity();
  for (std::size_t v = to; v != from; v = pred[v]) {
    auto [e, ok] = boost::edge(pred[v], v, graph_);
    const LinkProps& p = graph_[e];
    r.levels.push_back(p.level);
    r.latency += p.latency;
    r.bottleneck_bytes_per_second = std::min(r.bottleneck_bytes_per_second, p.bytes_per_second);
  }
  return r;
}

}  // namespace moesim::cluster
