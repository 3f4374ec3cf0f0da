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
  into.latency += phase.latency;
  if (into.bytes_by_level.size() < phase.bytes_by_level.size()) into.bytes_by_level.resize(phase.bytes_by_level.size());
  for (std::size_t l = 0; l < phase.bytes_by_level.size(); ++l) into.bytes_by_level[l] += phase.bytes_by_level[l];
  into.max_bytes_sent_per_gpu += phase.max_bytes_sent_per_gpu;
  into.protocols |= phase.protocols;
  into.in_switch_domains = std::max(into.in_switch_domains, phase.in_switch_domains);
}

AnalyticModel::AnalyticModel(const cluster::Topology& topology, AlphaBetaTable params)
    : topology_(topology), params_(std::move(params)) {}

namespace {
// The bit of a protocol in CollectiveCost::protocols.
std::uint8_t bit(cluster::Protocol p) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(p)); }
// Picoseconds per byte over GPU m's PCIe link to its host.
double pcie_beta(const cluster::Topology& topo, std::uint32_t m) { return 1e12 / topo.gpu(m).host_bandwidth.bytes_per_second; }
}  // namespace

Algorithm AnalyticModel::resolve(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  if (op.algorithm != Algorithm::Auto && op.algorithm != Algorithm::Nvls) return op.algorithm;
  if (op.kind != CollectiveKind::AllReduce || op.traffic)
    return op.kind == CollectiveKind::AllToAll || op.traffic ? Algorithm::Direct : Algorithm::Ring;
  const bool nvls = nvls_tier(members, topology_, params_) >= 0;
  if (op.algorithm == Algorithm::Nvls) return nvls ? Algorithm::Nvls : Algorithm::Ring;
  std::vector<Algorithm> candidates{Algorithm::Ring};
  if (nvls) candidates.push_back(Algorithm::Nvls);
  const auto groups = local_groups(members, topology_);
  if (groups.size() > 1 && groups.front().size() > 1) candidates.push_back(Algorithm::Hierarchical);
  Algorithm best = Algorithm::Ring;
  Time best_time = 0;
  for (Algorithm a : candidates) {
    CollectiveOp candidate = op;
    candidate.algorithm = a;
    const Time t = cost_resolved(candidate, members).duration;
    if (a == candidates.front() || t < best_time) best = a, best_time = t;
  }
  return best;
}

CollectiveCost AnalyticModel::cost(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  if (op.algorithm != Algorithm::Auto && op.algorithm != Algorithm::Nvls) return cost_resolved(op, members);
  CollectiveOp resolved = op;
  resolved.algorithm = resolve(op, members);
  return cost_resolved(resolved, members);
}

CollectiveCost AnalyticModel::cost_resolved(const CollectiveOp& op, std::span<const std::uint32_t> members) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.tier_count(), 0.0);
  if (op.kind == CollectiveKind::HostCopy) return host_copy(op.bytes, members.front());
  if (members.size() <= 1) return c;
  // Pipelined phases (overlaps_next): their latencies add up, each tier drains what they all put
  // on it.
  CollectiveCost run;
  std::vector<double> phase_drains, run_drains;
  bool in_run = false;
  for (const CollectivePhase& phase : plan_collective(op, members, topology_, params_)) {
    const bool pipelined = phase.overlaps_next || in_run;
    if (pipelined) phase_drains.assign(topology_.tier_count() + 1, 0.0);
    const std::span<double> drains = pipelined ? std::span<double>(phase_drains) : std::span<double>();
    CollectiveCost p;
    if (const auto* e = std::get_if<ExchangePhase>(&phase.work)) p = exchange(phase.kind, *e->traffic, members, drains);
    if (const auto* r = std::get_if<RingPhase>(&phase.work)) p = rings(phase.kind, r->rings, r->steps, r->chunk, drains);
    if (const auto* t = std::get_if<TransferPhase>(&phase.work)) p = p2p(t->bytes, t->from, t->to, drains);
    if (const auto* i = std::get_if<InSwitchPhase>(&phase.work)) p = in_switch(*i, drains);
    if (!pipelined) {
      accumulate(c, p);
      continue;
    }
    if (run_drains.empty()) run_drains.assign(phase_drains.size(), 0.0);
    for (std::size_t t = 0; t < phase_drains.size(); ++t) run_drains[t] += phase_drains[t];
    p.duration = p.latency;
    accumulate(run, p);
    in_run = phase.overlaps_next;
    if (!in_run) {
      run.duration += ps_to_time(*std::max_element(run_drains.begin(), run_drains.end()));
      accumulate(c, run);
      run = CollectiveCost{};
      run_drains.clear();
    }
  }
  const double n = static_cast<double>(members.size());
  c.pairs = op.traffic ? op.traffic->pairs()
            : op.kind == CollectiveKind::P2P    ? (op.bytes > 0 ? 1 : 0)
                                                : static_cast<std::uint64_t>(n * (n - 1));
  return c;
}

CollectiveCost AnalyticModel::in_switch(const InSwitchPhase& phase, std::span<double> tier_drains) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.tier_count(), 0.0);
  const auto& nvls = params_.in_switch(phase.tier);
  if (!nvls || phase.groups.empty()) return c;
  const double per_port = phase.port_bytes();  // each way
  c.latency = nvls->latency;
  const double drain = per_port * params_.tier_default(phase.tier).beta / nvls->efficiency_across(phase.domains);
  c.duration = nvls->latency + ps_to_time(drain);
  if (!tier_drains.empty()) {
    std::fill(tier_drains.begin(), tier_drains.end(), 0.0);
    tier_drains[phase.tier] = drain;
  }
  for (const auto& g : phase.groups) c.bytes_by_level[phase.tier] += per_port * static_cast<double>(g.size());
  c.max_bytes_sent_per_gpu = per_port;
  c.in_switch_domains = phase.domains;
  return c;
}

