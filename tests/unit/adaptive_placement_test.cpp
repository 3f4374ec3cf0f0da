// Adaptive expert replication's placement (seed 004 §3.4 Algorithm 1, §4.3 Algorithm 2;
// sim/strategies/adaptive/placement): the worked examples of the spec (seeds-001-002-004.md, 004
// A.4 and A.5, claim C8), re-derived by hand below, the tie and clamp rules of ambiguity 1,
// DeepSpeed's static layout (A.9) and the inputs Algorithm 1 cannot place.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "sim/core/error.hpp"
#include "sim/strategies/adaptive/placement.hpp"

using namespace moesim;
using namespace moesim::strategies::adaptive;

namespace {
using V = std::vector<int>;

// The slots of one rank: [rank·S, (rank+1)·S).
V rank_slots(const Placement& p, int rank) {
  const auto first = p.slot_class.begin() + rank * p.slots_per_rank;
  return V(first, first + p.slots_per_rank);
}

// Spec A.4's evaluation-scale example: E = 16, G = N = 16, S = s = 4, Σp = 8000, so
// goal = p·64/8000 = p/125 = [24, 12, 6.4, 5.6, 4, 3.2, 2.4, 1.6, 1.2, 0.8, 0.8, 0.64, 0.56, 0.4,
// 0.24, 0.16].
const std::vector<double> kEvalPopularity{3000, 1500, 800, 700, 500, 400, 300, 200, 150, 100, 100, 80, 70, 50, 30, 20};
Placement eval_placement() { return contiguous_placement(replica_counts(kEvalPopularity, 16, 4), 16, 4); }
}  // namespace

TEST(AdaptivePlacement, CountsThatNeedNoCorrection) {
  // A.4: [50,30,15,5] on G = 2, S = 4: goal = p·8/100 = [4, 2.4, 1.2, 0.4]; floor(max(goal, 1))
  // = [4, 2, 1, 1], sum 8 = G·S, neither loop runs. Contiguous: rank 0 = class 0's four slots,
  // rank 1 = [1, 1, 2, 3].
  const V counts = replica_counts({50, 30, 15, 5}, 2, 4);
  EXPECT_EQ(counts, (V{4, 2, 1, 1}));
  const Placement p = contiguous_placement(counts, 2, 4);
  EXPECT_EQ(p.classes, 4);
  EXPECT_EQ(p.slot_class, (V{0, 0, 0, 0, 1, 1, 2, 3}));
}

TEST(AdaptivePlacement, LargestRemainderFill) {
  // A.4: [45,35,15,5]: goal [3.6, 2.8, 1.2, 0.4], floor/clamp [3, 2, 1, 1] (sum 7), diff
  // [−0.6, −0.8, −0.2, 0.6]; one fill to argmin diff = class 1 → [3, 3, 1, 1].
  const V counts = replica_counts({45, 35, 15, 5}, 2, 4);
  EXPECT_EQ(counts, (V{3, 3, 1, 1}));
  EXPECT_EQ(contiguous_placement(counts, 2, 4).slot_class, (V{0, 0, 0, 1, 1, 1, 2, 3}));
}

TEST(AdaptivePlacement, TheMinOneClampOverridesPopularity) {
  // A.4: [70,20,5,5] on G = 2, S = 2: goal [2.8, 0.8, 0.2, 0.2], clamp [2, 1, 1, 1] (sum 5), diff
  // [−0.8, 0.2, 0.8, 0.8]. Reduction (argmax, diff decremented whether or not the count drops):
  // class 2 (→ −0.2, stays 1), class 3 (→ −0.2), class 1 (→ −0.8), class 2 (→ −1.2), class 3
  // (→ −1.2), then class 0 (−0.8, level with class 1, which could not drop anyway) drops to 1. With the decrement
  // inside the `if` the first step would repeat forever (ambiguity 1): this test would hang.
  EXPECT_EQ(replica_counts({70, 20, 5, 5}, 2, 2), (V{1, 1, 1, 1}));
}

