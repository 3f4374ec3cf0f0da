// The parm strategy (seed 003) by simulation: the bytes each schedule puts on the wire against
// Eq. 1, 11 and 14, the baseline's N_MP-fold expert compute, S1/S2 never slower than the baseline
// (Eq. 6, 10), SAA against AAS, the §IV-A placements, Algorithm 1 with a calibration profile and
// the simulated alternatives of "auto", and bad input.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fstream>

#include "sim/blocks/layer_costs.hpp"
#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/strategies/parm/parm_strategy.hpp"
#include "sim/simulation/calibration_binding.hpp"
#include "test_support.hpp"

using namespace moesim;
using strategies::parm::ParmGroups;
using strategies::parm::Placement;

namespace {

// One bare MoE layer (Table III) of M = H = 1024 on B = 2 × L = 512 tokens per GPU, f = 1.2,
// top-1, fp32, without the gradient all-reduce (§VI-A).
schema::Json layer(const char* testbed, int mp, int esp, const char* schedule, int experts) {
  auto doc = schema::Json::parse(R"({
    "name": "parm-test",
    "model": {"preset": "parm-moe-layer", "hidden": 1024, "ffn_hidden": 1024},
    "training": {"sequence_length": 512, "micro_batch_size": 2, "dtype": "fp32", "capacity_factor": 1.2},
    "routing": {"sampling": "expected"},
    "strategy": {"name": "parm", "gradient_sync": "none"}
  })");
  doc["cluster"] = {{"preset", testbed}};
  doc["model"]["experts"] = experts;
  doc["strategy"]["mp_size"] = mp;
  doc["strategy"]["esp_size"] = esp;
  doc["strategy"]["schedule"] = schedule;
  return doc;
}

schema::Json run(const schema::Json& doc) {
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run();
  return sim.results_json();
}

double wire_bytes(const schema::Json& r, const char* kind) {
  const auto& c = r["network"]["collectives"];
  return c.contains(kind) ? c[kind]["bytes"].get<double>() : 0.0;
}

double busy(const schema::Json& r, const char* kind) { return r["busy_ms"][kind]["mean"].get<double>(); }

}  // namespace

TEST(ParmStrategy, WireBytesOfEachScheduleFollowTheEquations) {
  // Testbed A (8 GPUs: 2 sockets × 4), N_MP = N_ESP = 2, so N_EP = 4 and E = 4. Per GPU:
  //   B·L = 1024 tokens, BLM = 1024·1024·4 B = 4 MiB; T = 1.2·1024/4 = 307.2; ETM = 4·T·1024·4 = 1.2·BLM.
  // Forward and backward each run the schedule's communications once (the backward ones are the
  // conjugates with the same sizes). Wire bytes of one collective: ring all-gather of a piece c
  // over n ranks n(n−1)·c; ring all-reduce of S, 2(n−1)·S; all-to-all of x per GPU, (n−1)·x.
  const double blm = 1024.0 * 1024 * 4, etm = 1.2 * blm;
  {
    // Baseline (Eq. 1): ESP-AllGather(BLM·N_ESP): 4 groups × 2·1·BLM; ESP-AllReduce(ETM·N_ESP):
    // 4 groups × 2·1·2ETM; EP-A2A(ETM·N_ESP): 2 groups × 3·2ETM, dispatch and combine.
    const auto r = run(layer("parm-testbed-a", 2, 2, "baseline", 4));
    EXPECT_NEAR(wire_bytes(r, "all_gather"), 2 * (4 * 2 * blm), 1);
    EXPECT_NEAR(wire_bytes(r, "all_reduce"), 2 * (4 * 2 * 2 * etm), 1);
    EXPECT_NEAR(wire_bytes(r, "all_to_all"), 2 * 2 * (2 * 3 * 2 * etm), 1);
  }
  {
    // S1 (Eq. 11): EP&ESP-A2A(ETM·N_ESP/N_MP = ETM) over all 8 GPUs: 7·ETM, twice per direction;
    // MP-AllGather(BLM): 4 groups × 2·1·BLM/2.
    const auto r = run(layer("parm-testbed-a", 2, 2, "s1", 4));
    EXPECT_NEAR(wire_bytes(r, "all_gather"), 2 * (4 * blm), 1);
    EXPECT_NEAR(wire_bytes(r, "all_reduce"), 0, 1);
    EXPECT_NEAR(wire_bytes(r, "all_to_all"), 2 * 2 * (7 * etm), 1);
  }
  for (bool saa : {false, true}) {
    // S2 (Eq. 14): the same all-to-alls; MP-AllGather(ETM): 4 groups × 2·1·ETM/2 — with SAA split
    // into 8 phases whose sums are the same, each phase's gather grouped send/recv (§III-D:
    // ncclSend/ncclRecv), so its bytes count as an exchange's (all_to_all), not as all_gather.
    auto doc = layer("parm-testbed-a", 2, 2, "s2", 4);
    doc["strategy"]["saa"] = saa;
    const auto r = run(doc);
    const double gather = 2 * (4 * etm);
    EXPECT_NEAR(wire_bytes(r, "all_gather"), saa ? 0 : gather, 1) << "saa " << saa;
    EXPECT_NEAR(wire_bytes(r, "all_to_all"), 2 * 2 * (7 * etm) + (saa ? gather : 0), 1) << "saa " << saa;
    // Collectives per direction: the first all-to-all, and with SAA the second in 7 phases beside
    // 8 gather pieces in each of the 4 MP groups; without, the second whole.
    EXPECT_EQ(r["network"]["collectives"]["all_to_all"]["count"].get<double>(), saa ? 2 * (1 + 7 + 8 * 4) : 4);
  }
}

