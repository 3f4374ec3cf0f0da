// Cluster renumbering (HybridEP Eq. 13), link graph routes, and analytic collective costs derived
// by hand from α-β and the traffic each GPU sends (HybridEP Eq. 3 and 4, ring all-reduce).
#include <gtest/gtest.h>

#include <numeric>

#include "sim/cluster/link_graph.hpp"
#include "sim/network/analytic_model.hpp"
#include "test_support.hpp"

using namespace moesim;
using namespace moesim::cluster;
using namespace moesim::network;

namespace {

using test::any_gpu;
using test::level;

Topology one_level(std::uint32_t gpus) { return Topology({level("gpu", gpus, "128Gbps", "5us")}, {any_gpu()}, {}); }

using test::iota;

struct Fixture {
  explicit Fixture(Topology t) : topo(std::move(t)), graph(topo), model(topo, AlphaBetaTable::from_topology(topo, graph)) {}
  Topology topo;
  LinkGraph graph;
  AnalyticModel model;
  GroupTable groups;
  CollectiveCost run(CollectiveOp op, std::vector<std::uint32_t> members) {
    return model.cost(op, members);
  }
};

}  // namespace

TEST(Topology, LocationRenumberingFollowsEq13) {
  // HybridEP Fig. 8(b): SF = [4, 4]; GPU 13 is GPU 1 of DC 3.
  Topology fig8({level("dc", 4, "10Gbps", "1ms"), level("gpu", 4, "128Gbps", "5us")}, {any_gpu()}, {});
  EXPECT_EQ(fig8.location(13), (std::vector<std::uint32_t>{3, 1}));
  // SF = [2, 3, 4]: x0 = 17/12 mod 2 = 1, x1 = 17/4 mod 3 = 1, x2 = 17 mod 4 = 1.
  Topology three({level("dc", 2, "10Gbps", "1ms"), level("node", 3, "400Gbps", "5us"), level("gpu", 4, "900GB/s", "1us")},
                 {any_gpu()}, {});
  EXPECT_EQ(three.gpu_count(), 24u);
  EXPECT_EQ(three.location(17), (std::vector<std::uint32_t>{1, 1, 1}));
  EXPECT_EQ(three.location(23), (std::vector<std::uint32_t>{1, 2, 3}));
  EXPECT_EQ(three.worker(17, 1), 4u);  // the fifth node of the cluster
  for (std::uint32_t m = 0; m < three.gpu_count(); ++m) EXPECT_EQ(three.index_of(three.location(m)), m);
  EXPECT_EQ(three.index_of({1, 2, 3}), 23u);
  EXPECT_EQ(three.first_differing_level(17, 19), 2);
  EXPECT_EQ(three.first_differing_level(17, 13), 1);
  EXPECT_EQ(three.first_differing_level(17, 5), 0);
  EXPECT_EQ(three.first_differing_level(17, 17), -1);
}

TEST(LinkGraph, RoutesCrossEachLevelOnce) {
  // 2 DCs × 8 GPUs: GPU 0 → 1 stays in the DC (latency 5 us); GPU 0 → 8 crosses the DC level
  // too (100 + 5 us) and its bottleneck is the 10 Gbps DC link.
  Topology t({level("dc", 2, "10Gbps", "100us"), level("gpu", 8, "128Gbps", "5us")}, {any_gpu()}, {});
  LinkGraph g(t);
  // 16 GPUs, 2 DC switches, one top switch and 16 hosts; 16 GPU uplinks, 2 DC uplinks and 16
  // PCIe host links.
  EXPECT_EQ(g.vertex_count(), 35u);
  EXPECT_EQ(g.link_count(), 34u);
  EXPECT_EQ(g.route(0, 1).latency, 5 * kMicrosecond);
  const Route far = g.route(0, 8);
  EXPECT_EQ(far.latency, 105 * kMicrosecond);
  EXPECT_DOUBLE_EQ(far.bottleneck_bytes_per_second, 1.25e9);
  EXPECT_EQ(far.levels.size(), 4u);
}

