// The `adaptive` strategy (seed 004): the §3.3 cost example reproduced by simulating its
// gradient and weight phases, capacity by replicas with pooled and per-source drops, the
// placement following the previous iteration's counts, and the three policies' drops on one
// popularity process.
#include <algorithm>
#include <gtest/gtest.h>

#include <map>

#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/strategies/adaptive/placement.hpp"
#include "sim/workload/routing.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

// Spec 004 C2: E = 64 classes, N = 2048 ranks, s = 2 slots, G = W = 3.375 "GB", PCIe 64 and
// network 50 "GB/s", in the paper's units: one expert is a GPT-3 layer, 12·12288² parameters,
// 3.375 GiB in fp16, and the links run at 50 and 64 GiB/s, so bytes/bandwidth is 3.375/50 s as the
// paper divides. No latency, a CPU step of no time (a huge optimizer rate) and the analytic
// network, so each phase takes its bytes over its link.
schema::Json section33(const std::string& placement, int experts = 64, int ranks = 2048, int slots = 2,
                       const std::string& pcie = "64GiB/s", const std::string& network = "50GiB/s") {
  auto doc = schema::Json::parse(R"({
    "name": "seed004-section-3.3",
    "gpus": {"gpt3-node": {"name": "one GPU per node, the paper's example", "peak_flops": {"fp16": "1000TFLOPS"},
             "hbm_bandwidth": "3000GB/s", "memory": "1TiB", "sms": 132, "flash_attention": true,
             "host_link": {"bandwidth": "64GiB/s", "latency": "0us"}, "source": "seed 004 §3.3 example"}},
    "cluster": {"gpu": "gpt3-node",
                "levels": [{"name": "node", "count": 2048, "fabric": "switch", "bandwidth": "50GiB/s", "latency": "0us"}],
                "hosts": {"gpus": 1, "memory": "16TiB", "optimizer_bandwidth": "1000000TB/s",
                          "switch_uplink": {"bandwidth": "64GiB/s", "latency": "0us"}}},
    "model": {"name": "GPT-3 layer as one expert", "layers": 1, "dense_layers": 0, "hidden": 12288, "ffn_hidden": 73728,
              "experts": 64, "top_k": 1, "expert_kind": "mlp", "heads": 96, "vocab": 0},
    "training": {"sequence_length": 1, "micro_batch_size": 1, "microbatches": 1, "iterations": 2, "dtype": "fp16",
                 "capacity_factor": 1.0, "optimizer": "host"},
    "routing": {"sampling": "expected"},
    "network": {"model": "analytic"},
    "strategy": {"name": "adaptive", "slots_per_gpu": 2, "gradient_reduction": "direct"}
  })");
  doc["strategy"]["placement"] = placement;
  doc["strategy"]["slots_per_gpu"] = slots;
  doc["model"]["experts"] = experts;
  doc["cluster"]["levels"][0]["count"] = ranks;
  doc["cluster"]["levels"][0]["bandwidth"] = network;
  doc["gpus"]["gpt3-node"]["host_link"]["bandwidth"] = pcie;
  doc["cluster"]["hosts"]["switch_uplink"]["bandwidth"] = pcie;
  return doc;
}

// GPU 0's time in each named phase of iteration `it` (collectives: from rendezvous to end).
std::map<std::string, double> phase_seconds(const simulation::Simulation& sim, int it) {
  std::map<std::string, double> out;
  const auto& log = sim.task_log();
  for (const auto& t : log.tasks()) {
    if (t.end < 0 || t.gpu != 0 || t.label.iteration != it || t.collective == engine::kNone) continue;
    const auto& span = log.collectives()[t.collective];
    out[sim.engine().names()[t.label.name]] += time_to_seconds(span.end - span.start);
  }
  return out;
}

