// The host launches the GPU's work (software/software.hpp, blocks/host_launch.hpp): what each task
// costs its GPU's launch thread under a software's host costs and CUDA graphs, derived by hand; and
// whole runs that are host-bound because the simulation says so.
#include <gtest/gtest.h>

#include <filesystem>

#include "sim/blocks/host_launch.hpp"
#include "sim/core/error.hpp"
#include "sim/simulation/simulation.hpp"
#include "test_support.hpp"

using namespace moesim;
using engine::Phase;
using software::Module;

namespace {

cluster::Topology two_gpus(double factor) {
  cluster::Level level;
  level.name = "gpu";
  level.count = 2;
  level.bandwidth = Bandwidth{100e9};
  level.latency = kMicrosecond;
  cluster::GpuSpec g;
  g.key = "test";
  g.host_launch_factor = factor;
  return cluster::Topology({level}, {g}, {});
}

engine::Label label(Phase phase, int layer, int microbatch = 0, int iteration = 0) {
  engine::Label l;
  l.phase = phase;
  l.layer = static_cast<std::uint16_t>(layer);
  l.microbatch = static_cast<std::uint16_t>(microbatch);
  l.iteration = static_cast<std::uint16_t>(iteration);
  return l;
}

// Host costs of 10 us a forward launch, 5 us a backward one, 3 us a graph replay, 40 us after a
// read, with the CUDA graph scope `scope`, on two GPUs whose host issues `factor` times slower.
struct HostBench {
  software::Software sw;
  cluster::Topology topo;
  blocks::HostLaunch host;
  HostBench(const char* scope, double factor) : sw(costs(scope)), topo(two_gpus(factor)), host(sw, topo) {}
  static software::Software costs(const char* scope) {
    software::Software sw;
    sw.host = {10 * kMicrosecond, 5 * kMicrosecond, 3 * kMicrosecond, 40 * kMicrosecond};
    EXPECT_TRUE(software::parse_graph_scope(scope, sw.graphs)) << scope;
    return sw;
  }
};

}  // namespace

TEST(HostLaunch, EagerKernelsCostTheirLaunchesAGraphOneReplayPerModuleLayerAndDirection) {
  HostBench b("attn", 1.0);
  blocks::HostLaunch& host = b.host;
  // Attention of layer 0, forward: the first task opens a graph (3 us), the next task of the same
  // graph costs nothing; a task without kernels (a wait) costs nothing and keeps the graph open.
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 0), 4).cost, 3 * kMicrosecond);
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 0), 2).cost, 0);
  EXPECT_EQ(host.launch(0, Module::None, label(Phase::Forward, 0), 0).cost, 0);
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 0), 1).cost, 0);
  // The router is not captured: 4 kernels launched eagerly in a forward, 10 us each.
  EXPECT_EQ(host.launch(0, Module::Router, label(Phase::Forward, 0), 4).cost, 40 * kMicrosecond);
  // The next layer's attention is another graph; so is the same layer's in the backward, or for
  // another microbatch.
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 1), 4).cost, 3 * kMicrosecond);
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Backward, 1), 8).cost, 3 * kMicrosecond);
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Backward, 1, 1), 8).cost, 3 * kMicrosecond);
  // Eager kernels in a backward cost the backward's launch: 6 × 5 us.
  EXPECT_EQ(host.launch(0, Module::Experts, label(Phase::Backward, 1), 6).cost, 30 * kMicrosecond);
  // GPU 1's thread keeps its own graph: its first attention task replays.
  EXPECT_EQ(host.launch(1, Module::Attention, label(Phase::Backward, 1, 1), 8).cost, 3 * kMicrosecond);
  // A read: one eager launch, then the thread waits for it and the sync time.
  const engine::Launch read = host.read(0, label(Phase::Forward, 2), 40 * kMicrosecond);
  EXPECT_EQ(read.cost, 10 * kMicrosecond);
  EXPECT_EQ(read.sync, 40 * kMicrosecond);
}

