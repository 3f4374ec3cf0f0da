// The flow network model: max-min fair sharing derived by hand, agreement with the analytic model
// when nothing contends, and contention when something does.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "sim/cluster/link_graph.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/engine/task_log.hpp"
#include "sim/network/flow_executor.hpp"
#include "sim/core/rng.hpp"
#include "sim/network/max_min.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;
using namespace moesim::cluster;
using namespace moesim::network;

namespace {

using test::any_gpu;
using test::level;

using Bench = test::NetworkBench;

using test::iota;

// A skewed all-to-all over 16 GPUs: GPU i routes 1, 2 or 3 MB (i mod 3), and receiver j takes the
// share (j + 1) / 136 of every source's (the shares 1 … 16 over their sum, 136).
TrafficPtr skewed16() {
  std::vector<double> a(16), q(16);
  for (int i = 0; i < 16; ++i) {
    a[i] = 1e6 * (1 + i % 3);
    q[i] = (1.0 + i) / 136.0;
  }
  return std::make_shared<TrafficMatrix>(TrafficMatrix::factored(a, q));
}

}  // namespace

TEST(MaxMin, ClassicExampleWithTwoBottlenecks) {
  // Links L0 (capacity 10) and L1 (capacity 4). Flow A crosses both, B only L0, C only L1.
  // Progressive filling: all rise together until L1 saturates at A = C = 2; then B alone on L0
  // takes the remaining 10 − 2 = 8.
  MaxMinSolver solver(2);
  const std::vector<LinkDemand> a{{0, 1}, {1, 1}}, b{{0, 1}}, c{{1, 1}};
  std::vector<double> rates;
  solver.solve({&a, &b, &c}, {10, 4}, rates);
  EXPECT_DOUBLE_EQ(rates[0], 2);
  EXPECT_DOUBLE_EQ(rates[1], 8);
  EXPECT_DOUBLE_EQ(rates[2], 2);
}

TEST(MaxMin, UnevenLoadsOfOneFlow) {
  // A phase putting its full size on L0 and half of it on L1 (a = 0.5), beside a flow on L1 alone;
  // both links capacity 6. Equal rates r: L0 carries r (saturates at 6), L1 carries 0.5r + r
  // (saturates at r = 4) → both freeze at 4; L0 keeps 2 spare.
  MaxMinSolver solver(2);
  const std::vector<LinkDemand> phase{{0, 1}, {1, 0.5}}, other{{1, 1}};
  std::vector<double> rates;
  solver.solve({&phase, &other}, {6, 6}, rates);
  EXPECT_DOUBLE_EQ(rates[0], 4);
  EXPECT_DOUBLE_EQ(rates[1], 4);
}

TEST(FlowModel, LoneTransferTakesLatencyPlusBytesOverBandwidth) {
  // 2 GPUs on a 100 GB/s switch, 3 us: 1 MB takes 3 us + 1e6 × 10 ps = 13 us.
  Bench b(Topology({level("gpu", 2, "100GB/s", "3us")}, {any_gpu()}, {}));
  const auto t = b.run({{{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 1}), 1e6, nullptr}, 0}});
  EXPECT_EQ(t[0].second - t[0].first, 13 * kMicrosecond);
}

TEST(FlowModel, TwoTransfersShareABottleneckAndTheFirstFreesItsShare) {
  // GPU 0 → 2 (1 MB) and GPU 1 → 2 (3 MB) both enter GPU 2 over its 100 GB/s downlink: 50 GB/s
  // each. The first drains at 2e6 × 10 ps = 20 us; the second then has 2 MB left at full rate:
  // another 20 us, so it drains at 40 us. Each ends 1 us (latency) after it drains.
  Bench b(Topology({level("gpu", 3, "100GB/s", "1us")}, {any_gpu()}, {}));
  const auto t = b.run({{{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 2}), 1e6, nullptr}, 0},
                        {{CollectiveKind::P2P, Algorithm::Direct, b.group({1, 2}), 3e6, nullptr}, 0}});
  EXPECT_EQ(t[0].second, 21 * kMicrosecond);
  EXPECT_EQ(t[1].second, 41 * kMicrosecond);
  // Alone, the second would take 1 + 30 us.
  const auto alone = b.run({{{CollectiveKind::P2P, Algorithm::Direct, b.group({1, 2}), 3e6, nullptr}, 0}});
  EXPECT_EQ(alone[0].second, 31 * kMicrosecond);
}