TEST(AdaptivePlacement, TiesGoToTheFirstIndex) {
  // Fill: 4 equal classes on 1 × 6 slots: goal 1.5 each (exact in binary), floor [1, 1, 1, 1],
  // diff −0.5 each; two fills: class 0 (first of four ties, → 0.5), then class 1 (first of the
  // three left at −0.5). The last index would give [1, 1, 2, 2].
  EXPECT_EQ(replica_counts({1, 1, 1, 1}, 1, 6), (V{2, 2, 1, 1}));
  // Reduction: [2, 2, 0, 0] on 1 × 5: goal [2.5, 2.5, 0, 0], clamp [2, 2, 1, 1] (sum 6), diff
  // [−0.5, −0.5, 1, 1]: classes 2, 3, 2, 3 are decremented to −1 without dropping, then class 0
  // (tied with class 1 at −0.5) gives one up. The last index would give [2, 1, 1, 1].
  EXPECT_EQ(replica_counts({2, 2, 0, 0}, 1, 5), (V{1, 2, 1, 1}));
}

TEST(AdaptivePlacement, EvaluationScaleExample) {
  // A.4: floor/clamp = [24, 12, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1], sum 65 > 64. The
  // clamped classes 9–15 have diffs 0.2–0.84, so the reduction walks them down first (15, 14, 13,
  // 12, 11, 9, 10, to −0.16 … −0.8, none drops). The largest diff is then 0, shared by class 0
  // (24 − 24) and class 4 (4 − 500/125): the first index, class 0, gives up the extra replica.
  const V counts = replica_counts(kEvalPopularity, 16, 4);
  EXPECT_EQ(counts, (V{23, 12, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1}));
  const Placement p = contiguous_placement(counts, 16, 4);
  // The per-rank slot lists of A.4: 23 slots of class 0 fill ranks 0–4 and three of rank 5.
  for (int r = 0; r < 5; ++r) EXPECT_EQ(rank_slots(p, r), (V{0, 0, 0, 0})) << "rank " << r;
  const std::vector<V> rest{{0, 0, 0, 1}, {1, 1, 1, 1},  {1, 1, 1, 1}, {1, 1, 1, 2}, {2, 2, 2, 2},   {2, 3, 3, 3},
                            {3, 3, 4, 4}, {4, 4, 5, 5},  {5, 6, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
  for (int r = 5; r < 16; ++r) EXPECT_EQ(rank_slots(p, r), rest[r - 5]) << "rank " << r;
  // The helpers on the same layout.
  EXPECT_EQ(p.replicas(0), 23);
  EXPECT_EQ(p.replicas(15), 1);
  EXPECT_EQ(p.local_replicas(5, 0), 3);
  EXPECT_EQ(p.local_replicas(5, 1), 1);
  EXPECT_EQ(p.local_replicas(5, 2), 0);
  EXPECT_EQ(p.ranks_hosting(0), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p.ranks_hosting(1), (V{5, 6, 7, 8}));  // 1 + 4 + 4 + 3 = 12 replicas on 4 ranks
  EXPECT_EQ(p.ranks_hosting(15), (V{15}));
}

TEST(AdaptivePlacement, GradientSourcePrefersLocalThenRoundRobins) {
  const Placement p = eval_placement();
  // Class 0 on ranks 0–5: rank 5 reads its own replica; rank 9 reads cand[9 mod 6] = rank 3.
  EXPECT_EQ(gradient_source(p, 0, 5), 5);
  EXPECT_EQ(gradient_source(p, 0, 9), 3);
  // Class 1 on ranks 5–8: rank 0 → cand[0] = 5, rank 13 → cand[13 mod 4 = 1] = 6.
  EXPECT_EQ(gradient_source(p, 1, 0), 5);
  EXPECT_EQ(gradient_source(p, 1, 13), 6);
  // Class 2 has 6 replicas on 3 ranks (8: one, 9: four, 10: one). De-duplicated candidates
  // {8, 9, 10}: rank 3 → cand[3 mod 3 = 0] = 8. One candidate per slot, [8, 9, 9, 9, 9, 10],
  // would give cand[3] = 9.
  EXPECT_EQ(gradient_source(p, 2, 3), 8);
  EXPECT_EQ(gradient_source(p, 2, 11), 10);  // 11 mod 3 = 2
  // A single-replica class has one source for everyone.
  for (int dst = 0; dst < 16; ++dst) EXPECT_EQ(gradient_source(p, 15, dst), 15);
}

TEST(AdaptivePlacement, CollectionOfTheEvaluationScaleExample) {
  const Placement p = eval_placement();
  // Every partition takes one shard of every class: E·N = 256 transfers, class-major, each
  // agreeing with gradient_source.
  const auto transfers = collection_transfers(p);
  ASSERT_EQ(transfers.size(), 256u);
  for (std::size_t k = 0; k < transfers.size(); ++k) {
    const ShardTransfer& t = transfers[k];
    EXPECT_EQ(t.cls, static_cast<int>(k) / 16);
    EXPECT_EQ(t.dst, static_cast<int>(k) % 16);
    EXPECT_EQ(t.src, gradient_source(p, t.cls, t.dst));
  }
  // A.5's remote counts. Receives: a rank fetches remotely every class it does not host, so
  // receives = E − (distinct classes on the rank): rank 0 hosts {0} → 15, rank 5 {0, 1} → 14,
  // rank 13 {5, 6, 7} → 13, rank 15 {12..15} → 12.
  const CollectionCounts c = collection_counts(p);
  EXPECT_EQ(c.receives, (V{15, 15, 15, 15, 15, 14, 15, 15, 14, 15, 14, 14, 14, 13, 12, 12}));
  for (int r = 0; r < 16; ++r) {
    int distinct = 0;
    for (int cls = 0; cls < 16; ++cls) distinct += p.local_replicas(r, cls) > 0;
    EXPECT_EQ(c.receives[r], 16 - distinct) << "rank " << r;
  }
  // Sends. Rank 14 holds the single replicas of classes 8–11: all 15 other partitions fetch each
  // from it, 4·15 = 60 = s·(N−1), the send-side hotspot (the analytic sN − s of §3.3). Rank 13
  // [5, 6, 6, 7]: class 7 (single) 15, class 6 (both replicas here) 15, class 5 (on {12, 13}) the
  // odd non-hosts 1, 3, 5, 7, 9, 11, 15 → 7; 37 in all.
  EXPECT_EQ(c.sends, (V{2, 2, 2, 2, 1, 4, 3, 3, 8, 4, 11, 14, 14, 37, 60, 60}));
  EXPECT_EQ(c.sends[14], 4 * (16 - 1));
  // Every remote shard has one sender and one receiver: 227 of the 256 cross the network, the 29
  // others (Σ distinct classes per rank) cross PCIe only.
  int received = 0, sent = 0, remote = 0;
  for (int r = 0; r < 16; ++r) received += c.receives[r], sent += c.sends[r];
  for (const ShardTransfer& t : transfers) remote += t.remote();
  EXPECT_EQ(received, 227);
  EXPECT_EQ(sent, 227);
  EXPECT_EQ(remote, 227);
}

TEST(AdaptivePlacement, AnalyticRemoteReplicasPerRank) {
  // §3.3's per-rank term: Σ_i (r_i − r_{i|local}) = Σ_i r_i − Σ_i r_{i|local} = sN − s, since the
  // replicas of all classes fill all sN slots and those on one rank its s slots (Eq. 2). It holds
  // for any placement; here it checks replicas() and local_replicas() against each other. The
  // analytic model counts replica shards (reduce-to-owner, 60 per rank here), Algorithm 2 one
  // shard per class (12–15 above): the sN − s shows up only as the sends of ranks 14 and 15.
  const Placement p = eval_placement();
  for (int r = 0; r < 16; ++r) {
    int remote_replicas = 0;
    for (int cls = 0; cls < 16; ++cls) remote_replicas += p.replicas(cls) - p.local_replicas(r, cls);
    EXPECT_EQ(remote_replicas, 4 * 16 - 4) << "rank " << r;
  }
}

TEST(AdaptivePlacement, UniformPopularityContiguousAndStatic) {
  // 16 equal classes on 16 × 4: goal = 4 each, exactly DeepSpeed's r = sN/E = 64/16 = 4 (A.4).
  const V counts = replica_counts(std::vector<double>(16, 100.0), 16, 4);
  EXPECT_EQ(counts, V(16, 4));
  // Contiguous: class c fills rank c. No class is shared, so each rank receives the 15 classes it
  // lacks and sends its own class to the 15 others.
  const Placement contiguous = contiguous_placement(counts, 16, 4);
  for (int r = 0; r < 16; ++r) EXPECT_EQ(rank_slots(contiguous, r), V(4, r));
  const CollectionCounts cc = collection_counts(contiguous);
  EXPECT_EQ(cc.receives, V(16, 15));
  EXPECT_EQ(cc.sends, V(16, 15));

  // DeepSpeed (A.9): slot g holds class g mod 16. Rank k holds classes 4·(k mod 4) .. +3, and
  // class i sits on ranks ⌊i/4⌋ + 4j, j = 0..3: 4 replicas on 4 distinct ranks, 4 slots per rank.
  const Placement st = static_placement(16, 16, 4);
  EXPECT_EQ(rank_slots(st, 0), (V{0, 1, 2, 3}));
  EXPECT_EQ(rank_slots(st, 5), (V{4, 5, 6, 7}));
  EXPECT_EQ(rank_slots(st, 15), (V{12, 13, 14, 15}));
  EXPECT_EQ(st.ranks_hosting(0), (V{0, 4, 8, 12}));
  EXPECT_EQ(st.ranks_hosting(13), (V{3, 7, 11, 15}));
  for (int cls = 0; cls < 16; ++cls) {
    EXPECT_EQ(st.replicas(cls), 4) << "class " << cls;
    EXPECT_EQ(st.ranks_hosting(cls).size(), 4u) << "class " << cls;
  }
  // Algorithm 2 on this layout (for comparison; DeepSpeed itself shards each optimizer over the
  // hosting ranks only): every rank lacks 12 classes. Class i's hosts are h + 4m (h = ⌊i/4⌋);
  // a non-host d (d mod 4 ≠ h) reads cand[d mod 4] = h + 4·(d mod 4), so rank h + 4m sends to the
  // 4 ranks ≡ m (mod 4) when m ≠ h and to none when m = h. Rank k hosts 4 classes with h = k mod 4:
  // 16 sends unless ⌊k/4⌋ = k mod 4 (ranks 0, 5, 10, 15: none). 12·16 = 192 = 16·12.
  const CollectionCounts sc = collection_counts(st);
  EXPECT_EQ(sc.receives, V(16, 12));
  EXPECT_EQ(sc.sends, (V{0, 16, 16, 16, 16, 0, 16, 16, 16, 16, 0, 16, 16, 16, 16, 0}));
}

TEST(AdaptivePlacement, StaticPlacementWhenSlotsPerRankDoNotDivideClasses) {
  // E = 6, N = 3, s = 4: r = 12/6 = 2. Slot g → g mod 6: [0,1,2,3 | 4,5,0,1 | 2,3,4,5]; each
  // class's two replicas are 6 slots apart, on two ranks.
  const Placement p = static_placement(6, 3, 4);
  EXPECT_EQ(p.slot_class, (V{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(p.ranks_hosting(0), (V{0, 1}));
  EXPECT_EQ(p.ranks_hosting(2), (V{0, 2}));
  EXPECT_EQ(p.ranks_hosting(4), (V{1, 2}));
  // sN = 16 is not a multiple of E = 5; E = 2 < s = 4 needs r = 8 replicas on 4 ranks.
  EXPECT_THROW(static_placement(5, 4, 4), InputError);
  EXPECT_THROW(static_placement(2, 4, 4), InputError);
  EXPECT_THROW(static_placement(0, 4, 4), InputError);
}

TEST(AdaptivePlacement, WithoutIntraRankReplicasEachClassOnDistinctRanks) {
  // §4.1's counterfactual (C9). Algorithm 1 on [75, 15, 10] over 4 ranks × 2 slots: goals 6,
  // 1.2, 0.8 → floors 6, 1, 1, all 8 slots. Capped at N = 4: class 0 gives 2 back; the first goes
  // to class 1 (15 per replica against 10), the second to class 2 (10 against 15/2) → [4, 2, 2].
  const std::vector<double> pop{75, 15, 10};
  EXPECT_EQ(replica_counts(pop, 4, 2), (V{6, 1, 1}));
  const V capped = capped_replica_counts(replica_counts(pop, 4, 2), pop, 4, 2);
  EXPECT_EQ(capped, (V{4, 2, 2}));
  // Spread: class 0 first, on ranks 0-3 (2 free slots each) → slots 0, 2, 4, 6; class 1 on the
  // ranks with most room, lowest first, 0 and 1 → slots 1, 3; class 2 on ranks 2, 3 → 5, 7.
  const Placement p = spread_placement(capped, 4, 2);
  EXPECT_EQ(p.slot_class, (V{0, 1, 0, 1, 0, 2, 0, 2}));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(static_cast<int>(p.ranks_hosting(c).size()), capped[c]) << c;
  // Largest classes first onto the emptiest ranks: [2, 2, 2, 1, 1] on 4 × 2 puts no class twice
  // on a rank.
  const Placement q = spread_placement({2, 2, 2, 1, 1}, 4, 2);
  for (int r = 0; r < 4; ++r) EXPECT_NE(q.slot_class[2 * r], q.slot_class[2 * r + 1]) << "rank " << r;
  // Refused: a count above N, and fewer classes than slots per rank (no distinct-rank layout).
  EXPECT_THROW(spread_placement({5, 2, 1}, 4, 2), InputError);
  EXPECT_THROW(capped_replica_counts({6, 2}, {1, 1}, 2, 4), InputError);  // 2 classes × 2 ranks < 8 slots
}

TEST(AdaptivePlacement, InputsAlgorithmOneCannotPlace) {
  // 17 classes on 4 × 4 = 16 slots: the min-one clamp cannot hold.
  try {
    replica_counts(std::vector<double>(17, 1.0), 4, 4);
    ADD_FAILURE() << "17 classes on 16 slots accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("17 expert classes"), std::string::npos) << what;
    EXPECT_NE(what.find("16 slots"), std::string::npos) << what;
  }
  EXPECT_EQ(replica_counts(std::vector<double>(16, 1.0), 4, 4), V(16, 1));  // 16 on 16 fits
  EXPECT_THROW(replica_counts({0, 0, 0, 0}, 2, 4), InputError);
  EXPECT_THROW(replica_counts({}, 2, 4), InputError);
  EXPECT_THROW(replica_counts({5, -1, 3}, 2, 4), InputError);
  EXPECT_THROW(replica_counts({5, std::numeric_limits<double>::quiet_NaN()}, 2, 4), InputError);
  EXPECT_THROW(replica_counts({5, std::numeric_limits<double>::infinity()}, 2, 4), InputError);
  EXPECT_THROW(replica_counts({5, 5}, 0, 4), InputError);
  EXPECT_THROW(replica_counts({5, 5}, 2, 0), InputError);
  // Contiguous layouts fill every slot exactly once and keep every class reachable.
  EXPECT_THROW(contiguous_placement({4, 2, 1}, 2, 4), InputError);     // 7 of 8 slots
  EXPECT_THROW(contiguous_placement({5, 2, 1, 1}, 2, 4), InputError);  // 9 of 8
  EXPECT_THROW(contiguous_placement({6, 2, 0}, 2, 4), InputError);     // class 2 unreachable
  EXPECT_THROW(contiguous_placement({}, 2, 4), InputError);
}
