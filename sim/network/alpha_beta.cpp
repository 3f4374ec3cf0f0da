#include "sim/network/alpha_beta.hpp"

#include <algorithm>
#include <cmath>

namespace moesim::network {

Time AlphaBeta::cost(double bytes) const { return alpha + ps_to_time(bytes * beta); }

AlphaBetaTable AlphaBetaTable::from_topology(const cluster::Topology& topo, const cluster::LinkGraph& graph) {
  std::vector<AlphaBeta> tiers(topo.tier_count());
  std::vector<cluster::LinkTechPtr> links(topo.tier_count());
  for (int t = 0; t < topo.tier_count(); ++t) {
    tiers[t].beta = 1e12 / topo.fabric(t).worker_bandwidth();
    // Two GPUs that first differ at tier t: GPU 0 and the first GPU of the next tier-t worker. A
    // tier of one worker has no such pair (GPU `other` would sit across a coarser tier): its own latency.
    const std::uint32_t other = topo.gpus_per_tier_worker(t);
    tiers[t].alpha = other < topo.gpu_count() && topo.tiers()[t].count > 1 ? graph.route(0, other).latency : topo.tiers()[t].latency;
    links[t] = topo.tiers()[t].link;
  }
  return AlphaBetaTable(std::move(tiers), std::move(links));
}

AlphaBeta AlphaBetaTable::get(CollectiveKind kind, int level, double message_bytes) const {
  if (static_cast<std::size_t>(level) < overrides_.size()) {
    const auto& pieces = overrides_[level][static_cast<std::size_t>(kind)];
    if (!pieces.empty()) {
      auto it = std::upper_bound(pieces.begin(), pieces.end(), message_bytes,
                                 [](double b, const AlphaBetaPiece& p) { return b < p.from_bytes; });
      return (it == pieces.begin() ? *it : *(it - 1)).value;
    }
  }
  return levels_[level];
}

double AlphaBetaTable::drain_factor(CollectiveKind kind, int level, double message_bytes) const {
  if (!overridden(kind, level) || levels_[level].beta <= 0) return 1.0;
  return get(kind, level, message_bytes).beta / levels_[level].beta;
}

const std::optional<cluster::InSwitchReduction>& AlphaBetaTable::in_switch(int tier) const {
  static const std::optional<cluster::InSwitchReduction> none;
  return links_[tier] ? links_[tier]->nvls : none;
}

StepsCost AlphaBetaTable::steps_cost(CollectiveKind kind, std::span<const TierLoad> loads, double steps,
                                     double extra_drain, std::span<double> drains, bool exchange,
                                     std::span<double> tier_drains) const {
  const auto efficiency = [&](const cluster::LinkTech& link, cluster::Protocol p) {
    return link.protocol(p).efficiency * (exchange ? link.exchange_factor : 1.0);
  };
  const double rounds = std::round(steps);
  // Tiers from the coarsest loaded one down to the first calibrated one (which alone stands for
  // the finer tiers it was measured over).
  std::size_t used = 0;
  bool measured = false;
  while (used < loads.size() && !measured) measured = overridden(kind, loads[used++].tier);
  StepsCost best;
  bool found = false;
  for (cluster::Protocol p : cluster::kAllProtocols) {
    Time base = 0, ideal_hop = 0;
    double link_hops = 0, drain = extra_drain;  // picoseconds per step
    bool usable = true;
    for (std::size_t i = 0; i < used && usable; ++i) {
      const TierLoad& l = loads[i];
      const cluster::LinkTech* link = links_[l.tier].get();
      if (overridden(kind, l.tier) || !link) {
        // Measured, or an ideal link: one protocol, its α per step.
        if (p != cluster::Protocol::Simple) usable = false;
        const AlphaBeta ab = get(kind, l.tier, l.bytes);
        ideal_hop = std::max(ideal_hop, ab.alpha);
        drain = std::max(drain, static_cast<double>(ab.cost(l.bytes) - ab.alpha));
        continue;
      }
      const cluster::ProtocolCost& c = link->protocol(p);
      if (c.efficiency <= 0) {
        usable = false;
        continue;
      }
      base = std::max(base, c.base);
      link_hops += l.hops * static_cast<double>(c.hop) + l.peers * static_cast<double>(link->protocol(cluster::Protocol::LL).hop);
      drain = std::max(drain, l.bytes * levels_[l.tier].beta / efficiency(*link, p));
    }
    if (!usable) continue;
    const double per_step = std::max(static_cast<double>(ideal_hop), link_hops);
    const StepsCost cost{base + ps_to_time(rounds * (per_step + drain)), base + ps_to_time(rounds * per_step), p};
    if (!found || cost.duration < best.duration) best = cost;
    found = true;
  }
  if (measured)
    for (std::size_t i = 0; i < used; ++i)
      if (overridden(kind, loads[i].tier)) ++applied_[loads[i].tier][static_cast<std::size_t>(kind)];
  if (!tier_drains.empty()) {
    std::fill(tier_drains.begin(), tier_drains.end(), 0.0);
    tier_drains.back() = rounds * extra_drain;
    for (std::size_t i = 0; i < used; ++i) {
      const TierLoad& l = loads[i];
      const cluster::LinkTech* link = links_[l.tier].get();
      double per_step;
      if (overridden(kind, l.tier) || !link) {
        const AlphaBeta ab = get(kind, l.tier, l.bytes);
        per_step = static_cast<double>(ab.cost(l.bytes) - ab.alpha);
      } else {
        per_step = l.bytes * levels_[l.tier].beta / efficiency(*link, best.protocol);
      }
      tier_drains[l.tier] = rounds * per_step;
    }
  }
  if (!drains.empty()) {
    // Tiers finer than a calibrated one drain at their line rate (the measurement covers them).
    const int finest = measured ? loads[used - 1].tier : static_cast<int>(drains.size());
    for (int t = 0; t < static_cast<int>(drains.size()); ++t) {
      const cluster::LinkTech* link = links_[t].get();
      // A tier the step does not load, whose link lacks the chosen protocol, drains as Simple.
      const double e = link ? efficiency(*link, best.protocol) : 0;
      drains[t] = t > finest                         ? 1.0
                  : overridden(kind, t) || !link     ? drain_factor(kind, t, 0)
                  : e > 0                            ? 1.0 / e
                                                     : 1.0 / efficiency(*link, cluster::Protocol::Simple);
    }
    for (std::size_t i = 0; i < used; ++i)
      if (overridden(kind, loads[i].tier)) drains[loads[i].tier] = drain_factor(kind, loads[i].tier, loads[i].bytes);
  }
  return best;
}

bool AlphaBetaTable::overridden(CollectiveKind kind, int level) const {
  return static_cast<std::size_t>(level) < overrides_.size() && !overrides_[level][static_cast<std::size_t>(kind)].empty();
}

bool AlphaBetaTable::calibrated(CollectiveKind kind) const {
  for (int l = 0; l < levels(); ++l)
    if (overridden(kind, l)) return true;
  return false;
}

std::uint64_t AlphaBetaTable::applied(CollectiveKind kind, int level) const {
  return static_cast<std::size_t>(level) < applied_.size() ? applied_[level][static_cast<std::size_t>(kind)] : 0;
}

void AlphaBetaTable::reset_applied() const { std::fill(applied_.begin(), applied_.end(), std::array<std::uint64_t, kCollectiveKinds>{}); }

void AlphaBetaTable::override_for(CollectiveKind kind, int level, std::vector<AlphaBetaPiece> pieces) {
  if (applied_.size() < levels_.size()) applied_.resize(levels_.size());
  if (overrides_.size() < levels_.size()) overrides_.resize(levels_.size());
  overrides_[level][static_cast<std::size_t>(kind)] = std::move(pieces);
}

}  // namespace moesim::network