TEST(FlowModel, ADrainReSolvesOnlyTheFlowsItsLinksReach) {
  // 4 GPUs on a 100 GB/s switch, 1 us. A: 0 → 1 (1 MB) alone at 100 GB/s; B (1 MB) and C (3 MB)
  // both 2 → 3 at 50 GB/s each: two components (A shares no link with B or C), each solved at
  // t = 0. A drains at 10 us: no flow is left on its links, nothing is solved. B drains at 20 us:
  // C, on B's links, is re-solved to 100 GB/s and drains its last 2 MB by 40 us. Three solves (two
  // components, then C), of 4 flows in all, where re-solving every flow in flight at every change
  // took 3 + 2 + 1.
  Bench b(Topology({level("gpu", 4, "100GB/s", "1us")}, {any_gpu()}, {}));
  const auto t = b.run({{{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 1}), 1e6, nullptr}, 0},
                        {{CollectiveKind::P2P, Algorithm::Direct, b.group({2, 3}), 1e6, nullptr}, 0},
                        {{CollectiveKind::P2P, Algorithm::Direct, b.group({2, 3}), 3e6, nullptr}, 0}});
  EXPECT_EQ(t[0].second, 11 * kMicrosecond);
  EXPECT_EQ(t[1].second, 21 * kMicrosecond);
  EXPECT_EQ(t[2].second, 41 * kMicrosecond);
  EXPECT_EQ(b.solves, 3u);
  EXPECT_EQ(b.flows_solved, 4u);
}

TEST(FlowModel, ADrainReSolvesOnlyTheFlowsAtLeastAsFastAsIt) {
  // 6 GPUs on a 100 GB/s switch, 1 us; one component: X1-X4: 4 → 5 and W: 0 → 5, 1 MB each; Y1
  // (1 MB) and Y2 (2 MB): 0 → 1. Filling: GPU 5's downlink (X1-X4, W) saturates first, at 20 GB/s
  // a flow; Y1 and Y2 share what W leaves of GPU 0's uplink, 80 GB/s: 40 each. Y1 drains at 25 us:
  // X1-X4 and W, slower than it, keep their rates; Y2 alone is filled anew on what W leaves of
  // GPU 0's uplink, 80 GB/s: its last 1 MB by 37.5 us. Y2 draining then leaves the slower flows as
  // they are (no solve); they drain at 50 us. Two solves, of 7 flows and then 1, where re-solving
  // the component filled 7 + 6.
  Bench b(Topology({level("gpu", 6, "100GB/s", "1us")}, {any_gpu()}, {}));
  std::vector<std::pair<CollectiveOp, Time>> ops;
  for (int x = 0; x < 4; ++x) ops.push_back({{CollectiveKind::P2P, Algorithm::Direct, b.group({4, 5}), 1e6, nullptr}, 0});
  ops.push_back({{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 5}), 1e6, nullptr}, 0});
  ops.push_back({{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 1}), 1e6, nullptr}, 0});
  ops.push_back({{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 1}), 2e6, nullptr}, 0});
  const auto t = b.run(ops);
  for (int x = 0; x < 5; ++x) EXPECT_EQ(t[x].second, 51 * kMicrosecond) << x;
  EXPECT_EQ(t[5].second, 26 * kMicrosecond);
  EXPECT_NEAR(t[6].second, 38500 * kNanosecond, 1);  // 1 MB / 80 GB/s, rounded up to the next ps
  EXPECT_EQ(b.solves, 2u);
  EXPECT_EQ(b.flows_solved, 8u);
}

