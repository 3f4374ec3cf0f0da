// What one iteration writes into the engine (sim/engine/engine.hpp), for the host-memory estimate
// (simulation/memory_estimate.hpp): its tasks, the collective members among them, and the
// collectives those members form. Strategies count it block by block as the blocks write it; a
// count is a bound where a block may write less (a group of one GPU writes no collective).
#pragma once

namespace moesim::strategies {

struct ProgramSize {
  double tasks = 0;
  double members = 0;      // tasks that are collective members (Engine::add_member)
  double collectives = 0;  // Engine::add_collective

  // `n` compute tasks (kernels, waits).
  static ProgramSize kernels(double n) { return {n, 0, 0}; }
  // `n` member tasks per GPU in collectives over groups of `group` GPUs: n / group collectives per
  // GPU. A group of one GPU writes nothing (ProgramBuilder interns no such group); its tasks are
  // still counted, as the bound the task count always was.
  static ProgramSize collective(double n, double group) {
    if (group <= 1) return {n, 0, 0};
    return {n, n, n / group};
  }
  // `n` host copies per GPU: collectives of the GPU alone (blocks/optimizer_step.cpp).
  static ProgramSize host_copies(double n) { return {n, n, n}; }

  ProgramSize& operator+=(const ProgramSize& o) {
    tasks += o.tasks, members += o.members, collectives += o.collectives;
    return *this;
  }
  friend ProgramSize operator+(ProgramSize a, const ProgramSize& b) { return a += b; }
  friend ProgramSize operator*(double k, const ProgramSize& a) { return {k * a.tasks, k * a.members, k * a.collectives}; }
};

}  // namespace moesim::strategies