TEST(AnalyticModel, AllToAllSendsDTimesGMinusOneOverG) {
  // HybridEP Eq. 3: with D bytes of dispatch per GPU spread evenly over G GPUs, each GPU sends
  // D·(G−1)/G. G = 8, D = 8 MiB: 7 MiB = 7340032 B. At 128 Gbps (β = 62.5 ps/B) and α = 5 us:
  // 5e6 + 7340032 × 62.5 = 463,752,000 ps.
  Fixture f(one_level(8));
  const double d = 8.0 * 1024 * 1024;
  auto traffic = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(8, d / 8));
  const auto c = f.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, traffic}, iota(8));
  EXPECT_DOUBLE_EQ(c.max_bytes_sent_per_gpu, 7340032.0);
  EXPECT_DOUBLE_EQ(c.bytes_by_level[0], 8 * 7340032.0);
  EXPECT_EQ(c.duration, 463'752'000);
  // HybridEP Table VII, S_ED = 1 (plain EP): 56 communicating pairs at EP size 8.
  EXPECT_EQ(c.pairs, 56u);
}

TEST(AnalyticModel, AllToAllPairCountsMatchTableVII) {
  for (std::uint32_t g : {8u, 16u, 32u}) {
    Fixture f(one_level(g));
    auto traffic = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(g, 1000));
    EXPECT_EQ(f.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, traffic}, iota(g)).pairs,
              static_cast<std::uint64_t>(g) * (g - 1));  // 56, 240, 992
  }
}

TEST(AnalyticModel, RingAllGatherSendsPTimesGMinusOne) {
  // HybridEP Eq. 4: all-gathering P bytes per GPU costs P·(G−1) per GPU. G = 8, P = 1e6 B:
  // 7 steps of α + P·β = 5e6 + 62.5e6 = 67.5e6 ps → 472.5e6 ps.
  Fixture f(one_level(8));
  const auto c = f.run({CollectiveKind::AllGather, Algorithm::Ring, 0, 1e6, nullptr}, iota(8));
  EXPECT_DOUBLE_EQ(c.max_bytes_sent_per_gpu, 7e6);
  EXPECT_EQ(c.duration, 472'500'000);
  EXPECT_EQ(c.pairs, 56u);
}

TEST(AnalyticModel, RingAllReduceSendsTwoGMinusOneOverGTimesS) {
  // Ring all-reduce of S = 8e6 B over G = 8: 2·(G−1)/G·S = 14e6 B per GPU, in 14 steps of
  // α + (S/G)·β = 5e6 + 1e6·62.5 = 67.5e6 ps → 945e6 ps.
  Fixture f(one_level(8));
  const auto c = f.run({CollectiveKind::AllReduce, Algorithm::Ring, 0, 8e6, nullptr}, iota(8));
  EXPECT_DOUBLE_EQ(c.max_bytes_sent_per_gpu, 14e6);
  EXPECT_EQ(c.duration, 945'000'000);
  // Reduce-scatter alone: half of it.
  const auto rs = f.run({CollectiveKind::ReduceScatter, Algorithm::Ring, 0, 8e6, nullptr}, iota(8));
  EXPECT_EQ(rs.duration, 472'500'000);
}

TEST(AnalyticModel, TreeAllReduceHasTheRingsBytesInLogSteps) {
  // Tree all-reduce of S = 8e6 B over G = 8: the ring's 14e6 B per GPU in 2·log2(8) = 6 steps of
  // α + (14e6/6)·β = 5e6 + 2.333e6 × 62.5 ps → 6 × 5e6 + 14e6 × 62.5 = 905e6 ps (ring: 945e6).
  Fixture f(one_level(8));
  const auto c = f.run({CollectiveKind::AllReduce, Algorithm::Tree, 0, 8e6, nullptr}, iota(8));
  EXPECT_NEAR(c.max_bytes_sent_per_gpu, 14e6, 1e-6);
  EXPECT_NEAR(static_cast<double>(c.duration), 905e6, 6);
  // Across 1000 nodes of 8 GPUs (100 us, 10 Gbps between): rings inside the node, trees across;
  // the latency is 2·⌈log2 1000⌉ = 20 steps of the node level, not the ring's 1998.
  Fixture big(Topology({level("dc", 1000, "10Gbps", "100us"), level("gpu", 8, "128Gbps", "5us")}, {any_gpu()}, {}));
  const auto tree = big.run({CollectiveKind::AllReduce, Algorithm::Tree, 0, 8e6, nullptr}, iota(8000));
  const auto hier = big.run({CollectiveKind::AllReduce, Algorithm::Hierarchical, 0, 8e6, nullptr}, iota(8000));
  // Cross-node stage: 8e6/8 = 1e6 B per GPU, 2·999/1000·1e6 B each over the DC uplink that the 8
  // GPUs' trees share, at 800 ps/B: 12.8 ms either way; then α: 20 × 105 us vs 1998 × 105 us.
  // The node's reduce-scatter and all-gather (14 ring steps of 8e6/8 B: 14 × 5 us of latency,
  // 14 × 1e6 × 62.5 ps = 0.875 ms of bytes) are pipelined with it: their latency adds, their
  // bytes drain under the cross-node stage's 12.8 ms.
  const double bytes_time = 8 * 2 * 999.0 / 1000 * 1e6 * 800;
  const double in_node_latency = 14 * 5e6;
  EXPECT_NEAR(static_cast<double>(tree.duration), 20 * 105e6 + in_node_latency + bytes_time, 1e3);
  EXPECT_NEAR(static_cast<double>(hier.duration), 1998 * 105e6 + in_node_latency + bytes_time, 1e3);
  // Without the pipeline it would be 0.875 ms more: the hierarchical all-reduce beats the flat
  // ring (8000 ranks: 15998 steps of 105 us) by far, and Auto picks it.
  const auto ring = big.run({CollectiveKind::AllReduce, Algorithm::Ring, 0, 8e6, nullptr}, iota(8000));
  const auto automatic = big.run({CollectiveKind::AllReduce, Algorithm::Auto, 0, 8e6, nullptr}, iota(8000));
  EXPECT_GT(ring.duration, hier.duration);
  EXPECT_EQ(automatic.duration, hier.duration);
}