TEST(FlowModel, RandomTransfersEndAsAFluidSimulationReSolvingEveryFlow) {
  // Seeded random transfers (0.2-3 MB between random GPUs, starting at random times in the first
  // 40 us) over 4 nodes × 4 GPUs whose node switch is 2:1 oversubscribed, so that they contend on
  // GPU links, node uplinks and the core, and components form, merge and split. The reference
  // re-solves the max-min rates of every flow in flight at each start and end (one solve over all
  // of them, MaxMinSolver on the same link demands) and advances each flow's bytes between: the
  // executor, which re-solves only what a change reaches, must end every transfer at the same time
  // (to rounding: finishing times are rounded up to a picosecond at each of a flow's solves).
  Topology topo({level("node", 4, "100GB/s", "2us", 2.0), level("gpu", 4, "200GB/s", "1us")}, {any_gpu()}, {});
  Bench b(std::move(topo));
  const FlowLinks links(b.topo);
  const FlowDemands demands(links, b.params);
  std::vector<double> capacity(links.size());
  for (std::uint32_t l = 0; l < links.size(); ++l) capacity[l] = links.capacity(l);
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    Rng rng(seed);
    std::vector<std::pair<CollectiveOp, Time>> ops;
    struct Transfer {
      double start, latency, remaining, rate = 0, end = -1;
      std::vector<LinkDemand> share;
    };
    std::vector<Transfer> ref;
    const std::size_t n = 20 + rng.below(30);
    for (std::size_t i = 0; i < n; ++i) {
      const auto from = static_cast<std::uint32_t>(rng.below(16));
      const auto to = static_cast<std::uint32_t>((from + 1 + rng.below(15)) % 16);
      const CollectiveOp op{CollectiveKind::P2P, Algorithm::Direct, b.group({from, to}), 2e5 + 2.8e6 * rng.uniform(), nullptr};
      const Time at = static_cast<Time>(rng.below(40)) * kMicrosecond;
      ops.push_back({op, at});
      const std::vector<std::uint32_t> members{from, to};
      const auto phases = plan_collective(op, members, b.topo, b.params);
      ASSERT_EQ(phases.size(), 1u);
      const FlowPhase phase = demands.demand(phases[0], members);
      Transfer t{time_to_seconds(at), time_to_seconds(phase.latency), 0};
      for (const LinkDemand& d : phase.demand) t.remaining = std::max(t.remaining, d.bytes);
      for (LinkDemand d : phase.demand) t.share.push_back({d.link, d.bytes / t.remaining});
      ref.push_back(std::move(t));
    }
    // The fluid reference, in seconds.
    MaxMinSolver solver(links.size());
    double now = 0;
    for (;;) {
      std::vector<std::size_t> active;
      std::vector<const std::vector<LinkDemand>*> shares;
      for (std::size_t i = 0; i < n; ++i)
        if (ref[i].end < 0 && ref[i].start <= now) active.push_back(i), shares.push_back(&ref[i].share);
      double next = HUGE_VAL;
      for (const Transfer& t : ref)
        if (t.end < 0 && t.start > now) next = std::min(next, t.start);
      if (active.empty() && next == HUGE_VAL) break;
      std::vector<double> rates;
      solver.solve(shares, capacity, rates);
      for (std::size_t j = 0; j < active.size(); ++j) {
        ref[active[j]].rate = rates[j];
        next = std::min(next, now + ref[active[j]].remaining / rates[j]);
      }
      for (std::size_t j : active) {
        Transfer& t = ref[j];
        t.remaining -= t.rate * (next - now);
        if (t.remaining <= 1e-6 * t.rate * 1e-6) t.end = next + t.latency;  // within a picosecond of draining
      }
      now = next;
    }
    const auto got = b.run(ops);
    for (std::size_t i = 0; i < n; ++i) {
      const double end = time_to_seconds(got[i].second);
      EXPECT_NEAR(end, ref[i].end, 1e-9 * ref[i].end + 1e-10) << "seed " << seed << " transfer " << i;
    }
  }
}

TEST(FlowModel, OversubscriptionHalvesTheInterLevelRate) {
  // 4 nodes × 2 GPUs; the node switch is 2:1 oversubscribed: its core carries 4 × 100 GB/s / 2.
  // Four node-to-node transfers at once (0→1, 1→0, 2→3, 3→2 by node) load every uplink once but
  // the core four times: 200 GB/s / 4 = 50 GB/s each, half the uplink rate. 1 MB: 20 us of drain.
  Topology t({level("node", 4, "100GB/s", "0us", 2.0), level("gpu", 2, "1000GB/s", "0us")}, {any_gpu()}, {});
  Bench b(std::move(t));
  std::vector<std::pair<CollectiveOp, Time>> ops;
  for (auto [from, to] : {std::pair{0u, 2u}, {2u, 0u}, {4u, 6u}, {6u, 4u}})
    ops.push_back({{CollectiveKind::P2P, Algorithm::Direct, b.group({from, to}), 1e6, nullptr}, 0});
  for (const auto& [start, end] : b.run(ops)) EXPECT_EQ(end - start, 20 * kMicrosecond);
  // One of them alone runs at the 100 GB/s of the uplinks: 10 us.
  const auto alone = b.run({ops[0]});
  EXPECT_EQ(alone[0].second - alone[0].first, 10 * kMicrosecond);
}

TEST(FlowModel, AgreesWithAnalyticOnEveryCollectiveAlone) {
  // 2 DCs × 2 nodes × 4 GPUs; every algorithm, one collective at a time: flow within 1 % of
  // analytic (they share α and β; the flow model only adds picosecond rounding).
  Topology t({level("dc", 2, "10Gbps", "100us"), level("node", 2, "400Gbps", "5us"), level("gpu", 4, "900GB/s", "1us")},
             {any_gpu()}, {});
  Bench b(std::move(t));
  auto skewed = skewed16();
  auto uniform = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(16, 5e5));
  const GroupId all = b.group(iota(16));
  const std::vector<CollectiveOp> ops{
      {CollectiveKind::AllToAll, Algorithm::Direct, all, 0, uniform},
      {CollectiveKind::AllToAll, Algorithm::Direct, all, 0, skewed},
      {CollectiveKind::AllToAll, Algorithm::Hierarchical, all, 0, skewed},
      {CollectiveKind::AllReduce, Algorithm::Ring, all, 64e6, nullptr},
      {CollectiveKind::AllReduce, Algorithm::Hierarchical, all, 64e6, nullptr},
      {CollectiveKind::AllReduce, Algorithm::Direct, all, 64e6, nullptr},
      {CollectiveKind::AllGather, Algorithm::Ring, all, 4e6, nullptr},
      {CollectiveKind::ReduceScatter, Algorithm::Hierarchical, all, 64e6, nullptr},
      {CollectiveKind::P2P, Algorithm::Direct, b.group({3, 12}), 8e6, nullptr},
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto flow = b.run({{ops[i], 0}}, true);
    const auto analytic = b.run({{ops[i], 0}}, false);
    const double f = static_cast<double>(flow[0].second), an = static_cast<double>(analytic[0].second);
    EXPECT_NEAR(f, an, 0.01 * an) << "op " << i;
    EXPECT_GT(an, 0) << "op " << i;
  }
}

