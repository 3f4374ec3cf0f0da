// The fitter (calibrate/fit): synthetic α-β recovery, noise and outliers, piecewise splits, refusals,
// and the nccl-tests importer with held-out prediction on the real logs of tests/data/realdata.
#include <gtest/gtest.h>

#include <cmath>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <numeric>
#include <set>
#include <sstream>

#include "calibrate/fit/gemm_table_csv.hpp"
#include "calibrate/fit/nccl_tests_log.hpp"
#include "calibrate/fit/piecewise_fit.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/compute/compute_model.hpp"
#include "sim/core/error.hpp"
#include "test_support.hpp"

namespace moesim::calibrate {
namespace {

std::vector<Sample> line_samples(double alpha, double beta, double from = 8, double to = 1 << 30) {
  std::vector<Sample> s;
  for (double x = from; x <= to; x *= 2) s.push_back({x, alpha + beta * x, ""});
  return s;
}

using test::realdata;

TEST(PiecewiseFit, RecoversExactAlphaBetaAsOneLine) {
  // t = 20 us + x / (150 GB/s) over 8 B .. 1 GiB: one piece, α and β to 1e-6 relative.
  const double alpha = 20e-6, beta = 1.0 / 150e9;
  const PiecewiseFit f = fit_piecewise(line_samples(alpha, beta));
  ASSERT_EQ(f.pieces.size(), 1u);
  EXPECT_NEAR(f.pieces[0].alpha, alpha, 1e-6 * alpha);
  EXPECT_NEAR(f.pieces[0].beta, beta, 1e-6 * beta);
  EXPECT_LT(f.max_relative_error, 1e-9);
  EXPECT_EQ(f.sizes, 28);
}

TEST(PiecewiseFit, NoiseAndOutliers) {
  // 2% multiplicative noise on both "columns" and three spikes of 4× (as nccl-tests issue 309's
  // 1272 us among 300 us): α, β within a few percent, the spikes dropped and reported.
  const double alpha = 35e-6, beta = 1.0 / 40e9;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<Sample> s;
  for (double x = 1 << 10; x <= double(1 << 30); x *= 2)
    for (int col = 0; col < 2; ++col) s.push_back({x, (alpha + beta * x) * (1 + noise(rng)), ""});
  s[7].seconds *= 4;
  s[20].seconds *= 4;
  s[33].seconds *= 4;
  const PiecewiseFit f = fit_piecewise(s);
  ASSERT_EQ(f.pieces.size(), 1u);
  EXPECT_NEAR(f.pieces[0].alpha, alpha, 0.05 * alpha);
  EXPECT_NEAR(f.pieces[0].beta, beta, 0.02 * beta);
  EXPECT_EQ(f.pieces[0].dropped.size(), 3u);
  EXPECT_LT(f.rms_relative_error, 0.03);
}

TEST(PiecewiseFit, SplitsWhereTheProtocolChanges) {
  // Two regimes, as NCCL's LL below 64 KiB and Simple above: 5 us + x/2 GB/s, then 30 us + x/100 GB/s.
  // The fit splits between 32 KiB and 64 KiB, recovers both lines and bridges the gap with the line
  // through their values there: 5 us + 32 KiB/2 GB/s = 21.38 us and 30 us + 64 KiB/100 GB/s = 30.66 us.
  std::vector<Sample> s = line_samples(5e-6, 1 / 2e9, 8, 32768);
  for (const Sample& x : line_samples(30e-6, 1 / 100e9, 65536, 1 << 30)) s.push_back(x);
  const PiecewiseFit f = fit_piecewise(s);
  ASSERT_EQ(f.pieces.size(), 3u);
  EXPECT_TRUE(f.pieces[1].bridge);
  EXPECT_EQ(f.pieces[1].from_bytes, 32768);
  EXPECT_EQ(f.pieces[2].from_bytes, 65536);
  EXPECT_NEAR(f.pieces[0].alpha, 5e-6, 5e-12);
  EXPECT_NEAR(f.pieces[2].beta, 1 / 100e9, 1e-6 / 100e9);
  EXPECT_NEAR(f.predict(49152), (5e-6 + 32768 / 2e9 + 30e-6 + 65536 / 100e9) / 2, 1e-12);
  EXPECT_NEAR(f.predict(1 << 20), 30e-6 + (1 << 20) / 100e9, 1e-12);
}

Measurements one_series(std::vector<Sample> samples, std::string unit = "us") {
  Measurements m;
  m.file = "m.json";
  Series s;
  s.collective = "all_reduce";
  s.ranks = 8;
  s.nodes = 1;
  s.time_unit = std::move(unit);
  s.file = "m.json";
  s.where = "$.collectives[0]";
  s.samples = std::move(samples);
  m.series.push_back(s);
  return m;
}

TEST(ProfileBuilder, RefusesTooFewPointsNonMonotoneAndMixedUnits) {
  try {
    build_profile({one_series(line_samples(1e-5, 1e-10, 8, 32))}, {});  // 8, 16, 32: three sizes
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "m.json");
    EXPECT_NE(std::string(e.what()).find("3 message size(s)"), std::string::npos) << e.what();
  }
  auto shuffled = line_samples(1e-5, 1e-9, 8, 1 << 20);
  shuffled[10].seconds = shuffled[9].seconds * 0.3;  // 8 KiB faster than 4 KiB by 70%
  shuffled[10].where = "$.collectives[0].samples[10]";
  try {
    build_profile({one_series(shuffled)}, {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.collectives[0].samples[10]");
    EXPECT_NE(e.problem().find("times fall with the size"), std::string::npos);
  }
  auto negative = line_samples(1e-5, 1e-9);
  negative[3].seconds = -1e-6;
  EXPECT_THROW(build_profile({one_series(negative)}, {}), InputError);
  Measurements a = one_series(line_samples(1e-5, 1e-9), "us"), b = one_series(line_samples(1e-5, 1e-9), "ms");
  b.file = b.series[0].file = "b.json";
  try {
    build_profile({a, b}, {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "b.json");
    EXPECT_NE(e.problem().find("mixed units"), std::string::npos) << e.problem();
  }
}

TEST(ProfileBuilder, MeasurementsJsonToProfileRoundTrip) {
  // The calibration binaries' format: times in us; all_reduce 8 ranks t = 12 us + x / 200 GB/s.
  schema::Json doc = {{"format", "moesim-measurements/1"},
                      {"provenance", {{"gpu", "NVIDIA H200"}, {"gpu_count", 8}}},
                      {"units", {{"time", "us"}}},
                      {"collectives", schema::Json::array()},
                      {"gemm", schema::Json::array()}};
  schema::Json samples = schema::Json::array();
  for (double x = 1024; x <= 1 << 30; x *= 4) samples.push_back({{"bytes", x}, {"time", 12 + x / 200e9 * 1e6}});
  doc["collectives"].push_back({{"collective", "all_reduce"}, {"ranks", 8}, {"nodes", 1}, {"samples", samples}});
  // A 2×2×2 GeMM grid at 400 and 800 TFLOP/s.
  for (double m : {1024.0, 4096.0})
    for (double n : {1024.0, 4096.0})
      for (double k : {1024.0, 4096.0}) {
        const double rate = (m == 4096 ? 800e12 : 400e12);
        doc["gemm"].push_back({{"dtype", "bf16"}, {"m", m}, {"n", n}, {"k", k}, {"time", 2 * m * n * k / rate * 1e6}});
      }
  const calibration::Profile p = build_profile({read_measurements(doc, "h.json")}, {});
  ASSERT_EQ(p.collectives.size(), 1u);
  const auto& e = p.collectives[0];
  EXPECT_EQ(e.label(), "all_reduce ranks=8 nodes=1");
  ASSERT_EQ(e.segments.size(), 1u);
  EXPECT_NEAR(e.segments[0].alpha_s, 12e-6, 12e-12);
  EXPECT_NEAR(e.segments[0].beta_s_per_byte, 1 / 200e9, 1e-6 / 200e9);
  ASSERT_EQ(p.gemm.size(), 1u);
  // Midway in log2(M) between 400 and 800: the geometric mean, 565.7 TFLOP/s.
  EXPECT_NEAR(p.gemm[0].flops_per_second(2048, 1024, 1024), std::sqrt(400e12 * 800e12), 1e3);
  const calibration::Profile back = calibration::parse_profile(calibration::profile_to_json(p), "back.json");
  EXPECT_NEAR(back.collectives[0].seconds(1 << 20), e.seconds(1 << 20), 1e-15);
  EXPECT_NEAR(back.gemm[0].flops_per_second(4096, 4096, 4096), 800e12, 1e3);
}

TEST(ProfileBuilder, MemoryBoundKernelsGiveTheModelsLine) {
  // Kernels on an exact line, 2 us a launch + bytes at 3 TB/s, one of them an op of two launches:
  // the relative least-squares fit gives the line back, and the profile round-trips it. Kernels of
  // other rules (a scatter) and sections no profile holds (host launches) are named, not fitted.
  schema::Json doc = {{"format", "moesim-measurements/1"}, {"provenance", {{"gpu", "Test GPU"}}}, {"units", {{"time", "us"}}}};
  doc["kernels"] = schema::Json::array();
  for (double bytes : {1e6, 1e7, 1e8, 1e9})
    doc["kernels"].push_back({{"kernel", "copy"}, {"bytes", bytes}, {"time", 2 + bytes / 3e12 * 1e6}});
  doc["kernels"].push_back({{"kernel", "swiglu_eager"}, {"bytes", 5e8}, {"time", 4 + 5e8 / 3e12 * 1e6}, {"kernels", 2}});
  doc["kernels"].push_back({{"kernel", "scatter_rows"}, {"bytes", 5e8}, {"time", 1e4}});
  doc["launch"] = {{"eager_ops", schema::Json::array()}};
  const Measurements m = read_measurements(doc, "k.json");
  EXPECT_EQ(m.memory_kernels.size(), 5u);
  ASSERT_EQ(m.not_fitted.size(), 2u);
  EXPECT_NE(m.not_fitted[0].find("scatter_rows"), std::string::npos);
  EXPECT_NE(m.not_fitted[1].find("$.launch"), std::string::npos);
  const calibration::Profile p = build_profile({m}, {});
  ASSERT_TRUE(p.memory_bound);
  EXPECT_NEAR(p.memory_bound->fixed_s, 2e-6, 1e-12);
  EXPECT_NEAR(p.memory_bound->bytes_per_second, 3e12, 1e3);
  EXPECT_LT(p.memory_bound->error.max, 1e-9);  // leave-one-out on an exact line
  EXPECT_EQ(p.provenance.at("not_fitted").size(), 2u);
  const calibration::Profile back = calibration::parse_profile(calibration::profile_to_json(p), "back.json");
  ASSERT_TRUE(back.memory_bound);
  EXPECT_NEAR(back.memory_bound->fixed_s, 2e-6, 1e-11);
  EXPECT_NEAR(back.memory_bound->bytes_per_second, 3e12, 1e3);
}

TEST(ProfileBuilder, AttentionTablesAreOneImplementations) {
  // Timings of two kernels (cuDNN's fused attention and the unfused cuBLAS path) at the same shapes
  // would interpolate between them: refused, naming both and --attention; with it, the table is
  // the chosen kernel's alone (its forward at 300 TFLOP/s where the other ran at 100).
  schema::Json doc = {{"format", "moesim-measurements/1"}, {"provenance", {{"gpu", "Test GPU"}}}, {"units", {{"time", "us"}}}};
  doc["attention"] = schema::Json::array();
  for (const auto& [impl, rate] : {std::pair{"cudnn-fused-sdpa", 300e12}, std::pair{"cublas-unfused", 100e12}})
    for (double seq : {2048.0, 4096.0}) {
      const double f = compute::attention_forward_flops(1, 32, seq, 128, true);
      doc["attention"].push_back({{"dtype", "bf16"}, {"batch", 1}, {"heads", 32}, {"seq", seq}, {"head_dim", 128}, {"causal", true},
                                  {"forward", f / rate * 1e6}, {"backward", 2.5 * f / rate * 1e6}, {"implementation", impl}});
    }
  const Measurements m = read_measurements(doc, "a.json");
  try {
    build_profile({m}, {});
    ADD_FAILURE() << "two implementations fitted into one table";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cudnn-fused-sdpa"), std::string::npos) << what;
    EXPECT_NE(what.find("cublas-unfused"), std::string::npos) << what;
    EXPECT_NE(what.find("--attention"), std::string::npos) << what;
  }
  BuildOptions o;
  o.attention_implementation = "cudnn-fused-sdpa";
  const calibration::Profile p = build_profile({m}, o);
  ASSERT_EQ(p.attention.size(), 1u);
  EXPECT_NEAR(p.attention[0].table.at({3000, 128, 1}, 0), 300e12, 1e3);
  o.attention_implementation = "flash";
  EXPECT_THROW(build_profile({m}, o), InputError);
}

TEST(ProfileBuilder, MeasuredH100MemoryBoundKernelsGiveTheModelsConstants) {
  // compute::kMemoryKernelOverhead (2.34 us) and kHbmEfficiency (0.814 of the H100's 3.35 TB/s)
  // were fitted by this rule to this project's H100 kernels: `calibrate fit` on that file gives
  // them back, and on the H200's file its own line (2.9 us, 3.6 TB/s: 0.75 of its 4.8, where
  // the model carries 0.814; tests/unit/compute_test.cpp MeasuredH200MemoryBoundKernels).
  const auto fit = [](const char* file) {
    return *build_profile({read_measurements(schema::Json::parse(test::measured(file)), file)}, {}).memory_bound;
  };
  const calibration::MemoryBoundFit h100 = fit("h100-memory-bound-kernels.json");
  EXPECT_EQ(h100.kernels, 43);
  EXPECT_NEAR(h100.fixed_s, 2.34e-6, 0.05e-6);
  EXPECT_NEAR(h100.bytes_per_second / 3.35e12, 0.814, 0.01);
  const calibration::MemoryBoundFit h200 = fit("h200-memory-bound-kernels.json");
  EXPECT_NEAR(h200.bytes_per_second / 4.8e12, 0.75, 0.02);
  // One line per GPU leaves what the SM-bound kernels (eager SwiGLU, RMSNorm) do apart from copies:
  // 16 and 18 % leave-one-out mean error.
  EXPECT_LT(h100.error.mean, 0.17);
  EXPECT_LT(h200.error.mean, 0.19);
}

TEST(NcclTestsLog, ReadsRanksNodesAndBothColumns) {
  // 09: 8 H100 on one node (Rank lines absent; Open MPI prefixes), all_reduce 8 B .. 16 GiB.
  const auto s = read_nccl_tests_log(realdata("09_aws_p5_h100_8gpu_nvlink_allreduce_awsbatch.txt"), "09", {.collective = "", .gpus_per_node = 8, .table = {}, .ranks = {}, .nodes = {}});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].collective, "all_reduce");
  EXPECT_EQ(s[0].ranks, 8);  // busbw/algbw = 2·7/8 = 1.75
  EXPECT_EQ(s[0].nodes, 1);
  EXPECT_EQ(s[0].samples.size(), 2u * 32);  // 32 sizes, out-of-place and in-place
  EXPECT_DOUBLE_EQ(s[0].samples.back().seconds, 62200e-6);
  // 01: 16 Rank lines on two hosts.
  const auto a = read_nccl_tests_log(realdata("01_h100_a3mega_2node16gpu_allreduce.txt"), "01");
  EXPECT_EQ(a[0].ranks, 16);
  EXPECT_EQ(a[0].nodes, 2);
  EXPECT_EQ(a[0].provenance.at("gpu"), "NVIDIA H100 80GB HBM3");
  // 19: six tables, named by markdown labels, sizes of 0 skipped; alltoall busbw/algbw 15/16.
  const auto b = read_nccl_tests_log(realdata("19_b200_hgx_vultr_8gpu_and_2node16gpu_ib_allreduce_allgather_alltoall_fullsweep.txt"),
                                     "19", {.collective = "", .gpus_per_node = 8, .table = {}, .ranks = {}, .nodes = {}});
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b[2].collective, "all_to_all");
  EXPECT_EQ(b[5].collective, "all_to_all");
  EXPECT_EQ(b[5].ranks, 16);
  EXPECT_EQ(b[5].nodes, 2);
  EXPECT_EQ(b[5].samples.front().bytes, 256);
}

TEST(NcclTestsLog, OneRowsInconsistentCellDoesNotDecideTheRanks) {
  // OCI's 2-host GB200 all-to-all (realdata 25; the log names no collective: --collective): no Rank
  // lines; its in-place algbw of 8 GiB is
  // printed to three decimals, 752.324, beside a busbw of 658.30: 658.30/752.324 = 0.875021, which
  // the digits put at 0.875021 ± 0.000007, beyond 7/8. The other three cells' ratios admit 8 ranks
  // (657.81/751.78, 662.27/756.88, 661.03/755.47 = 7/8 to their digits): the table ran 8 ranks.
  const auto s = read_nccl_tests_log(realdata("25_oci_nccl_scale/oci_GB200_06_nccl_all_to_all_scale_performance_2_hosts_single_rack.txt"),
                                     "25", {.collective = "all_to_all", .gpus_per_node = 4, .table = {}, .ranks = {}, .nodes = {}});
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].collective, "all_to_all");
  EXPECT_EQ(s[0].ranks, 8);
  EXPECT_EQ(s[0].nodes, 2);
  // A table whose every row says 1.6 ranks is still refused (RefusesWhatItCannotRead).
}

