#include "sim/network/alpha_beta.hpp"

#include <algorithm>
#include <cmath>

namespace moesim::network {

Time AlphaBeta::cost(double bytes) const { return alpha + static_cast<Time>(std::llround(bytes * beta)); }

AlphaBetaTable AlphaBetaTable::from_topology(const cluster::Topology& topo, const cluster::LinkGraph& graph) {
  std::vector<AlphaBeta> levels(topo.level_count());
  for (int l = 0; l < topo.level_count(); ++l) {
    const cluster::Level& level = topo.levels()[l];
    const double bw = level.bandwidth.bytes_per_second;
    const double n = level.count;
    double per_worker = bw / level.oversubscription;
    if (level.fabric == cluster::Fabric::FullMesh) per_worker = bw * std::max(1.0, n - 1);
    if (level.fabric == cluster::Fabric::Ring) per_worker = 2 * bw / std::max(1.0, n / 4);
    levels[l].beta = 1e12 / per_worker;
    // Two GPUs that first differ at level l: GPU 0 and the first GPU of the next level-l worker.
    const std::uint32_t other = topo.gpus_per_worker(l);
    levels[l].alpha = other < topo.gpu_count() ? graph.route(0, other).latency : level.latency;
  }
  return AlphaBetaTable(std::move(levels));
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
