// HybridEP (seed 000): the domain-based partition against Table VII and Fig. 8(b), and the
// stream-based model's solution (Eq. 10–12) against a search over every p.
#include <gtest/gtest.h>

#include "sim/strategies/hybridep/domain_partition.hpp"
#include "sim/strategies/hybridep/stream_model.hpp"

using namespace moesim;
using namespace moesim::strategies::hybridep;

namespace {
cluster::GpuSpec bare_gpu() {
  cluster::GpuSpec g;
  g.key = "t";
  return g;
}
cluster::Level level(const char* name, std::uint32_t count) {
  return cluster::Level{name, count, cluster::Fabric::Switch, *parse_bandwidth("10Gbps"), 0, 1.0, 1, {}, nullptr};
}
}  // namespace

TEST(HybridEpPartition, TableVIICommunicationFrequency) {
  // Table VII: A2A and AG GPU-to-GPU communications for EP sizes 8, 16, 32 and every S_ED.
  struct Row {
    std::uint32_t ep, sed;
    std::uint64_t a2a, ag;
  };
  const Row rows[] = {{8, 1, 56, 0},      {8, 2, 24, 8},      {8, 4, 8, 24},       {8, 8, 0, 56},
                      {16, 1, 240, 0},    {16, 2, 112, 16},   {16, 4, 48, 48},     {16, 8, 16, 112},
                      {16, 16, 0, 240},   {32, 1, 992, 0},    {32, 2, 480, 32},    {32, 4, 224, 96},
                      {32, 8, 96, 224},   {32, 16, 32, 480},  {32, 32, 0, 992}};
  for (const Row& r : rows) {
    cluster::Topology t({level("gpu", r.ep)}, {bare_gpu()}, {});
    const PairCounts c = count_pairs(t, {r.sed});
    EXPECT_EQ(c.all_to_all, r.a2a) << "EP " << r.ep << " S_ED " << r.sed;
    EXPECT_EQ(c.all_gather, r.ag) << "EP " << r.ep << " S_ED " << r.sed;
    // Algorithm 1 pair by pair gives the same counts.
    PairCounts direct;
    for (std::uint32_t m = 0; m < r.ep; ++m)
      for (std::uint32_t n = 0; n < r.ep; ++n) {
        const Pattern p = communication(t, {r.sed}, m, n, 0);
        direct.all_to_all += p == Pattern::AllToAll;
        direct.all_gather += p == Pattern::AllGather;
      }
    EXPECT_EQ(direct.all_to_all, r.a2a);
    EXPECT_EQ(direct.all_gather, r.ag);
  }
}

TEST(HybridEpPartition, Figure8bTwoLevels) {
  // Fig. 8(b): 4 DCs × 4 GPUs, S_ED^0 = 2, S_ED^1 = 4. Inside a DC all 4 GPUs form one domain and
  // all-gather (4 groups of 4); across DCs, DCs {0,1} and {2,3} are domains: GPUs with the same
  // local index all-gather with the other DC of their domain and all-to-all with the DCs of the
  // other domain at the same offset.
  cluster::Topology t({level("dc", 4), level("gpu", 4)}, {bare_gpu()}, {});
  const auto groups = build_groups(t, {2, 4});
  ASSERT_EQ(groups[1].all_gather.size(), 4u);
  EXPECT_EQ(groups[1].all_gather[1], (std::vector<std::uint32_t>{4, 5, 6, 7}));
  EXPECT_TRUE(groups[1].all_to_all.empty());
  // Level 0: per local index 2 domains → 8 AG pairs-groups of 2, and 2 offsets → 8 A2A groups of 2.
  ASSERT_EQ(groups[0].all_gather.size(), 8u);
  EXPECT_EQ(groups[0].all_gather[0], (std::vector<std::uint32_t>{0, 4}));
  EXPECT_EQ(groups[0].all_to_all[0], (std::vector<std::uint32_t>{0, 8}));
  EXPECT_EQ(communication(t, {2, 4}, 1, 9, 0), Pattern::AllToAll);    // DCs 0 and 2: other domain, offset 0
  EXPECT_EQ(communication(t, {2, 4}, 1, 13, 0), Pattern::None);       // DC 3: other domain, other offset
  EXPECT_EQ(communication(t, {2, 4}, 1, 5, 0), Pattern::AllGather);   // DCs 0 and 1, same domain
  EXPECT_EQ(communication(t, {2, 4}, 1, 14, 0), Pattern::None);       // differ at both levels
  EXPECT_EQ(communication(t, {2, 4}, 1, 2, 1), Pattern::AllGather);
}

