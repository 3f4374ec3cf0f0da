// `moesim collective`: nccl-tests' table, simulated. On a flat switch of 4 GPUs at 100 GB/s with
// no latency, every bandwidth-optimal algorithm moves (n − 1)/n of the data (twice for
// all-reduce) through each GPU's link, so busbw — algbw times nccl-tests' factor
// (doc/PERFORMANCE.md) — is the link rate exactly: 100.00 GB/s for every collective and size.
#include <sstream>

#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

class Collective : public CliTest {
 protected:
  fs::path flat() {
    fs::create_directories(work_);
    const fs::path p = work_ / "flat4.json";
    write_text(p, R"({"name": "flat4",
      "cluster": {"gpu": "h100-sxm5-80gb", "levels": [{"name": "gpu", "count": 4, "bandwidth": "100GB/s", "latency": "0us"}]},
      "model": {"layers": 2, "hidden": 256, "ffn_hidden": 512, "experts": 4, "top_k": 1, "heads": 4},
      "training": {"sequence_length": 128}, "strategy": {"name": "ep"}})");
    return p;
  }
};

// The result rows of an nccl-tests table: size, count, and the out-of-place time, algbw, busbw.
std::vector<std::vector<std::string>> rows(const std::string& out) {
  std::vector<std::vector<std::string>> r;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() == 13) r.push_back({w[0], w[1], w[5], w[6], w[7]});
  }
  return r;
}

TEST_F(Collective, BusbwIsTheLinkRateOfAFlatSwitch) {
  // algbw = busbw / factor: all_reduce 100 / (2·3/4) = 66.67; all_gather, reduce_scatter,
  // alltoall 100 / (3/4) = 133.33; sendrecv 100. Counts: all_reduce 4-byte elements of the
  // buffer; all_gather and reduce_scatter per rank, alltoall per peer: size / 16.
  const std::map<std::string, std::pair<std::string, double>> expect{{"all_reduce", {"66.67", 4}},
                                                                     {"all_gather", {"133.33", 16}},
                                                                     {"reduce_scatter", {"133.33", 16}},
                                                                     {"alltoall", {"133.33", 16}},
                                                                     {"sendrecv", {"100.00", 4}}};
  const fs::path s = flat();
  for (const auto& [name, e] : expect) {
    const Result r = moesim({"collective", name, "--cluster", s.string(), "-b", "1M", "-e", "64M", "-f", "4", "--network", "analytic"});
    ASSERT_EQ(r.code, 0) << describe(r);
    const auto t = rows(r.out);
    ASSERT_EQ(t.size(), 4u) << r.out;  // 1, 4, 16, 64 MiB
    for (const auto& row : t) {
      EXPECT_EQ(row[4], "100.00") << name << ": " << r.out;
      EXPECT_EQ(row[3], e.first) << name;
      EXPECT_EQ(std::stod(row[1]), std::stod(row[0]) / e.second) << name;
    }
    // The same with the flow model: one collective alone shares no link.
    const Result f = moesim({"collective", name, "--cluster", s.string(), "-b", "16M", "-e", "16M", "--network", "flow"});
    ASSERT_EQ(f.code, 0) << describe(f);
    EXPECT_EQ(rows(f.out).at(0)[4], "100.00") << name;
  }
}

TEST_F(Collective, TableParsesBackThroughCalibrateFit) {
  // The printed table is an nccl-tests log: `calibrate fit` reads its 4 ranks on one node (the
  // Rank lines) and fits the ring's cost, 2·3/4 · size / 100 GB/s = 1.5e-11 s per byte (to the
  // printed digits of the times).
  const fs::path s = flat();
  const Result r = moesim({"collective", "all_reduce", "--cluster", s.string(), "-b", "1M", "-e", "1G", "--network", "analytic"});
  ASSERT_EQ(r.code, 0) << describe(r);
  write_text(work_ / "ar.log", r.out);
  const Result fit = moesim({"calibrate", "fit", (work_ / "ar.log").string(), "--out", (work_ / "p.json").string()});
  ASSERT_EQ(fit.code, 0) << describe(fit);
  const auto p = Json::parse(read_text(work_ / "p.json")).at("collectives").at(0);
  EXPECT_EQ(p.at("collective"), "all_reduce");
  EXPECT_EQ(p.at("ranks"), 4);
  EXPECT_EQ(p.at("nodes"), 1);
  EXPECT_NEAR(p.at("segments").back().at("beta_s_per_byte").get<double>(), 1.5e-11, 1.5e-11 * 2e-3);
}

