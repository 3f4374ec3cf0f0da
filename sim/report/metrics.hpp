// Metrics of a run, recorded as its tasks finish: iteration times, busy time per GPU by kind of
// work, exposed communication (time a communication stream is busy while no compute runs), and
// time spent waiting at collective rendezvous, and for the host's launches.
//
// The recorder keeps, per GPU, only the busy intervals it cannot settle yet: every task that will
// still finish on a GPU began at or after Engine::running_since(gpu), so the unions of compute and
// of communication, and the communication left uncovered by compute, are final before that instant
// and are added up there. Memory stays bounded however many iterations run.
#pragma once

#include <array>
#include <vector>

#include "sim/engine/engine.hpp"

namespace moesim::report {

struct GpuMetrics {
  std::array<Time, engine::kWorkKinds> busy{};
  Time compute = 0;                // union of GPU compute activity (kernels on its SMs)
  Time communication = 0;          // union of communication activity
  Time exposed_communication = 0;  // communication not hidden behind compute
  Time collective_wait = 0;        // arrival at a collective until its last member arrived
  Time launch_wait = 0;            // kernels ready but not yet issued by the host (Engine::launch_wait)
};

struct Metrics {
  std::vector<Time> iteration_end;
  std::vector<Time> iteration_time;
  Time makespan = 0;
  std::vector<GpuMetrics> gpus;
};

class MetricsRecorder final : public engine::TaskObserver {
 public:
  // Attaches itself to `engine`.
  MetricsRecorder(engine::Engine& engine, int iterations);
  void on_finish(const engine::Engine& engine, engine::TaskId id, const engine::Task& task, Time began) override;
  // After the run: settles what is left.
  Metrics result(const engine::Engine& engine);
  // Host bytes of a recorder of `gpus` GPUs that each finish `tasks_per_gpu` tasks while their
  // oldest runs (at most kSettleEvery pending), with the Metrics result() returns: for the
  // host-memory estimate.
  static double memory_estimate(std::uint32_t gpus, double tasks_per_gpu);

 private:
  using Interval = std::pair<Time, Time>;
  struct Pending {
    std::vector<Interval> compute, communication;
    // Settles when this many intervals are pending: twice what the last settle kept, so a GPU
    // whose oldest task stays open for long is not re-sorted at every finish (amortised n log n).
    std::size_t settle_at = 0;
  };
  // Adds up the parts of GPU g's pending intervals before `until`; keeps the rest.
  void settle(std::uint32_t g, Time until);

  Metrics m_;
  std::vector<Pending> pending_;
  std::vector<Interval> compute_before_, communication_before_;   // scratch of settle()
};

}  // namespace moesim::report
