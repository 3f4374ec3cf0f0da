// The host-memory estimate (simulation/memory_estimate.hpp) and the sizes it is made of.
#include <filesystem>
#include <gtest/gtest.h>

#include "sim/core/huge_pages.hpp"
#include "sim/engine/block_queue.hpp"
#include "sim/network/flow_links.hpp"
#include "sim/network/max_min.hpp"
#include "sim/report/metrics.hpp"
#include "sim/report/results.hpp"
#include "test_support.hpp"

namespace moesim {
namespace {

TEST(MemoryEstimate, BlockQueueHoldsItsBlocksAndChunks) {
  // Tasks: 64 B records in blocks of 4096 (256 KiB), eight blocks to a 2 MiB chunk after the first
  // block. Up to a block, the records written.
  using Tasks = engine::BlockQueue<engine::Task>;
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(1000, 1000, true), 64000.0);
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(4096, 4096, true), 262144.0);
  // quickstart's two iterations held and written, 14656 tasks: 4 blocks, the first and 3 from a
  // chunk, whole on huge pages, else the 3 blocks touched.
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(14656, 14656, true), 262144.0 + 2097152);
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(14656, 14656, false), 4 * 262144.0);
  // A long run (seed 004: 7876 held of 776498): the live tasks straddle one block more, 3 blocks.
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(7876, 776498, true), 262144.0 + 2097152);
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(7876, 776498, false), 3 * 262144.0);
  // deepseek-v3-gb200's 3649600 tasks: 892 blocks, 891 in 112 chunks (the run allocated 112).
  EXPECT_DOUBLE_EQ(Tasks::resident_bytes(3649600, 3649600, true), 262144.0 + 112 * 2097152.0);
  // Its 137854 collectives (40 B, blocks of 1024 = 40 KiB, 51 to a chunk): 135 blocks, 134 in 3
  // chunks (the run allocated 3).
  using Collectives = engine::BlockQueue<engine::Collective, 10>;
  EXPECT_DOUBLE_EQ(Collectives::resident_bytes(137854, 137854, true), 40960.0 + 3 * 2097152.0);
}

TEST(MemoryEstimate, FlowLinksAreCountedAsTheConstructorNumbersThem) {
  // Every shipped scenario's cluster (switches with ports and cores, meshes, hosts with PCIe
  // switches, 9216 GPUs).
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MOESIM_SOURCE_DIR) + "/scenarios")) {
    const auto l = test::loader();
    const std::string file = entry.path().string();
    const scenario::Scenario s = l.build(l.resolve(l.read_json(file), file), file);
    const cluster::Topology topology = s.topology();
    EXPECT_EQ(network::FlowLinks::count(topology), network::FlowLinks(topology).size()) << file;
  }
}

TEST(MemoryEstimate, RunStateIsPerGpuStreamAndHost) {
  // 16 GPUs with 4 streams, each its own host: streams 16·4·8 = 512, SM shares 2·16·40 = 1280
  // (the constructor's resources for 16 GPUs and 16 hosts), host of each GPU 16·4 = 64, the host
  // lists 16·24 = 384 and 16 blocks of one GPU (32 B) = 512, an event per stream 16·4·32 = 2048,
  // and an iteration of 7328 tasks added while running, 8192·4 = 32768; a launch thread per GPU
  // (72 B: its clock, the task it waits for, its resume time, the pending vector and index, its
  // wait statistics) 16·72 = 1152; a sustained-clock state per GPU (40 B: its factor, time
  // constant, heat, time and running count) 16·40 = 640: 39360 B.
  EXPECT_DOUBLE_EQ(engine::Engine::state_bytes(16, 4, 0, 7328), 39360.0);
  // Where the threads stop at reads, they may hold back as pending launches every task of the two
  // iterations held (24 B each: the id and its Launch): 14656 over 16 GPUs, 916 each, a vector
  // grown to 1024 entries (24576 B, a 24592 B heap block) per GPU: 393472 B more.
  EXPECT_DOUBLE_EQ(engine::Engine::state_bytes(16, 4, 0, 7328, 14656), 39360.0 + 16 * 24592.0);
  // 2 hosts of 8 GPUs: their lists a 48 B block each (8 ids of 4 B and the header); nothing added.
  EXPECT_DOUBLE_EQ(engine::Engine::state_bytes(16, 4, 2, 0), 512.0 + 1280 + 64 + 384 + 2 * 48 + 2048 + 1152 + 640);
  // Metrics per GPU: its 152 B here and in the result, the 56 B of its pending lists, and each
  // list grown to 32 intervals of 16 B (kSettleEvery; a 528 B block), or with 20 tasks to 16
  // (10 each way: a 272 B block).
  EXPECT_DOUBLE_EQ(report::MetricsRecorder::memory_estimate(16, 916), 16 * (2 * 152.0 + 56 + 2 * 528));
  EXPECT_DOUBLE_EQ(report::MetricsRecorder::memory_estimate(16, 20), 16 * (2 * 152.0 + 56 + 2 * 272));
  // Results per GPU: metrics 152 B, memory footprint 48 B, its kind (2 B) and capacity (8 B);
  // per host its memory (8 B).
  EXPECT_DOUBLE_EQ(report::Results::memory_estimate(16, 0), 16 * (152.0 + 48 + 2 + 8));
  EXPECT_DOUBLE_EQ(report::Results::memory_estimate(16, 2), 16 * (152.0 + 48 + 2 + 8) + 2 * 8);
}