// Each placement's simulated gradient and weight phases of the §3.3 model, in seconds: the
// gradients' reduction and copy to the host in iteration 0, the weights' copy back and their
// distribution at the start of iteration 1 (which follows iteration 0's host step).
std::map<std::string, std::pair<double, double>> section33_phases(int experts, int ranks, int slots,
                                                                  const std::string& pcie, const std::string& network) {
  std::map<std::string, std::pair<double, double>> out;
  for (const std::string placement : {"static", "adaptive"}) {
    simulation::Simulation sim(test::scenario_from(section33(placement, experts, ranks, slots, pcie, network).dump()));
    sim.run(test::with_task_log());
    const auto p0 = phase_seconds(sim, 0), p1 = phase_seconds(sim, 1);
    const bool st = placement == "static";
    out[placement] = {p0.at(st ? "replica_reduce_scatter" : "gradients_to_owners") + p0.at("gradients_to_host"),
                      p0.at("weights_from_host") + p1.at(st ? "replica_weight_gather" : "weights_to_placement")};
  }
  return out;
}

TEST(Adaptive, Section33CostExampleBySimulation) {
  // T_X^static = (E/N)·X/BW_pci + ((sN − E)/N)·X/BW_net = 0.03125·3.375/64 + 1.96875·3.375/50
  //            = 0.134539 s per phase; T_X^adaptive = 0.03125·3.375/64 + ((sN − s)/N)·3.375/50
  //            = 0.136582 s (spec 004 C2). Static: each rank reduce-scatters its 2 classes over their
  // 64 replicas ((r−1)/r·G each) and copies 2·G/64 to the host; adaptive: each of its 2 slots sends
  // its G/N shard to every other owner ((N−1)·2·G/N) and the rank copies E·G/N. The weights return
  // the same way (all-gather; s·W/N to every other rank).
  const double pcie = 0.03125 * 3.375 / 64;
  const double expect_static = pcie + 1.96875 * 3.375 / 50, expect_adaptive = pcie + (4096.0 - 2) / 2048 * 3.375 / 50;
  std::map<std::string, double> total;
  for (const auto& [placement, phases] : section33_phases(64, 2048, 2, "64GiB/s", "50GiB/s")) {
    const double expect = placement == "static" ? expect_static : expect_adaptive;
    EXPECT_NEAR(phases.first, expect, 1e-3 * expect) << placement;
    EXPECT_NEAR(phases.second, expect, 1e-3 * expect) << placement;
    total[placement] = phases.first + phases.second;
  }
  // Totals 0.26908 s and 0.27316 s, adaptive 1.519 % above: (E − s)/(sN − E·(1 − BW_net/BW_pci)).
  EXPECT_NEAR(total["static"], 0.26908, 1e-3 * 0.26908);
  EXPECT_NEAR(total["adaptive"], 0.27316, 1e-3 * 0.27316);
  EXPECT_NEAR(total["adaptive"] / total["static"] - 1, 62.0 / 4082, 1e-3);
}

TEST(Adaptive, Section33ModelOnTheEvaluationClusterAsC4) {
  // Spec 004 C4, the counter-check: the same model on the evaluation cluster (E = 16, N = 16,
  // s = 4, PCIe 32 and network 12.5 "GB/s") predicts adaptive's gradient and weight phases
  // (E − s)/(sN − E·(1 − BW_net/BW_pci)) = 12/54.25 = 22.1 % above static's. Per phase,
  // static: (E/N)·X/32 + ((sN − E)/N)·X/12.5 = X·(1/32 + 3/12.5); adaptive: X·(1/32 + 3.75/12.5);
  // with X = 3.375: 0.9155 and 1.1180 s for both phases. (The paper measures adaptive 2.8-9.3 %
  // faster in all; the spec warns the model does not predict that sign.) moesim also moves the
  // rank's ZeRO shard of the layer's attention parameters (4·12288² fp16 over N = 16: 75.5 MB, in
  // GiB 0.0703125) over PCIe both ways, which the model leaves out: 2·0.0703125/32 s on both.
  std::map<std::string, double> total;
  for (const auto& [placement, phases] : section33_phases(16, 16, 4, "32GiB/s", "12.5GiB/s"))
    total[placement] = phases.first + phases.second;
  const double x = 3.375, dense = 2 * (4.0 * 12288 * 12288 * 2 / 16 / (1 << 30)) / 32;
  const double expect_static = 2 * x * (1 / 32.0 + 3 / 12.5), expect_adaptive = 2 * x * (1 / 32.0 + 3.75 / 12.5);
  EXPECT_NEAR(total.at("static") - dense, expect_static, 1e-3 * expect_static);
  EXPECT_NEAR(total.at("adaptive") - dense, expect_adaptive, 1e-3 * expect_adaptive);
  EXPECT_NEAR((total.at("adaptive") - dense) / (total.at("static") - dense) - 1, 12 / 54.25, 1e-3);
}

