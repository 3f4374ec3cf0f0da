// `moesim calibrate fit` as a user runs it: a real nccl-tests log in, a profile out that a scenario
// can name; bad input exits 2 with the file and place, and writes nothing.
#include "cli_test_support.hpp"

namespace moesim_cli {
namespace {

const fs::path kLogs = kSourceDir / "tests" / "data" / "realdata";

class CalibrateFit : public CliTest {};

TEST_F(CalibrateFit, FitsARealLogIntoAProfile) {
  const fs::path out = work_ / "b200.json";
  fs::create_directories(work_);
  const Result r = moesim({"calibrate", "fit",
                           (kLogs / "19_b200_hgx_vultr_8gpu_and_2node16gpu_ib_allreduce_allgather_alltoall_fullsweep.txt").string(),
                           "--gpus-per-node", "8", "--gpu", "NVIDIA B200", "--out", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  // One summary line per entry: 3 collectives × (8 ranks on 1 node, 16 on 2).
  EXPECT_NE(r.out.find("all_to_all         16     2"), std::string::npos) << r.out;
  const auto p = Json::parse(read_text(out));
  EXPECT_EQ(p.at("collectives").size(), 6u);
  EXPECT_EQ(p.at("provenance").at("gpu"), "NVIDIA B200");
  // The committed profile is this output (regenerate it with the command in docs/calibration.md).
  // (The input paths in fit.sources differ with the folder the command ran in.)
  auto committed = Json::parse(read_text(kSourceDir / "calibrations" / "b200-vultr-nccl-tests.json")).at("collectives");
  auto fresh = p.at("collectives");
  for (auto* list : {&committed, &fresh})
    for (auto& e : *list) e.at("fit").erase("sources");
  EXPECT_EQ(fresh, committed);
}

TEST_F(CalibrateFit, BadInputExits2AndWritesNothing) {
  fs::create_directories(work_);
  const fs::path out = work_ / "p.json";
  // Too few sizes.
  write_text(work_ / "few.json", R"({"format": "moesim-measurements/1", "provenance": {"gpu": "x"}, "units": {"time": "us"},
    "collectives": [{"collective": "all_reduce", "ranks": 8, "nodes": 1,
                     "samples": [{"bytes": 1024, "time": 10}, {"bytes": 2048, "time": 11}]}]})");
  Result r = moesim({"calibrate", "fit", (work_ / "few.json").string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("few.json: $.collectives[0]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("measure more sizes"), std::string::npos) << r.err;
  // A negative time names its sample.
  write_text(work_ / "neg.json", R"({"format": "moesim-measurements/1", "provenance": {}, "units": {"time": "us"},
    "gemm": [{"dtype": "bf16", "m": 1024, "n": 1024, "k": 1024, "time": -3}]})");
  r = moesim({"calibrate", "fit", (work_ / "neg.json").string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("$.gemm[0].time"), std::string::npos) << r.err;
  // A log that names no collective, and an unknown time unit.
  write_text(work_ / "anon.log", "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                                 "1048576 262144 float sum -1 28.56 36.71 64.24 0 28.37 36.96 64.68 0\n");
  r = moesim({"calibrate", "fit", (work_ / "anon.log").string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--collective"), std::string::npos) << r.err;
  write_text(work_ / "unit.json", R"({"format": "moesim-measurements/1", "provenance": {}, "units": {"time": "minutes"}})");
  r = moesim({"calibrate", "fit", (work_ / "unit.json").string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("$.units.time"), std::string::npos) << r.err;
  // 1440 ranks of alltoall, no Rank lines: the printed bandwidths cannot tell n from n ± 1.
  write_text(work_ / "big.log", "# alltoall_perf\n# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                                "1000000000 173611 float none -1 10000 100.00 99.93 0 10000 100.00 99.93 0\n");
  r = moesim({"calibrate", "fit", (work_ / "big.log").string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("big.log: table 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pass --ranks N"), std::string::npos) << r.err;
  r = moesim({"calibrate", "fit", (work_ / "big.log").string(), "--ranks", "1", "--out", out.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--ranks must be between 2 and"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(listing(work_), (std::set<std::string>{"anon.log", "big.log", "few.json", "neg.json", "unit.json"}));
}

TEST_F(CalibrateFit, RanksAndNodesStatedForALogWithoutRankLines) {
  // The same 1440-rank table with the job's size given: one entry of 1440 ranks on 180 nodes.
  fs::create_directories(work_);
  write_text(work_ / "big.log", "# alltoall_perf\n# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                                "1000 0 float none -1 400 0.00 0.00 0 400 0.00 0.00 0\n"
                                "1000000 173 float none -1 500 2.00 2.00 0 500 2.00 2.00 0\n"
                                "10000000 1736 float none -1 1200 8.33 8.33 0 1200 8.33 8.33 0\n"
                                "100000000 17361 float none -1 2000 50.00 49.97 0 2000 50.00 49.97 0\n"
                                "1000000000 173611 float none -1 10000 100.00 99.93 0 10000 100.00 99.93 0\n");
  const fs::path out = work_ / "p.json";
  const Result r = moesim({"calibrate", "fit", (work_ / "big.log").string(), "--ranks", "1440", "--nodes", "180", "--out", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  const auto p = Json::parse(read_text(out));
  EXPECT_EQ(p.at("collectives")[0].at("ranks"), 1440);
  EXPECT_EQ(p.at("collectives")[0].at("nodes"), 180);
}

TEST_F(CalibrateFit, FitsXlasGemmTableIntoAProfile) {
  // OpenXLA's H100 matmul table (CSV): 125 single-GeMM shapes per dtype, the f32 column filed as
  // tf32 (Hopper runs XLA's f32 matmuls on TF32 tensor cores: 402 TFLOP/s, 6× the fp32 peak).
  const fs::path out = work_ / "h100.json";
  fs::create_directories(work_);
  const Result r = moesim({"calibrate", "fit", (kLogs / "20_xla_h100_sm90_bf16_f32_gemm_flops_grid.csv").string(), "--dtype-as",
                           "fp32=tf32", "--gpu", "NVIDIA H100 SXM5", "--name", "h100-xla-gemm", "--out", out.string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("gemm bf16   125 shapes, 6–783 TFLOP/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gemm tf32   125 shapes, 6–402 TFLOP/s"), std::string::npos) << r.out;
  const auto p = Json::parse(read_text(out));
  EXPECT_EQ(p.at("provenance").at("dtype_as").at("fp32"), "tf32");
  // The committed profile is this output (the command is in docs/calibration.md).
  const auto committed = Json::parse(read_text(kSourceDir / "calibrations" / "h100-xla-gemm.json"));
  EXPECT_EQ(p.at("gemm").size(), committed.at("gemm").size());
  for (std::size_t i = 0; i < p.at("gemm").size(); ++i)
    EXPECT_EQ(p.at("gemm")[i].at("points"), committed.at("gemm")[i].at("points"));
}

TEST_F(CalibrateFit, BadGemmTableExits2AndWritesNothing) {
  fs::create_directories(work_);
  const fs::path out = work_ / "p.json";
  write_text(work_ / "cells.csv", "m,n,k,bf16_time_us\n1024,1024,1024,10\n2048,2048,2048,fast\n");
  Result r = moesim({"calibrate", "fit", (work_ / "cells.csv").string(), "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("cells.csv: line 3, column 4 (bf16_time_us): `fast` is not a positive number"), std::string::npos) << r.err;
  r = moesim({"calibrate", "fit", (work_ / "cells.csv").string(), "--dtype-as", "fp32=fp64", "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--dtype-as fp32=fp64: expected FROM=TO"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(listing(work_), (std::set<std::string>{"cells.csv"}));
}

TEST_F(CalibrateFit, DtypeRulesThatClashAreRefused) {
  // XLA's table measures bf16 and f32: filing f32 under bf16 silently merged the two tables, and a
  // repeated rule kept the last (issue 45). Both exit 2 and write nothing.
  fs::create_directories(work_);
  const fs::path out = work_ / "p.json";
  const std::string table = (kLogs / "20_xla_h100_sm90_bf16_f32_gemm_flops_grid.csv").string();
  Result r = moesim({"calibrate", "fit", table, "--dtype-as", "fp32=bf16", "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("moesim: error: --dtype-as: fp32=bf16: the inputs measure bf16 GeMMs too"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("would merge two tables; drop the rule"), std::string::npos) << r.err;
  r = moesim({"calibrate", "fit", table, "--dtype-as", "fp32=tf32", "--dtype-as", "fp32=fp16", "--out", out.string()});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--dtype-as fp32=fp16: fp32 is already filed as tf32; give one rule per dtype"), std::string::npos) << r.err;
  EXPECT_TRUE(listing(work_).empty());
}

TEST_F(CalibrateFit, ARunSaysWhatItsProfileChangedAndWhatNot) {
  // The committed profile of realdata 19 (all_to_all, all_gather and all_reduce measured on 8 GPUs
  // of one node and 16 of two) on one node of 8 B200: the 16-GPU entries cannot be placed; the
  // 8-GPU ones set their kinds at level gpu. Expert parallelism without sharding runs all-to-alls
  // and the dense gradients' all-reduce there, but no all-gather: that entry binds and changes
  // nothing. Each is said on stderr, in the summary and in results.json.
  fs::create_directories(work_);
  const fs::path sc = scenario("idle.json", fmt::format(R"({{"name": "idle-profile",
    "cluster": {{"gpu": "b200-sxm-180gb", "levels": [{{"name": "gpu", "count": 8, "bandwidth": "900GB/s", "latency": "1us"}}]}},
    "model": {{"preset": "gpt-medium-moe"}}, "training": {{"sequence_length": 1024}}, "strategy": {{"name": "ep"}},
    "calibration": "{}"}})", (kSourceDir / "calibrations" / "b200-vultr-nccl-tests.json").string()));
  const Result r = moesim({"run", sc.string(), "--out", (work_ / "out").string()});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find("entry \"all_gather ranks=8 nodes=1\" replaced nothing: no all_gather of this run crosses level gpu"),
            std::string::npos)
      << r.err;
  for (const char* kind : {"all_gather", "all_reduce", "all_to_all"})
    EXPECT_NE(r.err.find(fmt::format("entry \"{} ranks=16 nodes=2\" not used: its shape (16 ranks on 2 nodes) does not fit", kind)),
              std::string::npos)
        << r.err;
  EXPECT_EQ(r.err.find("ranks=8 nodes=1\" not used"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("b200-vultr-nccl-tests: 2 collective entries costed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 replaced nothing"), std::string::npos) << r.out;
  const auto results = Json::parse(read_text(work_ / "out" / "results.json"));
  std::map<std::string, Json> used;
  for (const auto& u : results.at("calibration").at("collectives").at("used")) used[u.at("entry")] = u;
  ASSERT_EQ(used.size(), 3u);
  EXPECT_GT(used.at("all_to_all ranks=8 nodes=1").at("applied_to_steps").get<int>(), 0);
  EXPECT_GT(used.at("all_reduce ranks=8 nodes=1").at("applied_to_steps").get<int>(), 0);
  EXPECT_EQ(used.at("all_gather ranks=8 nodes=1").at("applied_to_steps").get<int>(), 0);
  EXPECT_TRUE(used.at("all_gather ranks=8 nodes=1").contains("replaced_nothing"));
  EXPECT_FALSE(used.at("all_to_all ranks=8 nodes=1").contains("replaced_nothing"));
  EXPECT_EQ(results.at("warnings").size(), 4u);
}

TEST_F(CalibrateFit, CompareUncalibratedRunsTheScenarioWithoutItsProfile) {
  // scenarios/calibrated-b200.json with --compare-uncalibrated: the table holds both runs, the
  // second being the same scenario with "calibration" removed (run here as its own scenario), and
  // results.json keeps the uncalibrated headline beside the calibrated one.
  fs::create_directories(work_);
  auto doc = Json::parse(read_text(kSourceDir / "scenarios" / "calibrated-b200.json"));
  doc["calibration"] = (kSourceDir / "calibrations" / "b200-vultr-nccl-tests.json").string();
  const fs::path with = scenario("with.json", doc.dump());
  doc.erase("calibration");
  const fs::path without = scenario("without.json", doc.dump());
  Result r = moesim({"run", with.string(), "--out", (work_ / "with").string(), "--compare-uncalibrated"});
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("with its profile and without (--compare-uncalibrated)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("uncalibrated"), std::string::npos) << r.out;
  ASSERT_EQ(moesim({"run", without.string(), "--out", (work_ / "without").string()}).code, 0);
  const auto calibrated = Json::parse(read_text(work_ / "with" / "results.json"));
  const auto plain = Json::parse(read_text(work_ / "without" / "results.json"));
  EXPECT_DOUBLE_EQ(calibrated.at("uncalibrated").at("iteration_time_ms").get<double>(), plain.at("iteration_time_ms").get<double>());
  // The profile's all-to-all and all-reduce entries price this run's collectives: the two differ.
  EXPECT_NE(calibrated.at("iteration_time_ms").get<double>(), plain.at("iteration_time_ms").get<double>());
  EXPECT_FALSE(plain.contains("uncalibrated"));
  // A scenario without a profile has nothing to compare: exit 2, the file and field named, nothing written.
  r = moesim({"run", without.string(), "--out", (work_ / "none").string(), "--compare-uncalibrated"});
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("without.json: $.calibration: is not set"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work_ / "none"));
}

}  // namespace
}  // namespace moesim_cli