TEST(AnalyticModel, CrossDcAllToAllIsBoundByTheDcUplink) {
  // 2 DCs × 8 GPUs, 10 Gbps between DCs (800 ps/B), 128 Gbps inside (62.5 ps/B). Even dispatch
  // of D per GPU: D/16 per pair. Each DC sends 8 GPUs × 8 remote GPUs × D/16 = 4D across; each
  // GPU sends 15D/16 in all. D = 1.6e6 B: DC level α 105 us + 6.4e6 × 800 = 5.225e9 ps;
  // GPU level 5 us + 1.5e6 × 62.5 = 98.75e6 ps. The DC level decides.
  Topology t({level("dc", 2, "10Gbps", "100us"), level("gpu", 8, "128Gbps", "5us")}, {any_gpu()}, {});
  Fixture f(std::move(t));
  const double d = 1.6e6;
  auto traffic = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(16, d / 16));
  const auto c = f.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, traffic}, iota(16));
  EXPECT_EQ(c.duration, 105 * kMicrosecond + 5'120'000'000);
  // Bytes by level: 2 × 4D cross DCs; all GPUs send 16 × 15D/16 = 15D, so 7D stay inside DCs.
  EXPECT_DOUBLE_EQ(c.bytes_by_level[0], 8 * d);
  EXPECT_DOUBLE_EQ(c.bytes_by_level[1], 7 * d);
}

TEST(AnalyticModel, FactoredAndDenseTrafficCostTheSame) {
  // Skewed routing: sources send different amounts, destinations get different shares. The O(n)
  // factored formulas must agree with the O(n²) dense loop.
  Topology t({level("dc", 4, "10Gbps", "100us"), level("gpu", 4, "128Gbps", "5us")}, {any_gpu()}, {});
  Fixture f(std::move(t));
  std::vector<double> a(16), q(16);
  double qs = 0;
  for (int i = 0; i < 16; ++i) {
    a[i] = 1e6 * (1 + i % 3);
    q[i] = 1.0 / (1 + i);
    qs += q[i];
  }
  for (double& x : q) x /= qs;
  auto fac = std::make_shared<TrafficMatrix>(TrafficMatrix::factored(a, q));
  auto den = std::make_shared<TrafficMatrix>(fac->to_dense());
  const auto cf = f.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, fac}, iota(16));
  const auto cd = f.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, den}, iota(16));
  EXPECT_NEAR(static_cast<double>(cf.duration), static_cast<double>(cd.duration), 2.0);
  EXPECT_NEAR(cf.bytes_by_level[0], cd.bytes_by_level[0], 1e-3);
  EXPECT_EQ(cf.pairs, cd.pairs);
  // The transposed matrix (combine) moves the same bytes the other way.
  EXPECT_NEAR(fac->transposed().total(), fac->total(), 1e-3);
  EXPECT_NEAR(fac->transposed().at(3, 7), fac->at(7, 3), 1e-6);
}

