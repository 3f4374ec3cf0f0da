// Google Benchmark: raw engine throughput (events per second) and whole EP iterations at scale.
// Run with `make bench`; never part of the unit tests.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "sim/cluster/link_graph.hpp"
#include "sim/core/rng.hpp"
#include "sim/core/units.hpp"
#include "sim/engine/engine.hpp"
#include "sim/network/flow_executor.hpp"
#include "sim/network/max_min.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/simulation/simulation.hpp"
#include "sim/workload/routing.hpp"

using namespace moesim;

namespace {

class Instant : public engine::CollectiveExecutor {
 public:
  void start(engine::Engine& e, engine::CollectiveId id, Time now) override { e.finish_collective_at(id, now + 1000); }
};

// `gpus` GPUs, each a chain of `per_gpu` compute tasks with a 2-member collective every 4 tasks
// (GPU pairs), the shape of an EP program.
void BM_EngineChains(benchmark::State& state) {
  const auto gpus = static_cast<std::uint32_t>(state.range(0));
  const int per_gpu = 256;
  std::uint64_t events = 0;
  for (auto _ : state) {
    engine::Engine e(gpus, 2);
    engine::Label l;
    std::vector<engine::TaskId> last(gpus);
    for (int i = 0; i < per_gpu; ++i) {
      for (std::uint32_t g = 0; g < gpus; ++g) last[g] = e.add_compute(g, 0, 1000 + (g * 7 + i) % 13, l);
      if (i % 4 == 3)
        for (std::uint32_t g = 0; g + 1 < gpus; g += 2) {
          const auto c = e.add_collective(2, engine::WorkKind::AllToAll);
          for (std::uint32_t k = 0; k < 2; ++k) {
            const auto m = e.add_member(c, g + k, 1, l);
            e.depend(last[g + k], m);
            const auto after = e.add_compute(g + k, 0, 500, l);
            e.depend(m, after);
          }
        }
    }
    Instant x;
    e.run(x);
    events += e.events_processed();
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineChains)->Arg(64)->Arg(1024)->Arg(8192)->Unit(benchmark::kMillisecond);

// One iteration of the 1000-DC EP scenario (8000 GPUs, 12-layer GPT-Medium MoE).
void BM_Ep1000Dc(benchmark::State& state) {
  scenario::Loader loader(MOESIM_SOURCE_DIR);
  const auto sc = loader.load(std::string(MOESIM_SOURCE_DIR) + "/scenarios/ep-1000dc.json");
  std::uint64_t events = 0;
  for (auto _ : state) {
    simulation::Simulation sim(sc);
    sim.run();
    events += sim.results().engine.events;
  }
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Ep1000Dc)->Unit(benchmark::kMillisecond)->Iterations(3);

// The flow model's rate solver: `flows` flows, each over 16 of 4096 links chosen at random (seeded),
// some loading their links unevenly, as concurrent collective phases do.
void BM_MaxMinSolve(benchmark::State& state) {
  const auto flows = static_cast<std::size_t>(state.range(0));
  const std::size_t links = 4096;
  Rng rng(5);
  std::vector<std::vector<network::LinkDemand>> shares(flows);
  for (auto& s : shares) {
    for (int i = 0; i < 16; ++i) s.push_back({static_cast<std::uint32_t>(rng.below(links)), i == 0 ? 1.0 : 0.25 + 0.75 * rng.uniform()});
  }
  std::vector<const std::vector<network::LinkDemand>*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);
  std::vector<double> capacity(links);
  for (auto& c : capacity) c = 1e9 * (1 + rng.below(8));
  network::MaxMinSolver solver(links);
  std::vector<double> rates;
  std::size_t rounds = 0;
  for (auto _ : state) {
    solver.solve(ptrs, capacity, rates);
    rounds += solver.rounds();
    benchmark::DoNotOptimize(rates.data());
  }
  state.counters["solves/s"] = benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["rounds"] = static_cast<double>(rounds) / static_cast<double>(state.iterations());
}
BENCHMARK(BM_MaxMinSolve)->Arg(4)->Arg(64)->Arg(1024)->Arg(16384);

// The solves that dominate a pipeline-parallel run in an NVLink domain (qwen3-235b-a22b-gb200:
// ~210,000 solves, most of them one round): `flows` collectives of 32 GPUs each in a 72-GPU
// domain, each flow over its GPUs' up and down links (64 links, a = 1), consecutive flows sharing
// 8 GPUs. Equal capacities: every link of the busiest GPUs saturates at once, one or two rounds.
void BM_MaxMinSolvePipeline(benchmark::State& state) {
  const auto flows = static_cast<std::uint32_t>(state.range(0));
  const std::uint32_t gpus = 72;
  std::vector<std::vector<network::LinkDemand>> shares(flows);
  for (std::uint32_t f = 0; f < flows; ++f)
    for (std::uint32_t i = 0; i < 32; ++i) {
      const std::uint32_t g = (24 * f + i) % gpus;
      shares[f].push_back({2 * g, 1});
      shares[f].push_back({2 * g + 1, 1});
    }
  std::vector<const std::vector<network::LinkDemand>*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);
  // 900 GB/s each way: NVLink 5's 1.8 TB/s per GB200 GPU (NVIDIA GB200 NVL72 datasheet), halved.
  const std::vector<double> capacity(2 * gpus, 900e9);
  network::MaxMinSolver solver(capacity.size());
  std::vector<double> rates;
  for (auto _ : state) {
    solver.solve(ptrs, capacity, rates);
    benchmark::DoNotOptimize(rates.data());
  }
  state.counters["rounds"] = static_cast<double>(solver.rounds());
}
BENCHMARK(BM_MaxMinSolvePipeline)->Arg(1)->Arg(2)->Arg(5);