TEST(MemoryEstimate, QuickstartTermByTerm) {
  // ep on 16 GPUs, 2 iterations of 2 microbatches, 12 MoE layers, pipelining degree 2. Per GPU
  // and microbatch (ep_strategy.cpp) 220 tasks, of them 12·2·2·2 = 96 members of all-to-alls over
  // the 16; per iteration 18 more, 14 of them members of all-reduces over the 16 (12 layers' dense
  // gradients, the 2 vocabulary ends'): 7328 tasks, 3296 members, 206 collectives per iteration.
  // Both iterations held: 14656 tasks in 4 blocks, the first and 3 from a chunk (whole on huge
  // pages: 262144 + 2097152 B, else 4·262144); 6592 members (26368 B), 412 collectives (16480 B)
  // and 13184 edges (105472 B), each within its first block; 412 ops of 520/7 B.
  simulation::Simulation sim(test::scenario_from(test::repository_file("scenarios/quickstart.json")));
  const strategies::ProgramSize size = sim.program_per_iteration();
  EXPECT_DOUBLE_EQ(size.tasks, 7328.0);
  EXPECT_DOUBLE_EQ(size.members, 3296.0);
  EXPECT_DOUBLE_EQ(size.collectives, 206.0);
  const simulation::MemoryEstimate& e = sim.memory_estimate();
  const double tasks = transparent_huge_pages() ? 262144.0 + 2097152 : 4 * 262144.0;
  EXPECT_DOUBLE_EQ(e.program, tasks + 26368 + 16480 + 105472 + 412 * 520.0 / 7);
  // Sampled routing: per MoE layer and microbatch a 16 × 16 matrix of doubles and its transpose,
  // 4096 B, × 12 layers × 2 microbatches × 2 iterations.
  EXPECT_DOUBLE_EQ(e.routing, 196608.0);
  // The run state: the engine's (4 streams: compute, dispatch, combine, gradients; no hosts
  // described), metrics of 14656 / 16 tasks per GPU, results, the flow model's.
  const cluster::Topology& t = sim.topology();
  EXPECT_FALSE(t.hosts());
  EXPECT_DOUBLE_EQ(e.state, engine::Engine::state_bytes(16, 4, 0, 7328) + report::MetricsRecorder::memory_estimate(16, 916) +
                                report::Results::memory_estimate(16, 0) + network::FlowExecutor::memory_estimate(t));
  EXPECT_DOUBLE_EQ(e.alternatives, 0.0);
  EXPECT_DOUBLE_EQ(sim.host_memory_estimate(), e.program + e.routing + e.state);
  // What its CPU time grows with: the tasks of both iterations.
  EXPECT_DOUBLE_EQ(e.tasks, 14656.0);
}

