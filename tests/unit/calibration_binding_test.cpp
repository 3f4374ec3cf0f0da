// A profile's collective entries become the network models' per-level α-β (calibration_binding):
// simulating the measured collective on the measured shape must give back the fitted time, piece by
// piece; results say what was used and where defaults stayed.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "calibrate/fit/nccl_tests_log.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

using network::CollectiveKind;

calibration::Profile profile_from_log(const std::string& name) {
  std::ifstream in(std::string(MOESIM_SOURCE_DIR) + "/tests/data/realdata/" + name);
  std::stringstream b;
  b << in.rdbuf();
  calibrate::Measurements m;
  m.file = name;
  m.series = calibrate::read_nccl_tests_log(b.str(), name, {.collective = "", .gpus_per_node = 8, .table = {}});
  return calibrate::build_profile({m}, {});
}

TEST(CalibrationBinding, SimulatedAllReduceReproducesTheFitOnItsShape) {
  // Log 09: all_reduce on the 8 H100 of one node. On one 8-GPU node, moesim's ring all-reduce of
  // S bytes runs 2·7 = 14 steps of S/8 bytes; the binding divides the fit into those steps, so the
  // simulated time of the same collective must be the fitted α + β·S of the piece S falls in
  // (to the picosecond rounding of 14 steps), on every piece, bridges included.
  const calibration::Profile p = profile_from_log("09_aws_p5_h100_8gpu_nvlink_allreduce_awsbatch.txt");
  const cluster::Topology topo({test::level("gpu", 8, "450GB/s", "2us")}, {test::any_gpu()}, {});
  auto params = network::AlphaBetaTable(std::vector<network::AlphaBeta>(1));
  const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, params);
  ASSERT_EQ(report.at("used").size(), 1u);
  EXPECT_EQ(report.at("used")[0].at("steps"), 14.0);
  const network::AnalyticModel model(topo, params);
  const std::vector<std::uint32_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto& fit = p.collectives.at(0);
  ASSERT_GE(fit.segments.size(), 3u);
  for (const auto& seg : fit.segments)
    for (double size : {seg.from_bytes + 64, seg.from_bytes * 1.5 + 64}) {
      network::CollectiveOp op;
      op.kind = CollectiveKind::AllReduce;
      op.algorithm = network::Algorithm::Ring;
      op.bytes = size;
      const double simulated = time_to_seconds(model.cost(op, all).duration);
      EXPECT_NEAR(simulated, fit.seconds(size), 1e-9 * fit.seconds(size) + 30e-12) << size;
    }
  // The fallbacks name every kind the profile lacks.
  const std::string fallback = report.at("fallback").dump();
  EXPECT_NE(fallback.find("all_to_all at level gpu"), std::string::npos);
  EXPECT_EQ(fallback.find("all_reduce at level gpu"), std::string::npos);
}

TEST(CalibrationBinding, ScenarioResultsSayWhatWasUsed) {
  // calibrated-b200: log 19's entries on two HGX B200 nodes. All six entries fit the cluster;
  // reduce_scatter and send_recv stay on the topology's defaults, and the GeMM tables too (the
  // profile has none).
  auto s = test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibrated-b200.json");
  simulation::Simulation sim(std::move(s));
  sim.run();
  const auto r = sim.results().at("calibration");
  EXPECT_EQ(r.at("profile"), "b200-vultr-nccl-tests");
  EXPECT_EQ(r.at("collectives").at("used").size(), 6u);
  EXPECT_EQ(r.at("collectives").at("not_used").size(), 0u);
  const std::string fallback = r.at("collectives").at("fallback").dump();
  EXPECT_NE(fallback.find("reduce_scatter at level node"), std::string::npos);
  EXPECT_NE(fallback.find("p2p at level gpu"), std::string::npos);
  EXPECT_NE(r.at("compute").at("b200-sxm-180gb").at("gemm").get<std::string>().find("roofline default"), std::string::npos);
}

TEST(CalibrationBinding, EntriesThatDoNotFitAreReported) {
  // A 16-rank, 2-node entry on a single 8-GPU node cannot be placed; a group entry is Parm's.
  const calibration::Profile p = profile_from_log("01_h100_a3mega_2node16gpu_allreduce.txt");
  const cluster::Topology topo({test::level("gpu", 8, "450GB/s", "2us")}, {test::any_gpu()}, {});
  auto params = network::AlphaBetaTable(std::vector<network::AlphaBeta>(1));
  const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, params);
  EXPECT_EQ(report.at("used").size(), 0u);
  ASSERT_EQ(report.at("not_used").size(), 1u);
  EXPECT_NE(report.at("not_used")[0].at("reason").get<std::string>().find("does not fit this cluster"), std::string::npos);
}

TEST(CalibrationBinding, GemmTableSetsTheComputeModel) {
  // A bf16 GeMM table measured on this GPU kind: a GeMM of a measured shape takes 2·M·N·K divided
  // by the measured FLOP/s (the roofline's memory term is far below it); a dtype without a table,
  // or another GPU, keeps the roofline.
  calibration::Profile p;
  p.name = "t";
  p.provenance = {{"source", "test"}, {"gpu", "Test GPU"}};
  calibration::GemmTable g;
  g.dtype = "bf16";
  g.table = calibration::LogTable({{4096, 4096, 4096}, {8192, 8192, 8192}}, {{600e12}, {700e12}});
  p.gemm.push_back(g);
  cluster::GpuSpec gpu = test::any_gpu();
  gpu.name = "Test GPU";
  schema::Json report;
  const compute::ComputeModel cm(gpu, {}, simulation::bind_kernels(p, gpu, cluster::Dtype::bf16, report));
  EXPECT_NEAR(time_to_seconds(cm.gemm(4096, 4096, 4096)), 2.0 * 4096 * 4096 * 4096 / 600e12, 1e-12);
  EXPECT_NE(report.at("gemm").get<std::string>().find("bf16 table of 2 shapes"), std::string::npos);
  gpu.name = "Other GPU";
  schema::Json other;
  const compute::ComputeModel roofline(gpu, {}, simulation::bind_kernels(p, gpu, cluster::Dtype::bf16, other));
  EXPECT_NE(other.at("gemm").get<std::string>().find("measured on Test GPU"), std::string::npos);
  EXPECT_NE(roofline.gemm(4096, 4096, 4096), cm.gemm(4096, 4096, 4096));
}

}  // namespace
}  // namespace moesim
