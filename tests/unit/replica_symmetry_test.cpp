// Identical replicas simulated once (simulation/replica_symmetry.hpp, issue 50 part 1): the
// reduced run's results are the full run's, byte for byte, and the runs it cannot prove symmetric
// are simulated in full with the reason; under both network models.
#include <sstream>

#include <gtest/gtest.h>

#include "sim/simulation/replica_symmetry.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;

namespace {

struct ReducedRun {
  std::string results;  // results.json less the engine's own figures
  report::EngineStats engine;
};

ReducedRun reduced_run_of(const schema::Json& doc, bool every_gpu) {
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  simulation::RunOptions options;
  options.every_gpu = every_gpu;
  sim.run(options);
  schema::Json j = sim.results_json();
  j.erase("engine");
  return {j.dump(1), sim.results().engine};
}

// A shipped scenario under expected routing and the analytic model, its sweep left out.
schema::Json shipped_expected_analytic(const std::string& name) {
  auto doc = schema::Json::parse(test::repository_file("scenarios/" + name + ".json"));
  doc["routing"]["sampling"] = "expected";
  doc["network"]["model"] = "analytic";
  doc.erase("sweep");
  return doc;
}

void expect_reduced_as_full(const schema::Json& doc, std::uint32_t copies, std::uint32_t simulated_gpus) {
  const ReducedRun reduced = reduced_run_of(doc, false), full = reduced_run_of(doc, true);
  EXPECT_EQ(reduced.engine.replicas, copies) << reduced.engine.full_because;
  EXPECT_EQ(reduced.engine.simulated_gpus, simulated_gpus);
  EXPECT_EQ(full.engine.replicas, 1u);
  EXPECT_EQ(full.engine.full_because, "asked to (--every-gpu)");
  EXPECT_EQ(reduced.results, full.results);
  // The simulator's own work shrinks with the replicas: fewer tasks than the full run's.
  EXPECT_LT(reduced.engine.tasks * copies, full.engine.tasks * 11 / 10);
  EXPECT_LT(reduced.engine.tasks, full.engine.tasks);
}

// kSmallEp on 16 GPUs in 2 nodes of 8 (400 Gb/s between them, NVLink-class inside), 16 experts.
schema::Json two_nodes_of_small_ep(int ep, const std::string& network) {
  auto doc = schema::Json::parse(test::kSmallEp);
  doc["cluster"]["levels"] = schema::Json::parse(
      R"([{"name": "node", "count": 2, "bandwidth": "400Gbps", "latency": "5us"},
          {"name": "gpu", "count": 8, "bandwidth": "450GB/s", "latency": "2us"}])");
  doc["model"]["experts"] = 16;
  doc["parallel"]["ep"] = ep;
  doc["network"]["model"] = network;
  return doc;
}

}  // namespace

// torchtitan's 256 GB200 with EP 64 inside a rack and FSDP (PP 1): 256 / 64 = 4 expert-data-
// parallel replicas of one rack each, the FSDP gathers spanning all four.
TEST(ReplicaSymmetry, ShippedSeed001ReplicasRunOnceAsEveryGpu) {
  expect_reduced_as_full(shipped_expected_analytic("seed001-torchtitan-nvl72"), 4, 64);
}

// DeepSeek-V3 on 256 GB300 (4 racks of 64), PP 2, VP 8, EP 32, the distributed optimizer: each
// stage of 128 GPUs (2 racks) holds 4 EP groups of 32, so 4 replicas (two per rack, the halves of
// a rack swapped by one shift and the racks by another), the dense gradients' groups spanning the
// whole stage.
TEST(ReplicaSymmetry, ShippedDeepSeekV3Gb300ReplicasRunOnceAsEveryGpu) {
  expect_reduced_as_full(shipped_expected_analytic("deepseek-v3-gb300"), 4, 64);
}