TEST(MemoryEstimate, FlowModelStateIsPerLinkAndPerGpu) {
  // kSmallEp's 4 GPUs on one switch: 2 port links per GPU and 2 PCIe links per GPU, 16 links.
  // Per link the executor's tables (92 B: capacity, the capacity kept flows leave, rate, bytes,
  // peak, the slowest drained rate, busy and busy-since at 8 B, a mark at 4 B, the vector of the
  // flows on it at 24 B), the demands' scratch (8 B), the solver's state (61 B) and the links' own
  // tables (12 B, 16 grown); in flight each GPU's 4 links in a flow's share (16 B), the link's
  // list of flows (8 B), the flow's place in it, the solver's lists and a component's links (4 B
  // each), and each GPU's flow: its slot (112 B), mark and place in a component (4 B each), its
  // heap entry (a 48 B list node in a 64 B malloc block, 8 B in the heap's array); what it keeps
  // for reuse (FlowExecutor::phase_demand): the link demands of 64 collectives over every GPU (64 ·
  // 16 of 16 B) and 64 dense matrices over the 4 GPUs (64 · 4² · 8 B).
  const cluster::Topology t = test::scenario_from(test::kSmallEp).topology();
  EXPECT_EQ(network::FlowLinks::count(t), 16u);
  EXPECT_DOUBLE_EQ(network::MaxMinSolver::kBytesPerLink, 61.0);
  EXPECT_DOUBLE_EQ(network::FlowExecutor::memory_estimate(t), 16 * (92.0 + 8 + 61) + 16 * 12 + 4 * 4 * 36 +
                                                                  4 * (112 + 8 + 64 + 8) + 64 * 16 * 16 + 64 * 16 * 8);
}

TEST(MemoryEstimate, AlternativesRunWhileTheMainRunIsHeld) {
  // parm-table5-a's "auto" also runs S1 and S2 (Strategy::alternatives), one after the other, the
  // main run's memory held: the larger of their runs is added.
  auto doc = schema::Json::parse(test::repository_file("scenarios/parm-table5-a.json"));
  doc.erase("sweep");
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  double largest = 0, alternative_tasks = 0;
  const double main_tasks = sim.program_per_iteration().tasks * sim.scenario().training.iterations;
  for (const char* schedule : {"s1", "s2"}) {
    doc["strategy"]["schedule"] = schedule;
    simulation::Simulation alt(test::scenario_from(doc.dump()));
    EXPECT_DOUBLE_EQ(alt.memory_estimate().alternatives, 0.0);
    largest = std::max(largest, alt.memory_estimate().run());
    alternative_tasks += alt.memory_estimate().tasks;
  }
  EXPECT_GT(largest, 0.0);
  EXPECT_DOUBLE_EQ(sim.memory_estimate().alternatives, largest);
  // Their memory is held one at a time, but each runs in full: their tasks add up.
  EXPECT_DOUBLE_EQ(sim.memory_estimate().tasks, main_tasks + alternative_tasks);
}

// What a run writes against what its strategy's program_per_iteration says one iteration writes
// (× the iterations): a bound, and not far above.
TEST(MemoryEstimate, ProgramSizeBoundsWhatTheRunWrites) {
  const struct {
    const char* path;
    double slack;  // how far above what the run writes each count may be
  } cases[] = {
      {"scenarios/quickstart.json", 1.05},        // ep, pipelining 2
      {"scenarios/hetermoe-pp.json", 1.05},       // ep, 2 pipeline stages
      {"scenarios/hetermoe-o2-w2.json", 1.5},     // zebra
      {"scenarios/hybridep-table6.json", 1.5},    // hybridep
      {"scenarios/parm-table3-a.json", 2.0},      // parm
      // adaptive: a class whose replicas share a rank needs no collective; the bound takes every class
      {"scenarios/seed004-gpt-small.json", 2.0},
  };
  for (const auto& c : cases) {
    const int iterations = 3;
    auto doc = schema::Json::parse(test::repository_file(c.path));
    doc.erase("sweep");
    doc["training"]["iterations"] = iterations;
    simulation::Simulation sim(test::scenario_from(doc.dump(), c.path));
    const strategies::ProgramSize size = sim.program_per_iteration();
    sim.run(test::with_task_log());
    double members = 0;
    for (const auto& t : sim.task_log().tasks()) members += t.type == engine::TaskType::CollectiveMember ? 1 : 0;
    const double tasks = static_cast<double>(sim.results().engine.tasks);
    const double collectives = static_cast<double>(sim.results().engine.collectives);
    for (const auto& [what, counted, run] : {std::tuple{"tasks", size.tasks, tasks}, {"members", size.members, members},
                                             {"collectives", size.collectives, collectives}}) {
      EXPECT_GE(iterations * counted, run) << c.path << ": " << what;
      EXPECT_LE(iterations * counted, c.slack * run) << c.path << ": " << what;
    }
  }
}

}  // namespace
}  // namespace moesim
