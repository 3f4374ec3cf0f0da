// The traffic matrix's forms (network/traffic_matrix.hpp): the tiered form, built from the same
// bytes as a dense matrix, gives the same load on every worker and port of every tier, the same
// bytes per rank and the same pairs; single pairs are split in proportion to what each
// destination receives.
#include <gtest/gtest.h>

#include <memory>

#include "sim/core/rng.hpp"
#include "sim/network/traffic_matrix.hpp"

using namespace moesim;
using namespace moesim::network;

namespace {

// 12 ranks: 2 regions × 3 racks × 2 GPUs (tiers 0, 1, 2; the GPU tier's workers are the ranks).
std::shared_ptr<RankTiers> twelve() {
  auto t = std::make_shared<RankTiers>();
  t->worker.resize(3);
  for (std::uint32_t r = 0; r < 12; ++r) {
    t->worker[0].push_back(r / 6);
    t->worker[1].push_back(r / 2);
    t->worker[2].push_back(r);
  }
  t->workers = {2, 6, 12};
  return t;
}

// Random bytes between ranks (a third of the pairs empty), and both forms of them.
struct Both {
  TrafficMatrix dense, tiered;
  std::vector<double> bytes;  // row-major 12 × 12
};
Both random_pair(std::uint64_t seed) {
  Rng rng(seed);
  std::vector<double> bytes(144, 0.0);
  TrafficMatrix::TieredBuilder b(twelve());
  for (std::uint32_t s = 0; s < 12; ++s)
    for (std::uint32_t d = 0; d < 12; ++d) {
      if (rng.below(3) == 0) continue;
      bytes[s * 12 + d] = std::floor(rng.uniform() * 1000) + 1;
      b.add(s, d, bytes[s * 12 + d] / 2);  // the same destination twice
      b.add(s, d, bytes[s * 12 + d] / 2);
    }
  return {TrafficMatrix::dense(12, bytes), std::move(b).build(), bytes};
}

}  // namespace

TEST(TrafficMatrix, TieredLoadsEqualTheDenseOnesOnEveryTierAndPort) {
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const Both m = random_pair(seed);
    const auto tiers = twelve();
    for (int t = 0; t < 3; ++t) {
      std::vector<double> out_d, in_d, out_t, in_t;
      m.dense.worker_loads(tiers->worker[t], tiers->workers[t], out_d, in_d);
      m.tiered.worker_loads(tiers->worker[t], tiers->workers[t], out_t, in_t);
      for (std::uint32_t w = 0; w < tiers->workers[t]; ++w) {
        EXPECT_DOUBLE_EQ(out_t[w], out_d[w]) << "tier " << t << " worker " << w;
        EXPECT_DOUBLE_EQ(in_t[w], in_d[w]) << "tier " << t << " worker " << w;
      }
      // Two ports per rack (each of its GPUs its own) at tier 1.
      if (t == 1) {
        std::vector<std::uint32_t> port(12);
        for (std::uint32_t r = 0; r < 12; ++r) port[r] = r;
        m.dense.port_loads(tiers->worker[t], 6, port, 12, out_d, in_d);
        m.tiered.port_loads(tiers->worker[t], 6, port, 12, out_t, in_t);
        for (std::uint32_t p = 0; p < 12; ++p) {
          EXPECT_DOUBLE_EQ(out_t[p], out_d[p]);
          EXPECT_DOUBLE_EQ(in_t[p], in_d[p]);
        }
      }
    }
    for (std::uint32_t r = 0; r < 12; ++r) {
      EXPECT_DOUBLE_EQ(m.tiered.sent(r), m.dense.sent(r));
      EXPECT_DOUBLE_EQ(m.tiered.received(r), m.dense.received(r));
    }
    EXPECT_DOUBLE_EQ(m.tiered.total(), m.dense.total());
    EXPECT_EQ(m.tiered.pairs(), m.dense.pairs());
    // The combine: the transpose, loads swapped.
    const TrafficMatrix back = m.tiered.transposed(), back_d = m.dense.transposed();
    for (std::uint32_t r = 0; r < 12; ++r) EXPECT_DOUBLE_EQ(back.sent(r), back_d.sent(r));
    // A grouping that is no tier's (ranks in threes) is answered pair by pair, and keeps the
    // bytes: what leaves the groups enters them.
    std::vector<std::uint32_t> threes(12);
    for (std::uint32_t r = 0; r < 12; ++r) threes[r] = r / 3;
    std::vector<double> out, in;
    m.tiered.worker_loads(threes, 4, out, in);
    EXPECT_NEAR(std::accumulate(out.begin(), out.end(), 0.0), std::accumulate(in.begin(), in.end(), 0.0), 1e-6);
  }
}