TEST(NcclTestsLog, RefusesWhatItCannotRead) {
  const std::string header = "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n";
  // A table of all_gather numbers labelled all_reduce: busbw/algbw = 7/8 is not 2(n−1)/n for any n
  // near it... it is for n = 1.6, which is not a rank count.
  const std::string rows = "1048576 32768 float none -1 20.0 52.43 45.88 0 20.0 52.43 45.88 0\n";
  EXPECT_THROW(read_nccl_tests_log("# all_reduce_perf\n" + header + rows, "x.log"), InputError);
  // Times in milliseconds: refused.
  try {
    read_nccl_tests_log("# alltoall_perf\n" + header + "# (B) (elements) (ms) (GB/s)\n" + rows, "x.log");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(e.problem().find("microseconds"), std::string::npos);
  }
  // No collective named anywhere.
  EXPECT_THROW(read_nccl_tests_log(header + rows, "x.log"), InputError);
  EXPECT_THROW(read_nccl_tests_log("no table here\n", "x.log"), InputError);
}

TEST(NcclTestsLog, RanksOfElidedRankLinesAndOfOneProcess) {
  const std::string header = "# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                             "# (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n";
  // alltoall on 72 ranks: busbw/algbw = 71/72; a paste that kept only the last Rank line, cut.
  const std::string a2a = "1073741824 3728270 float none -1 10000 107.37 105.88 0 10000 107.37 105.88 0\n";
  const auto cut = read_nccl_tests_log("# alltoall_perf\n#  Rank 71 ...\n" + header + a2a, "x.log");
  EXPECT_EQ(cut[0].ranks, 72);
  EXPECT_EQ(cut[0].nodes, 0);  // no hosts known: the profile builder asks for --gpus-per-node
  // 4 of 64 Rank lines kept, "..." between: 64 ranks; the 2 hosts seen are not the nodes.
  std::string some;
  for (int r : {0, 1, 62, 63})
    some += fmt::format("#  Rank {:2d} Group  0 Pid  {} on node{} device  {} [0x1b] NVIDIA H100 80GB HBM3\n", r, 100 + r,
                        r < 8 ? 0 : 7, r % 8);
  const std::string ar64 = "1073741824 268435456 float sum -1 10000 107.37 211.38 0 10000 107.37 211.38 0\n";
  const auto partial = read_nccl_tests_log("# all_reduce_perf\n" + some + "...\n" + header + ar64, "x.log",
                                           {.collective = "", .gpus_per_node = 8, .table = {}, .ranks = {}, .nodes = {}});
  EXPECT_EQ(partial[0].ranks, 64);  // 2·63/64 = 1.96875 = 211.38/107.37 to the digits
  EXPECT_EQ(partial[0].nodes, 8);
  // One process driving 8 GPUs (-g 8), no Rank lines: nThread × nGpus.
  const std::string ar8 = "1073741824 268435456 float sum -1 10000 107.37 187.90 0 10000 107.37 187.90 0\n";
  const auto single = read_nccl_tests_log("# all_reduce_perf\n# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824\n" + header + ar8, "x.log");
  EXPECT_EQ(single[0].ranks, 8);
}