TEST_F(Collective, ComparesWithARealLog) {
  // AWS p5's 8-GPU NVLink all_reduce (realdata 09): its 32 sizes simulated on a DGX H100 and
  // printed beside the measured busbw, with the mean error.
  const Result r = moesim({"collective", "all_reduce", "--cluster", "dgx-h100", "--compare",
                           (kSourceDir / "tests" / "data" / "realdata" / "09_aws_p5_h100_8gpu_nvlink_allreduce_awsbatch.txt").string(),
                           "--gpus-per-node", "8"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(rows(r.out).size(), 32u);
  EXPECT_NE(r.out.find("#  Rank  7 Group  0"), std::string::npos);
  EXPECT_NE(r.out.find("# mean |busbw error|: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over 32 sizes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("over the 9 sizes of 64 MiB and more"), std::string::npos) << r.out;
  // Each compared size says what moesim ran: an 8-byte all-reduce by the ring's LL steps (15 us
  // against NVLS's fixed 76.6 us), 16 GiB by NVLS in the switch.
  EXPECT_NE(r.out.find("-14.1%  ring LL\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-5.6%  nvls\n"), std::string::npos) << r.out;
}

TEST_F(Collective, SaysNvlsTreeAcrossRacks) {
  // OCI's all-reduce over two GB200 NVL72 racks (realdata 25, 128 ranks): NCCL's NVLS-tree, NVLS in
  // each rack pipelined with a ring of Simple steps across the racks, at every compared size.
  const auto log = kSourceDir / "tests" / "data" / "realdata" / "25_oci_nccl_scale" /
                   "oci_GB200_03_nccl_all_reduce_scale_performance_multi_node_2_racks_32_node.txt";
  const Result r = moesim({"collective", "all_reduce", "--cluster", "oci-gb200-nvl72", "--compare", log.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("error  moesim ran\n"), std::string::npos) << r.out;
  std::size_t tree = 0;
  for (std::size_t at = r.out.find("%  nvls-tree + ring Simple\n"); at != std::string::npos;
       at = r.out.find("%  nvls-tree + ring Simple\n", at + 1))
    ++tree;
  EXPECT_EQ(tree, 2u) << r.out;
}

TEST_F(Collective, ComparesEachLogSizeWithTheSizeItsRanksRoundItTo) {
  // OCI's 192-rank all-to-all over three GB200 NVL72 racks (realdata 25, 48 hosts): its 4 and 8 GiB
  // are not whole elements per rank (4 GiB / (192 · 4 B) = 5592405.33), so the simulation runs
  // 4294967040 B; each log row is compared with the row asked for its size, each busbw from its
  // own size. Before, none matched, and the command printed an empty comparison and exited 0.
  const auto log = kSourceDir / "tests" / "data" / "realdata" / "25_oci_nccl_scale" /
                   "oci_GB200_09_nccl_all_to_all_scale_performance_48_hosts_3_racks.txt";
  const Result r = moesim({"collective", "alltoall", "--cluster", "oci-gb200-nvl72", "-n", "192", "--compare", log.string(),
                           "--gpus-per-node", "4"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("over 2 sizes"), std::string::npos) << r.out;
  // The measured busbw of the 4 GiB row from its own size: 4294967296 B over the mean of 70159 and
  // 70439 us, times 191/192: 60.78 GB/s.
  EXPECT_NE(r.out.find("  4294967040       70299.00"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("60.78"), std::string::npos) << r.out;
  // A log of which no size can be simulated on its ranks compares nothing: exit 2, not 0. (A
  // one-byte all-to-all over 8 ranks rounds to no whole element.)
  const auto tiny = std::filesystem::temp_directory_path() / "moesim-tiny-alltoall.txt";
  {
    std::ofstream out(tiny);
    out << "# alltoall_perf\n# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
           "#  Rank  7 Group  0 Pid 1 on host device 7 [0x00] NVIDIA H100\n"
           "1 0 float none -1 10.0 0.00 0.00 0 10.0 0.00 0.00 0\n";
  }
  const Result none = moesim({"collective", "alltoall", "--cluster", "dgx-h100", "--compare", tiny.string()});
  EXPECT_EQ(none.code, 2) << describe(none);
  EXPECT_NE(none.err.find("no size of the log's table could be simulated"), std::string::npos) << describe(none);
  std::filesystem::remove(tiny);
}

TEST_F(Collective, AProfileSegmentOfLatencyOnlyCostsItsLatency) {
  // Regression (issue 45, class 2): the shipped B200 profile fits its 8-rank all-reduce below 32
  // bytes with beta = 0 (nccl-tests' smallest sizes are latency only). On a DGX H100 the flow
  // model gave that phase's flows no bytes to drain and aborted ("a flow got no bandwidth"). Now
  // an 8-byte all-reduce costs the segment's alpha, 19.4363 us, under every algorithm.
  const std::string profile = (kSourceDir / "calibrations" / "b200-vultr-nccl-tests.json").string();
  for (const std::string algorithm : {"auto", "ring", "tree", "nvls", "hierarchical"})
    for (const std::string network : {"flow", "analytic"}) {
      const Result r = moesim({"collective", "all_reduce", "--cluster", "dgx-h100", "--profile", profile, "-b", "8", "-e", "8",
                               "--algorithm", algorithm, "--network", network});
      ASSERT_EQ(r.code, 0) << algorithm << " " << network << "\n" << describe(r);
      EXPECT_NEAR(std::stod(rows(r.out).at(0).at(2)), 19.44, 0.011) << algorithm << " " << network << "\n" << r.out;
    }
}

TEST_F(Collective, BadInputExits2) {
  const fs::path s = flat();
  Result r = moesim({"collective", "broadcast", "--cluster", s.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("is not all_reduce, all_gather, reduce_scatter, alltoall or sendrecv"), std::string::npos) << r.err;
  r = moesim({"collective", "all_reduce", "--cluster", s.string(), "-n", "5"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("give between 2 and 4 GPUs"), std::string::npos) << r.err;
  r = moesim({"collective", "all_reduce", "--cluster", s.string(), "-e", "12X"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--maxbytes: 12X: is not a size"), std::string::npos) << r.err;
  r = moesim({"collective", "all_reduce", "--cluster", s.string(), "--algorithm", "nccl"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--algorithm is one of auto, ring, hierarchical, tree, nvls, direct"), std::string::npos) << r.err;
  r = moesim({"collective", "all_reduce", "--cluster", "no-such-cluster"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("no-such-cluster"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace moesim_cli
