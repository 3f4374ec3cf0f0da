// The host memory a run allocates, estimated from the scenario before anything is built: what
// `validate` prints and what Simulation::check holds against what this process may use. Each term
// is a structure the run allocates, sized from the strategy's program per iteration
// (strategies/program_size.hpp) and the cluster:
//  - the task program: the engine's queues of tasks, collectives, their members and the
//    dependency edges, in their blocks and 2 MiB chunks (engine/block_queue.hpp), and the
//    collective program's op of every collective; two iterations of it at once (the run loop
//    writes iteration i + 1 when i starts, the engine retires what has finished);
//  - the sampled routing matrices, two iterations of them (Simulation::shape_of);
//  - the run's state, per GPU and per link: the engine's streams, events and hosts, the metrics
//    recorder and the results' per-GPU series, the flow model's per-link tables and its flows;
//  - the strategy's alternatives (Parm's schedules, HybridEP's domain candidates), each run after
//    the main run while that one's memory is held: the largest of them.
// What the process holds already (binary, libraries, the scenario's data, the cluster's link
// graph) is not in it: resident_bytes() measures that.
#pragma once

#include <string>

#include "sim/cluster/topology.hpp"
#include "sim/strategies/program_size.hpp"

namespace moesim::simulation {

// What a run's estimate is made of.
struct RunShape {
  strategies::ProgramSize per_iteration;  // the strategy's program_per_iteration
  int iterations = 1;
  std::size_t streams = 1;  // per GPU: the plan's StreamSet
  bool flow_model = true;   // else the analytic model, which keeps nothing per link
  double routing = 0;       // the sampled routing matrices held at once
  bool host_reads = false;  // launch threads stop at device-to-host reads (tasks added meanwhile are held)
};

struct MemoryEstimate {
  double program = 0;       // the task program: engine queues and collective ops
  double routing = 0;       // sampled routing matrices
  double state = 0;         // per GPU and per link
  double alternatives = 0;  // the largest alternative run, on top of the main run's
  // Not bytes: the tasks the run writes over its iterations, and its alternatives' (each runs in
  // full after it): what its CPU time grows with (time_estimate.hpp).
  double tasks = 0;
  double run() const { return program + routing + state; }
  double total() const { return run() + alternatives; }
};

// Its terms in words: "task program 1.1 MiB, sampled routing 192 KiB, run state 1.9 MiB" (and
// the alternatives', routing only where sampled).
std::string describe(const MemoryEstimate& estimate);

// One run's estimate (alternatives 0); `huge_pages`: core/huge_pages.hpp.
MemoryEstimate estimate_run(const cluster::Topology& topology, const RunShape& run, bool huge_pages);

}  // namespace moesim::simulation