TEST(NcclTestsLog, RefusesARankCountTheBandwidthsCannotTell) {
  // alltoall on 1440 ranks: busbw/algbw = 1439/1440. Printed to 2 decimals (100.00 and 99.93),
  // the ratio 0.9993 is known to ±0.9993·(0.005/99.93 + 0.005/100) = ±9.9965e-5, which
  // 1/(1 − r) maps to n between 1250.06 and 1666.9, ranks 1251 to 1666: n cannot be told from n ± 1, and moesim refuses rather than guess
  // (1437 was the guess before). --ranks 1440 says it; --ranks 1000 contradicts the ratio.
  const std::string log = "# alltoall_perf\n# size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
                          "# (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n"
                          "1000000000 173611 float none -1 10000 100.00 99.93 0 10000 100.00 99.93 0\n";
  try {
    read_nccl_tests_log(log, "x.log");
    FAIL() << "guessed a rank count";
  } catch (const InputError& e) {
    EXPECT_NE(e.problem().find("fits all_to_all ranks from 1251 to 1666"), std::string::npos) << e.problem();
    EXPECT_NE(e.fix().find("--ranks"), std::string::npos);
  }
  const auto stated = read_nccl_tests_log(log, "x.log", {.collective = "", .gpus_per_node = {}, .table = {}, .ranks = 1440, .nodes = 180});
  EXPECT_EQ(stated[0].ranks, 1440);
  EXPECT_EQ(stated[0].nodes, 180);
  EXPECT_THROW(read_nccl_tests_log(log, "x.log", {.collective = "", .gpus_per_node = {}, .table = {}, .ranks = 1000, .nodes = {}}),
               InputError);
}

