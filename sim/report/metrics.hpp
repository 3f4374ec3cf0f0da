// Metrics of a finished run, measured from the engine's record of every task: iteration times,
// busy time per GPU by kind of work, exposed communication (time a communication stream is busy
// while the compute stream is idle), and time spent waiting at collective rendezvous.
#pragma once

#include <array>
#include <vector>

#include "sim/engine/engine.hpp"

namespace moesim::report {

struct GpuMetrics {
  std::array<Time, engine::kWorkKinds> busy{};
  Time compute = 0;                // union of compute-stream activity
  Time communication = 0;          // union of communication-stream activity
  Time exposed_communication = 0;  // communication not hidden behind compute
  Time collective_wait = 0;        // arrival at a collective until its last member arrived
};

struct Metrics {
  std::vector<Time> iteration_end;
  std::vector<Time> iteration_time;
  Time makespan = 0;
  std::vector<GpuMetrics> gpus;
};

Metrics measure(const engine::Engine& engine, int iterations);

}  // namespace moesim::report