TEST(HostLaunch, AFullIterationGraphIsOneReplayAndTheOptimizerStaysEager) {
  HostBench b("full_iteration", 1.0);
  blocks::HostLaunch& host = b.host;
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 0), 4).cost, 3 * kMicrosecond);
  EXPECT_EQ(host.launch(0, Module::None, label(Phase::Forward, 3, 1), 2).cost, 0);
  EXPECT_EQ(host.launch(0, Module::Experts, label(Phase::Backward, 0, 1), 9).cost, 0);
  EXPECT_EQ(host.launch(0, Module::None, label(Phase::GradSync, 0), 1).cost, 0);
  // The optimizer step after it: eager (Megatron-Core's graph wraps forward_backward_func only).
  EXPECT_EQ(host.launch(0, Module::None, label(Phase::Optimizer, 0), 2).cost, 20 * kMicrosecond);
  // The next iteration replays the graph again.
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 0, 0, 1), 4).cost, 3 * kMicrosecond);
}

TEST(HostLaunch, AGraceHostIssuesMoreSlowly) {
  // The GPU kind's host factor scales every cost: 2.75 × 4 × 10 us = 110 us, a replay 8.25 us.
  HostBench b("moe_router", 2.75);
  blocks::HostLaunch& host = b.host;
  EXPECT_EQ(host.launch(0, Module::Attention, label(Phase::Forward, 0), 4).cost, 110 * kMicrosecond);
  EXPECT_EQ(host.launch(0, Module::Router, label(Phase::Forward, 0), 4).cost, 8250 * kNanosecond);
}

TEST(HostLaunch, UnknownGraphScopesAreNotParsed) {
  software::CudaGraphs g;
  EXPECT_FALSE(software::parse_graph_scope("transformer_engine", g));
  EXPECT_TRUE(software::parse_graph_scope("moe_preprocess", g));
  EXPECT_TRUE(g.preprocess);
  EXPECT_TRUE(g.captures(Module::Router));  // moe_preprocess is captured with the router
  EXPECT_FALSE(g.captures(Module::Attention));
}

namespace {

// One GPU, a 2-layer MoE of 4 experts (top-2), 2 microbatches, one iteration: every kernel takes
// microseconds, so with launches of a millisecond the run is host-bound throughout and every task
// starts when its launch thread issues it (no collectives: a group of one GPU exchanges nothing).
// An A100, whose catalogue entry has no sustained clock: its kernels keep their rates however busy
// it has been, so the differences below are the host's alone.
schema::Json host_bound(const schema::Json& software) {
  auto doc = schema::Json::parse(R"({
    "name": "host-bound",
    "cluster": {"gpu": "a100-sxm4-80gb", "levels": [{"name": "gpu", "count": 1, "bandwidth": "450GB/s", "latency": "1us"}]},
    "model": {"layers": 2, "hidden": 64, "ffn_hidden": 64, "experts": 4, "top_k": 2, "heads": 2, "vocab": 0},
    "training": {"sequence_length": 64, "micro_batch_size": 1, "microbatches": 2},
    "routing": {"sampling": "expected"},
    "strategy": {"name": "ep"}
  })");
  doc["software"] = software;
  return doc;
}

Time iteration(const schema::Json& doc) {
  simulation::Simulation sim(test::scenario_from(doc.dump()));
  sim.run();
  return sim.mean_iteration_time();
}

}  // namespace

