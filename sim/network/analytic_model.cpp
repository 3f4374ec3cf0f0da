#include "sim/network/analytic_model.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>

#include "sim/core/error.hpp"
#include "sim/network/collective_plan.hpp"

namespace moesim::network {


void accumulate(CollectiveCost& into, const CollectiveCost& phase) {
  into.duration += phase.duration;
  if (into.bytes_by_level.size() < phase.bytes_by_level.size()) into.bytes_by_level.resize(phase.bytes_by_level.size());
  for (std::size_t l = 0; l < phase.bytes_by_level.size(); ++l) into.bytes_by_level[l] += phase.bytes_by_level[l];
  into.max_bytes_sent_per_gpu += phase.max_bytes_sent_per_gpu;
}

AnalyticModel::AnalyticModel(const cluster::Topology& topology, AlphaBetaTable params)
    : topology_(topology), params_(std::move(params)) {}

namespace {
// Picoseconds per byte over GPU m's PCIe link to its host.
double pcie_beta(const cluster::Topology& topo, std::uint32_t m) { return 1e12 / topo.gpu(m).host_bandwidth.bytes_per_second; }
}  // namespace

CollectiveCost AnalyticModel::cost(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.tier_count(), 0.0);
  if (op.kind == CollectiveKind::HostCopy) return host_copy(op.bytes, members.front());
  if (members.size() <= 1) return c;
  for (const CollectivePhase& phase : plan_collective(op, members, topology_)) {
    if (const auto* e = std::get_if<ExchangePhase>(&phase.work)) accumulate(c, exchange(phase.kind, *e->traffic, members));
    if (const auto* r = std::get_if<RingPhase>(&phase.work)) accumulate(c, rings(phase.kind, r->rings, r->steps, r->chunk));
    if (const auto* t = std::get_if<TransferPhase>(&phase.work)) accumulate(c, p2p(t->bytes, t->from, t->to));
  }
  const double n = static_cast<double>(members.size());
  c.pairs = op.traffic ? op.traffic->pairs()
            : op.kind == CollectiveKind::P2P    ? (op.bytes > 0 ? 1 : 0)
                                                : static_cast<std::uint64_t>(n * (n - 1));
  return c;
}

