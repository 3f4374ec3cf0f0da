#include "sim/strategies/program.hpp"

namespace moesim::strategies {

namespace {
engine::WorkKind work_kind(network::CollectiveKind k) {
  switch (k) {
    case network::CollectiveKind::AllToAll: return engine::WorkKind::AllToAll;
    case network::CollectiveKind::AllGather: return engine::WorkKind::AllGather;
    case network::CollectiveKind::ReduceScatter: return engine::WorkKind::ReduceScatter;
    case network::CollectiveKind::AllReduce: return engine::WorkKind::AllReduce;
    case network::CollectiveKind::P2P: return engine::WorkKind::P2P;
  }
  return engine::WorkKind::AllToAll;
}
}  // namespace

void ProgramBuilder::collective(network::CollectiveOp op, std::uint8_t stream, const engine::Label& label,
                                std::vector<engine::TaskId>& members) {
  const auto& gpus = program_.groups.members(op.group);
  const engine::WorkKind kind = work_kind(op.kind);
  const engine::CollectiveId id = engine_.add_collective(static_cast<std::uint32_t>(gpus.size()), kind);
  if (program_.ops.size() != id) program_.ops.resize(id);
  program_.ops.push_back(std::move(op));
  engine::Label l = label;
  l.kind = kind;
  members.resize(gpus.size());
  for (std::size_t r = 0; r < gpus.size(); ++r) members[r] = engine_.add_member(id, gpus[r], stream, l);
}

engine::Label ProgramBuilder::label(engine::Phase phase, engine::WorkKind kind, std::string_view name, int iteration,
                                    int layer, int microbatch, int chunk) {
  engine::Label l;
  l.phase = phase;
  l.kind = kind;
  l.name = engine_.intern(name);
  l.iteration = static_cast<std::uint16_t>(iteration);
  l.layer = static_cast<std::uint16_t>(layer);
  l.microbatch = static_cast<std::uint16_t>(microbatch);
  l.chunk = static_cast<std::uint16_t>(chunk);
  return l;
}

}  // namespace moesim::strategies