CollectiveCost AnalyticModel::exchange(CollectiveKind kind, const TrafficMatrix& t,
                                       std::span<const std::uint32_t> members, std::span<double> tier_drains) const {
  CollectiveCost c;
  const int tiers = topology_.tier_count();
  c.bytes_by_level.assign(tiers, 0.0);
  std::vector<std::uint32_t> ids, ports;
  std::vector<double> out, in;
  std::vector<TierLoad> loads;
  const std::vector<double> peers = peers_by_tier(topology_, members);
  double previous_cross = 0;
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
    if (load > 0) loads.push_back({l, load, loads.empty() ? 1.0 : 0.0, peers[l]});
    if (l == tiers - 1) c.max_bytes_sent_per_gpu = *std::max_element(out.begin(), out.end());
    c.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
    previous_cross = cross;
  }
  // With hosts described, what leaves a host crosses each GPU's PCIe link to the NIC.
  double pcie = 0;
  if (topology_.hosts() && !(loads.size() && params_.overridden(kind, loads.front().tier))) {
    std::vector<std::uint32_t> rank(members.size());
    std::iota(rank.begin(), rank.end(), 0u);
    const std::uint32_t hosts = compress_hosts(topology_, members, ids);
    if (hosts > 1) {
      t.port_loads(ids, hosts, rank, static_cast<std::uint32_t>(members.size()), out, in);
      for (std::size_t r = 0; r < members.size(); ++r)
        pcie = std::max(pcie, static_cast<double>(ps_to_time(std::max(out[r], in[r]) * pcie_beta(topology_, members[r]))));
    }
  }
  if (!loads.empty() || pcie > 0) {
    const StepsCost cost = params_.steps_cost(kind, loads, 1, pcie, {}, true, tier_drains);
    c.duration = cost.duration;
    c.latency = cost.latency;
    c.protocols = bit(cost.protocol);
  }
  return c;
}

CollectiveCost AnalyticModel::rings(CollectiveKind kind, const std::vector<std::vector<std::uint32_t>>& ring_list,
                                    double steps, double chunk, std::span<double> tier_drains) const {
  CollectiveCost c;
  c.bytes_by_level = ring_bytes_by_tier(topology_, ring_list, steps * chunk);
  const std::vector<TierLoad> loads = ring_loads(topology_, ring_list, chunk);
  // With hosts described, ring edges that leave a host cross the PCIe links of both ends.
  double pcie = 0;
  if (topology_.hosts() && !(loads.size() && params_.overridden(kind, loads.front().tier))) {
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
        pcie = std::max(pcie, static_cast<double>(ps_to_time(chunk * count * pcie_beta(topology_, g))));
  }
  if (!loads.empty() || pcie > 0) {
    const StepsCost cost = params_.steps_cost(kind, loads, steps, pcie, {}, false, tier_drains);
    c.duration = cost.duration;
    c.latency = cost.latency;
    c.protocols = bit(cost.protocol);
  }
  c.max_bytes_sent_per_gpu = steps * chunk;
  return c;
}

CollectiveCost AnalyticModel::p2p(double bytes, std::uint32_t from, std::uint32_t to, std::span<double> tier_drains) const {
  CollectiveCost c;
  c.bytes_by_level.assign(topology_.tier_count(), 0.0);
  const int l = topology_.first_differing_tier(from, to);
  if (l < 0 || bytes <= 0) return c;
  const std::vector<TierLoad> loads = transfer_loads(topology_, from, to, bytes);
  double pcie = 0;  // a measured send_recv already includes the finer tiers and the hosts
  if (!params_.overridden(CollectiveKind::P2P, l) && topology_.hosts() && topology_.host_of(from) != topology_.host_of(to))
    pcie = bytes * std::max(pcie_beta(topology_, from), pcie_beta(topology_, to));
  const StepsCost cost = params_.steps_cost(CollectiveKind::P2P, loads, 1, pcie, {}, false, tier_drains);
  c.duration = cost.duration;
  c.latency = cost.latency;
  c.protocols = bit(cost.protocol);
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
  c.latency = alpha;
  c.host_bytes = bytes;
  return c;
}

std::string describe(Algorithm algorithm, const CollectiveCost& cost) {
  std::string protocols;
  for (cluster::Protocol p : cluster::kAllProtocols)
    if (cost.protocols & bit(p)) protocols += (protocols.empty() ? "" : "+") + std::string(cluster::to_string(p));
  if (cost.in_switch_domains == 1) return "nvls";
  // Across domains the in-switch phase is pipelined with a ring of each local index (a tree under
  // Algorithm::Tree).
  const std::string across = algorithm == Algorithm::Tree ? "tree" : "ring";
  if (cost.in_switch_domains > 1) return "nvls-tree + " + across + " " + protocols;
  const std::string steps = algorithm == Algorithm::Hierarchical ? "hierarchical" : std::string(to_string(algorithm));
  return protocols.empty() ? steps : steps + " " + protocols;
}

}  // namespace moesim::network
