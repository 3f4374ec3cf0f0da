// Plausibility warnings (scenario/plausibility.hpp): the Gbps/GB/s mix-ups users make most are
// named, the shipped topologies and scenarios raise none.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/scenario/plausibility.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

// Two DGX H100 nodes: 8 x 400 Gb/s NICs per node, NVLink 4 inside (450 GB/s per direction).
schema::Json two_nodes(const std::string& node_bw, const std::string& gpu_bw) {
  auto doc = schema::Json::parse(R"({
    "name": "t",
    "cluster": {"gpu": "h100-sxm5-80gb", "levels": [
      {"name": "node", "count": 2, "bandwidth": "3200Gbps", "latency": "5us", "ports": 8},
      {"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us"}]},
    "model": {"preset": "gpt-medium-moe"},
    "training": {"sequence_length": 512},
    "strategy": {"name": "ep"}
  })");
  doc["cluster"]["levels"][0]["bandwidth"] = node_bw;
  doc["cluster"]["levels"][1]["bandwidth"] = gpu_bw;
  return doc;
}

std::vector<std::string> warnings_of(const schema::Json& doc) { return test::scenario_from(doc.dump()).warnings; }

}  // namespace

TEST(Plausibility, TheRealClusterRaisesNone) { EXPECT_TRUE(warnings_of(two_nodes("3200Gbps", "450GB/s")).empty()); }

TEST(Plausibility, NvlinkWrittenInGbpsIsNamed) {
  // 450 Gbps = 56.25 GB/s: inside PCIe's range, so only the exact match with the H100's NVLink
  // (450 GB/s per direction, gpus.json) tells the mix-up.
  const auto w = warnings_of(two_nodes("3200Gbps", "450Gbps"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "test.json: $.cluster.levels[1].bandwidth: \"450Gbps\" is 56.25 GB/s, an eighth of the NVLink of h100-sxm5-80gb "
            "(450 GB/s per direction); NVLink is quoted in bytes: did you mean \"450GB/s\"? (keep Gbps if the GPUs are "
            "joined by a network at that rate)");
}

TEST(Plausibility, NetworkWrittenInBytesIsNamed) {
  // 3200 GB/s over a node's 8 GPUs is 400 GB/s each, 4x the fastest NIC per GPU (800 Gb/s = 100 GB/s).
  const auto w = warnings_of(two_nodes("3200GB/s", "450GB/s"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("$.cluster.levels[0].bandwidth: \"3200GB/s\" (400 GB/s for each of a node's 8 GPUs) is more than "
                      "twice the fastest network port per GPU"),
            std::string::npos)
      << w[0];
  EXPECT_NE(w[0].find("did you mean \"3200Gbps\"?"), std::string::npos) << w[0];
}

TEST(Plausibility, OuterLinkFasterThanTheGpusOwn) {
  // 1600 Gbps per node = 25 GB/s per GPU, faster than a 16 GB/s PCIe-class GPU level: an inter-node
  // link cannot beat the GPUs' own.
  const auto w = warnings_of(two_nodes("1600Gbps", "16GB/s"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("beats each GPU's own link at level gpu (\"16GB/s\", 16 GB/s)"), std::string::npos) << w[0];
}

TEST(Plausibility, FarPastEveryGpuLinkAndUnderOneGigabyte) {
  const auto fast = warnings_of(two_nodes("3200Gbps", "4TB/s"));
  ASSERT_EQ(fast.size(), 1u);
  EXPECT_NE(fast[0].find("more than twice the fastest GPU link in the catalogue (NVLink 5, 900 GB/s)"), std::string::npos);
  const auto slow = warnings_of(two_nodes("10Gbps", "4Gbps"));  // 0.5 GB/s
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_NE(slow[0].find("is under 1 GB/s"), std::string::npos) << slow[0];
}

TEST(Plausibility, NoShippedTopologyRaisesAny) {
  namespace fs = std::filesystem;
  int seen = 0;
  for (const auto& f : fs::directory_iterator(fs::path(MOESIM_SOURCE_DIR) / "topologies")) {
    if (f.path().stem() == "gpus" || f.path().stem() == "links") continue;  // the catalogues
    auto doc = two_nodes("3200Gbps", "450GB/s");
    doc["cluster"] = schema::Json{{"preset", f.path().stem().string()}};
    doc["training"]["dtype"] = "fp16";  // every GPU of the catalogue has it
    EXPECT_TRUE(warnings_of(doc).empty()) << f.path() << ": " << warnings_of(doc).front();
    ++seen;
  }
  EXPECT_GE(seen, 10);
}

TEST(Plausibility, ProfileOfAnotherGpuIsNamed) {
  // calibrations/b200-vultr-nccl-tests.json was measured on "NVIDIA B200"; the cluster is H100.
  auto doc = two_nodes("3200Gbps", "450GB/s");
  doc["calibration"] = "calibrations/b200-vultr-nccl-tests.json";
  const auto w = warnings_of(doc);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("test.json: $.calibration: profile"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("was measured on NVIDIA B200, but the cluster's GPUs are h100-sxm5-80gb"), std::string::npos) << w[0];
  // The H100 GeMM profile on the H100 cluster: no word.
  doc["calibration"] = "calibrations/h100-xla-gemm.json";
  EXPECT_TRUE(warnings_of(doc).empty());
}