TEST(FlowModel, AgreesWithAnalyticOnCalibratedCollectives) {
  // Two HGX B200 nodes with log 19's six entries bound (8 ranks set the gpu level, 16 ranks the
  // node level): each measured collective alone, on its own shape, at 1 MiB and 256 MiB, takes in
  // the flow model what the analytic model gives, which is the fit (calibration_binding_test).
  // The flow model scales the calibrated level's link demand by β_calibrated / β_topology and
  // leaves finer levels at their links' bandwidth when the coarsest level crossed is calibrated.
  const calibration::Profile profile =
      test::profile_from_log("19_b200_hgx_vultr_8gpu_and_2node16gpu_ib_allreduce_allgather_alltoall_fullsweep.txt");
  Bench b(test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibrated-b200.json").topology());
  ASSERT_EQ(simulation::bind_collectives(profile, b.topo, Algorithm::Ring, {}, b.params).at("used").size(), 6u);
  for (const std::uint32_t ranks : {8u, 16u}) {
    const GroupId g = b.group(iota(ranks));
    for (const double size : {1048576.0, 268435456.0}) {
      // nccl-tests sizes (profile.hpp): all_to_all sends `size` from each rank, all_gather gathers it.
      const std::vector<CollectiveOp> ops{
          {CollectiveKind::AllToAll, Algorithm::Direct, g, 0,
           std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(ranks, size / ranks))},
          {CollectiveKind::AllGather, Algorithm::Ring, g, size / ranks, nullptr},
          {CollectiveKind::AllReduce, Algorithm::Ring, g, size, nullptr},
      };
      for (std::size_t i = 0; i < ops.size(); ++i) {
        const double f = static_cast<double>(b.run({{ops[i], 0}}, true)[0].second);
        const double an = static_cast<double>(b.run({{ops[i], 0}}, false)[0].second);
        EXPECT_NEAR(f, an, 0.01 * an) << ranks << " ranks, " << size << " B, op " << i;
      }
    }
  }
  // A slow in-node entry (8-rank all_reduce at 2 GB/s of bus bandwidth, PCIe-like) must not slow
  // the two-node all_reduce, whose own measurement (16 ranks at 40 GB/s) includes the in-node hops:
  // had its drain factor been applied to the NVLink links of the 16-rank ring, they would bind.
  calibration::Profile slow;
  slow.name = "slow-in-node";
  const auto entry = [](int ranks, int nodes, double alpha_s, double bus_bytes_per_s) {
    calibration::CollectiveFit f;
    f.collective = "all_reduce";
    f.ranks = ranks;
    f.nodes = nodes;
    // nccl-tests all_reduce: time = size · 2(n−1)/n / busbw.
    f.segments = {{0, -1, alpha_s, 2.0 * (ranks - 1) / ranks / bus_bytes_per_s}};
    return f;
  };
  slow.collectives = {entry(8, 1, 20e-6, 2e9), entry(16, 2, 30e-6, 40e9)};
  Bench c(b.topo);
  simulation::bind_collectives(slow, c.topo, Algorithm::Ring, {}, c.params);
  const CollectiveOp all_reduce{CollectiveKind::AllReduce, Algorithm::Ring, c.group(iota(16)), 268435456.0, nullptr};
  const double f = time_to_seconds(c.run({{all_reduce, 0}}, true)[0].second);
  const double an = time_to_seconds(c.run({{all_reduce, 0}}, false)[0].second);
  EXPECT_NEAR(an, slow.collectives[1].seconds(268435456.0), 1e-6);  // 30 us + 2^28 · 30/16 / 40e9 = 12.61 ms
  EXPECT_NEAR(f, an, 0.01 * an);
}