TEST(ParmStrategy, BaselineComputesEveryExpertNmpTimes) {
  // §III-A: in the baseline every GPU of an MP group computes the same tokens; S1 and S2 split them.
  // Expert GeMMs of E·T·N_ESP tokens (baseline) vs E·T·N_ESP/N_MP (S1, S2) on M/N_ESP hidden:
  // N_MP = 4 times the work (B·L = 8192, M = H = 4096, one expert per GPU). In time a little less
  // than 4×: S1's kernels are 4 times smaller but pay the same fixed cost (5.3 us) and fill their
  // last wave differently; the ratio is that of the two FFNs in the compute model.
  auto base = layer("parm-testbed-a", 4, 2, "baseline", 4);
  base["training"]["micro_batch_size"] = 4;
  base["training"]["sequence_length"] = 2048;
  base["model"]["hidden"] = 4096;
  base["model"]["ffn_hidden"] = 4096;
  auto s1 = base, s2 = base;
  s1["strategy"]["schedule"] = "s1";
  s2["strategy"]["schedule"] = "s2";
  const auto rb = run(base);
  const double e_base = busy(rb, "expert"), e_s1 = busy(run(s1), "expert"), e_s2 = busy(run(s2), "expert");
  const double t = rb["strategy"]["tokens_per_expert"].get<double>(), baseline_tokens = 4 * t * 2, s1_tokens = 4 * t * 2 / 4;
  const auto sc = test::scenario_from(base.dump());
  const compute::ComputeModel cm = simulation::bound_compute_model(sc.topology().gpu(0), sc.compute);
  // Forward and backward (the gradients' GeMMs at their own shapes: blocks::experts_work).
  const auto both = [&](double tokens) {
    const auto w = blocks::experts_work(cm, sc.model, std::vector<double>{tokens}, 2048);
    return static_cast<double>((w.forward + w.backward).time);
  };
  const double ratio = both(baseline_tokens) / both(s1_tokens);
  EXPECT_NEAR(e_base / e_s1, ratio, 1e-6);
  EXPECT_GT(ratio, 3.5);  // mostly the work: 4×
  EXPECT_LT(ratio, 4.0);
  EXPECT_NEAR(e_s1, e_s2, 1e-9);
}

TEST(ParmStrategy, PausingMpIsNeverSlowerThanTheBaseline) {
  // Eq. 6 (N_MP = 1) and Eq. 10 (N_MP > 1) on both testbeds, for every (N_MP, N_ESP) of Table III
  // at two sizes; the Table III sweeps check the whole grid.
  for (const char* testbed : {"parm-testbed-a", "parm-testbed-b"})
    for (int mp : {1, 2, 4})
      for (int esp : {1, 2, 4})
        for (int m : {1024, 4096}) {
          const int gpus = std::string(testbed) == "parm-testbed-a" ? 8 : 32;
          auto doc = layer(testbed, mp, esp, "baseline", gpus / esp);
          doc["model"]["hidden"] = m;
          doc["model"]["ffn_hidden"] = m;
          const double base = run(doc)["iteration_time_ms"].get<double>();
          for (const char* s : {"s1", "s2"}) {
            doc["strategy"]["schedule"] = s;
            EXPECT_LE(run(doc)["iteration_time_ms"].get<double>(), base * (1 + 1e-9))
                << testbed << " N_MP " << mp << " N_ESP " << esp << " M " << m << " " << s;
          }
        }
}

