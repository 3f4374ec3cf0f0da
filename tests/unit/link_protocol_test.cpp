// NCCL's protocols over a named link technology (cluster/link_tech.hpp, AlphaBetaTable::steps_cost),
// NVLS in the switch, NCCL's ring channels over a node's NICs and the per-peer rounds of an
// all-to-all, each derived by hand; and the flow model agreeing with the analytic one on them.
#include <gtest/gtest.h>

#include <numeric>

#include "sim/cluster/link_graph.hpp"
#include "sim/network/analytic_model.hpp"
#include "test_support.hpp"

using namespace moesim;
using namespace moesim::cluster;
using namespace moesim::network;

namespace {

using test::level;

using test::iota;

// LL: 6 us once, 0.5 us per hop, a quarter of the line rate; Simple: 8 us once, 4 us per hop, 0.8
// of it (round figures of NCCL's tuner, tuning.cc).
LinkTechPtr tech(double ll_efficiency = 0.25, std::optional<InSwitchReduction> nvls = std::nullopt, double exchange = 1.0) {
  auto t = std::make_shared<LinkTech>();
  t->name = "test-link";
  t->protocols[static_cast<std::size_t>(Protocol::LL)] = {6 * kMicrosecond, kMicrosecond / 2, ll_efficiency};
  t->protocols[static_cast<std::size_t>(Protocol::Simple)] = {8 * kMicrosecond, 4 * kMicrosecond, 0.8};
  t->nvls = nvls;
  t->exchange_factor = exchange;
  return t;
}

// 8 GPUs on one 100 GB/s switch (β = 10 ps per byte).
Topology switch8(LinkTechPtr link) {
  Level l = level("gpu", 8, "100GB/s", "1us");
  l.link = std::move(link);
  return Topology({l}, {test::any_gpu()}, {});
}

struct Model {
  explicit Model(Topology t) : topo(std::move(t)), graph(topo), model(topo, AlphaBetaTable::from_topology(topo, graph)) {}
  Topology topo;
  LinkGraph graph;
  AnalyticModel model;
  Time run(CollectiveOp op, const std::vector<std::uint32_t>& members) const { return model.cost(op, members).duration; }
};

}  // namespace

