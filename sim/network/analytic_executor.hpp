// Runs collectives on the engine with the analytic model: when the last member arrives, the
// collective ends α-β time later. Accumulates network statistics for the report.
#pragma once

#include "sim/engine/engine.hpp"
#include "sim/network/analytic_model.hpp"
#include "sim/network/executor.hpp"

namespace moesim::network {

class AnalyticExecutor final : public NetworkExecutor {
 public:
  AnalyticExecutor(const AnalyticModel& model, CollectiveProgram& program);
  void start(engine::Engine& engine, engine::CollectiveId id, Time now) override;
  std::string model_name() const override { return "analytic"; }
  NetworkStats stats() const override { return stats_; }

 private:
  const AnalyticModel& model_;
  CollectiveProgram& program_;
  NetworkStats stats_;
};

}  // namespace moesim::network
