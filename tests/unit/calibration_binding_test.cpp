// A profile's collective entries become the network models' per-level α-β (calibration_binding):
// simulating the measured collective on the measured shape must give back the fitted time, piece by
// piece; results say what was used and where defaults stayed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "sim/core/error.hpp"
#include "sim/cluster/link_graph.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

using network::CollectiveKind;

using test::profile_from_log;

TEST(CalibrationBinding, SimulatedAllReduceReproducesTheFitOnItsShape) {
  // Log 09: all_reduce on the 8 H100 of one node. On one 8-GPU node, moesim's ring all-reduce of
  // S bytes runs 2·7 = 14 steps of S/8 bytes; the binding divides the fit into those steps, so the
  // simulated time of the same collective must be the fitted α + β·S of the piece S falls in
  // (to the picosecond rounding of 14 steps), on every piece, bridges included.
  const calibration::Profile p = profile_from_log("09_aws_p5_h100_8gpu_nvlink_allreduce_awsbatch.txt");
  const cluster::Topology topo({test::level("gpu", 8, "450GB/s", "2us")}, {test::any_gpu()}, {});
  auto params = network::AlphaBetaTable(std::vector<network::AlphaBeta>(1));
  const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, {}, params);
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

TEST(CalibrationBinding, EveryEntryOfATwoLevelClusterReproducesItsOwnShape) {
  // Log 19 on two HGX B200 nodes: the 8-rank entries set the gpu level, the 16-rank ones the node
  // level. A 16-rank ring crosses both; had the gpu level's α-β (from the 8-rank fit) also been
  // charged, the 16-rank all_reduce would come out up to 61 % above its measurement at 92 KB (its
  // ring has 30 steps of the gpu level's α where NCCL's 2-node latency is far lower). The
  // calibrated node level alone costs it, so every entry comes back to its fit (the report checks
  // the middle of every piece). A hierarchical all-reduce adds in-node phases to the measured
  // one: the report says so.
  const calibration::Profile p =
      profile_from_log("19_b200_hgx_vultr_8gpu_and_2node16gpu_ib_allreduce_allgather_alltoall_fullsweep.txt");
  const auto topo = test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibrated-b200.json").topology();
  cluster::LinkGraph graph(topo);
  auto ring = network::AlphaBetaTable::from_topology(topo, graph);
  const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, {}, ring);
  ASSERT_EQ(report.at("used").size(), 6u);
  for (const auto& u : report.at("used")) {
    EXPECT_LT(std::abs(u.at("own_shape_error").get<double>()), 1e-5) << u.dump();
    EXPECT_FALSE(u.contains("warning")) << u.dump();
  }
  auto hierarchical = network::AlphaBetaTable::from_topology(topo, graph);
  const auto h = simulation::bind_collectives(p, topo, network::Algorithm::Hierarchical, {}, hierarchical);
  int warned = 0;
  for (const auto& u : h.at("used"))
    if (u.contains("warning")) {
      ++warned;
      EXPECT_EQ(u.at("entry"), "all_reduce ranks=16 nodes=2");
      EXPECT_GT(u.at("own_shape_error").get<double>(), 0.02);
      EXPECT_NE(u.at("warning").get<std::string>().find("phases inside level gpu"), std::string::npos);
    }
  EXPECT_EQ(warned, 1);
}

TEST(CalibrationBinding, ScenarioResultsSayWhatWasUsed) {
  // calibrated-b200: log 19's entries on two HGX B200 nodes. All six entries fit the cluster;
  // reduce_scatter and send_recv stay on the topology's defaults, and the GeMM tables too (the
  // profile has none).
  auto s = test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/calibrated-b200.json");
  simulation::Simulation sim(std::move(s));
  sim.run();
  const auto r = sim.results_json().at("calibration");
  EXPECT_EQ(r.at("profile"), "b200-vultr-nccl-tests");
  EXPECT_EQ(r.at("collectives").at("used").size(), 6u);
  EXPECT_EQ(r.at("collectives").at("not_used").size(), 0u);
  const std::string fallback = r.at("collectives").at("fallback").dump();
  EXPECT_NE(fallback.find("reduce_scatter at level node"), std::string::npos);
  EXPECT_NE(fallback.find("p2p at level gpu"), std::string::npos);
  EXPECT_NE(r.at("compute").at("b200-sxm-180gb").at("gemm").get<std::string>().find("roofline default"), std::string::npos);
}

