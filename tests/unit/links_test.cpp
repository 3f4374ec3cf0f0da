// Links that differ inside a level, and hosts, by hand in both network models: host copies over
// PCIe, their contention with NIC traffic on the GPU's PCIe link, NIC ports of a node, and NVLink
// domains smaller than a level.
#include <gtest/gtest.h>

#include "test_support.hpp"

using namespace moesim;
using namespace moesim::cluster;
using namespace moesim::network;

namespace {

// A GPU kind with a 64 GB/s PCIe host link of no latency (latencies 0 keep the hand sums short).
GpuSpec pcie_gpu(Time host_latency = 0) {
  GpuSpec g = test::any_gpu();
  g.host_bandwidth = *parse_bandwidth("64GB/s");
  g.host_latency = host_latency;
  return g;
}

// 2 nodes × 2 GPUs: a node's 800 Gbps spread over 2 NICs of 400 Gbps = 50 GB/s (GPU i of a node
// uses NIC i), NVLink 450 GB/s inside; optionally hosts (a node each) with one PCIe switch of
// 128 GB/s uplink.
Topology two_nodes(bool hosts, std::uint32_t ports = 2) {
  Level node = test::level("node", 2, "800Gbps", "0us");
  node.ports = ports;
  std::optional<HostSpec> h;
  if (hosts) {
    h.emplace();
    h->gpus = 2;
    h->memory_bytes = 1e12;
    h->pcie_switches = 1;
    h->switch_uplink = *parse_bandwidth("128GB/s");
  }
  return Topology({node, test::level("gpu", 2, "450GB/s", "0us")}, {pcie_gpu()}, {}, h);
}

CollectiveOp host_copy(GroupId group, double bytes, bool to_host = true) {
  CollectiveOp op{CollectiveKind::HostCopy, Algorithm::Direct, group, bytes, nullptr};
  op.to_host = to_host;
  return op;
}

Time duration(const std::pair<Time, Time>& span) { return span.second - span.first; }

}  // namespace

TEST(Links, HostCopyTakesAlphaPlusBytesOverTheSlowerPcieLink) {
  // 64 MB to the host over a 64 GB/s PCIe link of 2 us: 2 us + 1 ms. With hosts described the
  // copy also crosses the PCIe switch's 32 GB/s, 1 us uplink to the CPU: 3 us + 2 ms.
  {
    test::NetworkBench b(Topology({test::level("gpu", 2, "100GB/s", "1us")}, {pcie_gpu(2 * kMicrosecond)}, {}));
    const auto g = b.group({0});
    for (bool flow : {false, true})
      EXPECT_EQ(duration(b.run({{host_copy(g, 64e6), 0}}, flow)[0]), 2 * kMicrosecond + kMillisecond) << flow;
  }
  HostSpec h;
  h.gpus = 2;
  h.memory_bytes = 1e12;
  h.switch_uplink = *parse_bandwidth("32GB/s");
  h.switch_latency = kMicrosecond;
  test::NetworkBench b(Topology({test::level("gpu", 2, "100GB/s", "1us")}, {pcie_gpu(2 * kMicrosecond)}, {}, h));
  const auto g = b.group({1});
  for (bool flow : {false, true}) {
    EXPECT_NEAR(static_cast<double>(duration(b.run({{host_copy(g, 64e6, false), 0}}, flow)[0])),
                3 * kMicrosecond + 2 * kMillisecond, 1) << flow;
    EXPECT_DOUBLE_EQ(b.stats.by_kind[static_cast<int>(CollectiveKind::HostCopy)].bytes, 64e6);
  }
}

TEST(Links, HostCopyContendsWithNicTrafficOnTheGpusPcieLink) {
  // GPU 0 copies 32 MB to its host while sending 32 MB to GPU 2 in the other node. Both cross GPU
  // 0's 64 GB/s PCIe link (GPUDirect RDMA goes through the PCIe switch to the NIC): max-min gives
  // each 32 GB/s (the NIC's 50 GB/s and the switch's 128 GB/s uplink have room), so both take
  // 32 MB / 32 GB/s = 1 ms. Alone: the copy 32 MB / 64 GB/s = 0.5 ms, the transfer 32 MB over its
  // 50 GB/s NIC = 0.64 ms. The analytic model costs each alone.
  test::NetworkBench b(two_nodes(true));
  const auto one = b.group({0}), pair = b.group({0, 2});
  const CollectiveOp p2p{CollectiveKind::P2P, Algorithm::Direct, pair, 32e6, nullptr};
  const auto both = b.run({{host_copy(one, 32e6), 0}, {p2p, 0}});
  EXPECT_NEAR(static_cast<double>(duration(both[0])), 1e9, 1);
  EXPECT_NEAR(static_cast<double>(duration(both[1])), 1e9, 1);
  EXPECT_NEAR(static_cast<double>(duration(b.run({{host_copy(one, 32e6), 0}})[0])), 0.5e9, 1);
  EXPECT_NEAR(static_cast<double>(duration(b.run({{p2p, 0}})[0])), 0.64e9, 1);
  const auto alone = b.run({{host_copy(one, 32e6), 0}, {p2p, 0}}, false);
  EXPECT_EQ(duration(alone[0]), 500 * kMicrosecond);
  EXPECT_EQ(duration(alone[1]), 640 * kMicrosecond);
  // Without hosts described, NIC traffic does not cross the GPU's PCIe link: no contention.
  test::NetworkBench c(two_nodes(false));
  const auto apart = c.run({{host_copy(c.group({0}), 32e6), 0}, {{CollectiveKind::P2P, Algorithm::Direct, c.group({0, 2}), 32e6, nullptr}, 0}});
  EXPECT_NEAR(static_cast<double>(duration(apart[0])), 0.5e9, 1);
  EXPECT_NEAR(static_cast<double>(duration(apart[1])), 0.64e9, 1);
}