TEST(Adaptive, MigrationOfOneExpertAsSection22) {
  // §2.2 (C1): one d = 12288 expert is 3.375 GB of fp16 weights and 27 GB of optimizer state
  // (16 B/param); over 400 Gbps = 50 GB/s that is 0.0675 s and 0.54 s. Simulated as point-to-point
  // transfers over the example's 50 GiB/s network (units as the paper's).
  auto doc = section33("static");
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  const double params = 12.0 * 12288 * 12288;
  for (const auto& [bytes_per_param, seconds] : {std::pair{2.0, 0.0675}, std::pair{16.0, 0.54}}) {
    network::CollectiveOp op{network::CollectiveKind::P2P, network::Algorithm::Direct, 0, params * bytes_per_param, nullptr};
    EXPECT_NEAR(time_to_seconds(sim.time_collective(op, {0, 1})), seconds, 1e-6 * seconds) << bytes_per_param;
  }
}

TEST(Adaptive, CapacityFollowsReplicasPooledOrPerSource) {
  // Two sources with 1000 copies each (top-1) over 4 experts of shares 0.5, 0.3, 0.1, 0.1, with
  // replicas 4, 2, 1, 1 of 8 slots and f = 1 (expected routing: each source sends its shares).
  // Pooled: capacity f·2000·r/8 = 1000, 500, 250, 250 against 1000, 600, 200, 200 routed: 100
  // dropped. Per source: 500, 250, 125, 125 each against 500, 300, 100, 100: 2·50 = 100 dropped,
  // the same here since the sources are alike; with uniform shares (1/E = 0.25 each, GShard's)
  // capacity 250 per source drops (500 − 250)·2 + (300 − 250)·2 = 600.
  const std::vector<double> pop{0.5, 0.3, 0.1, 0.1};
  const std::vector<double> shares{4.0 / 8, 2.0 / 8, 1.0 / 8, 1.0 / 8};
  EXPECT_EQ(workload::expert_capacities(2000, 1.0, 4, shares), (std::vector<double>{1000, 500, 250, 250}));
  EXPECT_DOUBLE_EQ(workload::plan_dispatch(pop, 1000, 1, 1.0, shares).dropped * 2, 100);
  EXPECT_DOUBLE_EQ(workload::plan_dispatch(pop, 1000, 1, 1.0).dropped * 2, 600);
}

// The evaluation setup (16 A100, 16 classes, 4 slots, f = 1, top-1, 32,768 tokens per iteration)
// on GPT-Small with the popularity process, for `iterations`.
schema::Json evaluation(const schema::Json& strategy, int iterations) {
  auto doc = schema::Json::parse(R"({
    "name": "seed004-eval", "cluster": {"preset": "azure-nc-a100-16"}, "model": {"preset": "seed004-gpt-small"},
    "training": {"sequence_length": 512, "micro_batch_size": 4, "microbatches": 1, "dtype": "fp16",
                 "capacity_factor": 1.0, "optimizer": "host"},
    "routing": {"kind": "process"}
  })");
  doc["training"]["iterations"] = iterations;
  doc["strategy"] = strategy;
  return doc;
}

TEST(Adaptive, PlacementFollowsThePreviousIterationsCounts) {
  // Each iteration's replicas are Algorithm 1 of the counts the previous one routed (§3.4, one
  // iteration stale), at least one per class, 64 in all; the first iteration starts uniform (4).
  simulation::Simulation sim(test::scenario_from(evaluation({{"name", "adaptive"}}, 6).dump()));
  sim.run();
  const auto& its = sim.results().iterations;
  ASSERT_EQ(its.size(), 6u);
  EXPECT_EQ((*its[0].replicas)[0], std::vector<int>(16, 4));
  for (std::size_t i = 1; i < its.size(); ++i)
    for (int l = 0; l < 12; ++l) {
      const std::vector<int>& r = (*its[i].replicas)[l];
      std::vector<double> routed = its[i - 1].expert_routed[l];
      EXPECT_EQ(r, strategies::adaptive::replica_counts(routed, 16, 4)) << "iteration " << i << " layer " << l;
    }
  // Survival is reported per iteration and matches the copies.
  for (const auto& it : its) EXPECT_GT(it.routed_copies, 0);
}

