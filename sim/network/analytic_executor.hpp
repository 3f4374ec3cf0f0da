// Runs collectives on the engine with the analytic model: when the last member arrives, the
// collective ends α-β time later. Accumulates network statistics for the report.
#pragma once

#include <tuple>
#include <unordered_map>

#include <boost/container_hash/hash.hpp>

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
  // The model's cost is a function of the op and its group: ops without a traffic matrix (whose
  // address a later matrix may reuse) are costed once per (kind, algorithm, group, bytes,
  // direction). A large pipeline-parallel program repeats each tensor-parallel and pipeline
  // collective over every layer and microbatch.
  using Key = std::tuple<CollectiveKind, Algorithm, GroupId, double, bool>;
  static constexpr std::size_t kCacheLimit = 1 << 20;
  const CollectiveCost& costed(const CollectiveOp& op, CollectiveCost& scratch);

  const AnalyticModel& model_;
  CollectiveProgram& program_;
  NetworkStats stats_;
  std::unordered_map<Key, CollectiveCost, boost::hash<Key>> cache_;
};

}  // namespace moesim::network