TEST(CalibrationBinding, ResultsSayWhichKernelsTheTablesCosted) {
  // calibrated-h100-gemm: OpenXLA's H100 GeMM table costs every GeMM, and the H100's catalogue
  // entry its attention (cuDNN's measured kernels); norms, activations and the optimizer stay with
  // the model: part of the kernels' time, not all, is measured. calibrated-b200: a profile of
  // collectives only on a GPU kind with no measured kernels: none.
  const auto sources = [](const std::string& scenario) {
    simulation::Simulation sim(test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/" + scenario));
    sim.run();
    return sim.results_json().at("kernel_sources");
  };
  const auto h100 = sources("calibrated-h100-gemm.json");
  const auto& kind = h100.at("by_gpu_kind").at("h100-sxm5-80gb");
  for (const char* family : {"gemm", "grouped_gemm", "attention", "attention_backward"})
    EXPECT_TRUE(kind.at("families").at(family).get<std::string>().starts_with("measured table")) << family;
  EXPECT_TRUE(kind.at("families").at("memory_bound").get<std::string>().starts_with("model"));
  EXPECT_NE(kind.at("families").at("gemm").get<std::string>().find("h100-xla-gemm"), std::string::npos);
  EXPECT_GT(h100.at("measured_share").get<double>(), 0.0);
  EXPECT_LT(h100.at("measured_share").get<double>(), 1.0);
  EXPECT_EQ(h100.at("measured_share").get<double>(),
            kind.at("measured_ps").get<double>() / kind.at("costed_ps").get<double>());
  const auto b200 = sources("calibrated-b200.json");
  EXPECT_EQ(b200.at("measured_share").get<double>(), 0.0);
  for (const auto& [family, source] : b200.at("by_gpu_kind").at("b200-sxm-180gb").at("families").items())
    EXPECT_TRUE(source.get<std::string>().starts_with("model")) << family;
}

TEST(CalibrationBinding, EntriesThatDoNotFitAreReported) {
  // A 16-rank, 2-node entry on a single 8-GPU node cannot be placed; a group entry is Parm's.
  const calibration::Profile p = profile_from_log("01_h100_a3mega_2node16gpu_allreduce.txt");
  const cluster::Topology topo({test::level("gpu", 8, "450GB/s", "2us")}, {test::any_gpu()}, {});
  auto params = network::AlphaBetaTable(std::vector<network::AlphaBeta>(1));
  const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, {}, params);
  EXPECT_EQ(report.at("used").size(), 0u);
  ASSERT_EQ(report.at("not_used").size(), 1u);
  EXPECT_NE(report.at("not_used")[0].at("reason").get<std::string>().find("does not fit this cluster"), std::string::npos);
}

TEST(CalibrationBinding, AGroupEntryPricesTheCollectiveWhereTheStrategyPutsTheGroup) {
  // Parm §VI-B on Testbed A: AG_MP(x) = 664 us + 5.38e-10 s per fp32 element · x, i.e.
  // 1.345e-10 s per byte of the gathered x (calibrations/parm-testbed-a.json). Bound on the run's
  // MP group, the simulated ring all-gather of that group (x/n bytes from each of n ranks) must
  // cost exactly that, for N_MP = 2 (1 ring step of α) and N_MP = 4 (3 steps of α/3), so
  // Algorithm 1 and the simulation read one network.
  const auto sc = test::loader().load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/parm-table3-a.json");
  const auto topo = sc.topology();  // 2 sockets × 4 GPUs
  const calibration::Profile& p = *sc.calibration;
  cluster::LinkGraph graph(topo);
  for (const std::vector<std::uint32_t>& mp : {std::vector<std::uint32_t>{0, 1}, std::vector<std::uint32_t>{0, 1, 2, 3}}) {
    auto params = network::AlphaBetaTable::from_topology(topo, graph);
    const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, {{"mp", mp}}, params);
    ASSERT_EQ(report.at("used").size(), 1u) << report.dump();
    EXPECT_EQ(report.at("used")[0].at("entry"), "all_gather group=mp");
    EXPECT_EQ(report.at("used")[0].at("sets"), "all_gather at level gpu");
    EXPECT_EQ(report.at("used")[0].at("steps"), static_cast<double>(mp.size() - 1));
    const network::AnalyticModel model(topo, params);
    for (double x : {4.0 * 1024 * 1024, 256.0 * 1024 * 1024}) {
      network::CollectiveOp op;
      op.kind = CollectiveKind::AllGather;
      op.algorithm = network::Algorithm::Ring;
      op.bytes = x / static_cast<double>(mp.size());
      EXPECT_NEAR(time_to_seconds(model.cost(op, mp).duration), 664e-6 + 1.345e-10 * x, 1e-9) << mp.size() << " " << x;
    }
  }
  // A group the strategy does not form, and a group of one GPU (N_MP = 1), bind nothing.
  for (const std::map<std::string, std::vector<std::uint32_t>>& groups :
       {std::map<std::string, std::vector<std::uint32_t>>{}, std::map<std::string, std::vector<std::uint32_t>>{{"mp", {0}}}}) {
    auto params = network::AlphaBetaTable::from_topology(topo, graph);
    const auto report = simulation::bind_collectives(p, topo, network::Algorithm::Ring, groups, params);
    EXPECT_EQ(report.at("used").size(), 0u);
    ASSERT_EQ(report.at("not_used").size(), 1u);
    EXPECT_NE(report.at("not_used")[0].at("reason").get<std::string>().find(groups.empty() ? "forms no group named \"mp\""
                                                                                          : "a group of one GPU"),
              std::string::npos)
        << report.dump();
  }
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