TEST(Adaptive, FusedBackendHoldsItsBuffersOverAllRanksAndDropsBeyondItsBudget) {
  // One EP group of all 16 ranks, 2048 tokens each (512 × 4) of h = 768 in fp16: the all-to-all
  // buffer is 2048 · 16 rows · 768 · 2 B = 50,331,648 B per GPU (spec 001.A.4). Blocking HybridEP
  // is dropless beyond the capacity factor's drops, as NCCL; non-blocking at cf 0.05 the rank's
  // 4 slots share roundup8(2048 · 16 · min(1, 4) · 0.05) = 1640 rows, fewer than the 2048 copies
  // a rank's slot capacity admits: more tokens drop.
  const auto run = [](const schema::Json& parallel) {
    auto doc = evaluation({{"name", "adaptive"}}, 2);
    doc["parallel"] = parallel;
    simulation::Simulation sim(test::scenario_from(doc.dump()));
    sim.run();
    return std::pair{sim.results_json(), sim.results().dropped_copies() / sim.results().routed_copies()};
  };
  const auto [nccl, nccl_drops] = run(schema::Json::object());
  const auto [blocking, blocking_drops] = run({{"ep_backend", "hybridep"}});
  const auto [tight, tight_drops] = run({{"ep_backend", "hybridep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 0.05}});
  EXPECT_EQ(nccl["memory"]["breakdown_bytes"]["buffers"], 0.0);
  EXPECT_EQ(blocking["memory"]["breakdown_bytes"]["buffers"], 50331648.0);
  EXPECT_EQ(tight["memory"]["breakdown_bytes"]["buffers"], 50331648.0);
  EXPECT_DOUBLE_EQ(blocking_drops, nccl_drops);
  EXPECT_GT(tight_drops, blocking_drops + 0.05);
}

TEST(Adaptive, DropsOrderAdaptiveFlexMoEStatic) {
  // Spec 004 C5 (trend): on one popularity process, adaptive drops fewest, then FlexMoE-10, -50,
  // -100 (fewer the more often it rebalances), then static. FlexMoE here rebalances as far as it
  // lowers the largest load per replica (move_rule "balance": the spec's cost rule moves nothing
  // at k = 10 on GPT-Small, see the closing note of issue 19).
  const int iterations = 200;
  std::vector<Time> flex10_times;
  const auto drops = [&](const schema::Json& strategy) {
    simulation::Simulation sim(test::scenario_from(evaluation(strategy, iterations).dump()));
    sim.run();
    if (strategy.value("rebalance_every", 0) == 10)
      for (const auto& it : sim.results().iterations) flex10_times.push_back(it.time);
    return sim.results().dropped_copies() / sim.results().routed_copies();
  };
  const double adaptive = drops({{"name", "adaptive"}});
  const double stat = drops({{"name", "adaptive"}, {"placement", "static"}});
  std::vector<double> flex;
  for (const int k : {10, 50, 100})
    flex.push_back(drops({{"name", "adaptive"}, {"placement", "flexmoe"}, {"rebalance_every", k}, {"move_rule", "balance"}}));
  // §5.3 (spec 004 C6): FlexMoE's rebalancing iterations take 2.46×-4.10× a normal one (the moves
  // of weights and optimizer state, 18 B per parameter, block the first MoE layer). Here: the mean
  // over FlexMoE-10's 19 rebalancing iterations against the median of the others.
  ASSERT_EQ(flex10_times.size(), static_cast<std::size_t>(iterations));
  std::vector<double> normal;
  double rebalancing = 0;
  for (int i = 1; i < iterations; ++i)
    if (i % 10) normal.push_back(static_cast<double>(flex10_times[i]));
    else rebalancing += static_cast<double>(flex10_times[i]) / 19;
  std::nth_element(normal.begin(), normal.begin() + normal.size() / 2, normal.end());
  const double ratio = rebalancing / normal[normal.size() / 2];
  RecordProperty("flexmoe_10_rebalancing_over_normal", std::to_string(ratio));
  EXPECT_GE(ratio, 2.46);
  EXPECT_LE(ratio, 4.10);
  EXPECT_LT(adaptive, flex[0]);
  EXPECT_LT(flex[0], flex[1]);
  EXPECT_LT(flex[1], flex[2]);
  EXPECT_LT(flex[2], stat);
  // §5.2: adaptive drops 69 % fewer tokens than DeepSpeed (the issue's tolerance: ±10 points). The
  // popularity process is fitted to this figure (target (c) of popularity_process.hpp) on a NumPy
  // model of Algorithm 1 with one-iteration-stale counts; here the whole strategy (capacity per
  // slot pooled over sources, sampled routing of 4 sequences × 512 tokens per GPU) is simulated.
  // Not fitted: §3.4's "43 %-64 % fewer tokens than systems that rebalance experts on 10-100
  // iteration intervals", adaptive against FlexMoE-10 and FlexMoE-100, held to the same ±10 points.
  EXPECT_NEAR(1 - adaptive / stat, 0.69, 0.10);
  EXPECT_NEAR(1 - adaptive / flex[0], 0.43, 0.10);
  EXPECT_NEAR(1 - adaptive / flex[2], 0.64, 0.10);
  // §4.1 (spec 004 C9): forbidding intra-rank replicas (each class on distinct ranks, at most
  // N = 16 of the 64 slots) "can increase token drops by up to 20 %": more drops than adaptive,
  // still fewer than FlexMoE-10's. moesim gives +31 % (its popularity spikes put up to 90 % of a
  // layer's tokens on one class, which the cap holds to a quarter of the slots).
  const double distinct = drops({{"name", "adaptive"}, {"intra_rank_replicas", false}});
  EXPECT_GT(distinct, adaptive);
  EXPECT_LT(distinct, flex[0]);
  RecordProperty("drops_without_intra_rank_replicas", std::to_string(distinct));
  RecordProperty("drops_adaptive", std::to_string(adaptive));
  RecordProperty("drops_static", std::to_string(stat));
  RecordProperty("reduction_vs_static", std::to_string(1 - adaptive / stat));
  RecordProperty("reduction_vs_flexmoe_10", std::to_string(1 - adaptive / flex[0]));
  RecordProperty("reduction_vs_flexmoe_100", std::to_string(1 - adaptive / flex[2]));
}

TEST(Adaptive, RefusesWhatItCannotRun) {
  // Too few slots for the classes, DeepSpeed's layout on a non-multiple, and the optimizer on
  // the GPUs: each refused naming the field.
  const auto refused = [](const schema::Json& doc, const std::string& field) {
    try {
      simulation::Simulation sim(test::scenario_from(doc.dump()));
      sim.check();
      ADD_FAILURE() << "accepted, expected a refusal of " << field;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused(evaluation({{"name", "adaptive"}, {"slots_per_gpu", 0}}, 1), "slots_per_gpu");
  auto few = evaluation({{"name", "adaptive"}, {"slots_per_gpu", 1}}, 1);
  few["model"] = {{"preset", "seed004-gpt-small"}, {"experts", 32}};
  refused(few, "$.strategy.slots_per_gpu");
  // 16 GPUs x 4 slots over 12 classes: 64/12 replicas each cannot be (DeepSpeed needs sN/E whole).
  auto odd = evaluation({{"name", "adaptive"}, {"placement", "static"}}, 1);
  odd["model"] = {{"preset", "seed004-gpt-small"}, {"experts", 12}};
  refused(odd, "$.strategy.slots_per_gpu");
  auto gpu = evaluation({{"name", "adaptive"}}, 1);
  gpu["training"]["optimizer"] = "gpu";
  refused(gpu, "$.training.optimizer");
}

}  // namespace
}  // namespace moesim
