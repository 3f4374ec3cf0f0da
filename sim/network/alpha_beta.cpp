#include "sim/network/alpha_beta.hpp"

#include <algorithm>
#include <cmath>

namespace moesim::network {

Time AlphaBeta::cost(double bytes) const { return alpha + ps_to_time(bytes * beta); }

AlphaBetaTable AlphaBetaTable::from_topology(const cluster::Topology& topo, const cluster::LinkGraph& graph) {
  std::vector<AlphaBeta> tiers(topo.tier_count());
  for (int t = 0; t < topo.tier_count(); ++t) {
    tiers[t].beta = 1e12 / topo.fabric(t).worker_bandwidth();
    // Two GPUs that first differ at tier t: GPU 0 and the first GPU of the next tier-t worker.
    const std::uint32_t other = topo.gpus_per_tier_worker(t);
    tiers[t].alpha = other < topo.gpu_count() ? graph.route(0, other).latency : topo.tiers()[t].latency;
  }
  return AlphaBetaTable(std::move(tiers));
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

bool AlphaBetaTable::overridden(CollectiveKind kind, int level) const {
  return static_cast<std::size_t>(level) < overrides_.size() && !overrides_[level][static_cast<std::size_t>(kind)].empty();
}

void AlphaBetaTable::override_for(CollectiveKind kind, int level, std::vector<AlphaBetaPiece> pieces) {
  if (overrides_.size() < levels_.size()) overrides_.resize(levels_.size());
  overrides_[level][static_cast<std::size_t>(kind)] = std::move(pieces);
}

}  // namespace moesim::network
