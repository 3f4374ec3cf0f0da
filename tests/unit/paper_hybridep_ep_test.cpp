// Reproductions of HybridEP's analysis of plain EP (seed 000), by simulating the ep strategy:
// Table VII's communication frequency at S_ED = 1 and Eq. 3's all-to-all traffic per GPU.
#include <gtest/gtest.h>

#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// HybridEP Cluster-L shape (DCs of 8 A800 over PCIe, 10 Gbps between), GPT-Medium MoE (Table II)
// with one expert per GPU, expected-share routing so Eq. 3 holds exactly.
schema::Json cluster_of(int dcs) {
  auto doc = schema::Json::parse(R"({
    "name": "hybridep-ep",
    "cluster": {"preset": "hybridep-cluster-l"},
    "model": {"preset": "gpt-medium-moe"},
    "training": {"sequence_length": 256, "micro_batch_size": 8},
    "routing": {"sampling": "expected"},
    "strategy": {"name": "ep"}
  })");
  doc["cluster"]["levels"] = schema::Json::parse(R"([
    {"name": "dc", "count": 1, "bandwidth": "10Gbps", "latency": "100us"},
    {"name": "gpu", "count": 8, "bandwidth": "128Gbps", "latency": "5us"}])");
  doc["cluster"]["levels"][0]["count"] = dcs;
  doc["model"]["experts"] = 8 * dcs;
  return doc;
}

}  // namespace

TEST(PaperHybridEP, TableVIIAllToAllPairsOfPlainEp) {
  // Table VII, column S_ED = 1 (EP): 56, 240 and 992 GPU-to-GPU communications per all-to-all at
  // EP size 8, 16 and 32; no all-gather.
  const std::pair<int, std::uint64_t> rows[] = {{1, 56}, {2, 240}, {4, 992}};
  for (const auto& [dcs, pairs] : rows) {
    simulation::Simulation sim(test::scenario_from(cluster_of(dcs).dump()));
    sim.run();
    const auto r = sim.results_json();
    const auto& a2a = r["network"]["collectives"]["all_to_all"];
    // 12 layers × (dispatch + combine) × (forward + backward) all-to-alls per iteration.
    EXPECT_EQ(a2a["count"].get<double>(), 48.0);
    EXPECT_EQ(a2a["gpu_pairs"].get<double>() / 48.0, static_cast<double>(pairs)) << "EP size " << 8 * dcs;
    EXPECT_FALSE(r["network"]["collectives"].contains("all_gather"));
  }
}

TEST(PaperHybridEP, Eq3AllToAllTrafficPerGpu) {
  // Eq. 3: with D = B·L·k·H·b bytes of dispatch per GPU, an all-to-all over G GPUs sends
  // D·(G−1)/G per GPU. B·L = 8·256 tokens, k = 2, H = 1024, bf16: D = 8 MiB; G = 16:
  // 16 GPUs × 8 MiB × 15/16 = 120 MiB per all-to-all, of which 2 DCs × 8 × 8 × D/16 = 64 MiB
  // cross the DC link.
  simulation::Simulation sim(test::scenario_from(cluster_of(2).dump()));
  sim.run();
  const auto r = sim.results_json();
  const double d = 8.0 * 256 * 2 * 1024 * 2;
  EXPECT_DOUBLE_EQ(r["network"]["collectives"]["all_to_all"]["bytes"].get<double>(), 48 * 16 * d * 15 / 16);
  // Dense-gradient all-reduces also cross the DC link; the all-to-alls' part is 48 × 64 MiB.
  EXPECT_GE(r["network"]["bytes_by_level"]["dc"].get<double>(), 48 * 2 * 8 * 8 * d / 16);
}
