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
  return {TrafficMatrix::dense(12, bytes), std::move(b).build()};
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
