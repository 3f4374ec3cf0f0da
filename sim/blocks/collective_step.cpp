#include "sim/blocks/collective_step.hpp"

namespace moesim::blocks {

void run_step(Emission& em, const parallel::CollectiveStep& step, engine::Phase phase, int layer, int mb,
              const Frontier& after, Frontier& out) {
  const auto& ids = em.pb.groups(step.groups);
  if (ids.empty()) return;
  const auto label = em.label(phase, engine::WorkKind::AllReduce, step.name, layer, mb);
  std::vector<engine::TaskId> members;
  for (const network::GroupId id : ids) {
    const auto& gpus = em.pb.group_members(id);
    if (!em.in_stage(gpus.front())) continue;  // a group of another pipeline stage
    network::CollectiveOp op{step.kind, step.algorithm, id, step.bytes, nullptr};
    if (step.kind == network::CollectiveKind::AllToAll) {
      op.bytes = 0;
      op.traffic = step.traffic ? step.traffic
                                : std::make_shared<network::TrafficMatrix>(network::TrafficMatrix::uniform(
                                      static_cast<std::uint32_t>(gpus.size()), step.bytes));
    }
    em.pb.collective(std::move(op), step.stream, label, members, &after);
    for (std::size_t r = 0; r < gpus.size(); ++r) out[gpus[r]] = members[r];
  }
}

void run_steps(Emission& em, const std::vector<parallel::CollectiveStep>& steps, engine::Phase phase, int layer, int mb,
               Frontier& chain) {
  for (const auto& step : steps) run_step(em, step, phase, layer, mb, chain, chain);
}

}  // namespace moesim::blocks