TEST(Links, AGpusTrafficLeavesItsNodeThroughItsOwnNic) {
  // GPU 0 alone sends 1 MB to each GPU of the other node: 2 MB leave through its NIC of 50 GB/s:
  // 40 us, where the node's undivided 100 GB/s uplink took 20 us. GPU 2 and GPU 3 each receive
  // 1 MB through their own NIC. Both models agree; the flow model names the port.
  for (std::uint32_t ports : {2u, 1u}) {
    test::NetworkBench b(two_nodes(false, ports));
    const auto all = b.group({0, 1, 2, 3});
    std::vector<double> dense(16, 0.0);
    dense[0 * 4 + 2] = dense[0 * 4 + 3] = 1e6;
    const CollectiveOp a2a{CollectiveKind::AllToAll, Algorithm::Direct, all, 0,
                           std::make_shared<TrafficMatrix>(TrafficMatrix::dense(4, std::move(dense)))};
    const Time expected = (ports == 2 ? 40 : 20) * kMicrosecond;
    EXPECT_EQ(duration(b.run({{a2a, 0}}, false)[0]), expected) << ports;
    EXPECT_NEAR(static_cast<double>(duration(b.run({{a2a, 0}}, true)[0])), static_cast<double>(expected), 1) << ports;
    if (ports == 2) {
      EXPECT_EQ(b.stats.hottest_links.front().name, "node 0 port 0 up");
    }
  }
}

TEST(Links, NvlinkDomainsSmallerThanALevel) {
  // 4 GPUs on one 100 GB/s NVSwitch level cut into domains of 2; between domains each GPU has its
  // own 10 GB/s link. 1 MB from GPU 0: to GPU 1 (same domain) 10 us; to GPU 2 (the other domain)
  // 100 us. An even all-to-all of 1 MB per pair: each GPU sends 2 MB across domains over its own
  // link: 200 us (the NVLink tier carries its 3 MB in 30 us beside). Both models agree; the bytes
  // of both tiers count for level "gpu".
  Level gpu = test::level("gpu", 4, "100GB/s", "0us");
  gpu.domains = {2, *parse_bandwidth("10GB/s"), 0, nullptr};
  test::NetworkBench b(Topology({gpu}, {pcie_gpu()}, {}));
  ASSERT_EQ(b.topo.tier_count(), 2);
  EXPECT_EQ(b.topo.tiers()[0].name, "gpu (between domains)");
  const auto near = b.group({0, 1}), far = b.group({0, 2}), all = b.group({0, 1, 2, 3});
  const auto a2a = std::make_shared<TrafficMatrix>(TrafficMatrix::uniform(4, 1e6));
  for (bool flow : {false, true}) {
    EXPECT_NEAR(static_cast<double>(duration(b.run({{{CollectiveKind::P2P, Algorithm::Direct, near, 1e6, nullptr}, 0}}, flow)[0])),
                10e6, 1) << flow;
    EXPECT_NEAR(static_cast<double>(duration(b.run({{{CollectiveKind::P2P, Algorithm::Direct, far, 1e6, nullptr}, 0}}, flow)[0])),
                100e6, 1) << flow;
    EXPECT_NEAR(static_cast<double>(duration(b.run({{{CollectiveKind::AllToAll, Algorithm::Direct, all, 0, a2a}, 0}}, flow)[0])),
                200e6, 1) << flow;
    // 8 of the 12 MB cross domains, 4 stay inside one.
    EXPECT_DOUBLE_EQ(b.stats.bytes_by_level[0], 8e6);
    EXPECT_DOUBLE_EQ(b.stats.bytes_by_level[1], 4e6);
  }
}

TEST(Links, ScenarioDescribesPortsDomainsAndHosts) {
  // The loader turns the JSON into the tiers and hosts above, defaults filled.
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"] = schema::Json::parse(R"({"gpu": "h100-sxm5-80gb",
    "levels": [{"name": "node", "count": 2, "bandwidth": "3200Gbps", "latency": "5us", "ports": 8},
               {"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us",
                "domains": {"size": 4, "bandwidth": "64GB/s", "latency": "4us"}}],
    "hosts": {"memory": "2TiB", "pcie_switches": 4, "switch_uplink": {"bandwidth": "64GB/s", "latency": "1us"}}})");
  doc["model"]["experts"] = 16;
  const auto sc = test::scenario_from(doc.dump());
  const Topology t = sc.topology();
  ASSERT_EQ(t.tier_count(), 3);
  EXPECT_EQ(t.tiers()[0].ports, 8u);
  EXPECT_DOUBLE_EQ(t.tiers()[0].bandwidth.bytes_per_second, 50e9);  // 3200 Gbps / 8
  EXPECT_EQ(t.tiers()[1].ports, 4u);                               // each GPU of a domain its own link
  EXPECT_EQ(t.tier_of_level(1), 2);
  EXPECT_EQ(t.port(13, 0), 5u);  // GPU 13 is GPU 5 of node 1: NIC 5
  ASSERT_TRUE(t.hosts());
  EXPECT_EQ(t.hosts()->gpus, 8u);  // default: a node's GPUs
  EXPECT_EQ(t.pcie_switch_of(13), 6u);  // host 1, GPUs 4-5 → its switch 2
  EXPECT_DOUBLE_EQ(t.hosts()->optimizer_bytes_per_second, 45e9);
  EXPECT_EQ(sc.effective["cluster"]["hosts"]["gpus"], 8);
}