// Held-out prediction on every real log: fit each table on every other message size, predict the
// others. For sizes ≥ 1 MiB the mean relative error over a log's held-out samples (both columns)
// must stay under 10 %. Log 02 is the exception the data forces: its 2 MiB all-gather takes
// 1650 us between 985 us at 1 MiB and 945 us at 4 MiB, and 128 MiB 1750 us between 1570 and
// 3080 us, so even interpolating the neighbouring measurements misses by more than 10 %; there
// the fit must do no worse than that interpolation (log-log, per-size mean) plus 2 points.
struct HeldOutResult {
  double mean = 0, worst = 0, interpolation = 0;
  int sizes = 0, samples = 0;
};

HeldOutResult held_out(const Series& s) {
  std::vector<double> sizes;
  for (const Sample& x : s.samples)
    if (sizes.empty() || sizes.back() != x.bytes) sizes.push_back(x.bytes);
  std::vector<Sample> train, test;
  std::map<double, std::vector<double>> train_at;
  for (const Sample& x : s.samples) {
    const auto i = std::find(sizes.begin(), sizes.end(), x.bytes) - sizes.begin();
    (i % 2 == 0 ? train : test).push_back(x);
    if (i % 2 == 0) train_at[x.bytes].push_back(x.seconds);
  }
  const PiecewiseFit f = fit_piecewise(train);
  const auto interpolate = [&](double x) {
    auto hi = train_at.lower_bound(x);
    if (hi == train_at.end()) --hi;
    auto lo = hi == train_at.begin() ? hi : std::prev(hi);
    const auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
    if (lo == hi || x >= hi->first) return mean(hi->second);
    const double w = std::log(x / lo->first) / std::log(hi->first / lo->first);
    return std::exp((1 - w) * std::log(mean(lo->second)) + w * std::log(mean(hi->second)));
  };
  HeldOutResult r;
  std::set<double> held;
  for (const Sample& x : test) {
    if (x.bytes < (1 << 20)) continue;
    const double err = std::abs(f.predict(x.bytes) - x.seconds) / x.seconds;
    r.mean += err;
    r.interpolation += std::abs(interpolate(x.bytes) - x.seconds) / x.seconds;
    r.worst = std::max(r.worst, err);
    held.insert(x.bytes);
    ++r.samples;
  }
  r.sizes = static_cast<int>(held.size());
  return r;
}