TEST(FlowModel, AgreesWithAnalyticOverNcclLinks) {
  // Two HGX B200 nodes whose links name their technology (NVLink 5 with NVLS, InfiniBand NDR):
  // NCCL's protocols, NVLS in the node's switch and the pipelined hierarchical all-reduce (NVLS in
  // the node, a ring across) take in the flow model, alone, what the analytic model gives.
  Bench b(test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibrated-b200.json").topology());
  ASSERT_TRUE(b.topo.tiers()[1].link && b.topo.tiers()[1].link->nvls);
  const GroupId node = b.group(iota(8)), both = b.group(iota(16));
  for (const double size : {65536.0, 268435456.0}) {
    const std::vector<CollectiveOp> ops{
        {CollectiveKind::AllReduce, Algorithm::Auto, node, size, nullptr},
        {CollectiveKind::AllReduce, Algorithm::Auto, both, size, nullptr},
        {CollectiveKind::AllReduce, Algorithm::Hierarchical, both, size, nullptr},
        {CollectiveKind::AllReduce, Algorithm::Ring, both, size, nullptr},
        {CollectiveKind::AllGather, Algorithm::Ring, both, size / 16, nullptr},
        {CollectiveKind::AllToAll, Algorithm::Direct, both, 0, std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(16, size / 16))},
        {CollectiveKind::P2P, Algorithm::Direct, b.group({3, 12}), size, nullptr},
    };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const double f = static_cast<double>(b.run({{ops[i], 0}}, true)[0].second);
      const double an = static_cast<double>(b.run({{ops[i], 0}}, false)[0].second);
      EXPECT_NEAR(f, an, 0.01 * an) << size << " B, op " << i;
    }
  }
}

TEST(FlowModel, ContendingCollectivesShareTheLinkByHand) {
  // 2 GPUs, 100 GB/s, 1 us. An all-to-all sending 2 MB each way and a ring all-reduce of 8 MB
  // (2 steps of 4 MB per GPU: 8 MB over each uplink) start together. Both load the same two
  // uplinks and downlinks: 50 GB/s each. The all-to-all drains at 2e6 × 20 ps = 40 us and ends at
  // 41 us. The all-reduce has 6 MB left, alone at 100 GB/s: 60 us more → drains at 100 us, ends
  // 2 steps × 1 us later: 102 us. Alone it would take 2 + 80 = 82 us.
  Bench b(Topology({level("gpu", 2, "100GB/s", "1us")}, {any_gpu()}, {}));
  const GroupId both = b.group({0, 1});
  auto traffic = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(2, 2e6));
  const CollectiveOp a2a{CollectiveKind::AllToAll, Algorithm::Direct, both, 0, traffic};
  const CollectiveOp ar{CollectiveKind::AllReduce, Algorithm::Ring, both, 8e6, nullptr};
  const auto t = b.run({{a2a, 0}, {ar, 0}});
  EXPECT_EQ(t[0].second, 41 * kMicrosecond);
  EXPECT_EQ(t[1].second, 102 * kMicrosecond);
  EXPECT_EQ(b.run({{ar, 0}})[0].second, 82 * kMicrosecond);
  // The analytic model cannot see it: 41 us and 82 us.
  const auto an = b.run({{a2a, 0}, {ar, 0}}, false);
  EXPECT_EQ(an[1].second, 82 * kMicrosecond);
}

TEST(FlowModel, SkewedAllToAllIsSlowerByTheHotReceiversLoad) {
  // 4 GPUs at 100 GB/s, no latency. Uniform: each of 4 GPUs sends 1 MB to each other: every
  // downlink takes 3 MB: 30 us. Skewed, same 12 MB in all: every GPU sends 1 MB to each of the
  // others but GPU 0 sends its 3 MB to GPU 1 only... here a factored matrix whose receiver shares
  // are 0.7, 0.1, 0.1, 0.1 with 4 MB routed per source: GPU 0 receives 3 × 2.8 MB = 8.4 MB over
  // its 100 GB/s downlink: 84 us, the hot receiver's load over its bandwidth.
  Bench b(Topology({level("gpu", 4, "100GB/s", "0us")}, {any_gpu()}, {}));
  const GroupId all = b.group(iota(4));
  auto uniform = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(4, 1e6));
  auto skewed = std::make_shared<TrafficMatrix>(
      TrafficMatrix::factored(std::vector<double>(4, 4e6), std::vector<double>{0.7, 0.1, 0.1, 0.1}));
  for (bool flow : {true, false}) {
    EXPECT_EQ(b.run({{{CollectiveKind::AllToAll, Algorithm::Direct, all, 0, uniform}, 0}}, flow)[0].second,
              30 * kMicrosecond);
    EXPECT_EQ(b.run({{{CollectiveKind::AllToAll, Algorithm::Direct, all, 0, skewed}, 0}}, flow)[0].second,
              84 * kMicrosecond);
  }
}