// HeterMoE's pipeline baseline: 12 GPUs, PP 2, EP 1: each stage of 6 is 6 replicas of one GPU.
TEST(ReplicaSymmetry, ShippedHeterMoePipelineReplicasRunOnceAsEveryGpu) {
  expect_reduced_as_full(shipped_expected_analytic("hetermoe-pp"), 6, 2);
}

// kSmallEp on 16 GPUs in 2 nodes of 8, 16 experts, EP 4, TP 1: 4 units of 4 GPUs. One shift by 4
// across the whole stage would carry half of node 0 into node 1 (no symmetry of the cluster);
// the shifts swap the halves inside each node and the nodes themselves, each keeping the nodes
// whole, and together carry unit 0 to each of the 4.
TEST(ReplicaSymmetry, UnitsKeepTheClustersNodesWhole) {
  auto doc = two_nodes_of_small_ep(4, "analytic");
  expect_reduced_as_full(doc, 4, 4);
}

// Under the flow model the other replicas' exchanges still load their links (the executor runs
// each collective's images beside it, FlowExecutor::run_images), so a collective spanning the
// replicas (the dense gradients' all-reduce over both nodes) meets the same contention as when every
// GPU is simulated: identical results. kSmallEp on 2 nodes of 8, 16 experts, EP 8: 2 replicas of
// one node each.
TEST(ReplicaSymmetry, UnderTheFlowModelTheOtherReplicasExchangesStillLoadTheirLinks) {
  auto doc = two_nodes_of_small_ep(8, "flow");
  expect_reduced_as_full(doc, 2, 8);
  // torchtitan's 4 racks, the FSDP gathers across them contending with each rack's EP all-to-alls.
  auto seed001 = shipped_expected_analytic("seed001-torchtitan-nvl72");
  seed001["network"]["model"] = "flow";
  expect_reduced_as_full(seed001, 4, 64);
}

// What the reduction cannot prove it runs in full, and says why.
TEST(ReplicaSymmetry, RunsThatAreNotProvenSymmetricSimulateEveryGpuAndSayWhy) {
  auto doc = two_nodes_of_small_ep(8, "analytic");
  EXPECT_EQ(reduced_run_of(doc, false).engine.replicas, 2u);
  const auto why = [&](schema::Json d) {
    const ReducedRun r = reduced_run_of(d, false);
    EXPECT_EQ(r.engine.replicas, 1u);
    EXPECT_EQ(r.engine.simulated_gpus, 16u);
    return r.engine.full_because;
  };
  auto sampled = doc;
  sampled["routing"]["sampling"] = "sampled";
  EXPECT_EQ(why(sampled), "sampled routing draws each GPU's own tokens");
  auto one = doc;
  one["parallel"]["ep"] = 16;  // one EP group holds every GPU: one replica
  EXPECT_EQ(why(one), "its layout has one replica per stage");
  // Two GPU kinds, one per node: the replicas' GPUs differ.
  auto mixed = doc;
  mixed["cluster"]["groups"] = schema::Json::parse(R"([{"gpu": "h100-sxm5-80gb", "count": 8}, {"gpu": "a100-sxm4-80gb", "count": 8}])");
  mixed["cluster"].erase("gpu");
  EXPECT_EQ(why(mixed), "the replicas run on different GPU kinds");
  // 12 GPUs in 2 nodes of 6, EP 4: units of 4 cannot keep nodes of 6 whole (a shift by 4 carries
  // GPUs 4 and 5 of node 0 into node 1 and GPUs 6 and 7 of node 1 within it), and no larger unit
  // divides the 12.
  auto uneven = doc;
  uneven["cluster"]["levels"][1]["count"] = 6;
  uneven["parallel"]["ep"] = 4;
  const ReducedRun r = reduced_run_of(uneven, false);
  EXPECT_EQ(r.engine.replicas, 1u);
  EXPECT_EQ(r.engine.full_because, "the replicas sit differently on tier 0 of the cluster");
}