// The solves that dominated a 12-layer EP iteration at 1250 to 12,500 DCs (issue 21): the
// dispatch all-to-alls of two EP groups of `dcs`/2 DCs × 8 GPUs each (one flow per group over its
// DC and GPU links, skewed: a ∈ [0.3, 1] on DC links, ~1/8 of that on GPU links) beside the
// per-expert gradient all-reduces between the groups' replicas (one 2-GPU ring per GPU pair: 8
// links at a = 1). Every DC uplink saturates at a level of its own: ~dcs/2 rounds.
void BM_MaxMinSolveEp(benchmark::State& state) {
  const auto dcs = static_cast<std::uint32_t>(state.range(0)), gpus = dcs * 8, half = gpus / 2;
  const auto gpu_up = [](std::uint32_t g) { return 2 * g; };
  const auto gpu_down = [](std::uint32_t g) { return 2 * g + 1; };
  const auto dc_up = [&](std::uint32_t d) { return 2 * gpus + 2 * d; };
  const auto dc_down = [&](std::uint32_t d) { return 2 * gpus + 2 * d + 1; };
  const std::size_t links = 2 * gpus + 2 * dcs;
  std::vector<double> capacity(links, 16e9);
  for (std::uint32_t d = 0; d < dcs; ++d) capacity[dc_up(d)] = capacity[dc_down(d)] = 1.25e9;
  Rng rng(21);
  std::vector<std::vector<network::LinkDemand>> shares(2);
  for (std::uint32_t d = 0; d < dcs; ++d) {
    auto& a2a = shares[d < dcs / 2 ? 0 : 1];
    const double up = d % 97 == 0 ? 1.0 : 0.3 + 0.7 * rng.uniform(), down = 0.3 + 0.7 * rng.uniform();
    a2a.push_back({dc_up(d), up});
    a2a.push_back({dc_down(d), down});
    for (std::uint32_t g = d * 8; g < d * 8 + 8; ++g) {
      a2a.push_back({gpu_up(g), up / 8 * (0.5 + rng.uniform())});
      a2a.push_back({gpu_down(g), down / 8 * (0.5 + rng.uniform())});
    }
  }
  for (std::uint32_t g = 0; g < half; ++g) {
    const std::uint32_t h = g + half, dg = g / 8, dh = h / 8;
    shares.push_back({{gpu_up(g), 1}, {dc_up(dg), 1}, {dc_down(dh), 1}, {gpu_down(h), 1},
                      {gpu_up(h), 1}, {dc_up(dh), 1}, {dc_down(dg), 1}, {gpu_down(g), 1}});
  }
  std::vector<const std::vector<network::LinkDemand>*> ptrs;
  for (const auto& s : shares) ptrs.push_back(&s);
  network::MaxMinSolver solver(links);
  std::vector<double> rates;
  for (auto _ : state) {
    solver.solve(ptrs, capacity, rates);
    benchmark::DoNotOptimize(rates.data());
  }
  std::size_t entries = 0;
  for (const auto& s : shares) entries += s.size();
  state.counters["flows"] = static_cast<double>(shares.size());
  state.counters["entries"] = static_cast<double>(entries);
  state.counters["rounds"] = static_cast<double>(solver.rounds());
}
BENCHMARK(BM_MaxMinSolveEp)->Arg(1250)->Arg(12500)->Unit(benchmark::kMillisecond);

