// Adaptive expert replication (seed 004), the pure placement part: Algorithm 1, the Expert
// Placement Scheduler (§3.4), turns one iteration's per-class token counts into replica counts
// r_i (Σ r_i = sN, at least one each) laid out contiguously over the slots; Algorithm 2 (§4.3)
// picks, for every optimizer partition (one per rank) and class, the replica its gradient shard
// comes from. DeepSpeed's static layout (r = sN/E replicas on r distinct ranks) is the baseline.
// Spec: seeds-001-002-004.md, 004 A.4, A.5, A.7, A.9 and ambiguity 1.
// Choices where the paper is ambiguous (each made in placement.cpp):
//   * Algorithm 1's reduction loop decrements diff[i] outside `if exp_counts[i] > 1` (ambiguity 1:
//     inside it the loop never ends once the argmax class has a single replica).
//   * argmax / argmin take the first index on ties (numpy's), so every rank computes the same
//     placement from the same popularity.
//   * goal_i = (p_i / Σp)·G·S evaluated in that order, as printed.
//   * Algorithm 2's candidates are the ranks hosting the class, sorted and de-duplicated (a rank
//     with two replicas of a class is one candidate).
#pragma once

#include <vector>

namespace moesim::strategies::adaptive {

// Slot k holds class slot_class[k]; rank r owns slots [r·S, (r+1)·S). Every class in
// [0, classes) has at least one replica (the factories below ensure it), so every class's
// gradients have a source.
struct Placement {
  int classes = 0;          // E
  int ranks = 0;            // N (G in Algorithm 1)
  int slots_per_rank = 0;   // s (S in Algorithm 1)
  std::vector<int> slot_class;

  int replicas(int cls) const;                   // r_i: slots holding cls
  int local_replicas(int rank, int cls) const;   // r_{i|local}: slots of `rank` holding cls
  std::vector<int> ranks_hosting(int cls) const; // ranks with ≥ 1 replica of cls, ascending, unique
};

// Algorithm 1's replica counts for `ranks`·`slots_per_rank` slots: proportional to popularity,
// at least one per class, floor, then the reduction and largest-remainder fill loops. Throws
// InputError for no classes, a negative or non-finite count, all-zero popularity, ranks or slots
// below 1, or more classes than slots (the min-one clamp cannot hold).
std::vector<int> replica_counts(const std::vector<double>& popularity, int ranks, int slots_per_rank);

// Algorithm 1's layout: class 0's counts[0] slots first, then class 1's, ... (spec A.4), which
// packs a class onto as few consecutive ranks as it can (A.7). Throws InputError unless every
// count is ≥ 1 and they sum to ranks·slots_per_rank.
Placement contiguous_placement(const std::vector<int>& counts, int ranks, int slots_per_rank);

// §4.1's counterfactual, replication without intra-rank replicas (spec 004 C9: "this constraint
// can increase token drops by up to 20 %"): a class can have at most `ranks` replicas. Counts
// above it drop to `ranks`; each freed slot goes to the class with the most popularity per
// replica among those below it (first index on ties), as Algorithm 1's fill favours the most
// under-provisioned class. Throws InputError where classes × ranks < slots (no such placement).
std::vector<int> capped_replica_counts(std::vector<int> counts, const std::vector<double>& popularity, int ranks,
                                       int slots_per_rank);

// Each class's replicas on distinct ranks: classes with more replicas first (lower index on
// ties), each replica on the rank with the most free slots that does not host the class yet
// (lowest rank on ties) — the greedy that fills any counts with every r_i ≤ N and Σ r_i = sN
// (Gale-Ryser). Throws InputError as contiguous_placement does, and for a count above `ranks`.
Placement spread_placement(const std::vector<int>& counts, int ranks, int slots_per_rank);

// DeepSpeed's static replication (A.9): r = sN/E replicas of every class, on r distinct ranks.
// Slot g (= rank·s + slot) holds class g mod E: with E a multiple of s this is DeepSpeed's own
// layout, an expert-parallel group of E/s consecutive ranks holding every class once, repeated r
// times, so class i sits on ranks ⌊i/s⌋ + j·E/s. Replicas of a class are E ≥ s slots apart, hence
// on distinct ranks. Throws InputError unless sN is a multiple of E and r ≤ N (i.e. s ≤ E).
Placement static_placement(int classes, int ranks, int slots_per_rank);

// Algorithm 2's get_source: the rank whose replica of `cls` provides the gradient shard of the
// optimizer partition on `dst_rank` — dst_rank itself when it hosts cls (PCIe only), otherwise
// cand[dst_rank mod |cand|] with cand = ranks_hosting(cls).
int gradient_source(const Placement& placement, int cls, int dst_rank);

// One G/N gradient shard of class `cls` for the optimizer partition on `dst`, read from the
// replica on `src`. src == dst: the shard is local and crosses PCIe only.
struct ShardTransfer {
  int src = 0, dst = 0, cls = 0;
  bool remote() const { return src != dst; }
};

// Algorithm 2's collect_grads over all ranks: every partition takes one shard of every class,
// E·N transfers ordered by class, then destination rank. Local ones are included (src == dst);
// the simulator sends the remote ones point to point (batch_isend_irecv, §4.3–4.4).
std::vector<ShardTransfer> collection_transfers(const Placement& placement);

// Remote shards per rank, counted from collection_transfers: receives[r] = E − (distinct classes
// on r), since a rank fetches its own partition of a locally hosted class over PCIe.
struct CollectionCounts {
  std::vector<int> receives, sends;
};
CollectionCounts collection_counts(const Placement& placement);

}  // namespace moesim::strategies::adaptive
