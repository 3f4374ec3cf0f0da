#include "sim/network/flow_demand.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace moesim::network {

FlowDemands::FlowDemands(const FlowLinks& links, const AlphaBetaTable& params)
    : links_(links),
      topology_(links.topology()),
      params_(params),
      scratch_(links.size(), 0.0),
      drain_(static_cast<std::size_t>(links.topology().tier_count()) + 1, 1.0) {}

void FlowDemands::add(std::uint32_t link, double bytes) const {
  if (bytes <= 0 || link == kNoLink) return;
  if (scratch_[link] == 0) touched_.push_back(link);
  scratch_[link] += bytes;
}

void FlowDemands::collect(FlowPhase& out) const {
  out.demand.reserve(touched_.size());
  for (std::uint32_t l : touched_) {
    // A calibrated tier whose measured segment has β = 0 (latency only: nccl-tests' smallest
    // sizes) drains its bytes in no time: no demand on its links, only the latency.
    const double bytes = scratch_[l] * drain_[links_.tier(l)];
    if (bytes > 0) out.demand.push_back({l, bytes});
    scratch_[l] = 0;
  }
  touched_.clear();
  std::fill(drain_.begin(), drain_.end(), 1.0);
}

void FlowDemands::add_sibling(int tier, std::uint32_t parent, std::uint32_t i, std::uint32_t j, double bytes) const {
  route_.clear();
  links_.siblings(tier, parent, i, j, route_);
  for (std::uint32_t link : route_) add(link, bytes);
}

int FlowDemands::add_path(std::uint32_t u, std::uint32_t v, double bytes, const std::vector<PortSpread>* spread) const {
  const int top = topology_.first_differing_tier(u, v);
  if (top < 0 || bytes <= 0) return -1;
  for (int l = topology_.tier_count() - 1; l >= top; --l) {
    const std::uint32_t wu = topology_.tier_worker(u, l), wv = topology_.tier_worker(v, l);
    const std::uint32_t pu = l == 0 ? 0 : topology_.tier_worker(u, l - 1), pv = l == 0 ? 0 : topology_.tier_worker(v, l - 1);
    if (topology_.fabric(l).switched()) {
      const auto* used = spread && !(*spread)[l].empty() ? &(*spread)[l] : nullptr;
      if (used && !(*used)[wu].empty() && !(*used)[wv].empty()) {
        for (std::uint32_t p : (*used)[wu]) add(links_.port(l, wu, p, true), bytes / static_cast<double>((*used)[wu].size()));
        for (std::uint32_t p : (*used)[wv]) add(links_.port(l, wv, p, false), bytes / static_cast<double>((*used)[wv].size()));
      } else {
        add(links_.port(l, wu, topology_.port(u, l), true), bytes);
        add(links_.port(l, wv, topology_.port(v, l), false), bytes);
      }
      add(links_.core(l, pu), bytes);
      if (pv != pu) add(links_.core(l, pv), bytes);
    } else if (l == top) {
      add_sibling(l, pu, topology_.tier_coordinate(u, l), topology_.tier_coordinate(v, l), bytes);
    }
  }
  if (topology_.hosts() && topology_.host_of(u) != topology_.host_of(v)) {
    add(links_.pcie(u, true), bytes);
    add(links_.pcie(v, false), bytes);
  }
  return top;
}

void FlowDemands::host_copy(const HostCopyPhase& copy, FlowPhase& out) const {
  out.latency = topology_.gpu(copy.gpu).host_latency;
  if (copy.bytes <= 0) return;
  out.host_bytes = copy.bytes;
  add(links_.pcie(copy.gpu, copy.to_host), copy.bytes);
  if (const auto& h = topology_.hosts()) {
    add(links_.switch_uplink(topology_.pcie_switch_of(copy.gpu), copy.to_host), copy.bytes);
    out.latency += h->switch_latency;
  }
}