// Staggered drains in the flow model (issue 50): `dcs` DCs × 8 GPUs (10 Gbps DC links, 16 GB/s
// GPU links), every GPU of the first half sending 1-2 MB (seeded) to its replica in the second
// half, all at once: each DC pair's 8 transfers share its DC links, and they drain one at a time,
// at times of their own. A drain re-solves the flows of its DC pair only, not every flow in flight
// (counters: rate solves and flows filled per transfer).
void BM_FlowStaggeredDrains(benchmark::State& state) {
  const auto dcs = static_cast<std::uint32_t>(state.range(0)), gpus = dcs * 8, half = gpus / 2;
  std::vector<cluster::Level> levels(2);
  levels[0].name = "dc", levels[0].count = dcs, levels[0].bandwidth = {1.25e9}, levels[0].latency = 10 * kMicrosecond;
  levels[1].name = "gpu", levels[1].count = 8, levels[1].bandwidth = {16e9}, levels[1].latency = kMicrosecond;
  cluster::GpuSpec gpu;
  gpu.key = "bench-gpu";
  const cluster::Topology topo(levels, {gpu}, {});
  const cluster::LinkGraph graph(topo);
  const auto params = network::AlphaBetaTable::from_topology(topo, graph);
  Rng rng(50);
  std::vector<double> bytes(half);
  for (double& b : bytes) b = 1e6 * (1 + rng.uniform());
  std::uint64_t solves = 0, flows_solved = 0;
  for (auto _ : state) {
    engine::Engine e(gpus, 1);
    network::CollectiveProgram program;
    for (std::uint32_t g = 0; g < half; ++g) {
      const auto id = e.add_collective(2, engine::WorkKind::AllToAll);
      const network::GroupId group = program.groups.intern({g, g + half});
      program.add(id, {network::CollectiveKind::P2P, network::Algorithm::Direct, group, bytes[g], nullptr});
      e.add_member(id, g, 0, {});
      e.add_member(id, g + half, 0, {});
    }
    network::FlowExecutor x(topo, params, program);
    e.run(x);
    solves = x.rate_solves();
    flows_solved = x.flows_solved();
    benchmark::DoNotOptimize(e.now());
  }
  state.counters["transfers"] = half;
  state.counters["solves_per_transfer"] = static_cast<double>(solves) / half;
  state.counters["flows_per_transfer"] = static_cast<double>(flows_solved) / half;
}
BENCHMARK(BM_FlowStaggeredDrains)->Arg(128)->Arg(1250)->Unit(benchmark::kMillisecond);

// One iteration of the 1000-DC EP scenario with the flow model.
void BM_Ep1000DcFlow(benchmark::State& state) {
  scenario::Loader loader(MOESIM_SOURCE_DIR);
  auto doc = loader.read_json(std::string(MOESIM_SOURCE_DIR) + "/scenarios/ep-1000dc.json");
  doc["network"]["model"] = "flow";
  const auto sc = loader.build(loader.resolve(doc, "ep-1000dc.json"), "ep-1000dc.json");
  for (auto _ : state) {
    simulation::Simulation sim(sc);
    sim.run();
    benchmark::DoNotOptimize(sim.mean_iteration_time());
  }
}
BENCHMARK(BM_Ep1000DcFlow)->Unit(benchmark::kMillisecond)->Iterations(3);

// Seed 004's evaluation scenario over `iterations` iterations under one placement policy (issue
// 19: 1000 iterations in under a minute, memory flat): iterations simulated per second, and the
// run's events per second.
void BM_Seed004Iterations(benchmark::State& state, const char* placement) {
  scenario::Loader loader(MOESIM_SOURCE_DIR);
  auto doc = loader.read_json(std::string(MOESIM_SOURCE_DIR) + "/scenarios/seed004-gpt-small.json");
  doc.erase("sweep");
  doc["training"]["iterations"] = state.range(0);
  doc["strategy"]["placement"] = placement;
  const auto sc = loader.build(loader.resolve(doc, "seed004-gpt-small.json"), "seed004-gpt-small.json");
  std::uint64_t events = 0;
  for (auto _ : state) {
    simulation::Simulation sim(sc);
    sim.run();
    events += sim.results().engine.events;
  }
  const double iterations = static_cast<double>(state.iterations() * state.range(0));
  state.counters["iterations/s"] = benchmark::Counter(iterations, benchmark::Counter::kIsRate);
  state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_Seed004Iterations, adaptive, "adaptive")->Arg(200)->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK_CAPTURE(BM_Seed004Iterations, flexmoe, "flexmoe")->Arg(1000)->Unit(benchmark::kMillisecond)->Iterations(2);

// One source's sampled routing draw at 100,000 GPUs (issue 21): 8192 token copies (GPT-Medium,
// sequence 512 × micro-batch 8 × top-2) over `experts` Zipf(0.6) experts, in category order.
void BM_SparseCopyDraw(benchmark::State& state) {
  const auto experts = static_cast<std::size_t>(state.range(0));
  const std::vector<double> popularity = zipf_weights(experts, 0.6);
  const workload::GroupedAliasTable table(popularity);
  workload::SparseCopySampler sampler(2026);
  workload::SparseCopies out;
  for (auto _ : state) {
    sampler.draw(popularity, table, 8192, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["copies/s"] = benchmark::Counter(8192.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SparseCopyDraw)->Arg(8000)->Arg(50000)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
