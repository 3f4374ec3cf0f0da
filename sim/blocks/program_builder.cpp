#include "sim/blocks/program_builder.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/error.hpp"

namespace moesim::blocks {

namespace {
engine::WorkKind work_kind(network::CollectiveKind k) {
  switch (k) {
    case network::CollectiveKind::AllToAll: return engine::WorkKind::AllToAll;
    case network::CollectiveKind::AllGather: return engine::WorkKind::AllGather;
    case network::CollectiveKind::ReduceScatter: return engine::WorkKind::ReduceScatter;
    case network::CollectiveKind::AllReduce: return engine::WorkKind::AllReduce;
    case network::CollectiveKind::P2P: return engine::WorkKind::P2P;
    case network::CollectiveKind::HostCopy: return engine::WorkKind::HostCopy;
    case network::CollectiveKind::Count: break;
  }
  invariant_failed("a collective of no kind");
}
}  // namespace

ProgramBuilder::ProgramBuilder(engine::Engine& engine, network::CollectiveProgram& program,
                               std::shared_ptr<const parallel::StreamSet> streams, HostLaunch host)
    : engine_(engine), program_(program), streams_(std::move(streams)), host_(std::move(host)) {}

engine::TaskId ProgramBuilder::add(std::uint32_t gpu, Time duration, const engine::Label& label, engine::TaskId after,
                                   parallel::StreamRole role, double sm_share, const engine::Launch& launch) {
  if (!writes(gpu)) return engine::kNone;
  const std::uint8_t s = stream(role);
  const engine::TaskId previous = engine_.stream_tail(gpu, s);
  const engine::TaskId id = engine_.add_compute(gpu, s, duration, label, sm_share, launch);
  if (after != previous) depend(after, id);
  return id;
}

engine::TaskId ProgramBuilder::compute(std::uint32_t gpu, compute::Work work, const engine::Label& label,
                                       engine::TaskId after, parallel::StreamRole role, double sm_share) {
  if (!writes(gpu)) return engine::kNone;
  const std::size_t kind = kind_of_ ? kind_of_->kind_index(gpu) : 0;
  if (kernel_time_.size() <= kind) kernel_time_.resize(kind + 1);
  kernel_time_[kind].costed += work.time;
  kernel_time_[kind].measured += work.measured;
  return add(gpu, work.time, label, after, role, sm_share, host_.launch(gpu, module_, label, work.kernels));
}

engine::TaskId ProgramBuilder::wait(std::uint32_t gpu, Time duration, const engine::Label& label, engine::TaskId after,
                                    parallel::StreamRole role) {
  return add(gpu, duration, label, after, role, 0, {});
}

engine::TaskId ProgramBuilder::read(std::uint32_t gpu, Time sync, const engine::Label& label, engine::TaskId after) {
  return add(gpu, 0, label, after, parallel::StreamRole::Compute, 0, host_.read(gpu, label, sync));
}

void ProgramBuilder::collective(network::CollectiveOp op, parallel::StreamRole role, const engine::Label& label,
                                std::vector<engine::TaskId>& members, const std::vector<engine::TaskId>* after,
                                const std::function<double(std::uint32_t)>& sm_share) {
  const auto& gpus = program_.groups.members(op.group);
  const engine::WorkKind kind = work_kind(op.kind);
  const std::uint8_t s = stream(role);
  std::size_t written = gpus.size();
  if (!simulated_.empty()) {
    written = 0;
    for (const std::uint32_t g : gpus) written += simulated_[g] ? 1 : 0;
    members.assign(gpus.size(), engine::kNone);
    if (written == 0) return;
    op.copies = copies_(gpus.size(), written);
  }
  const engine::CollectiveId id = engine_.add_collective(static_cast<std::uint32_t>(written), kind);
  program_.add(id, std::move(op));
  engine::Label l = label;
  l.kind = kind;
  members.resize(gpus.size());
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    if (!writes(gpus[r])) continue;
    const engine::TaskId previous = engine_.stream_tail(gpus[r], s);
    members[r] = engine_.add_member(id, gpus[r], s, l, sm_share ? sm_share(gpus[r]) : 0.0,
                                    host_.launch(gpus[r], module_, l, 1));
    if (after && (*after)[gpus[r]] != previous) depend((*after)[gpus[r]], members[r]);
  }
}

engine::TaskId ProgramBuilder::p2p(std::uint32_t sender, std::uint32_t receiver, double bytes, parallel::StreamRole send,
                                   parallel::StreamRole receive, const engine::Label& label, engine::TaskId after) {
  if (!writes(sender) && !writes(receiver)) return engine::kNone;
  if (!writes(sender) || !writes(receiver))
    invariant_failed(fmt::format("a point-to-point transfer from GPU {} to GPU {} leaves the simulated replica", sender, receiver));
  const engine::CollectiveId id = engine_.add_collective(2, engine::WorkKind::P2P);
  network::CollectiveOp op{network::CollectiveKind::P2P, network::Algorithm::Direct, group({sender, receiver}), bytes, nullptr};
  if (copies_) op.copies = copies_(2, 2);
  program_.add(id, std::move(op));
  engine::Label l = label;
  l.kind = engine::WorkKind::P2P;
  const std::uint8_t s = stream(send);
  const engine::TaskId previous = engine_.stream_tail(sender, s);
  const engine::TaskId out = engine_.add_member(id, sender, s, l, 0, host_.launch(sender, module_, l, 1));
  if (after != previous) depend(after, out);
  return engine_.add_member(id, receiver, stream(receive), l, 0, host_.launch(receiver, module_, l, 1));
}

engine::TaskId ProgramBuilder::host_copy(std::uint32_t gpu, double bytes, bool to_host, parallel::StreamRole role,
                                         const engine::Label& label, engine::TaskId after) {
  network::CollectiveOp op{network::CollectiveKind::HostCopy, network::Algorithm::Direct, group({gpu}), bytes, nullptr};
  op.to_host = to_host;
  std::vector<engine::TaskId> member;
  collective(std::move(op), role, label, member);
  depend(after, member[0]);
  return member[0];
}

void ProgramBuilder::depend(engine::TaskId before, engine::TaskId after) {
  if (before != engine::kNone && after != engine::kNone) engine_.depend(before, after);
}

void ProgramBuilder::simulate_only(std::vector<bool> simulated, std::function<std::uint32_t(std::size_t, std::size_t)> copies) {
  if (engine_.task_count() != 0) invariant_failed("simulate_only() after tasks were written");
  simulated_ = std::move(simulated);
  copies_ = std::move(copies);
}

const std::vector<network::GroupId>& ProgramBuilder::groups(const parallel::FamilyPtr& family) {
  auto [it, fresh] = families_.try_emplace(family);
  if (fresh)
    for (const auto& g : family->groups)
      if (g.size() > 1 && std::any_of(g.begin(), g.end(), [&](std::uint32_t m) { return writes(m); }))
        it->second.push_back(group(g));
  return it->second;
}

void ProgramBuilder::forget_unused_families() {
  std::erase_if(families_, [](const auto& entry) { return entry.first.use_count() == 1; });
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

}  // namespace moesim::blocks