CollectiveCost AnalyticModel::exchange(CollectiveKind kind, const TrafficMatrix& t,
                                       std::span<const std::uint32_t> members) const {
  CollectiveCost c;
  const int tiers = topology_.tier_count();
  c.bytes_by_level.assign(tiers, 0.0);
  std::vector<std::uint32_t> ids, ports;
  std::vector<double> out, in;
  double previous_cross = 0;
  Time alpha = 0, drain = 0;
  bool measured = false;  // the coarsest tier crossed was calibrated for this kind: it alone costs the phase
  for (int l = 0; l < tiers; ++l) {
    const std::uint32_t workers = compress_workers(topology_, members, l, ids);
    if (workers <= 1) continue;
    // A worker with several ports (a node's NICs) drains each at its own rate, 1/ports of the
    // worker's: the busiest port's load counts `ports` times against the worker's β.
    const std::uint32_t n_ports = topology_.tiers()[l].ports;
    if (n_ports > 1) t.port_loads(ids, workers, ports, compress_ports(topology_, members, l, ports), out, in);
    else t.worker_loads(ids, workers, out, in);
    double load = 0, cross = 0;
    for (std::size_t w = 0; w < out.size(); ++w) {
      load = std::max({load, out[w], in[w]});
      cross += out[w];
    }
    load *= n_ports;
    // Invariant: every byte that leaves a worker enters another one.
    const double entering = std::accumulate(in.begin(), in.end(), 0.0);
    if (std::abs(entering - cross) > 1e-9 * std::max(1.0, cross))
      invariant_failed(fmt::format("all-to-all loses bytes at tier {}: {} leave, {} enter", l, cross, entering));
    if (load > 0 && !measured) {
      const AlphaBeta ab = params_.get(kind, l, load);
      alpha = std::max(alpha, ab.alpha);
      drain = std::max(drain, ab.cost(load) - ab.alpha);
      measured = params_.overridden(kind, l);
    }
    if (l == tiers - 1) c.max_bytes_sent_per_gpu = *std::max_element(out.begin(), out.end());
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  // With hosts described, what leaves a host crosses each GPU's PCIe link to the NIC.
  if (topology_.hosts() && !measured) {
    std::vector<std::uint32_t> rank(members.size());
    std::iota(rank.begin(), rank.end(), 0u);
    const std::uint32_t hosts = compress_hosts(topology_, members, ids);
    if (hosts > 1) {
      t.port_loads(ids, hosts, rank, static_cast<std::uint32_t>(members.size()), out, in);
      for (std::size_t r = 0; r < members.size(); ++r)
        drain = std::max(drain, ps_to_time(std::max(out[r], in[r]) * pcie_beta(topology_, members[r])));
    }
  }
  c.duration = alpha + drain;
  return c;
}

CollectiveCost AnalyticModel::rings(CollectiveKind kind, const std::vector<std::vector<std::uint32_t>>& ring_list,
                                    double steps, double chunk) const {
  CollectiveCost c;
  const int tiers = topology_.tier_count();
  c.bytes_by_level.assign(tiers, 0.0);
  Time alpha = 0, drain = 0;
  bool measured = false;  // as in exchange()
  double previous_cross = 0;
  std::map<std::uint32_t, std::uint32_t> leaving;  // worker port → ring edges leaving it
  for (int l = 0; l < tiers; ++l) {
    leaving.clear();
    const std::uint32_t ports = topology_.tiers()[l].ports;
    double crossing = 0;
    for (const auto& ring : ring_list) {
      if (ring.size() < 2) continue;
      for (std::size_t i = 0; i < ring.size(); ++i) {
        const std::uint32_t u = ring[i], v = ring[(i + 1) % ring.size()];
        const std::uint32_t wu = topology_.tier_worker(u, l);
        if (wu == topology_.tier_worker(v, l)) continue;
        ++leaving[wu * ports + topology_.port(u, l)];
        ++crossing;
      }
    }
    std::uint32_t busiest = 0;
    for (const auto& [w, count] : leaving) busiest = std::max(busiest, count);
    busiest *= ports;  // a port drains at 1/ports of the worker's bandwidth
    if (busiest > 0 && !measured) {
      const AlphaBeta ab = params_.get(kind, l, chunk * busiest);
      alpha = std::max(alpha, ab.alpha);
      drain = std::max(drain, ab.cost(chunk * busiest) - ab.alpha);
      measured = params_.overridden(kind, l);
    }
    const double cross = crossing * steps * chunk;
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  // With hosts described, ring edges that leave a host cross the PCIe links of both ends.
  if (topology_.hosts() && !measured) {
    std::map<std::uint32_t, std::uint32_t> out_edges, in_edges;  // GPU → ring edges leaving / entering its host
    for (const auto& ring : ring_list)
      for (std::size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
        const std::uint32_t u = ring[i], v = ring[(i + 1) % ring.size()];
        if (topology_.host_of(u) == topology_.host_of(v)) continue;
        ++out_edges[u];
        ++in_edges[v];
      }
    for (const auto* edges : {&out_edges, &in_edges})
      for (const auto& [g, count] : *edges)
        drain = std::max(drain, ps_to_time(chunk * count * pcie_beta(topology_, g)));
  }
  c.duration = ps_to_time(std::round(steps) * static_cast<double>(alpha + drain));
  c.max_bytes_sent_per_gpu = steps * chunk;
  return c;
}

CollectiveCost AnalyticModel::p2p(double bytes, std::uint32_t from, std::uint32_t to) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.tier_count(), 0.0);
  const int l = topology_.first_differing_tier(from, to);
  if (l < 0 || bytes <= 0) return c;
  // One transfer uses one port of each worker it leaves: 1/ports of the worker's bandwidth.
  const auto port_beta = [&](int k) { return params_.get(CollectiveKind::P2P, k, bytes).beta * topology_.tiers()[k].ports; };
  double beta = port_beta(l);
  if (!params_.overridden(CollectiveKind::P2P, l)) {  // a measured send_recv already includes the finer tiers
    for (int k = l + 1; k < topology_.tier_count(); ++k) beta = std::max(beta, port_beta(k));
    if (topology_.hosts() && topology_.host_of(from) != topology_.host_of(to))
      beta = std::max({beta, pcie_beta(topology_, from), pcie_beta(topology_, to)});
  }
  c.duration = params_.get(CollectiveKind::P2P, l, bytes).alpha + ps_to_time(bytes * beta);
  c.bytes_by_level[l] = bytes;
  c.pairs = 1;
  c.max_bytes_sent_per_gpu = bytes;
  return c;
}

CollectiveCost AnalyticModel::host_copy(double bytes, std::uint32_t gpu) const {
  // α + B/β over the GPU's PCIe link and, with hosts described, its switch's uplink to the CPU:
  // their latencies add up, the slower drains.
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.tier_count(), 0.0);
  if (bytes <= 0) return c;
  Time alpha = topology_.gpu(gpu).host_latency;
  double beta = pcie_beta(topology_, gpu);
  if (const auto& h = topology_.hosts()) {
    alpha += h->switch_latency;
    beta = std::max(beta, 1e12 / h->switch_uplink.bytes_per_second);
  }
  c.duration = alpha + ps_to_time(bytes * beta);
  c.host_bytes = bytes;
  return c;
}

}  // namespace moesim::network