TEST(CalibrationBinding, MemoryBoundLineSetsTheComputeModel) {
  // A profile's memory-bound line (3 us + bytes at 2 TB/s) replaces the model's constants: a
  // 20 MB kernel takes 3 us + 10 us; the report and the kernel sources say so.
  calibration::Profile p;
  p.name = "t";
  p.provenance = {{"source", "test"}, {"gpu", "Test GPU"}};
  p.memory_bound = calibration::MemoryBoundFit{3e-6, 2e12, 10, {0.05, 0.1}, "k.json"};
  cluster::GpuSpec gpu = test::any_gpu();
  gpu.name = "Test GPU";
  schema::Json report;
  const compute::ComputeModel cm(gpu, {}, simulation::bind_kernels(p, gpu, cluster::Dtype::bf16, report));
  EXPECT_EQ(cm.memory_bound(20e6), 13 * kMicrosecond);
  EXPECT_NE(report.at("memory_bound").get<std::string>().find("2000 GB/s"), std::string::npos);
  const auto sources = cm.kernel_sources();
  EXPECT_NE(sources.back().second.find("its line measured"), std::string::npos);
  // Without the line: the model's constants.
  const compute::ComputeModel model(gpu, {});
  EXPECT_EQ(model.memory_bound(20e6), compute::kMemoryKernelOverhead +
                                          seconds_to_time(20e6 / (compute::kHbmEfficiency * gpu.hbm_bytes_per_second)));
}

TEST(CalibrationBinding, RefusesATableFasterThanTheGpusPeak) {
  // XLA's f32 matmuls on H100 run on TF32 tensor cores: 402 TFLOP/s filed as fp32 is 6× the
  // 67 TFLOP/s fp32 peak. A scenario in fp32 must be told, with the profile file and the fix.
  calibration::Profile p;
  p.name = "t";
  p.file = "calibrations/t.json";
  p.provenance = {{"source", "test"}, {"gpu", "Test GPU"}};
  calibration::GemmTable g;
  g.dtype = "fp32";
  g.table = calibration::LogTable({{1024, 1024, 1024}, {4096, 4096, 4096}}, {{200e12}, {402e12}});
  p.gemm.push_back(g);
  cluster::GpuSpec gpu = test::any_gpu();
  gpu.name = "Test GPU";
  gpu.peak_flops[static_cast<std::size_t>(cluster::Dtype::fp32)] = 67e12;
  schema::Json report;
  try {
    simulation::bind_kernels(p, gpu, cluster::Dtype::fp32, report);
    FAIL() << "accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "calibrations/t.json");
    EXPECT_EQ(e.path(), "$.gemm (dtype fp32)");
    EXPECT_EQ(e.problem(), "up to 402 TFLOP/s measured, above the fp32 peak of Test GPU (67 TFLOP/s)");
    EXPECT_NE(e.fix().find("--dtype-as fp32=tf32"), std::string::npos);
  }
  // Within 5 % of the peak is accepted (clock and rounding of data-sheet figures).
  p.gemm[0].table = calibration::LogTable({{1024, 1024, 1024}, {4096, 4096, 4096}}, {{60e12}, {70e12}});
  EXPECT_NO_THROW(simulation::bind_kernels(p, gpu, cluster::Dtype::fp32, report));
}