TEST(FlowModel, AnExchangeOfTheSameMatrixOverTheSameGroupReusesItsDemands) {
  // Expected routing shares one factored matrix among a layer's all-to-alls (schedule/
  // iteration_program.cpp draw_routing): the flow model keeps its link demands per group. Three
  // all-to-alls of skewed16 over the 16 GPUs of two 8-GPU nodes, 1 ms apart (nothing contends), one
  // over another group, and two of skewed16 as a dense matrix (a fused dispatch's stages are
  // dense): with each matrix shared, the second and third reuse the first's demands and the second
  // dense one the first's (3 in all); with a copy of it each, none does. Either way every time and
  // every link statistic is the same.
  Bench b(Topology({level("node", 2, "400GB/s", "5us"), level("gpu", 8, "450GB/s", "2us")}, {any_gpu()}, {}));
  const GroupId all = b.group(iota(16)), half = b.group(iota(8));
  const auto run = [&](bool shared) {
    const TrafficPtr one = skewed16();
    std::vector<std::pair<CollectiveOp, Time>> ops;
    for (int i = 0; i < 3; ++i) ops.push_back({{CollectiveKind::AllToAll, Algorithm::Direct, all, 0, shared ? one : skewed16()},
                                               i * kMillisecond});
    auto eight = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(8, 1e6));
    ops.push_back({{CollectiveKind::AllToAll, Algorithm::Direct, half, 0, eight}, 3 * kMillisecond});
    const TrafficPtr dense = std::make_shared<TrafficMatrix>(skewed16()->to_dense());
    for (int i = 4; i < 6; ++i)
      ops.push_back({{CollectiveKind::AllToAll, Algorithm::Direct, all, 0,
                      shared ? dense : std::make_shared<TrafficMatrix>(skewed16()->to_dense())},
                     i * kMillisecond});
    return b.run(ops);
  };
  const auto shared = run(true);
  EXPECT_EQ(b.reused, 3u);
  const NetworkStats shared_stats = b.stats;
  const auto copies = run(false);
  EXPECT_EQ(b.reused, 0u);
  EXPECT_EQ(shared, copies);
  ASSERT_EQ(shared_stats.link_levels.size(), b.stats.link_levels.size());
  for (std::size_t l = 0; l < b.stats.link_levels.size(); ++l) {
    EXPECT_EQ(shared_stats.link_levels[l].bytes, b.stats.link_levels[l].bytes);
    EXPECT_EQ(shared_stats.link_levels[l].busy, b.stats.link_levels[l].busy);
  }
  EXPECT_EQ(shared_stats.bytes_by_level, b.stats.bytes_by_level);
  // The exchanges of one matrix take the same time, each alone.
  for (int i : {1, 2}) EXPECT_EQ(shared[i].second - shared[i].first, shared[0].second - shared[0].first);
  EXPECT_EQ(shared[5].second - shared[5].first, shared[4].second - shared[4].first);
}

TEST(FlowModel, LinkStatisticsAddUp) {
  // The uniform all-to-all above: each GPU's uplink and downlink carry 3 MB, busy 30 us, fully
  // used: 24 MB over the GPU level's links in all.
  Bench b(Topology({level("gpu", 4, "100GB/s", "0us")}, {any_gpu()}, {}));
  auto uniform = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(4, 1e6));
  b.run({{{CollectiveKind::AllToAll, Algorithm::Direct, b.group(iota(4)), 0, uniform}, 0}});
  ASSERT_EQ(b.stats.link_levels.size(), 1u);
  EXPECT_NEAR(b.stats.link_levels[0].bytes, 24e6, 1);
  EXPECT_EQ(b.stats.link_levels[0].busy, 30 * kMicrosecond);
  EXPECT_DOUBLE_EQ(b.stats.link_levels[0].peak_utilization, 1.0);
  ASSERT_FALSE(b.stats.hottest_links.empty());
  EXPECT_NEAR(b.stats.hottest_links[0].bytes, 3e6, 1);
}

