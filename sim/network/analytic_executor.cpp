#include "sim/network/analytic_executor.hpp"

namespace moesim::network {

AnalyticExecutor::AnalyticExecutor(const AnalyticModel& model, CollectiveProgram& program)
    : model_(model), program_(program) {
  stats_.bytes_by_level.assign(model.topology().tier_count(), 0.0);
}

const CollectiveCost& AnalyticExecutor::costed(const CollectiveOp& op, CollectiveCost& scratch) {
  const auto& members = program_.groups.members(op.group);
  if (op.traffic) return scratch = model_.cost(op, members);
  const Key key{op.kind, op.algorithm, op.group, op.bytes, op.to_host};
  if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() >= kCacheLimit) cache_.clear();
  return cache_.emplace(key, model_.cost(op, members)).first->second;
}

void AnalyticExecutor::start(engine::Engine& engine, engine::CollectiveId id, Time now) {
  const CollectiveOp& op = program_.op(id);
  CollectiveCost scratch;
  const CollectiveCost& cost = costed(op, scratch);
  engine.finish_collective_at(id, now + cost.duration);
  KindStats& k = stats_.by_kind[static_cast<std::size_t>(op.kind)];
  // Counted once per collective it stands for, as a run of every GPU adds them one by one.
  for (std::uint32_t c = 0; c < op.copies; ++c) {
    ++k.collectives;
    k.pairs += cost.pairs;
    k.time += cost.duration;
    for (std::size_t l = 0; l < cost.bytes_by_level.size(); ++l) {
      stats_.bytes_by_level[l] += cost.bytes_by_level[l];
      k.bytes += cost.bytes_by_level[l];
    }
    k.bytes += cost.host_bytes;
  }
  program_.release(id);
}

}  // namespace moesim::network