TEST(NcclTestsLog, HeldOutPredictionOnRealLogs) {
  const std::vector<std::string> logs = {
      "01_h100_a3mega_2node16gpu_allreduce.txt",
      "02_b200_gke_a4_2node16gpu_roce_allgather.txt",
      "08_aws_p4de_a100_and_p5_h100_2node_efa_allreduce.txt",
      "09_aws_p5_h100_8gpu_nvlink_allreduce_awsbatch.txt",
      "10_a100_sxm4_40gb_8gpu_modal_allreduce_single_process.txt",
      "11_l40s_pcie_2gpu_allreduce.txt",
      "11_l40s_pcie_4gpu_allreduce.txt",
      "13_h100_ib_ndr_allreduce_1_2_4_8_nodes_nccl-tests_issue309.txt",
      "19_b200_hgx_vultr_8gpu_and_2node16gpu_ib_allreduce_allgather_alltoall_fullsweep.txt"};
  std::string table =
      "\n| log | table | collective | ranks | nodes | held-out sizes ≥ 1 MiB | mean error | max error | "
      "neighbour interpolation |\n|---|---|---|---|---|---|---|---|---|\n";
  int tables = 0;
  for (const auto& log : logs) {
    double sum = 0, interpolation = 0;
    int samples = 0;
    for (const Series& s : read_nccl_tests_log(realdata(log), log, {.collective = "", .gpus_per_node = 8, .table = {}, .ranks = {}, .nodes = {}})) {
      const HeldOutResult r = held_out(s);
      ASSERT_GT(r.samples, 0) << log;
      table += fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f}% | {:.1f}% | {:.1f}% |\n", log.substr(0, 2), s.table,
                           s.collective, s.ranks, s.nodes, r.sizes, 100 * r.mean / r.samples, 100 * r.worst,
                           100 * r.interpolation / r.samples);
      sum += r.mean;
      interpolation += r.interpolation;
      samples += r.samples;
      ++tables;
    }
    table += fmt::format("| {} | all | | | | | **{:.1f}%** | | {:.1f}% |\n", log.substr(0, 2), 100 * sum / samples,
                         100 * interpolation / samples);
    if (log.rfind("02_", 0) == 0) EXPECT_LT(sum / samples, interpolation / samples + 0.02) << log;
    else EXPECT_LT(sum / samples, 0.10) << log;
  }
  EXPECT_EQ(tables, 1 + 1 + 3 + 1 + 1 + 1 + 1 + 7 + 6);
  std::cout << table;
}