TEST(FlowModel, LinkStatisticsFollowEachFlowThroughADrainWithoutASolve) {
  // The three transfers of ADrainReSolvesOnlyTheFlowsItsLinksReach: A (0 → 1, 1 MB) drains at
  // 10 us without a solve; B (1 MB) and C (3 MB) share 2 → 3 until B drains at 20 us,
  // and C drains at 40 us. GPU 0's uplink and GPU 1's downlink carry A's 1 MB and are busy 10 us
  // (until A drains, though nothing was re-solved then); GPU 2's uplink and GPU 3's downlink carry
  // 4 MB, busy 40 us, always at 100 GB/s (B and C at 50 each, then C at 100): every used link's
  // peak is 1. The bytes are exactly what the transfers demand: 10 MB over the level.
  Bench b(Topology({level("gpu", 4, "100GB/s", "1us")}, {any_gpu()}, {}));
  b.run({{{CollectiveKind::P2P, Algorithm::Direct, b.group({0, 1}), 1e6, nullptr}, 0},
         {{CollectiveKind::P2P, Algorithm::Direct, b.group({2, 3}), 1e6, nullptr}, 0},
         {{CollectiveKind::P2P, Algorithm::Direct, b.group({2, 3}), 3e6, nullptr}, 0}});
  ASSERT_EQ(b.solves, 3u);
  ASSERT_EQ(b.stats.link_levels.size(), 1u);
  EXPECT_EQ(b.stats.link_levels[0].bytes, 10e6);
  EXPECT_EQ(b.stats.link_levels[0].busy, 40 * kMicrosecond);
  EXPECT_EQ(b.stats.link_levels[0].peak_utilization, 1.0);
  std::map<std::string, const LinkStat*> by_name;
  for (const LinkStat& l : b.stats.hottest_links) by_name[l.name] = &l;
  ASSERT_EQ(by_name.size(), 4u);
  for (const auto& [name, bytes, busy] : {std::tuple{"gpu 0 up", 1e6, 10}, {"gpu 1 down", 1e6, 10},
                                          {"gpu 2 up", 4e6, 40}, {"gpu 3 down", 4e6, 40}}) {
    ASSERT_TRUE(by_name.count(name)) << name;
    EXPECT_EQ(by_name[name]->bytes, bytes) << name;
    EXPECT_EQ(by_name[name]->busy, busy * kMicrosecond) << name;
    EXPECT_EQ(by_name[name]->peak_utilization, 1.0) << name;
  }
}

TEST(FlowModel, FullEpIterationAgreesWithAnalyticWithoutContention) {
  // quickstart (2 DGX H100 nodes, EP 16, 2 chunks): its collectives never overlap, so the flow
  // model's iteration equals the analytic one within 1 %.
  const auto l = test::loader();
  auto doc = l.read_json(std::string(MOESIM_SOURCE_DIR) + "/scenarios/quickstart.json");
  doc["training"]["iterations"] = 1;
  simulation::Simulation analytic(test::scenario_from(doc.dump()));
  analytic.run();
  doc["network"] = {{"model", "flow"}};
  simulation::Simulation flow(test::scenario_from(doc.dump()));
  flow.run();
  const double a = static_cast<double>(analytic.mean_iteration_time()), f = static_cast<double>(flow.mean_iteration_time());
  EXPECT_NEAR(f, a, 0.01 * a);
  EXPECT_EQ(flow.results_json()["network"]["model"], "flow");
}

TEST(MaxMin, RandomFlowsGetAMaxMinAllocation) {
  // Seeded random flows over 64 links, uneven loads (the case whose floating leftovers once
  // stalled the solver). The allocation is feasible (no link over capacity) and max-min fair:
  // every flow crosses a saturated link on which no other flow has a larger rate.
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const std::size_t links = 64, flows = 4 + rng.below(40);
    std::vector<std::vector<LinkDemand>> shares(flows);
    for (auto& s : shares)
      for (int i = 0; i < 6; ++i)
        s.push_back({static_cast<std::uint32_t>(rng.below(links)), i == 0 ? 1.0 : 0.25 + 0.75 * rng.uniform()});
    std::vector<const std::vector<LinkDemand>*> ptrs;
    for (const auto& s : shares) ptrs.push_back(&s);
    std::vector<double> capacity(links);
    for (auto& c : capacity) c = 1e9 * (1 + rng.below(8));
    MaxMinSolver solver(links);
    std::vector<double> rates;
    solver.solve(ptrs, capacity, rates);
    std::vector<double> load(links, 0.0);
    for (std::size_t f = 0; f < flows; ++f)
      for (const auto& d : shares[f]) load[d.link] += d.bytes * rates[f];
    for (std::size_t l = 0; l < links; ++l) EXPECT_LE(load[l], capacity[l] * (1 + 1e-9)) << "seed " << seed;
    for (std::size_t f = 0; f < flows; ++f) {
      bool bottlenecked = false;
      for (const auto& d : shares[f]) {
        if (load[d.link] < capacity[d.link] * (1 - 1e-9)) continue;
        bool largest = true;
        for (std::size_t g = 0; g < flows; ++g)
          for (const auto& e : shares[g])
            if (e.link == d.link && rates[g] > rates[f] * (1 + 1e-9)) largest = false;
        bottlenecked |= largest;
      }
      EXPECT_TRUE(bottlenecked) << "seed " << seed << " flow " << f;
    }
  }
}

