// ProgramBuilder: how strategies write the task program of an iteration. Stream 0 of every GPU
// computes; streams 1 and 2 carry the dispatch and combine all-to-alls (so a combine can overlap
// the next chunk's dispatch); stream 3 carries gradient synchronisation; stream 4 is a side stream:
// HybridEP's expert all-gathers, issued ahead of the layers that need them, and the all-gathers
// Parm's SAA runs beside its all-to-all phases.
#pragma once

#include <vector>

#include "sim/engine/engine.hpp"
#include "sim/network/analytic_executor.hpp"

namespace moesim::strategies {

inline constexpr std::uint8_t kComputeStream = 0;
inline constexpr std::uint8_t kDispatchStream = 1;
inline constexpr std::uint8_t kCombineStream = 2;
inline constexpr std::uint8_t kGradientStream = 3;
inline constexpr std::uint8_t kMigrationStream = 4;
inline constexpr std::uint8_t kStreamsPerGpu = 5;

class ProgramBuilder {
 public:
  ProgramBuilder(engine::Engine& engine, network::CollectiveProgram& program) : engine_(engine), program_(program) {}

  engine::TaskId compute(std::uint32_t gpu, Time duration, const engine::Label& label) {
    return engine_.add_compute(gpu, kComputeStream, duration, label);
  }
  // Adds one collective over `op.group`: member tasks in rank order on `stream`, written to
  // `members` (members[r] is the task of the group's rank r).
  void collective(network::CollectiveOp op, std::uint8_t stream, const engine::Label& label,
                  std::vector<engine::TaskId>& members);
  void depend(engine::TaskId before, engine::TaskId after) { engine_.depend(before, after); }
  network::GroupId group(std::vector<std::uint32_t> gpus) { return program_.groups.intern(std::move(gpus)); }
  const std::vector<std::uint32_t>& group_members(network::GroupId id) const { return program_.groups.members(id); }
  engine::Label label(engine::Phase phase, engine::WorkKind kind, std::string_view name, int iteration, int layer,
                      int microbatch = 0, int chunk = 0);
  engine::Engine& engine() { return engine_; }

 private:
  engine::Engine& engine_;
  network::CollectiveProgram& program_;
};

}  // namespace moesim::strategies
