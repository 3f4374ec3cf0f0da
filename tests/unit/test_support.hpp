// Helpers shared by the unit tests: load scenarios from inline JSON with the repository's presets.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "calibrate/fit/nccl_tests_log.hpp"
#include "calibrate/fit/profile_builder.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/token_routing.hpp"
#include "sim/cluster/link_graph.hpp"
#include "sim/cluster/topology.hpp"
#include "sim/core/error.hpp"
#include "sim/engine/task_log.hpp"
#include "sim/network/analytic_executor.hpp"
#include "sim/network/flow_executor.hpp"
#include "sim/scenario/scenario.hpp"
#include "sim/simulation/simulation.hpp"

namespace moesim::test {

// A GPU kind for network tests: its compute figures do not matter there.
inline cluster::GpuSpec any_gpu() {
  cluster::GpuSpec g;
  g.key = "test-gpu";
  g.peak_flops[static_cast<std::size_t>(cluster::Dtype::bf16)] = 1e15;
  g.hbm_bytes_per_second = 1e12;
  g.memory_bytes = 80e9;
  return g;
}

// GPUs from, from + 1, ..., from + n − 1 (a group in rank order).
inline std::vector<std::uint32_t> iota(std::uint32_t n, std::uint32_t from = 0) {
  std::vector<std::uint32_t> v(n);
  for (std::uint32_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// A switch level from unit strings.
inline cluster::Level level(const char* name, std::uint32_t count, const char* bw, const char* latency,
                            double oversubscription = 1) {
  cluster::Level l;
  l.name = name;
  l.count = count;
  l.bandwidth = *parse_bandwidth(bw);
  l.latency = *parse_time(latency);
  l.oversubscription = oversubscription;
  return l;
}

// A file of the source tree (e.g. "scenarios/quickstart.json"), whole.
inline std::string repository_file(const std::string& path) {
  std::ifstream in(std::string(MOESIM_SOURCE_DIR) + "/" + path);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

// A file of tests/data/realdata (measurements published by others, SOURCES.md there).
inline std::string realdata(const std::string& name) { return repository_file("tests/data/realdata/" + name); }

// A file of tests/data/measured (what this project measured on real GPUs, SOURCES.md there).
inline std::string measured(const std::string& name) { return repository_file("tests/data/measured/" + name); }

// The profile `moesim calibrate fit LOG --gpus-per-node 8` fits from a real nccl-tests log.
inline calibration::Profile profile_from_log(const std::string& name) {
  calibrate::Measurements m;
  m.file = name;
  m.series = calibrate::read_nccl_tests_log(realdata(name), name, {.collective = "", .gpus_per_node = 8, .table = {}, .ranks = {}, .nodes = {}});
  return calibrate::build_profile({m}, {});
}

// The ep tests' small scenario: 4 GPUs on one 100 GB/s switch; 2 MoE layers, H 256, M 512, 4 experts, top-1, 4 heads, no
// vocabulary; 128 tokens per GPU, one microbatch, bf16, dropless uniform routing by expected
// shares (every source sends exactly 1/E of its tokens to each expert).
inline constexpr const char* kSmallEp = R"({
  "name": "small",
  "cluster": {"gpu": "h100-sxm5-80gb", "levels": [{"name": "gpu", "count": 4, "bandwidth": "100GB/s", "latency": "1us"}]},
  "model": {"layers": 2, "hidden": 256, "ffn_hidden": 512, "experts": 4, "top_k": 1, "heads": 4},
  "training": {"sequence_length": 128},
  "routing": {"sampling": "expected"},
  "strategy": {"name": "ep"}
})";

// Runs collectives through the engine, each started by a compute task of the given duration on
// every member, and returns each collective's [start, end].
struct NetworkBench {
  explicit NetworkBench(cluster::Topology t) : topo(std::move(t)), graph(topo), params(network::AlphaBetaTable::from_topology(topo, graph)) {}
  std::vector<std::pair<Time, Time>> run(const std::vector<std::pair<network::CollectiveOp, Time>>& ops, bool flow = true) {
    engine::Engine e(topo.gpu_count(), static_cast<std::uint8_t>(std::max<std::size_t>(8, ops.size() + 1)));  // a stream an op
    engine::TaskLog log(e);
    network::CollectiveProgram program;
    program.groups = groups;
    std::uint8_t stream = 1;
    for (const auto& [op, at] : ops) {
      const auto& gpus = program.groups.members(op.group);
      const auto id = e.add_collective(static_cast<std::uint32_t>(gpus.size()), engine::WorkKind::AllToAll);
      program.add(id, op);
      for (std::uint32_t g : gpus) {
        const auto pre = e.add_compute(g, stream, at, {});
        e.depend(pre, e.add_member(id, g, stream, {}));
      }
      ++stream;
    }
    network::AnalyticModel model(topo, params);
    std::unique_ptr<network::NetworkExecutor> x;
    if (flow) x = std::make_unique<network::FlowExecutor>(topo, params, program);
    else x = std::make_unique<network::AnalyticExecutor>(model, program);
    e.run(*x);
    stats = x->stats();
    solves = flow ? static_cast<network::FlowExecutor&>(*x).rate_solves() : 0;
    flows_solved = flow ? static_cast<network::FlowExecutor&>(*x).flows_solved() : 0;
    reused = flow ? static_cast<network::FlowExecutor&>(*x).demands_reused() : 0;
    std::vector<std::pair<Time, Time>> out;
    for (const auto& c : log.collectives()) out.emplace_back(c.start, c.end);
    return out;
  }
  network::GroupId group(std::vector<std::uint32_t> g) { return groups.intern(std::move(g)); }
  cluster::Topology topo;
  cluster::LinkGraph graph;
  network::AlphaBetaTable params;
  network::GroupTable groups;  // every run's program starts from these
  network::NetworkStats stats;
  std::uint64_t solves = 0;  // the flow model's rate solves in the last run
  std::uint64_t flows_solved = 0;  // the flows those solves filled, in all
  std::uint64_t reused = 0;        // exchange phases whose link demands the flow model kept
};

// Run options that keep every finished task (Simulation::task_log()).
inline simulation::RunOptions with_task_log() {
  simulation::RunOptions o;
  o.task_log = true;
  return o;
}

inline scenario::Loader loader() { return scenario::Loader(MOESIM_SOURCE_DIR); }

inline scenario::Scenario scenario_from(const std::string& json, const std::string& file = "test.json") {
  const auto l = loader();
  return l.build(l.resolve(schema::Json::parse(json), file), file);
}

// Expects loading `doc` to be refused at JSON path `path`, with a fix.
inline void expect_refused_at(const schema::Json& doc, const std::string& path) {
  try {
    scenario_from(doc.dump());
    ADD_FAILURE() << "accepted, expected a refusal at " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.path(), path) << e.what();
    EXPECT_FALSE(e.fix().empty()) << e.what();
  }
}

// One MoE layer's routing under a hand-written plan, on a scenario's cluster, model and routing
// (one GPU kind), with the expert compute it implies.
struct RoutingBench {
  scenario::Scenario sc;
  cluster::Topology topo;
  std::vector<compute::ComputeModel> compute;
  workload::RoutingModel routing;
  explicit RoutingBench(const schema::Json& doc)
      : sc(scenario_from(doc.dump())),
        topo(sc.topology()),
        compute{compute::ComputeModel(topo.gpu(0), sc.compute)},
        routing(sc.routing, sc.model.experts, sc.model.layers, sc.training.iterations, sc.seed) {}
  blocks::LayerRouting route(const parallel::MoeLayerPlan& layer, const parallel::IterationPlan& plan = {}, int mb = 0) const {
    const blocks::Context ctx{topo, sc.model, sc.training, routing, compute};
    return blocks::route_layer(ctx, plan, layer, 0, 0, mb);
  }
  compute::Work ffn(double tokens) const { return blocks::ffn_time(compute[0], sc.model, tokens, sc.model.ffn_hidden); }
  // A GPU's replicas, one grouped FFN over their copies (in expert order).
  compute::Work experts(std::vector<double> copies) const {
    return blocks::experts_time(compute[0], sc.model, copies, sc.model.ffn_hidden);
  }
};

// A small MoE model for the memory and recomputation tests: 4 layers, the first dense (FFN 2048),
// then 3 MoE layers of 8 SwiGLU experts of 512, top-2, one shared expert; hidden 1024, 8 heads of
// 128 (q = k = v = o = 1024 wide).
inline workload::ModelShape small_moe_model() {
  workload::ModelShape m;
  m.layers = 4;
  m.dense_layers = 1;
  m.hidden = 1024;
  m.ffn_hidden = 512;
  m.dense_ffn_hidden = 2048;
  m.experts = 8;
  m.top_k = 2;
  m.shared_experts = 1;
  m.expert_kind = workload::ExpertKind::SwiGlu;
  m.heads = 8;
  m.kv_heads = 8;
  return m;
}

// That model as a scenario named `name`: 2 H100, EP 2 over NVLink, 2 microbatches of 4096 tokens,
// balanced routing, the analytic network.
inline schema::Json small_moe_case(const char* name) {
  auto doc = schema::Json::parse(R"({
    "cluster": {"gpu": "h100-sxm5-80gb", "levels": [{"name": "gpu", "count": 2, "bandwidth": "450GB/s", "latency": "2us"}]},
    "model": {"layers": 4, "dense_layers": 1, "hidden": 1024, "ffn_hidden": 512, "dense_ffn_hidden": 2048,
              "experts": 8, "top_k": 2, "shared_experts": 1, "expert_kind": "swiglu", "heads": 8, "vocab": 0},
    "training": {"sequence_length": 4096, "micro_batch_size": 1, "microbatches": 2},
    "routing": {"sampling": "expected"},
    "network": {"model": "analytic"},
    "strategy": {"name": "ep"}
  })");
  doc["name"] = name;
  return doc;
}

// The bit set of these modules (workload::RecomputeModule, workload::OffloadModule).
template <typename Module>
std::uint8_t module_bits(std::initializer_list<Module> modules) {
  std::uint8_t b = 0;
  for (const auto m : modules) b |= static_cast<std::uint8_t>(1u << static_cast<int>(m));
  return b;
}

}  // namespace moesim::test
