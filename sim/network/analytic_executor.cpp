#include "sim/network/analytic_executor.hpp"

namespace moesim::network {

AnalyticExecutor::AnalyticExecutor(const AnalyticModel& model, CollectiveProgram& program)
    : model_(model), program_(program) {
  stats_.bytes_by_level.assign(model.topology().tier_count(), 0.0);
}

void AnalyticExecutor::start(engine::Engine& engine, engine::CollectiveId id, Time now) {
  const CollectiveOp& op = program_.op(id);
  const auto& members = program_.groups.members(op.group);
  const CollectiveCost cost = model_.cost(op, members);
  engine.finish_collective_at(id, now + cost.duration);
  KindStats& k = stats_.by_kind[static_cast<std::size_t>(op.kind)];
  ++k.collectives;
  k.pairs += cost.pairs;
  k.time += cost.duration;
  for (std::size_t l = 0; l < cost.bytes_by_level.size(); ++l) {
    stats_.bytes_by_level[l] += cost.bytes_by_level[l];
    k.bytes += cost.bytes_by_level[l];
  }
  k.bytes += cost.host_bytes;
  program_.release(id);
}

}  // namespace moesim::network
