// Runs collectives on the engine with the analytic model: when the last member arrives, the
// collective ends α-β time later. Accumulates network statistics for the report.
#pragma once

#include <array>
#include <vector>

#include "sim/engine/engine.hpp"
#include "sim/network/analytic_model.hpp"

namespace moesim::network {

struct KindStats {
  std::uint64_t collectives = 0;
  std::uint64_t pairs = 0;
  double bytes = 0;
  Time time = 0;  // sum of collective durations
};

struct NetworkStats {
  std::vector<double> bytes_by_level;
  std::array<KindStats, 5> by_kind{};  // indexed by CollectiveKind
};

// The collective programme: the op of every engine collective, by CollectiveId.
struct CollectiveProgram {
  GroupTable groups;
  std::vector<CollectiveOp> ops;
};

class AnalyticExecutor final : public engine::CollectiveExecutor {
 public:
  AnalyticExecutor(const AnalyticModel& model, const CollectiveProgram& program);
  void start(engine::Engine& engine, engine::CollectiveId id, Time now) override;
  const NetworkStats& stats() const { return stats_; }

 private:
  const AnalyticModel& model_;
  const CollectiveProgram& program_;
  NetworkStats stats_;
};

}  // namespace moesim::network
