#include "sim/cluster/link_graph.hpp"

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/property_map/transform_value_property_map.hpp>
#include <limits>

namespace moesim::cluster {

LinkGraph::LinkGraph(const Topology& topo) : graph_(topo.gpu_count()) {
  // child_vertex[w]: the vertex standing for worker w of the level being joined (GPUs first).
  std::vector<std::size_t> child_vertex(topo.gpu_count());
  for (std::uint32_t m = 0; m < topo.gpu_count(); ++m) child_vertex[m] = m;
  for (int l = topo.level_count() - 1; l >= 0; --l) {
    const Level& level = topo.levels()[l];
    // A level's latency is GPU-to-GPU one way across it: half on each side of a switch or gateway.
    const double bw = level.bandwidth.bytes_per_second / level.oversubscription;
    const LinkProps uplink{l, bw, level.latency / 2};
    const LinkProps direct{l, bw, level.latency};
    const std::uint32_t parents = l == 0 ? 1 : topo.workers_at(l - 1);
    std::vector<std::size_t> hubs(parents);
    for (std::uint32_t p = 0; p < parents; ++p) {
      const std::size_t hub = boost::add_vertex(graph_);
      hubs[p] = hub;
      const std::uint32_t first = p * level.count;
      for (std::uint32_t c = 0; c < level.count; ++c) {
        const std::size_t v = child_vertex[first + c];
        boost::add_edge(v, hub, uplink, graph_);  // uplink to the switch, or gateway out of a mesh/ring
        if (level.fabric == Fabric::FullMesh) {
          for (std::uint32_t d = c + 1; d < level.count; ++d) boost::add_edge(v, child_vertex[first + d], direct, graph_);
        } else if (level.fabric == Fabric::Ring && level.count > 1) {
          const std::uint32_t next = (c + 1) % level.count;
          if (next != c && !(level.count == 2 && c == 1)) boost::add_edge(v, child_vertex[first + next], direct, graph_);
        }
      }
    }
    child_vertex = std::move(hubs);
  }
  first_host_ = boost::num_vertices(graph_);
  for (std::uint32_t m = 0; m < topo.gpu_count(); ++m) {
    const GpuSpec& g = topo.gpu(m);
    boost::add_edge(m, boost::add_vertex(graph_), LinkProps{kHostLevel, g.host_bandwidth.bytes_per_second, g.host_latency},
                    graph_);
  }
}

Route LinkGraph::host_route(std::uint32_t gpu) const { return route_between(gpu, first_host_ + gpu); }

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
  boost::dijkstra_shortest_paths(
      graph_, from,
      boost::predecessor_map(boost::make_iterator_property_map(pred.begin(), boost::get(boost::vertex_index, graph_)))
          .distance_map(boost::make_iterator_property_map(dist.begin(), boost::get(boost::vertex_index, graph_)))
          .weight_map(weight));
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