TEST(LinkProtocols, SmallStepsRunLowLatencyLargeOnesSimple) {
  Model m(switch8(tech()));
  // Ring all-gather of P per rank: 7 steps of P. P = 8 KiB: LL 6 us + 7·(0.5 us + 8192·10/0.25 ps)
  // = 11.79376 us; Simple would be 8 us + 7·(4 us + 8192·10/0.8 ps) = 36.7168 us.
  EXPECT_EQ(m.run({CollectiveKind::AllGather, Algorithm::Ring, 0, 8192, nullptr}, iota(8)), 11'793'760);
  // P = 64 MiB: Simple 8 us + 7·(4 us + 67108864·10/0.8 ps) = 5908.0256 us (LL: 18.8 ms).
  EXPECT_EQ(m.run({CollectiveKind::AllGather, Algorithm::Ring, 0, 67108864, nullptr}, iota(8)), 5'908'025'600);
  // A link without LL (efficiency 0) runs Simple at every size.
  Model simple_only(switch8(tech(0)));
  EXPECT_EQ(simple_only.run({CollectiveKind::AllGather, Algorithm::Ring, 0, 8192, nullptr}, iota(8)), 36'716'800);
}

TEST(LinkProtocols, NvlsAllReduceMovesTheBufferOnceEachWay) {
  // NVLS on the switch: 20 us, 0.6 of the line rate. S = 64 MiB over 8 GPUs: each GPU's link
  // carries S each way (InSwitchPhase::port_bytes): 20 us + 67108864·10/0.6 ps = 1138.481067 us.
  Model m(switch8(tech(0.25, InSwitchReduction{20 * kMicrosecond, 0.6})));
  const double s = 67108864;
  const Time nvls = m.run({CollectiveKind::AllReduce, Algorithm::Nvls, 0, s, nullptr}, iota(8));
  EXPECT_NEAR(static_cast<double>(nvls), 20e6 + s * 10 / 0.6, 1.0);
  // nccl-tests' bus bandwidth of it: algbw·2(n−1)/n = 2(n−1)/n · B · efficiency = 7/4 · 60 GB/s;
  // over 64 GPUs it would be 63/32 of it, 1.125x more (OCI's NVL72 racks: 1.02-1.11x, realdata 25).
  const double busbw = s / (static_cast<double>(nvls - 20 * kMicrosecond) * 1e-12) * 2 * 7 / 8;
  EXPECT_NEAR(busbw, 7.0 / 4 * 60e9, 1e5);
  // The ring: 8 us + 14·(4 us + 8388608·10/0.8 ps) = 1532.0064 us, so Auto runs NVLS; at 8 KiB the
  // ring's LL steps (6 us + 14·(0.5 us + 1024·10/0.25 ps) = 13.57344 us) beat NVLS's 20 us.
  EXPECT_EQ(m.run({CollectiveKind::AllReduce, Algorithm::Ring, 0, s, nullptr}, iota(8)), 1'532'006'400);
  EXPECT_EQ(m.model.resolve({CollectiveKind::AllReduce, Algorithm::Auto, 0, s, nullptr}, iota(8)), Algorithm::Nvls);
  EXPECT_EQ(m.run({CollectiveKind::AllReduce, Algorithm::Auto, 0, s, nullptr}, iota(8)), nvls);
  EXPECT_EQ(m.model.resolve({CollectiveKind::AllReduce, Algorithm::Auto, 0, 8192, nullptr}, iota(8)), Algorithm::Ring);
  EXPECT_EQ(m.run({CollectiveKind::AllReduce, Algorithm::Auto, 0, 8192, nullptr}, iota(8)), 13'573'440);
  // A group that spans two switches, or links without NVLS, falls back to the ring.
  Model none(switch8(tech()));
  EXPECT_EQ(none.model.resolve({CollectiveKind::AllReduce, Algorithm::Nvls, 0, s, nullptr}, iota(8)), Algorithm::Ring);
}

TEST(LinkProtocols, NvlsTreeAcrossDomainsRunsAtItsShareOfNvls) {
  // NCCL's NVLS-tree: an all-reduce over D nodes of 8 GPUs, NVLS in each node's switch (20 us, 0.6
  // of 100 GB/s) pipelined with a ring of each local index across the nodes, whose 10 TB/s links
  // leave the switch the bottleneck. The in-switch phase runs at 0.6 · 0.9 (tree_efficiency) over
  // two nodes and at 0.6 · 0.9 · 0.8 (beyond_two_domains) over three: each GPU's port carries S each
  // way, so doubling S from 64 to 128 MiB adds S·10 ps / 0.54 = 1242.76 us, and / 0.432 = 1553.45 us.
  // The ring across the nodes drains through the same port with it (pipelined phases' bytes add on
  // a tier): 2(D − 1)/D · S/8 at Simple's 0.8, 104.86 us over two nodes and 139.81 us over three.
  const double s = 67108864;
  for (const int d : {1, 2, 3}) {
    Level node = level("node", static_cast<std::uint32_t>(d), "80000Gbps", "1us");
    node.ports = 8;
    Level gpu = level("gpu", 8, "100GB/s", "1us");
    gpu.link = tech(0.25, InSwitchReduction{20 * kMicrosecond, 0.6, 0.9, 0.8});
    Model m(Topology({node, gpu}, {test::any_gpu()}, {}));
    const auto members = iota(8 * static_cast<std::uint32_t>(d));
    const Algorithm a = d == 1 ? Algorithm::Nvls : Algorithm::Hierarchical;
    const double slope = static_cast<double>(m.run({CollectiveKind::AllReduce, a, 0, 2 * s, nullptr}, members) -
                                             m.run({CollectiveKind::AllReduce, a, 0, s, nullptr}, members));
    // One node: NVLS alone, the tree's share left out (S·10/0.6 = 1118.48 us).
    const double efficiency = d == 1 ? 0.6 : d == 2 ? 0.6 * 0.9 : 0.6 * 0.9 * 0.8;
    const double ring = 2.0 * (d - 1) / d * s / 8 * 10 / 0.8;
    EXPECT_NEAR(slope, s * 10 / efficiency + ring, 1e3) << d << " nodes";
  }
}

TEST(LinkProtocols, AllToAllPaysAHopPerPeer) {
  // Uniform all-to-all of 1 MB per pair over 8 GPUs, Simple (LL moves nothing on this link): one
  // Simple hop, and a send/recv round of one LL hop per peer: 8 us + 4 us + 7·0.5 us = 15.5 us;
  // each GPU sends 7 MB at 0.8 of 10 ps/B: 87.5 us. 103 us in all.
  Model m(switch8(tech(0)));
  auto traffic = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(8, 1e6));
  EXPECT_EQ(m.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, traffic}, iota(8)), 103'000'000);
  // Among 4 of the GPUs: 3 peers, 8 + 4 + 1.5 us + 3 MB at 12.5 ps/B = 51 us.
  auto four = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(4, 1e6));
  EXPECT_EQ(m.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, four}, iota(4)), 51'000'000);
  // Half the ring efficiency for many peers at once (InfiniBand's all-to-all): the bytes take
  // twice as long, 15.5 + 175 = 190.5 us.
  Model ib(switch8(tech(0, std::nullopt, 0.5)));
  EXPECT_EQ(ib.run({CollectiveKind::AllToAll, Algorithm::Direct, 0, 0, traffic}, iota(8)), 190'500'000);
}

TEST(LinkProtocols, RingChannelsSpreadOverTheNodesNics) {
  // 2 nodes of 8 GPUs; each node has 8 NICs of 400 Gbps (3200 Gbps: β = 2.5 ps/B for the node);
  // ideal links. A ring all-reduce of S = 16 MB over all 16 GPUs: 30 steps of S/16 = 1 MB. NCCL's
  // channels leave the node through all 8 NICs, so a step puts 1 MB on the node's 3200 Gbps:
  // 2.5 us (the GPUs' 450 GB/s links: 2.2 us). 30·(α + 2.5 us).
  Level node = level("node", 2, "3200Gbps", "5us");
  node.ports = 8;
  Model m(Topology({node, level("gpu", 8, "450GB/s", "2us")}, {test::any_gpu()}, {}));
  const Time alpha = m.model.params().tier_default(0).alpha;
  EXPECT_EQ(m.run({CollectiveKind::AllReduce, Algorithm::Ring, 0, 16e6, nullptr}, iota(16)), 30 * (alpha + 2'500'000));
  // A ring of one GPU per node (a data-parallel rail) has one NIC to use: each of its 2 steps puts
  // S/2 = 8 MB on one 400 Gbps NIC (20 ps/B): 160 us.
  EXPECT_EQ(m.run({CollectiveKind::AllReduce, Algorithm::Ring, 0, 16e6, nullptr}, {0, 8}), 2 * (alpha + 160'000'000));
}