void FlowDemands::exchange(CollectiveKind kind, const TrafficMatrix& t, std::span<const std::uint32_t> members,
                           FlowPhase& out) const {
  const int tiers = topology_.tier_count();
  std::vector<std::uint32_t> ids, global, above_global, port_ids, port_global;
  std::vector<double> w_out, w_in, above_in, p_out, p_in;  // above: the tier above's workers and the bytes entering them
  double previous_cross = 0;
  std::vector<TierLoad> loads;
  const std::vector<double> peers = peers_by_tier(topology_, members);
  for (int l = 0; l < tiers; ++l) {
    const cluster::Tier& tier = topology_.tiers()[l];
    const cluster::TierFabric& fabric = topology_.fabric(l);
    const std::uint32_t workers = compress_workers(topology_, members, l, ids, &global);
    w_in.assign(workers, 0.0);
    if (workers > 1) {
      // Loads per worker, and per port where a worker has several (a node's NICs).
      const bool ported = fabric.switched() && tier.ports > 1;
      t.worker_loads(ids, workers, w_out, w_in);
      if (ported) t.port_loads(ids, workers, port_ids, compress_ports(topology_, members, l, port_ids, &port_global), p_out, p_in);
      const std::vector<double>& l_out = ported ? p_out : w_out;
      const std::vector<double>& l_in = ported ? p_in : w_in;
      double cross = 0;
      double load = 0;
      for (std::uint32_t w = 0; w < workers; ++w) cross += w_out[w];
      for (std::size_t p = 0; p < l_out.size(); ++p) load = std::max({load, l_out[p], l_in[p]});
      // The analytic model's per-tier step (analytic_model.cpp): the busiest port's bytes.
      if (cross > 0) loads.push_back({l, load * (ported ? tier.ports : 1), loads.empty() ? 1.0 : 0.0, peers[l]});
      out.bytes_by_level[l] = std::max(0.0, cross - previous_cross);
      previous_cross = cross;
      if (fabric.switched()) {
        const std::vector<std::uint32_t>& l_global = ported ? port_global : global;
        for (std::size_t p = 0; p < l_out.size(); ++p) {
          // A global port index is worker·ports + port (one port: the worker's index).
          const std::uint32_t worker = l_global[p] / tier.ports, port = l_global[p] % tier.ports;
          add(links_.port(l, worker, port, true), l_out[p]);
          add(links_.port(l, worker, port, false), l_in[p]);
        }
        if (links_.core(l, 0) != kNoLink) {
          // Bytes through each parent's switch: from its children, and from above into the parent.
          std::unordered_map<std::uint32_t, double> through;
          for (std::uint32_t w = 0; w < workers; ++w) through[global[w] / tier.count] += w_out[w];
          for (std::size_t p = 0; p < above_global.size(); ++p)
            if (through.count(above_global[p])) through[above_global[p]] += above_in[p];
          for (const auto& [p, bytes] : through) add(links_.core(l, p), bytes);
        }
      } else {
        // Pairs of sibling workers (TrafficMatrix::sibling_pairs).
        std::vector<std::uint32_t> parent(workers);
        for (std::uint32_t w = 0; w < workers; ++w) parent[w] = global[w] / tier.count;
        std::vector<double> pair;
        t.sibling_pairs(ids, workers, parent, pair);
        for (std::uint32_t a = 0; a < workers; ++a)
          for (std::uint32_t b = 0; b < workers; ++b) {
            const double bytes = pair[static_cast<std::size_t>(a) * workers + b];
            if (bytes <= 0) continue;
            add_sibling(l, global[a] / tier.count, global[a] % tier.count, global[b] % tier.count, bytes);
          }
      }
    }
    above_global = global;
    above_in = w_in;
  }
  // With hosts described, what leaves a host crosses each GPU's PCIe link to the NIC.
  if (topology_.hosts() && compress_hosts(topology_, members, ids) > 1) {
    std::vector<std::uint32_t> rank(members.size());
    for (std::uint32_t r = 0; r < rank.size(); ++r) rank[r] = r;
    t.port_loads(ids, topology_.host_count(), rank, static_cast<std::uint32_t>(members.size()), p_out, p_in);
    for (std::size_t r = 0; r < members.size(); ++r) {
      add(links_.pcie(members[r], true), p_out[r]);
      add(links_.pcie(members[r], false), p_in[r]);
    }
  }
  out.latency = loads.empty() ? 0 : params_.steps_cost(kind, loads, 1, 0, std::span(drain_).first(tiers), true).latency;
}

FlowPhase FlowDemands::demand(const CollectivePhase& phase, std::span<const std::uint32_t> members) const {
  FlowPhase out;
  out.bytes_by_level.assign(topology_.tier_count(), 0.0);
  if (const auto* e = std::get_if<ExchangePhase>(&phase.work)) {
    exchange(phase.kind, *e->traffic, members, out);
  } else if (const auto* r = std::get_if<RingPhase>(&phase.work)) {
    const double bytes = r->steps * r->chunk;
    const int tiers = topology_.tier_count();
    const std::vector<TierLoad> loads = ring_loads(topology_, r->rings, r->chunk);
    if (!loads.empty())
      out.latency = params_.steps_cost(phase.kind, loads, r->steps, 0, std::span(drain_).first(tiers)).latency;
    // NCCL's channels: ring edges that leave a worker with several ports spread over the ports
    // its ring members use (ring_loads).
    std::vector<PortSpread> spread(tiers);
    bool spreads = false;
    for (int l = 0; l < tiers; ++l) {
      if (!topology_.fabric(l).switched()) continue;
      spread[l] = ring_ports(topology_, r->rings, l);
      spreads = spreads || !spread[l].empty();
    }
    for (const auto& ring : r->rings)
      for (std::size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
        const int l = add_path(ring[i], ring[(i + 1) % ring.size()], bytes, spreads ? &spread : nullptr);
        if (l >= 0) out.bytes_by_level[l] += bytes;
      }
  } else if (const auto* x = std::get_if<TransferPhase>(&phase.work)) {
    const std::vector<TierLoad> loads = transfer_loads(topology_, x->from, x->to, x->bytes);
    if (!loads.empty())
      out.latency = params_.steps_cost(phase.kind, loads, 1, 0, std::span(drain_).first(topology_.tier_count())).latency;
    const int l = add_path(x->from, x->to, x->bytes);
    if (l >= 0) out.bytes_by_level[l] += x->bytes;
  } else if (const auto* h = std::get_if<HostCopyPhase>(&phase.work)) {
    host_copy(*h, out);
  } else if (const auto* i = std::get_if<InSwitchPhase>(&phase.work)) {
    // NVLS: each GPU's port carries InSwitchPhase::port_bytes each way, at the NVLS efficiency
    // (NVLS-tree's across domains: InSwitchReduction::efficiency_across).
    if (const auto& nvls = params_.in_switch(i->tier); nvls && !i->groups.empty()) {
      const int t = i->tier;
      const double per_port = i->port_bytes();
      for (const auto& g : i->groups)
        for (std::uint32_t m : g) {
          const std::uint32_t w = topology_.tier_worker(m, t);
          add(links_.port(t, w, topology_.port(m, t), true), per_port);
          add(links_.port(t, w, topology_.port(m, t), false), per_port);
          out.bytes_by_level[t] += per_port;
        }
      drain_[t] = 1.0 / nvls->efficiency_across(i->domains);
      out.latency = nvls->latency;
    }
  }
  collect(out);
  return out;
}

}  // namespace moesim::network