TEST(HostLaunch, AHostBoundRunPaysEveryLaunchTheSoftwareAdds) {
  // Launches of 1 ms, forward and backward. The router's 29 extra kernels (31 against the 2 moesim
  // costs) are launched in each MoE layer's forward, and twice as many in its backward (two per
  // forward kernel): 2 layers × 2 microbatches × (29 + 58) × 1 ms = 348 ms more, exactly, since
  // every task starts at its launch.
  const schema::Json eager = {{"host", {{"launch", "1ms"}, {"backward_launch", "1ms"}}}};
  const Time base = iteration(host_bound(eager));
  auto routed = eager;
  routed["router_kernels"] = 31;
  EXPECT_EQ(iteration(host_bound(routed)) - base, 348 * kMillisecond);
  // The 4 local experts' GeMMs launched one per expert: fc1 and fc2 4 kernels each instead of 1,
  // 6 more forward and 12 more backward per layer and microbatch: 2 × 2 × 18 × 1 ms = 72 ms.
  auto per_expert = eager;
  per_expert["grouped_gemm"] = "per_expert";
  EXPECT_EQ(iteration(host_bound(per_expert)) - base, 72 * kMillisecond);
  // Host-bound: the GPU waits for launches nearly the whole iteration.
  simulation::Simulation sim(test::scenario_from(host_bound(eager).dump()));
  sim.run();
  EXPECT_GT(sim.metrics().gpus[0].launch_wait, sim.mean_iteration_time() * 99 / 100);
  EXPECT_GT(base, 50 * kMillisecond);  // dozens of launches, each 1 ms
}

TEST(HostLaunch, AWholeIterationGraphCostsOneReplay) {
  // The same run without launch costs, and with the whole forward-backward as one CUDA graph
  // whose replay costs 1 ms: every task is issued at 1 ms, so the iteration ends 1 ms later,
  // exactly. (A full-iteration graph needs a dispatch without a read: non-blocking HybridEP.)
  schema::Json none = schema::Json::object();
  auto doc = host_bound(none);
  doc["parallel"] = {{"ep_backend", "hybridep"}, {"ep_non_blocking", true}, {"ep_capacity_factor", 1.0}};
  const Time base = iteration(doc);
  doc["software"] = {{"host", {{"graph_launch", "1ms"}}}, {"cuda_graphs", {"full_iteration"}}};
  EXPECT_EQ(iteration(doc) - base, 1 * kMillisecond);
}

TEST(HostLaunch, EverySoftwarePresetLoadsAndModelsTheHost) {
  int presets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MOESIM_SOURCE_DIR) + "/software")) {
    if (entry.path().extension() != ".json") continue;
    const auto s = test::scenario_from(host_bound({{"preset", entry.path().stem().string()}}).dump());
    EXPECT_FALSE(s.software.name.empty()) << entry.path();
    EXPECT_TRUE(s.software.models_host()) << entry.path();
    ++presets;
  }
  EXPECT_GE(presets, 4);
}

TEST(HostLaunch, AFullIterationGraphCannotCaptureADispatchThatReads) {
  auto doc = host_bound({{"cuda_graphs", {"full_iteration"}}});
  try {
    test::scenario_from(doc.dump(), "g.json");
    ADD_FAILURE() << "a full-iteration graph around a blocking dispatch accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), "$.software.cuda_graphs");
  }
}

TEST(HostLaunch, APresetsHostCostsAreOverriddenKeyByKey) {
  // The scenario's keys merge into the preset's as a JSON merge patch (RFC 7396): overriding one
  // host cost keeps the others the preset gives (megatron-bridge-26.04: 36.5 us a forward launch,
  // 48.6 us a backward one, 39 us a graph replay, 80 us after a read), an array replaces, and null
  // removes a key so its default (0 us) applies.
  auto doc = host_bound({{"preset", "megatron-bridge-26.04"}, {"host", {{"sync", "0us"}, {"graph_launch", nullptr}}},
                         {"cuda_graphs", {"attn"}}});
  const auto s = test::scenario_from(doc.dump());
  EXPECT_EQ(s.software.host.launch, 36'500'000);
  EXPECT_EQ(s.software.host.backward_launch, 48'600'000);
  EXPECT_EQ(s.software.host.sync, 0);
  EXPECT_EQ(s.software.host.graph_launch, 0);
  EXPECT_TRUE(s.software.graphs.captures(software::Module::Attention));
  EXPECT_FALSE(s.software.graphs.captures(software::Module::Router));
  EXPECT_EQ(s.software.router_kernels, 31);  // untouched keys stay the preset's
}