constexpr const char* kXlaGrid = "20_xla_h100_sm90_bf16_f32_gemm_flops_grid.csv";

TEST(GemmTableCsv, ReadsXlasH100Table) {
  // 375 entries: b ∈ {1, 2, 4} × m, n, k ∈ {256, …, 4096}. The 125 single GeMMs (b = 1) give one
  // bf16 and one fp32 sample each; the 250 batched rows are skipped and counted.
  const Measurements m = read_gemm_table_csv(realdata(kXlaGrid), kXlaGrid);
  ASSERT_EQ(m.gemm.size(), 250u);
  EXPECT_NE(m.provenance.at("skipped").get<std::string>().find("250 rows of batched GeMMs"), std::string::npos);
  EXPECT_NE(m.provenance.at("notes")[0].get<std::string>().find("matmul_interpolator_data.h"), std::string::npos);
  // The file's first row: 1,1024,2048,256 at 139519467775467 FLOP/s bf16: 2·1024·2048·256 FLOPs
  // = 1.0737e9 → 7.696 us.
  EXPECT_EQ(m.gemm[0].dtype, "bf16");
  EXPECT_EQ(m.gemm[0].where, "line 6");
  EXPECT_DOUBLE_EQ(m.gemm[0].seconds, 2.0 * 1024 * 2048 * 256 / 139519467775467.0);
  EXPECT_EQ(m.gemm[1].dtype, "fp32");  // XLA's f32 column
  // Time columns in a unit are read too; an empty cell is a shape not measured in that dtype.
  const Measurements t = read_gemm_table_csv("m,n,k,fp16_time_us,bf16_time_us\n1024,1024,1024,10,\n2048,2048,2048,40,41\n", "t.csv");
  ASSERT_EQ(t.gemm.size(), 3u);
  EXPECT_DOUBLE_EQ(t.gemm[0].seconds, 10e-6);
  EXPECT_EQ(t.gemm[2].dtype, "bf16");
}

