#include "sim/simulation/memory_estimate.hpp"

#include <algorithm>

#include "sim/core/units.hpp"
#include "sim/engine/engine.hpp"
#include "sim/network/executor.hpp"
#include "sim/network/flow_executor.hpp"
#include "sim/report/metrics.hpp"
#include "sim/report/results.hpp"

namespace moesim::simulation {

namespace {
// Dependency edges per collective member: the member waits for the kernel before it and the
// kernel after it waits for the member, each on another stream (ProgramBuilder adds an edge only
// across streams: a kernel after a kernel on its stream needs none). The shipped scenarios' runs
// held 0.6 to 2.0 per member (the engine's edge queue at the end of each run, 2026-11-24).
constexpr double kEdgesPerMember = 2;
}  // namespace

std::string describe(const MemoryEstimate& e) {
  std::string out = "task program " + format_bytes(e.program);
  if (e.routing > 0) out += ", sampled routing " + format_bytes(e.routing);
  out += ", run state " + format_bytes(e.state);
  if (e.alternatives > 0) out += ", alternatives " + format_bytes(e.alternatives);
  return out;
}

MemoryEstimate estimate_run(const cluster::Topology& topology, const RunShape& run, bool huge_pages) {
  const strategies::ProgramSize& it = run.per_iteration;
  const double held_iterations = std::min(2, run.iterations), iterations = run.iterations;
  engine::Engine::Records held{held_iterations * it.tasks, held_iterations * it.members, held_iterations * it.collectives, 0};
  held.edges = kEdgesPerMember * held.members;
  const engine::Engine::Records written{iterations * it.tasks, iterations * it.members, iterations * it.collectives, held.edges};
  const std::uint32_t gpus = topology.gpu_count();
  const std::uint32_t hosts = topology.hosts() ? topology.host_count() : 0;

  MemoryEstimate e;
  e.program = engine::Engine::program_bytes(held, written, huge_pages) +
              held.collectives * network::CollectiveProgram::bytes_per_op();
  e.routing = run.routing;
  e.tasks = written.tasks;
  // An iteration after the first is added while the one before runs.
  const double added_while_running = run.iterations > 1 ? it.tasks : 0;
  // Launch threads that stop at reads may hold back every task written after a read: the tasks
  // held at once.
  e.state = engine::Engine::state_bytes(gpus, run.streams, hosts, added_while_running, run.host_reads ? held.tasks : 0) +
            report::MetricsRecorder::memory_estimate(gpus, held.tasks / gpus) + report::Results::memory_estimate(gpus, hosts) +
            (run.flow_model ? network::FlowExecutor::memory_estimate(topology) : 0.0);
  return e;
}

}  // namespace moesim::simulation