// Each GPU of a replica stands for its copies in the others: GPU g's metrics are those of
// g mod 8 (unit 0 of the single stage), and a collective over the whole stage (the dense
// gradients' all-reduce: 16 members, 8 simulated) stands for 2 · 8 / 16 = 1 collective, one over a
// replica's EP group (8 members, all simulated) for 2.
TEST(ReplicaSymmetry, ACollectiveStandsForTheReplicasItsGroupCovers) {
  simulation::ReplicaSymmetry s;
  s.copies = 2;
  s.unit = 8;
  for (std::uint32_t g = 0; g < 16; ++g) s.representative.push_back(g % 8);
  EXPECT_EQ(s.simulated_gpus(), 8u);
  EXPECT_TRUE(s.simulated(7));
  EXPECT_FALSE(s.simulated(8));
  EXPECT_EQ(s.collective_copies(16, 8), 1u);
  EXPECT_EQ(s.collective_copies(8, 8), 2u);
  EXPECT_EQ(s.collective_copies(2, 1), 1u);
  // Its images: the other replica's GPUs, rank for rank (unit 0 → unit 1 adds 8); a group spanning
  // both replicas has none.
  s.stage_size = 16;
  s.radix = {2};
  EXPECT_EQ(s.image(3, 1), 11u);
  EXPECT_EQ(s.image(11, 1), 3u);
  EXPECT_EQ(s.images({0, 1, 2, 3, 4, 5, 6, 7}, 2), (std::vector<std::vector<std::uint32_t>>{{8, 9, 10, 11, 12, 13, 14, 15}}));
  EXPECT_TRUE(s.images({0, 8}, 1).empty());
  // Four units in two blocks of two (radix 2, 2): unit 1 → 3 adds digit 1 to the second digit and
  // keeps the first: GPU 4·1 + 1 (unit 1 of units of 4) goes to 4·3 + 1.
  s.unit = 4;
  s.copies = 4;
  s.radix = {2, 2};
  EXPECT_EQ(s.image(5, 2), 13u);
  EXPECT_EQ(s.image(5, 1), 1u);  // the first digit cycles inside its block: unit 1 → unit 0
}

// A trace records the tasks of its GPUs: of the simulated replica's, the same tasks at the same
// times as when every GPU is simulated, so tracing GPUs 0-7 (replica 0 of kSmallEp on 2 nodes of 8,
// EP 8) keeps the reduction and writes the full run's trace; tracing GPU 8 runs in full.
TEST(ReplicaSymmetry, ATraceOfTheSimulatedReplicaIsTheFullRunsTrace) {
  const auto doc = two_nodes_of_small_ep(8, "flow");
  const auto traced = [&](std::uint32_t last, bool every_gpu, report::EngineStats* engine) {
    simulation::Simulation sim(test::scenario_from(doc.dump()));
    simulation::RunOptions options;
    options.trace = true;
    options.trace_gpus.assign(16, false);
    for (std::uint32_t g = 0; g <= last; ++g) options.trace_gpus[g] = true;
    options.every_gpu = every_gpu;
    sim.run(options);
    *engine = sim.results().engine;
    std::ostringstream out;
    sim.write_trace(out);
    return out.str();
  };
  report::EngineStats reduced, full, wider;
  const std::string trace = traced(7, false, &reduced);
  EXPECT_EQ(reduced.replicas, 2u);
  EXPECT_EQ(trace, traced(7, true, &full));
  EXPECT_EQ(full.replicas, 1u);
  EXPECT_NE(trace.find("\"pid\":7"), std::string::npos);
  traced(8, false, &wider);
  EXPECT_EQ(wider.replicas, 1u);
  EXPECT_EQ(wider.full_because,
            "the trace records GPU 8, whose replica is not simulated (--trace-gpus within 0-7 keeps the 2 replicas simulated once)");
}
