// Where each MoE layer's expert replicas sit, iteration after iteration, under the three policies
// seed 004 compares (spec seeds-001-002-004.md, 004 A.2, A.4, A.9):
//   * adaptive: every iteration, Algorithm 1 on the token counts the previous iteration's
//     popularity all-reduce gathered (one iteration stale, §3.4), laid out contiguously; the
//     first iteration starts from uniform counts;
//   * static (DeepSpeed): r = sN/E replicas of every class on r distinct ranks, never changed;
//   * flexmoe (FlexMoE-k): DeepSpeed's layout at first; every k iterations a rebalance moves one
//     replica at a time from the least to the most loaded class (tokens per replica, over the
//     previous iteration's counts) while the spec's reading of FlexMoE's cost threshold holds:
//     the drop of the largest load per replica × k iterations × the time per token must exceed
//     the time to move the replica's weights and optimizer state; at most `max_moves` per layer.
//     With `cost_threshold` off, the moves go on while they lower the largest load per replica.
//     A moved slot is taken from a rank that does not hold the receiving class yet, when one
//     exists (replicas stay on distinct ranks as DeepSpeed's do).
#pragma once

#include <vector>

#include "sim/core/enum_names.hpp"
#include "sim/strategies/adaptive/placement.hpp"

namespace moesim::strategies::adaptive {

enum class PolicyKind { Adaptive, Static, FlexMoE };
inline constexpr auto kPolicyKindNames = enum_names<PolicyKind>(
    {{PolicyKind::Adaptive, "adaptive"}, {PolicyKind::Static, "static"}, {PolicyKind::FlexMoE, "flexmoe"}});

struct PolicyOptions {
  PolicyKind kind = PolicyKind::Adaptive;
  int rebalance_every = 10;  // FlexMoE-k
  int max_moves = 16;        // per layer and rebalance
  // FlexMoE's stopping rule: the spec's cost threshold (true), or move while the largest load per
  // replica falls (the evaluation's forced rebalancing taken as far as it helps).
  bool cost_threshold = true;
  // Adaptive: replicas of a class may share a rank (§4.1's intra+inter-rank all-reduce, Algorithm
  // 1's contiguous layout), or each sits on its own rank (§4.1's counterfactual, at most N each).
  bool intra_rank = true;
};

// One replica moved by a FlexMoE rebalance: slot `slot` of layer `layer` changes from class
// `from` to class `to`; its weights and optimizer state come from `src_rank` (a rank holding `to`).
struct Move {
  int layer = 0, slot = 0, from = 0, to = 0, src_rank = 0, dst_rank = 0;
};

// What the FlexMoE threshold weighs: seconds of expert compute (forward and backward) per token
// copy, and seconds to move one replica.
struct MoveCost {
  double seconds_per_token = 0;
  double seconds_per_move = 0;
};

class ReplicationPolicy {
 public:
  // `moe_layers[l]`: whether layer l has experts. Starts at iteration 0's placement.
  ReplicationPolicy(PolicyOptions options, int classes, int ranks, int slots_per_rank, std::vector<bool> moe_layers);

  // Advances to iteration `iteration` (> 0) knowing the copies each layer's routers sent each
  // class in the previous one (per layer; empty for dense layers). Returns FlexMoE's moves.
  std::vector<Move> advance(int iteration, const std::vector<std::vector<double>>& previous_routed, const MoveCost& cost);

  // The current placement of layer l (MoE layers only).
  const Placement& placement(int layer) const { return placements_.at(layer); }
  // Per layer, replicas of every class (empty for dense layers).
  std::vector<std::vector<int>> replica_counts() const;
  const PolicyOptions& options() const { return options_; }
  int rebalances() const { return rebalances_; }

 private:
  void rebalance(int layer, const std::vector<double>& routed, const MoveCost& cost, std::vector<Move>& moves);

  PolicyOptions options_;
  int classes_, ranks_, slots_;
  std::vector<bool> moe_;
  std::vector<Placement> placements_;  // per layer (dense layers: empty)
  int rebalances_ = 0;
};

// The placement of iteration 0 under a policy: DeepSpeed's static layout for static and FlexMoE,
// Algorithm 1 of uniform popularity for adaptive.
Placement initial_placement(PolicyKind kind, int classes, int ranks, int slots_per_rank);

}  // namespace moesim::strategies::adaptive
