#include "sim/strategies/adaptive/replication_policy.hpp"

#include <algorithm>

#include "sim/core/error.hpp"

namespace moesim::strategies::adaptive {

Placement initial_placement(PolicyKind kind, int classes, int ranks, int slots_per_rank) {
  if (kind == PolicyKind::Adaptive)
    return contiguous_placement(replica_counts(std::vector<double>(classes, 1.0), ranks, slots_per_rank), ranks,
                                slots_per_rank);
  return static_placement(classes, ranks, slots_per_rank);
}

ReplicationPolicy::ReplicationPolicy(PolicyOptions options, int classes, int ranks, int slots_per_rank,
                                     std::vector<bool> moe_layers)
    : options_(options), classes_(classes), ranks_(ranks), slots_(slots_per_rank), moe_(std::move(moe_layers)) {
  const Placement first = initial_placement(options_.kind, classes, ranks, slots_per_rank);
  placements_.resize(moe_.size());
  for (std::size_t l = 0; l < moe_.size(); ++l)
    if (moe_[l]) placements_[l] = first;
}

std::vector<std::vector<int>> ReplicationPolicy::replica_counts() const {
  std::vector<std::vector<int>> out(moe_.size());
  for (std::size_t l = 0; l < moe_.size(); ++l) {
    if (!moe_[l]) continue;
    for (int c = 0; c < classes_; ++c) out[l].push_back(placements_[l].replicas(c));
  }
  return out;
}

std::vector<Move> ReplicationPolicy::advance(int iteration, const std::vector<std::vector<double>>& previous_routed,
                                             const MoveCost& cost) {
  std::vector<Move> moves;
  if (options_.kind == PolicyKind::Static) return moves;
  if (options_.kind == PolicyKind::FlexMoE && iteration % options_.rebalance_every != 0) return moves;
  if (options_.kind == PolicyKind::FlexMoE) ++rebalances_;
  for (std::size_t l = 0; l < moe_.size(); ++l) {
    if (!moe_[l]) continue;
    if (l >= previous_routed.size() || previous_routed[l].size() != static_cast<std::size_t>(classes_))
      invariant_failed("the previous iteration's token counts do not cover every MoE layer");
    const std::vector<double>& routed = previous_routed[l];
    if (options_.kind == PolicyKind::Adaptive) {
      // A layer whose routers sent nothing keeps its placement (Algorithm 1 needs a popularity).
      double sum = 0;
      for (double x : routed) sum += x;
      if (sum > 0) {
        const std::vector<int> counts = adaptive::replica_counts(routed, ranks_, slots_);
        placements_[l] = options_.intra_rank
                             ? contiguous_placement(counts, ranks_, slots_)
                             : spread_placement(capped_replica_counts(counts, routed, ranks_, slots_), ranks_, slots_);
      }
    } else {
      rebalance(static_cast<int>(l), routed, cost, moves);
    }
  }
  return moves;
}

void ReplicationPolicy::rebalance(int layer, const std::vector<double>& routed, const MoveCost& cost,
                                  std::vector<Move>& moves) {
  Placement& p = placements_[layer];
  std::vector<int> r(classes_);
  for (int c = 0; c < classes_; ++c) r[c] = p.replicas(c);
  const auto load = [&](int c, int replicas) { return routed[c] / replicas; };
  const auto max_load = [&] {
    double m = 0;
    for (int c = 0; c < classes_; ++c) m = std::max(m, load(c, r[c]));
    return m;
  };
  for (int move = 0; move < options_.max_moves; ++move) {
    // The most loaded class, and the least loaded one that can give a replica (first index on ties).
    int hot = 0, cold = -1;
    for (int c = 1; c < classes_; ++c)
      if (load(c, r[c]) > load(hot, r[hot])) hot = c;
    for (int c = 0; c < classes_; ++c)
      if (c != hot && r[c] >= 2 && (cold < 0 || load(c, r[c]) < load(cold, r[cold]))) cold = c;
    if (cold < 0) return;
    const double before = max_load();
    ++r[hot], --r[cold];
    const double after = max_load();
    const double gain = (before - after) * options_.rebalance_every * cost.seconds_per_token;
    if (options_.cost_threshold ? gain <= cost.seconds_per_move : after >= before) {
      --r[hot], ++r[cold];
      return;
    }
    // The slot: the first of `cold`'s on a rank without `hot`, else its first.
    const std::vector<int> hosting = p.ranks_hosting(hot);
    int slot = -1;
    for (int k = 0; k < static_cast<int>(p.slot_class.size()); ++k) {
      if (p.slot_class[k] != cold) continue;
      const bool has_hot = std::binary_search(hosting.begin(), hosting.end(), k / slots_);
      if (slot < 0 || !has_hot) slot = k;
      if (!has_hot) break;
    }
    const int dst = slot / slots_;
    // The weights come from the hot class's replica nearest in rank order (its first host).
    moves.push_back({layer, slot, cold, hot, hosting.front(), dst});
    p.slot_class[slot] = hot;
  }
}

}  // namespace moesim::strategies::adaptive