TEST(HybridEpStreamModel, TheThreeCasesMatchASearchOverEveryP) {
  // G = 16 GPUs at B = 1.25 GB/s (10 Gbps). For each case, Eq. 10–12's p is the p that minimises
  // Lat_final over the grid k/15, and its latency the minimum.
  const auto search = [](const StreamInputs& in) {
    double best = 1e300, best_p = -1;
    for (std::uint32_t k = 0; k < in.gpus; ++k) {
      const double p = static_cast<double>(k) / (in.gpus - 1);
      const double l = final_latency(in, p);
      if (l < best - 1e-15) best = l, best_p = p;
    }
    return std::pair{best_p, best};
  };
  // Case 1: P_E = 0.36 MB (Table V's expert), Lat_PE = 10 ms: B·Lat_PE = 12.5 MB ≥ 15 × 0.36 MB.
  StreamInputs c1{6e6, 0.36e6, 1.25e9, 10e-3, 16};
  // Case 2.2 (§III-E: 2D − G·P_E ≥ 0 → minimum p): big data, 2D = 384 MB ≥ 16 × 8 MB; Lat_PE = 5 ms
  // hides 6.25 MB of the 120 MB.
  StreamInputs c22{192e6, 8e6, 1.25e9, 5e-3, 16};
  // Case 2.1 (2D − G·P_E < 0 → the largest p below p*, i.e. p*'s grid point): small data,
  // 2D = 12 MB < 16 × 8 MB: only enough expert traffic to hide under 40 ms.
  StreamInputs c21{6e6, 8e6, 1.25e9, 40e-3, 16};
  const StreamSolution s1 = solve(c1), s21 = solve(c21), s22 = solve(c22);
  EXPECT_EQ(s1.which, StreamCase::Case1);
  EXPECT_EQ(s21.which, StreamCase::Case2_1);
  EXPECT_EQ(s22.which, StreamCase::Case2_2);
  for (const auto* in : {&c1, &c21, &c22}) {
    const auto [p, lat] = search(*in);
    const StreamSolution s = solve(*in);
    EXPECT_DOUBLE_EQ(s.p, p);
    EXPECT_DOUBLE_EQ(s.latency, lat);
  }
  // Case 2.1 by hand: p* = (8e6·15 − 1.25e9·0.04) / (8e6·15) = 70/120 = 0.5833 → p = ⌈8.75⌉/15 = 9/15;
  // the domain holds 16 − 9 = 7 GPUs (not yet rounded to a divisor of G); Eq. 11 gives
  // Lat = 40 ms + 2·6e6·15·(9/15) / (16·1.25e9) = 40 ms + 5.4 ms.
  EXPECT_NEAR(s21.p_star, 70.0 / 120.0, 1e-12);
  EXPECT_DOUBLE_EQ(s21.p, 9.0 / 15.0);
  EXPECT_EQ(s21.domain, 7u);
  EXPECT_NEAR(s21.latency, 0.04 + 2 * 6e6 * 9 / (16 * 1.25e9), 1e-12);
  // Case 2.2 by hand: p = 0, Lat = 15 × 8 MB / 1.25 GB/s = 96 ms (pure all-gather).
  EXPECT_NEAR(s22.latency, 15 * 8e6 / 1.25e9, 1e-12);
  EXPECT_EQ(s22.domain, 16u);
}