TEST(GemmTableCsv, RefusesWhatItCannotRead) {
  const auto problem = [](const std::string& text) {
    try {
      read_gemm_table_csv(text, "g.csv");
    } catch (const InputError& e) {
      return e.path() + ": " + e.problem();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(problem("m,n,bf16_flops_per_s\n1,2,3\n"), "line 1: the header lacks m, n or k");
  EXPECT_EQ(problem("m,n,k\n1,2,3\n"), "line 1: the header names no value column");
  EXPECT_EQ(problem("m,n,k,int4_flops_per_s\n"),
            "line 1, column 4 (int4_flops_per_s): a column that is neither m, n, k, b nor <dtype>_flops_per_s / "
            "<dtype>_time_<unit>");
  EXPECT_EQ(problem("m,n,k,bf16_time_minutes\n"), "line 1, column 4 (bf16_time_minutes): unknown time unit `minutes`");
  EXPECT_EQ(problem("m,n,k,bf16_flops_per_s,bf16_time_us\n"), "line 1, column 5 (bf16_time_us): a second column for bf16");
  EXPECT_EQ(problem("# c\nm,n,k,bf16_flops_per_s\n1,2,3\n"), "line 3: 3 cells where the header (line 2) has 4");
  EXPECT_EQ(problem("m,n,k,bf16_flops_per_s\n1,2,3,fast\n"), "line 2, column 4 (bf16_flops_per_s): `fast` is not a positive number");
  EXPECT_EQ(problem("m,n,k,bf16_flops_per_s\n1,-2,3,5\n"), "line 2, column 2 (n): `-2` is not a positive number");
  EXPECT_EQ(problem("b,m,n,k,bf16_flops_per_s\n2,1,2,3,5\n"), "line 1: no GeMM row with a batch of 1");
  EXPECT_EQ(problem("# only a comment\n"), ": no header row");
  // 2·256³ FLOP at 1e-300 FLOP/s: 3.36e307 s, no measurement (it once reached the table as inf).
  EXPECT_EQ(problem("m,n,k,bf16_flops_per_s\n256,256,256,1e-300\n"),
            "line 2, column 4 (bf16_flops_per_s): `1e-300` makes the 256x256x256 GeMM take 3.36e+307 s");
  EXPECT_EQ(problem("m,n,k,bf16_flops_per_s\n256,256,256,inf\n"),
            "line 2, column 4 (bf16_flops_per_s): `inf` is not a positive number");
}

TEST(GemmTableCsv, HeldOutShapesOfXlasH100Table) {
  // Fit the table on the shapes whose M, N and K are all in {256, 1024, 4096} (27 of 125) and
  // predict the other 98 (each has a coordinate of 512 or 2048, midway in log2 between two fitted
  // ones, so every prediction interpolates 8 measured corners): the time error averages under
  // 10 % for bf16 (9.5 %) and for f32 (9.8 %) — a 4× spacing of the grid costs that much. The
  // uncalibrated shape model misses the same bf16 shapes by 3.6 % on average, but it was fitted to
  // the whole table (compute_model.cpp), these shapes included: no held-out test for it. (The flat
  // roofline before it, 75 % of peak with 128×128 wave quantization and no launch cost, missed
  // them by 51 %.)
  const Measurements all = read_gemm_table_csv(realdata(kXlaGrid), kXlaGrid);
  const auto on_coarse_grid = [](const GemmSample& g) {
    const auto coarse = [](double x) { return x == 256 || x == 1024 || x == 4096; };
    return coarse(g.m) && coarse(g.n) && coarse(g.k);
  };
  Measurements fitted = all;
  fitted.gemm.clear();
  for (const auto& g : all.gemm)
    if (on_coarse_grid(g)) fitted.gemm.push_back(g);
  const calibration::Profile p = build_profile({fitted}, {});
  const auto h100 = test::scenario_from(R"({"name": "h100", "cluster": {"gpu": "h100-sxm5-80gb", "levels": [
      {"name": "gpu", "count": 1, "bandwidth": "1GB/s", "latency": "1us"}]}, "model": {"preset": "gpt-medium-moe"},
      "training": {"sequence_length": 128}, "strategy": {"name": "ep"}})").topology().gpu(0);
  const compute::ComputeModel roofline(h100, {});
  for (const std::string dtype : {"bf16", "fp32"}) {
    const auto* table = p.find_gemm(dtype);
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(table->table.size(), 27u);
    double sum = 0, worst = 0, roofline_sum = 0;
    int n = 0;
    for (const auto& g : all.gemm) {
      if (g.dtype != dtype || on_coarse_grid(g)) continue;
      const double predicted = 2 * g.m * g.n * g.k / table->flops_per_second(g.m, g.n, g.k);
      const double e = std::abs(predicted / g.seconds - 1);
      sum += e;
      worst = std::max(worst, e);
      roofline_sum += std::abs(time_to_seconds(roofline.gemm(g.m, g.n, g.k)) / g.seconds - 1);
      ++n;
    }
    EXPECT_EQ(n, 98);
    std::cout << fmt::format("{}: held-out mean error {:.1f}%, worst {:.1f}%{}\n", dtype, 100 * sum / n, 100 * worst,
                             dtype == "bf16" ? fmt::format("; the uncalibrated model's {:.1f}%", 100 * roofline_sum / n) : "");
    EXPECT_LT(sum / n, 0.10) << dtype;
    EXPECT_GT(sum / n, 0.05) << dtype;  // a real interpolation, not the measured points echoed back
    if (dtype == "bf16") {
      EXPECT_LT(roofline_sum / n, 0.05);
    }
  }
}

}  // namespace
}  // namespace moesim::calibrate