TEST(CalibrationBinding, AttentionTableSetsForwardAndBackward) {
  // A causal bf16 attention table measured on this GPU: 400 TFLOP/s forward, 300 TFLOP/s backward
  // at L = 4096, d = 128. One sequence of 32 heads counts 4·32·4096²·128 / 2 = 1.374e11 FLOPs
  // forward (causal) and 2.5× that backward, so the core takes 1.374e11 / 400e12 = 0.344 ms
  // forward and 3.436e11 / 300e12 = 1.145 ms backward — not 2 × forward (the default backward
  // factor). With FlashAttention the HBM traffic (4·32·4096·128·2 B = 134 MB, 0.134 ms at 1 TB/s;
  // twice that backward) stays below both. Without a table, backward stays 2 × forward.
  calibration::Profile p;
  p.name = "t";
  p.provenance = {{"source", "test"}, {"gpu", "Test GPU"}};
  calibration::AttentionTable a;
  a.dtype = "bf16";
  a.causal = true;
  a.table = calibration::LogTable({{4096, 128, 1}}, {{400e12, 300e12}});
  p.attention.push_back(a);
  cluster::GpuSpec gpu = test::any_gpu();
  gpu.name = "Test GPU";
  gpu.flash_attention = true;
  schema::Json report;
  const compute::ComputeModel cm(gpu, {}, simulation::bind_kernels(p, gpu, cluster::Dtype::bf16, report));
  const double flops = 4.0 * 32 * 4096.0 * 4096 * 128 / 2;
  EXPECT_NEAR(time_to_seconds(cm.attention(1, 32, 4096, 128, true)), flops / 400e12, 1e-12);
  EXPECT_NEAR(time_to_seconds(cm.attention_backward(1, 32, 4096, 128, true)), 2.5 * flops / 300e12, 1e-12);
  EXPECT_EQ(report.at("attention").get<std::string>(), "bf16 forward and backward table (causal)");
  // A full-mask query falls back on the causal table's FLOP/s (the only one measured).
  EXPECT_NEAR(time_to_seconds(cm.attention(1, 32, 4096, 128, false)), 2 * flops / 400e12, 1e-12);
  // Without a table the backward's 2.5× FLOPs run at kAttentionBackwardToForward (0.8) of the
  // forward's efficiency: 2.5 / 0.8 = 3.125 times the forward's compute, each plus its fixed cost.
  const compute::ComputeModel roofline(gpu, {});
  const double forward_core = static_cast<double>(roofline.attention(1, 32, 4096, 128, true) - compute::kKernelOverhead);
  EXPECT_NEAR(static_cast<double>(roofline.attention_backward(1, 32, 4096, 128, true) - compute::kKernelOverhead),
              2.5 / 0.8 * forward_core, 2.0);
}

TEST(CalibrationBinding, EpBackwardAttentionTakesTheMeasuredBackwardThroughput) {
  // The ep schedule of one MoE layer on 2 H100s is serial (ep_strategy_test spells it out), so an
  // attention table changes the iteration by exactly what it changes in the attention core:
  // (F_t − F_r) forward and (B_t − B_r) backward, F_r and B_r being the model's forward and backward
  // core, F_t and B_t the table's. Table: causal bf16 at L = 128, d = 64, forward 10 TFLOP/s, backward 4 TFLOP/s
  // (low, so the core is compute bound); one sequence of 4 heads counts 4·4·128²·64 / 2 = 8.39e6
  // FLOPs forward: F_t = 0.839 us, B_t = 2.5 · 8.39e6 / 4e12 = 5.24 us.
  calibration::Profile p;
  p.name = "attention-only";
  p.provenance = {{"source", "test"}, {"gpu", "NVIDIA H100 SXM5 80GB"}};
  calibration::AttentionTable a;
  a.dtype = "bf16";
  a.causal = true;
  a.table = calibration::LogTable({{128, 64, 1}}, {{10e12, 4e12}});
  p.attention.push_back(a);
  const auto dir = std::filesystem::temp_directory_path() / "moesim-attention-profile";
  std::filesystem::create_directories(dir);
  const auto profile = (dir / "attention.json").string();
  std::ofstream(profile) << calibration::profile_to_json(p).dump();

  auto doc = schema::Json::parse(test::kSmallEp);  // as in ep_strategy_test's serial schedule
  doc["cluster"]["levels"][0]["count"] = 2;
  doc["model"]["layers"] = 1;
  doc["model"]["experts"] = 2;
  const auto iteration = [](const schema::Json& d) {
    simulation::Simulation sim(test::scenario_from(d.dump()));
    sim.run();
    return sim.metrics().iteration_time[0];
  };
  const Time plain = iteration(doc);
  doc["calibration"] = profile;
  const Time calibrated = iteration(doc);
  const auto sc = test::scenario_from(doc.dump());
  std::filesystem::remove_all(dir);

  // The plain run's attention: the catalogue's measured H100 kernels, which the profile replaces.
  const compute::ComputeModel plain_model = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  const Time f_r = plain_model.attention(1, 4, 128, 64, true), b_r = plain_model.attention_backward(1, 4, 128, 64, true);
  const double flops = 4.0 * 4 * 128 * 128 * 64 / 2;
  const Time f_t = seconds_to_time(flops / 10e12), b_t = seconds_to_time(2.5 * flops / 4e12);
  EXPECT_NEAR(static_cast<double>(calibrated - plain), static_cast<double>((f_t - f_r) + (b_t - b_r)), 2.0);
  EXPECT_NE(b_t, 2 * f_t);  // the backward is not the forward's double
}

}  // namespace
}  // namespace moesim