TEST(AnalyticModel, HierarchicalAllToAllAddsItsTwoPhases) {
  // 2 nodes × 4 GPUs, uniform D = 8e6 B per GPU (1e6 per pair). Node level 100 Gbps (80 ps/B),
  // latency 10 us, so α_node = 10 + 2 us; GPU level 900 GB/s (1.111 ps/B), α_gpu = 2 us.
  // Phase 1 (in the node): each GPU hands each of its 3 peers the data for that peer's local
  // index in both nodes: 2 × 1e6 per peer, 6e6 in all → 2e6 + 6e6/0.9e12·1e12 ps.
  // Phase 2 (across): each GPU forwards the 4 local sources' data for its counterpart: 4e6 B; a
  // node sends 4 × 4e6 = 16e6 B → 12e6 + 16e6 × 80 ps; per GPU 4e6 × 1.111 is less.
  Topology t({level("node", 2, "100Gbps", "10us"), level("gpu", 4, "900GB/s", "2us")}, {any_gpu()}, {});
  Fixture f(std::move(t));
  auto traffic = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(8, 1e6));
  const auto c = f.run({CollectiveKind::AllToAll, Algorithm::Hierarchical, 0, 0, traffic}, iota(8));
  const Time phase1 = 2 * kMicrosecond + static_cast<Time>(std::llround(6e6 * 1e12 / 9e11));
  const Time phase2 = 12 * kMicrosecond + static_cast<Time>(16e6 * 80);
  EXPECT_EQ(c.duration, phase1 + phase2);
  // Inter-node bytes: 2 nodes × 16e6; the direct algorithm moves the same amount across.
  EXPECT_DOUBLE_EQ(c.bytes_by_level[0], 32e6);
  const auto direct = f.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, traffic}, iota(8));
  EXPECT_DOUBLE_EQ(direct.bytes_by_level[0], 32e6);
}

TEST(AnalyticModel, PointToPointUsesTheSlowestLinkOnTheWay) {
  // GPU 0 → GPU 8 crosses the 10 Gbps DC link: α = 105 us, β = 800 ps/B. 1 MB: 905 us.
  Topology t({level("dc", 2, "10Gbps", "100us"), level("gpu", 8, "128Gbps", "5us")}, {any_gpu()}, {});
  Fixture f(std::move(t));
  const auto c = f.run({CollectiveKind::P2P, Algorithm::Direct, 0, 1e6, nullptr}, {0, 8});
  EXPECT_EQ(c.duration, 905 * kMicrosecond);
  EXPECT_DOUBLE_EQ(c.bytes_by_level[0], 1e6);
  const auto local = f.run({CollectiveKind::P2P, Algorithm::Direct, 0, 1e6, nullptr}, {0, 3});
  EXPECT_EQ(local.duration, 5 * kMicrosecond + 62'500'000);
}

TEST(AnalyticModel, OversubscriptionDividesTheUplink) {
  // A 2:1 oversubscribed 400 Gbps switch gives each worker 200 Gbps: β = 40 ps/B.
  Topology t({Level{"node", 4, Fabric::Switch, *parse_bandwidth("400Gbps"), 0, 2.0, 1, {}, nullptr}, level("gpu", 2, "900GB/s", "1us")},
             {any_gpu()}, {});
  LinkGraph g(t);
  const auto ab = AlphaBetaTable::from_topology(t, g);
  EXPECT_DOUBLE_EQ(ab.tier_default(0).beta, 40.0);
  EXPECT_EQ(ab.tier_default(0).alpha, 1 * kMicrosecond);
}

TEST(LinkGraph, EachGpuHasItsHostLink) {
  // The test GPU keeps GpuSpec's defaults: 16 GB/s PCIe, 2 us. GPU-to-GPU routes never pass
  // through a host.
  Topology t({level("node", 2, "400Gbps", "5us"), level("gpu", 4, "900GB/s", "1us")}, {any_gpu()}, {});
  LinkGraph g(t);
  const Route h = g.host_route(5);
  ASSERT_EQ(h.levels.size(), 1u);
  EXPECT_EQ(h.levels[0], kHostLevel);
  EXPECT_DOUBLE_EQ(h.bottleneck_bytes_per_second, 16e9);
  EXPECT_EQ(h.latency, 2 * kMicrosecond);
  for (int l : g.route(0, 7).levels) EXPECT_NE(l, kHostLevel);
}