TEST(TrafficMatrix, TieredPairsSplitWhatCrossesATierByWhatEachDestinationReceives) {
  // Rank 0 sends 600 B to rank 6 and 300 B to rank 8 (both across tier 0, the other region);
  // rank 1 sends 100 B to rank 8. Across tier 0 region 1 receives 600 at rank 6 and 400 at rank
  // 8: rank 0's 900 B are split 540 / 360 (0.6 / 0.4), rank 1's 100 B 60 / 40.
  TrafficMatrix::TieredBuilder b(twelve());
  b.add(0, 6, 600);
  b.add(0, 8, 300);
  b.add(1, 8, 100);
  const TrafficMatrix t = std::move(b).build();
  EXPECT_DOUBLE_EQ(t.at(0, 6), 540);
  EXPECT_DOUBLE_EQ(t.at(0, 8), 360);
  EXPECT_DOUBLE_EQ(t.at(1, 6), 60);
  EXPECT_DOUBLE_EQ(t.at(0, 7), 0);  // rank 7 receives nothing
  EXPECT_DOUBLE_EQ(t.at(0, 1), 0);  // nothing inside the rack
  EXPECT_EQ(t.pairs(), 3u);
  // Sibling pairs at tier 0: region 0 → region 1 carries all 1000 B.
  std::vector<double> pair;
  t.sibling_pairs(twelve()->worker[0], 2, {0, 0}, pair);
  EXPECT_DOUBLE_EQ(pair[0 * 2 + 1], 1000);
  EXPECT_DOUBLE_EQ(pair[1 * 2 + 0], 0);
}

namespace {

// The 2-D all-to-all pair by pair (collective_plan's dense path) over twelve()'s racks as nodes:
// node r/2, local index r%2.
std::pair<TrafficMatrix, TrafficMatrix> relayed_by_pair(const TrafficMatrix& t) {
  std::vector<double> p1(144, 0.0), p2(144, 0.0);
  for (std::uint32_t s = 0; s < 12; ++s)
    for (std::uint32_t d = 0; d < 12; ++d) {
      const std::uint32_t relay = (s / 2) * 2 + d % 2;
      if (relay != s) p1[s * 12 + relay] += t.at(s, d);
      if (relay != d) p2[relay * 12 + d] += t.at(s, d);
    }
  return {TrafficMatrix::dense(12, p1), TrafficMatrix::dense(12, p2)};
}

struct Racks {
  std::vector<std::uint32_t> node, local;
  std::vector<std::vector<std::uint32_t>> rank_at;
};
Racks racks() {
  Racks r;
  for (std::uint32_t i = 0; i < 12; ++i) {
    r.node.push_back(i / 2);
    r.local.push_back(i % 2);
  }
  for (std::uint32_t g = 0; g < 6; ++g) r.rank_at.push_back({2 * g, 2 * g + 1});
  return r;
}

// What leaves and enters each of twelve()'s workers at `tier`: `got`'s within `tolerance` of `want`'s.
void expect_worker_loads(const TrafficMatrix& got, const TrafficMatrix& want, int tier, double tolerance) {
  const auto tiers = twelve();
  std::vector<double> out_w, in_w, out_g, in_g;
  want.worker_loads(tiers->worker[tier], tiers->workers[tier], out_w, in_w);
  got.worker_loads(tiers->worker[tier], tiers->workers[tier], out_g, in_g);
  for (std::uint32_t w = 0; w < tiers->workers[tier]; ++w) {
    EXPECT_NEAR(out_g[w], out_w[w], tolerance) << "tier " << tier << " worker " << w;
    EXPECT_NEAR(in_g[w], in_w[w], tolerance) << "tier " << tier << " worker " << w;
  }
}

}  // namespace

TEST(TrafficMatrix, SumsAcrossTheCoarsestTierGiveThePairByPairTieredForm) {
  // Sampled routing at scale adds up what each source sends out of its region (tier 0) and
  // counts its destinations there, and takes each rank's receipts from other regions from its
  // total less what it receives inside its region (its own bytes included): the same tiered form,
  // every worker's load at every tier, every rank's bytes and the pairs, as adding pair by pair.
  // Whole bytes: the sums and the difference are exact.
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const Both m = random_pair(seed);
    const auto tiers = twelve();
    TrafficMatrix::TieredBuilder b(tiers);
    std::vector<double> received(12, 0.0), own(12, 0.0);
    for (std::uint32_t s = 0; s < 12; ++s) {
      double leaving = 0;
      std::uint64_t pairs = 0;
      for (std::uint32_t d = 0; d < 12; ++d) {
        const double x = m.bytes[s * 12 + d];
        received[d] += x;
        if (tiers->worker[0][d] == tiers->worker[0][s]) {
          if (s == d) own[d] += x;
          else b.add(s, d, x);
        } else if (x > 0) {
          leaving += x;
          ++pairs;
        }
      }
      b.leave_coarsest(s, leaving, pairs);
    }
    b.enter_coarsest(received, own);
    const TrafficMatrix t = std::move(b).build();
    for (int tier = 0; tier < 3; ++tier) expect_worker_loads(t, m.tiered, tier, 0.0);
    for (std::uint32_t r = 0; r < 12; ++r) {
      EXPECT_EQ(t.sent(r), m.dense.sent(r));
      EXPECT_EQ(t.received(r), m.dense.received(r));
    }
    EXPECT_EQ(t.pairs(), m.dense.pairs());
  }
}