TEST(FlowModel, TransfersFollowTheLinkGraphRoutes) {
  // A transfer's link demands sit on exactly the levels of the Boost.Graph shortest path between
  // its GPUs: up and down each level from the GPU to the coarsest level that separates them.
  Topology t({level("dc", 3, "10Gbps", "100us"), level("node", 2, "400Gbps", "5us"), level("gpu", 4, "900GB/s", "1us")},
             {any_gpu()}, {});
  LinkGraph graph(t);
  FlowLinks links(t);
  const auto params = AlphaBetaTable::from_topology(t, graph);
  FlowDemands demands(links, params);
  for (auto [u, v] : {std::pair{0u, 1u}, {0u, 5u}, {2u, 9u}, {7u, 23u}, {23u, 16u}}) {
    const Route route = graph.route(u, v);
    std::vector<int> graph_levels = route.levels, demand_levels;
    const FlowPhase phase = demands.demand({CollectiveKind::P2P, TransferPhase{u, v, 1e6}}, std::vector<std::uint32_t>{u, v});
    for (const auto& d : phase.demand) {
      demand_levels.push_back(links.tier(d.link));
      EXPECT_DOUBLE_EQ(d.bytes, 1e6);
    }
    std::sort(graph_levels.begin(), graph_levels.end());
    std::sort(demand_levels.begin(), demand_levels.end());
    EXPECT_EQ(demand_levels, graph_levels) << u << " -> " << v;
    EXPECT_EQ(phase.latency, route.latency) << u << " -> " << v;
  }
}

TEST(FlowModel, BothModelsPutTheSameBytesOnEveryLevel) {
  // Issue 47: one description of what a transfer crosses. Two DGX H100 nodes with their hosts
  // (PCIe switches of 2 GPUs, topologies/dgx-h100-2node-hosts.json), uncalibrated and then with
  // log 19's six entries bound (8 ranks set the gpu level, 16 the node level: B200 figures on this
  // H100 cluster's shape, which is all a byte count needs): for every collective kind and
  // algorithm, alone, the analytic and the flow model count the same bytes at every level and per
  // kind, a host copy's over PCIe included (bytes are what crosses, whatever the time model).
  const cluster::Topology topo =
      test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/optimizer-on-host.json").topology();
  ASSERT_TRUE(topo.hosts());
  for (const bool calibrated : {false, true}) {
    Bench b(topo);
    if (calibrated) {
      const calibration::Profile profile =
          test::profile_from_log("19_b200_hgx_vultr_8gpu_and_2node16gpu_ib_allreduce_allgather_alltoall_fullsweep.txt");
      ASSERT_EQ(simulation::bind_collectives(profile, b.topo, Algorithm::Ring, {}, b.params).at("used").size(), 6u);
    }
    const GroupId all = b.group(iota(16));
    auto skewed = skewed16();
    CollectiveOp host_copy{CollectiveKind::HostCopy, Algorithm::Direct, b.group({5}), 32e6, nullptr};
    const std::vector<CollectiveOp> ops{
        {CollectiveKind::AllToAll, Algorithm::Direct, all, 0, skewed},
        {CollectiveKind::AllToAll, Algorithm::Hierarchical, all, 0, skewed},
        {CollectiveKind::AllReduce, Algorithm::Ring, all, 64e6, nullptr},
        {CollectiveKind::AllReduce, Algorithm::Hierarchical, all, 64e6, nullptr},
        {CollectiveKind::AllReduce, Algorithm::Tree, all, 64e6, nullptr},
        {CollectiveKind::AllReduce, Algorithm::Auto, all, 64e6, nullptr},
        {CollectiveKind::AllGather, Algorithm::Ring, all, 4e6, nullptr},
        {CollectiveKind::AllGather, Algorithm::Hierarchical, all, 4e6, nullptr},
        {CollectiveKind::ReduceScatter, Algorithm::Hierarchical, all, 64e6, nullptr},
        {CollectiveKind::P2P, Algorithm::Direct, b.group({3, 12}), 8e6, nullptr},
        host_copy,
    };
    for (std::size_t i = 0; i < ops.size(); ++i) {
      b.run({{ops[i], 0}}, true);
      const NetworkStats flow = b.stats;
      b.run({{ops[i], 0}}, false);
      const NetworkStats& analytic = b.stats;
      const std::string what = fmt::format("{}op {}", calibrated ? "calibrated, " : "", i);
      ASSERT_EQ(flow.bytes_by_level.size(), analytic.bytes_by_level.size()) << what;
      for (std::size_t l = 0; l < flow.bytes_by_level.size(); ++l)
        EXPECT_NEAR(flow.bytes_by_level[l], analytic.bytes_by_level[l], 1e-6 * std::max(1.0, analytic.bytes_by_level[l]))
            << what << ", level " << l;
      const auto& f = flow.by_kind[static_cast<std::size_t>(ops[i].kind)];
      const auto& an = analytic.by_kind[static_cast<std::size_t>(ops[i].kind)];
      EXPECT_GT(an.bytes, 0) << what;
      EXPECT_NEAR(f.bytes, an.bytes, 1e-6 * an.bytes) << what;
      EXPECT_EQ(f.pairs, an.pairs) << what;
    }
  }
}