TEST(ParmStrategy, SaaOverlapsTheAllGatherWithTheAllToAllAcrossNodes) {
  // Testbed B, 32 GPUs, N_MP = N_ESP = 4: the all-to-all crosses the 100 Gb/s network, the MP
  // all-gather stays in the node's PCIe: SAA (§III-D) hides the all-gather behind the all-to-all
  // phases, AAS runs it after. The all-gather alone takes the gap between the two.
  auto doc = layer("parm-testbed-b", 4, 4, "s2", 8);
  doc["model"]["hidden"] = 4096;
  doc["model"]["ffn_hidden"] = 4096;
  doc["strategy"]["saa"] = false;
  const auto aas = run(doc);
  doc["strategy"]["saa"] = true;
  const auto saa = run(doc);
  EXPECT_LT(saa["iteration_time_ms"].get<double>(), aas["iteration_time_ms"].get<double>());
  EXPECT_GT(aas["iteration_time_ms"].get<double>() - saa["iteration_time_ms"].get<double>(),
            0.5 * busy(aas, "all_gather"));
  // And the analytic network model runs the same program.
  doc["network"] = {{"model", "analytic"}};
  EXPECT_GT(run(doc)["iteration_time_ms"].get<double>(), 0);
}

TEST(ParmStrategy, PlacementsOfSectionIVA) {
  // 8 GPUs, N_MP = 2, N_ESP = 2 (N_EP = 4). ESP in node: ESP groups are consecutive pairs, EP
  // groups stride 2; EP in node: EP groups are consecutive quadruples, ESP groups stride 4. MP
  // groups are consecutive pairs either way; dense data parallelism joins equal MP ranks.
  using V = std::vector<std::vector<std::uint32_t>>;
  const auto esp = ParmGroups::build(8, 2, 2, Placement::EspInNode);
  EXPECT_EQ(esp.esp, (V{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(esp.ep, (V{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(esp.mp, (V{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(esp.dp, (V{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  const auto ep = ParmGroups::build(8, 2, 2, Placement::EpInNode);
  EXPECT_EQ(ep.ep, (V{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(ep.esp, (V{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(ep.ep_rank, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));

  // On Testbed B the baseline's ESP collectives leave the node when EP sits inside it: 8 GPUs =
  // 2 nodes of 4, N_ESP = 4. ESP in node: the ESP all-gather/all-reduce stay on PCIe and only the
  // EP all-to-all (N_EP = 2, one peer in the other node) crosses. EP in node: the all-to-all stays
  // in the node and the ESP rings 0→2→4→6→0 cross the network on 2 of their 4 edges.
  auto doc = layer("parm-testbed-b", 1, 4, "baseline", 2);
  doc["cluster"]["levels"] = schema::Json::parse(R"([{"name": "node", "count": 2, "bandwidth": "100Gbps", "latency": "5us"},
                                                     {"name": "gpu", "count": 4, "bandwidth": "128Gbps", "latency": "5us"}])");
  doc["network"]["all_reduce"] = "ring";  // the ESP rings' edges, not a hierarchical all-reduce's
  const auto in_node = run(doc);
  doc["strategy"]["placement"] = "ep_in_node";
  const auto across = run(doc);
  const double a2a = wire_bytes(in_node, "all_to_all");
  EXPECT_NEAR(in_node["network"]["bytes_by_level"]["node"].get<double>(), a2a, 1);
  const double esp_bytes = wire_bytes(across, "all_gather") + wire_bytes(across, "all_reduce");
  EXPECT_NEAR(across["network"]["bytes_by_level"]["gpu"].get<double>(), a2a + esp_bytes / 2, 1);
  EXPECT_NEAR(across["network"]["bytes_by_level"]["node"].get<double>(), esp_bytes / 2, 1);
}

TEST(ParmStrategy, AutoUsesTheProfileAndReportsBothSchedules) {
  auto doc = layer("parm-testbed-a", 2, 2, "auto", 4);
  doc["calibration"] = "calibrations/parm-testbed-a.json";
  const auto r = run(doc);
  const auto& s = r["strategy"];
  // §VI-B: α_MP^AG = 6.64e-4 s from the profile; the all-to-all and overlap terms are not in it.
  EXPECT_EQ(s["algorithm1"]["ag_mp"]["source"], "profile parm-testbed-a");
  EXPECT_NEAR(s["algorithm1"]["ag_mp"]["alpha_us"].get<double>(), 664, 1e-9);
  EXPECT_EQ(s["algorithm1"]["a2a_ep_esp"]["source"], "network model fit");
  // Algorithm 1 picks the smaller of t_D1 and t_D2, and that schedule runs.
  const double d1 = s["algorithm1"]["t_d1_ms"].get<double>(), d2 = s["algorithm1"]["t_d2_ms"].get<double>();
  EXPECT_EQ(s["choice"], d1 <= d2 ? "S1" : "S2");
  // Both schedules are simulated; the run's own time is that of its choice.
  const auto& alt = s["simulated_alternatives"];
  EXPECT_NEAR(alt[s["choice"].get<std::string>()]["iteration_time_ms"].get<double>(), r["iteration_time_ms"].get<double>(), 1e-9);
  const bool s1_faster = alt["S1"]["iteration_time_ms"].get<double>() <= alt["S2"]["iteration_time_ms"].get<double>();
  EXPECT_EQ(s["fastest_alternative"], s1_faster ? "S1" : "S2");
  EXPECT_EQ(s["choice_was_fastest"].get<bool>(), s["choice"] == s["fastest_alternative"]);
  // The profile's MP all-gather is what the simulated network charges (issue 17), so the choice
  // is right: S1 pays AG_MP(BLM) with its 664 us α twice an iteration, S2's SAA gathers are
  // send/recv without it.
  EXPECT_TRUE(s["choice_was_fastest"].get<bool>());
  EXPECT_EQ(s["choice"], "S2");
  // Without the profile the α-β are fitted to the network model itself: inside a socket's PCIe
  // switch the MP all-gather and the all-to-all share the GPUs' links, SAA cannot overlap them,
  // and S1's smaller all-gather (BLM < ETM at f = 1.2) wins — Algorithm 1 sees it.
  doc.erase("calibration");
  const auto fitted = run(doc);
  EXPECT_EQ(fitted["strategy"]["choice"], "S1");
  EXPECT_TRUE(fitted["strategy"]["choice_was_fastest"].get<bool>());
}

TEST(ParmStrategy, TheSimulatedMpAllGatherCostsWhatAlgorithmOneReads) {
  // Issue 17: Algorithm 1 reads AG_MP(x) = 664 us + 1.345e-10 s/B · x from the §VI-B profile, and
  // the simulation must charge the same. S1 on Testbed A with N_MP = 2, N_ESP = 1 (8 experts): the
  // MP-AllGather of BLM = 2·512·1024·4 B = 4 MiB runs once forward (after the combine) and once
  // backward (the MP-Split's gradients), alone on the MP pair's PCIe links, and nothing else
  // gathers: each GPU's all-gather busy time is 2·(664 us + 1.345e-10·4194304 s) = 2.4562 ms.
  auto doc = layer("parm-testbed-a", 2, 1, "s1", 8);
  doc["calibration"] = "calibrations/parm-testbed-a.json";
  const auto r = run(doc);
  EXPECT_NEAR(busy(r, "all_gather"), 2 * (0.664 + 1.345e-10 * 4194304 * 1e3), 1e-6);
  const auto& used = r["calibration"]["collectives"]["used"];
  ASSERT_EQ(used.size(), 1u);
  EXPECT_EQ(used[0]["entry"], "all_gather group=mp");
  EXPECT_LT(std::abs(used[0]["own_shape_error"].get<double>()), 1e-6);
}

TEST(ParmStrategy, BadInputNamesTheField) {
  const auto refuse = [](const schema::Json& doc, const std::string& path, const std::string& words) {
    try {
      simulation::Simulation sim(test::scenario_from(doc.dump()));
      sim.check();
      ADD_FAILURE() << "accepted; expected an error at " << path;
    } catch (const InputError& e) {
      EXPECT_EQ(e.path(), path);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_EQ(e.file(), "test.json");
    }
  };
  refuse(layer("parm-testbed-a", 1, 3, "s1", 4), "$.strategy.esp_size", "do not split into ESP groups of 3");
  refuse(layer("parm-testbed-a", 3, 1, "s1", 8), "$.strategy.mp_size", "do not split into MP groups of 3");
  // N_EP = 8/2 = 4 does not divide 6 experts.
  refuse(layer("parm-testbed-a", 1, 2, "s1", 6), "$.strategy.esp_size", "does not divide the model's 6 experts");
  auto no_capacity = layer("parm-testbed-a", 2, 2, "s1", 4);
  no_capacity["training"]["capacity_factor"] = 0;
  refuse(no_capacity, "$.training.capacity_factor", "capacity T");
  auto unknown = layer("parm-testbed-a", 2, 2, "sometimes", 4);
  refuse(unknown, "$.strategy.schedule", "sometimes");

  // A missing profile, and a profile with a bad field (named with the profile's own file).
  auto doc = layer("parm-testbed-a", 2, 2, "auto", 4);
  doc["calibration"] = "calibrations/no-such-profile.json";
  refuse(doc, "$.calibration", "no calibration profile");
  const std::string bad = ::testing::TempDir() + "parm-bad-profile.json";
  {
    std::ofstream(bad) << R"({"name": "bad", "provenance": {"source": "test"},
      "collectives": [{"collective": "all_gather", "group": "mp", "alpha": "1us", "beta_s_per_byte": -1}]})";
  }
  doc["calibration"] = bad;
  try {
    test::scenario_from(doc.dump());
    ADD_FAILURE() << "accepted a negative beta";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), bad);
    EXPECT_EQ(e.path(), "$.collectives[0].beta_s_per_byte");
  }
}