TEST(TrafficMatrix, TieredRelayKeepsWhatLeavesAndEntersEveryWorkerAboveTheNode) {
  // Random pairs: the tiered relay splits each source's bytes over local indices by what they
  // receive (not by the pairs), so only what the form keeps exact is compared: per region and
  // per rack (the node), what phase 2 sends out and takes in, what each rank receives in phase
  // 2, and all bytes (each byte crosses the node boundary once, in phase 2, or stays inside it).
  const Racks r = racks();
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const Both m = random_pair(seed);
    const auto [d1, d2] = relayed_by_pair(m.dense);
    const auto [t1, t2] = m.tiered.relayed(r.node, r.local, r.rank_at);
    ASSERT_TRUE(t1.is_tiered() && t2.is_tiered());
    const auto tiers = twelve();
    for (int t = 0; t < 2; ++t) expect_worker_loads(t2, d2, t, 1e-9 * m.dense.total());
    for (std::uint32_t d = 0; d < 12; ++d) EXPECT_NEAR(t2.received(d), d2.received(d), 1e-9 * m.dense.total()) << d;
    // What crosses racks in phase 2 is what crossed them at all; phase 1 stays inside racks.
    std::vector<double> out, in;
    t1.worker_loads(tiers->worker[1], 6, out, in);
    for (const double x : out) EXPECT_EQ(x, 0.0);
    EXPECT_NEAR(t2.total(), d2.total(), 1e-9 * m.dense.total());
  }
}

TEST(TrafficMatrix, TieredRelayOfEvenTrafficIsThePairByPairRelay) {
  // Every rank sends 100 B to every other: what a source sends across a tier is split evenly over
  // the ranks it reaches, which is what the pairs do, so both phases equal the pair-by-pair ones
  // on every rank, worker and pair count. Rank 0 hands rank 1 (its rack peer of index 1) what
  // it has for the 5 index-1 ranks of other racks and for rank 1 itself: 600 B (phase 1); rank 1
  // sends on to those 5 ranks 200 B each, rank 0's and its own: 1000 B (phase 2). (A single pair
  // of phase 2, at(), is split over every rank of the tier, not only those of its index.)
  const TrafficMatrix even = TrafficMatrix::uniform(12, 100);
  const auto [d1, d2] = relayed_by_pair(even);
  const auto [t1, t2] = even.as_tiered(twelve()).relayed(racks().node, racks().local, racks().rank_at);
  for (std::uint32_t s = 0; s < 12; ++s) {
    EXPECT_NEAR(t1.sent(s), d1.sent(s), 1e-9) << s;
    EXPECT_NEAR(t1.received(s), d1.received(s), 1e-9) << s;
    EXPECT_NEAR(t2.sent(s), d2.sent(s), 1e-9) << s;
    EXPECT_NEAR(t2.received(s), d2.received(s), 1e-9) << s;
  }
  EXPECT_NEAR(t1.at(0, 1), 600, 1e-9);  // rank 0's bytes for the 5 other racks' index 1 and rank 1
  EXPECT_NEAR(t2.sent(1), 1000, 1e-9);
  EXPECT_EQ(t1.pairs(), d1.pairs());  // 12: each rank to its rack peer
  EXPECT_EQ(t2.pairs(), d2.pairs());  // 12 × 5: each rank to the ranks of its index in other racks
  EXPECT_EQ(t1.pairs(), 12u);
  EXPECT_EQ(t2.pairs(), 60u);
}

TEST(TrafficMatrix, FactoredInTieredFormKeepsEveryRanksBytesAcrossEveryTier) {
  // a = 1..12, q = r/66: the tiered form's per-rank loads on every tier are the dense matrix's.
  std::vector<double> a, q;
  for (std::uint32_t r = 0; r < 12; ++r) {
    a.push_back(r + 1.0);
    q.push_back(r / 66.0);  // Σ r = 66: rank 0 receives nothing
  }
  const TrafficMatrix f = TrafficMatrix::factored(a, q);
  const TrafficMatrix t = f.as_tiered(twelve()), d = f.to_dense();
  for (int tier = 0; tier < 3; ++tier) expect_worker_loads(t, d, tier, 1e-12);
  EXPECT_EQ(t.pairs(), d.pairs());  // 12 senders × 11 receivers − 11 that are both: 121
  EXPECT_EQ(t.pairs(), 121u);
}
