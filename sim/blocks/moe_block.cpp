#include "sim/blocks/moe_block.hpp"

#include "sim/blocks/collective_step.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/tensor_parallel_block.hpp"

namespace moesim::blocks {

using engine::Phase;
using engine::TaskId;
using engine::WorkKind;
using parallel::MoePoint;
using parallel::StreamRole;

namespace {

const std::vector<parallel::CollectiveStep>& steps_at(const parallel::MoeLayerPlan& p, MoePoint point) {
  return p.at[static_cast<int>(point)];
}

bool exchanges(const parallel::MoeLayerPlan& p) {
  for (const auto& g : p.dispatch)
    if (g.gpus.size() > 1) return true;
  return false;
}

// One exchange of `kind` per group (gpus_of(i): the i-th group's GPUs) on `role`'s stream, member
// of GPU g after after[g]; the traffic per group (or one shared by all).
template <typename GpusOf>
void exchange(Emission& em, std::size_t groups, GpusOf gpus_of, network::CollectiveKind kind, network::Algorithm algorithm,
              const std::vector<network::TrafficPtr>& traffic, StreamRole role, const engine::Label& label,
              const Frontier& after, Frontier& out) {
  std::vector<TaskId> members;
  for (std::size_t gi = 0; gi < groups; ++gi) {
    const std::vector<std::uint32_t>& gpus = gpus_of(gi);
    if (gpus.size() <= 1) continue;
    em.pb.collective({kind, algorithm, em.pb.group(gpus), 0, traffic.size() == 1 ? traffic[0] : traffic[gi]}, role, label,
                     members, &after);
    for (std::size_t r = 0; r < gpus.size(); ++r) out[gpus[r]] = members[r];
  }
}

// One all-to-all per dispatch group.
void all_to_all(Emission& em, const parallel::MoeLayerPlan& p, const std::vector<network::TrafficPtr>& traffic,
                StreamRole role, const engine::Label& label, const Frontier& after, Frontier& out) {
  exchange(em, p.dispatch.size(), [&](std::size_t i) -> const auto& { return p.dispatch[i].gpus; },
           network::CollectiveKind::AllToAll, p.all_to_all, traffic, role, label, after, out);
}

// Expert tensor parallelism: the uneven all-gather (before the experts) or reduce-scatter (after
// them) of each ETP group's token copies (MoeLayerPlan::expert_tensor_parallel).
void expert_tensor_parallel(Emission& em, const parallel::MoeLayerPlan& p, const LayerRouting& rt, bool gather,
                            StreamRole role, const engine::Label& label, Frontier& f) {
  const auto& groups = p.expert_tensor_parallel->groups;
  exchange(em, groups.size(), [&](std::size_t i) -> const auto& { return groups[i]; },
           gather ? network::CollectiveKind::AllGather : network::CollectiveKind::ReduceScatter, network::Algorithm::Direct,
           gather ? rt.etp_gather : rt.etp_scatter, role, label, f, f);
}

// Parm's SAA (§III-D): the all-to-all in phases, phase i sending to rank r + i, each phase's
// received slice all-gathered during the next one (the GPU's own slice during the first).
// `chain` ends at each GPU's last all-to-all phase, `join` at its last all-gather phase. Parm
// builds SAA from ncclSend/ncclRecv (§III-D), so each phase's gather is grouped send/recv of the
// slice to every other rank of the group: a direct exchange, costed as one (NCCL's all-to-all is
// the same grouped send/recv), not as NCCL's ring all-gather and its α.
void phased_all_to_all(Emission& em, const parallel::MoeLayerPlan& p, StreamRole role, const engine::Label& a2a_label,
                       Phase phase, int layer, int mb, Frontier& chain, Frontier& join) {
  const parallel::PhasedGather& pg = *p.phased_gather;
  parallel::CollectiveStep gather;
  gather.name = pg.name;
  gather.kind = network::CollectiveKind::AllToAll;
  gather.algorithm = network::Algorithm::Direct;
  gather.bytes = pg.bytes_per_phase;
  gather.groups = pg.groups;
  gather.stream = pg.stream;
  run_step(em, gather, phase, layer, mb, chain, join);
  std::vector<TaskId> members;
  for (const auto& traffic : pg.phases) {
    for (const auto& group : p.dispatch) {
      if (group.gpus.size() <= 1) continue;
      em.pb.collective({network::CollectiveKind::AllToAll, network::Algorithm::Direct, em.pb.group(group.gpus), 0, traffic},
                       role, a2a_label, members, &chain);
      for (std::size_t r = 0; r < group.gpus.size(); ++r) chain[group.gpus[r]] = members[r];
    }
    run_step(em, gather, phase, layer, mb, chain, join);
  }
}

Time prologue(const Emission& em, const parallel::MoeLayerPlan& p, std::uint32_t g) {
  return p.fetch && !p.fetch->prologue.empty() ? p.fetch->prologue[em.ctx.topology.kind_index(g)] : 0;
}

// The kernel after every chunk: waits for each chunk's last task (and the phased gather's).
TaskId after_chunks(Emission& em, std::uint32_t g, Time duration, const engine::Label& label,
                    const std::vector<Frontier>& chunks, const Frontier& join) {
  const TaskId previous = em.pb.engine().stream_tail(g, em.pb.stream(StreamRole::Compute));
  const TaskId t = em.pb.compute(g, duration, label);
  for (const Frontier& c : chunks)
    if (c[g] != previous) em.pb.depend(c[g], t);
  em.pb.depend(join[g], t);
  return t;
}


// One direction of the block: which kernels open and close it, where the two exchanges of each
// chunk run, and the plan's points between them.
struct Pass {
  Phase phase;
  MoePoint before, after_experts, after_exchange, after;
  // The kernel before the chunks (forward: the router; backward: the un-permute's gradient) and
  // the one after them.
  WorkKind first_kind, last_kind;
  const char* first_name;
  const char* last_name;
  bool first_is_gate;
  // Each chunk's two exchanges: the first carries the dispatch pattern (tokens, or their output
  // gradients, towards the experts), the second the combine pattern.
  StreamRole first_stream, second_stream;
  const char* first_exchange;
  const char* second_exchange;
};

constexpr Pass kForward{.phase = Phase::Forward,
                        .before = MoePoint::BeforeGate,
                        .after_experts = MoePoint::AfterExperts,
                        .after_exchange = MoePoint::AfterCombine,
                        .after = MoePoint::AfterOutput,
                        .first_kind = WorkKind::Gate,
                        .last_kind = WorkKind::OtherCompute,
                        .first_name = "gate",
                        .last_name = "combine_output",
                        .first_is_gate = true,
                        .first_stream = StreamRole::Dispatch,
                        .second_stream = StreamRole::Combine,
                        .first_exchange = "dispatch",
                        .second_exchange = "combine"};
constexpr Pass kBackward{.phase = Phase::Backward,
                         .before = MoePoint::BeforeOutputGrad,
                         .after_experts = MoePoint::AfterExpertGrads,
                         .after_exchange = MoePoint::AfterDispatchGrad,
                         .after = MoePoint::AfterGateGrad,
                         .first_kind = WorkKind::OtherCompute,
                         .last_kind = WorkKind::Gate,
                         .first_name = "combine_output",
                         .last_name = "gate",
                         .first_is_gate = false,
                         .first_stream = StreamRole::Combine,
                         .second_stream = StreamRole::Dispatch,
                         .first_exchange = "combine",
                         .second_exchange = "dispatch"};

void moe(Emission& em, const Pass& pass, const parallel::MoeLayerPlan& p, int layer, int mb, const LayerRouting& rt,
         const Frontier* fetched, Frontier& f, Frontier& experts_done) {
  const auto& m = em.ctx.model;
  const std::uint32_t gpus = em.gpus();
  const bool forward = pass.phase != Phase::Backward;
  const bool comm = exchanges(p);
  const auto kernel_cost = [&](bool gate) {
    return PerKind(em.ctx, [&, gate](const compute::ComputeModel& cm) {
      const Time t = gate ? gate_time(cm, m, p.gate_tokens) : combine_time(cm, m, p.combine_tokens);
      return forward ? t : cm.backward(t);
    });
  };
  auto gate_kernel = kernel_cost(true), combine_kernel = kernel_cost(false);
  const auto kernel = [&](std::uint32_t g, bool gate) { return gate ? gate_kernel(g) : combine_kernel(g); };
  run_steps(em, steps_at(p, pass.before), pass.phase, layer, mb, f);
  const auto l_first = em.label(pass.phase, pass.first_kind, pass.first_name, layer, mb);
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = em.pb.compute(g, kernel(g, pass.first_is_gate), l_first, f[g]);
  // The shared experts beside the exchanges (Megatron-Core's moe_shared_expert_overlap): a
  // tensor-parallel MLP over the rank's tokens, its collectives on the side stream.
  Frontier shared;
  if (m.shared_experts > 0) {
    shared = f;
    const auto ls = em.label(pass.phase, WorkKind::Expert, "shared_expert", layer, mb);
    tensor_parallel_enter(em, pass.phase, layer, mb, shared, StreamRole::Side);
    // The shared experts: one FFN of the rank's tokens, as wide as all of them (Megatron-Core's
    // SharedExpertMLP), its columns split over tp.
    auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
      const Time t = ffn_time(cm, m, em.rank_tokens(), m.shared_experts * m.ffn_hidden / em.plan.tensor_parallel.size);
      return forward ? t : cm.backward(t);
    });
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) shared[g] = em.pb.compute(g, cost(g), ls, shared[g]);
    tensor_parallel_exit(em, pass.phase, layer, mb, shared, StreamRole::Side);
  }
  const Frontier before = f;
  experts_done.assign(gpus, engine::kNone);
  std::vector<Frontier> chunks(p.chunks, Frontier(gpus, engine::kNone));
  Frontier join(gpus, engine::kNone);
  for (int c = 0; c < p.chunks; ++c) {
    Frontier& cur = chunks[c];
    if (comm)
      all_to_all(em, p, rt.dispatch, pass.first_stream,
                 em.label(pass.phase, WorkKind::AllToAll, pass.first_exchange, layer, mb, c), before, cur);
    // Under ETP the forward gathers the tokens and the backward their output gradients; after
    // the experts the partial outputs (or input gradients) are reduce-scattered back.
    if (p.expert_tensor_parallel)
      expert_tensor_parallel(em, p, rt, true, pass.first_stream, em.label(pass.phase, WorkKind::AllGather, "etp_gather", layer, mb, c), cur);
    const auto le = em.label(pass.phase, WorkKind::Expert, "experts", layer, mb, c);
    const bool first = mb == 0 && c == 0 && pass.phase != Phase::Recompute;
    for (const std::uint32_t g : em.active()) {
      if (!em.runs_experts(g)) continue;
      const auto& cm = em.ctx.compute_of(g);
      const Time t = (forward ? rt.expert_forward[g] : cm.backward(rt.expert_forward[g])) + (first ? prologue(em, p, g) : 0);
      const TaskId e = em.pb.compute(g, t, le, cur[g]);
      if (fetched) em.pb.depend((*fetched)[g], e);
      cur[g] = experts_done[g] = e;
    }
    if (p.expert_tensor_parallel)
      expert_tensor_parallel(em, p, rt, false, pass.second_stream,
                             em.label(pass.phase, WorkKind::ReduceScatter, "etp_scatter", layer, mb, c), cur);
    run_steps(em, steps_at(p, pass.after_experts), pass.phase, layer, mb, cur);
    if (comm) {
      const auto lx = em.label(pass.phase, WorkKind::AllToAll, pass.second_exchange, layer, mb, c);
      if (p.phased_gather) phased_all_to_all(em, p, pass.second_stream, lx, pass.phase, layer, mb, cur, join);
      else all_to_all(em, p, rt.combine, pass.second_stream, lx, cur, cur);
    }
    run_steps(em, steps_at(p, pass.after_exchange), pass.phase, layer, mb, cur);
  }
  const auto l_last = em.label(pass.phase, pass.last_kind, pass.last_name, layer, mb);
  for (const std::uint32_t g : em.active()) {
    f[g] = em.runs_attention(g) ? after_chunks(em, g, kernel(g, !pass.first_is_gate), l_last, chunks, join) : chunks.back()[g];
    if (m.shared_experts > 0 && em.plan.tensor_parallel.size > 1 && em.runs_attention(g)) em.pb.depend(shared[g], f[g]);
  }
  run_steps(em, steps_at(p, pass.after), pass.phase, layer, mb, f);
}

}  // namespace

void moe_forward(Emission& em, const parallel::MoeLayerPlan& p, int layer, int mb, const LayerRouting& rt,
                 const Frontier* fetched, Frontier& f, Phase phase) {
  Frontier experts;
  Pass pass = kForward;
  pass.phase = phase;
  moe(em, pass, p, layer, mb, rt, fetched, f, experts);
}

void moe_backward(Emission& em, const parallel::MoeLayerPlan& p, int layer, int mb, const LayerRouting& rt, Frontier& f,
                  Frontier& experts_done) {
  moe(em, kBackward, p, layer, mb, rt, nullptr, f, experts_done);
}

}  // namespace moesim::blocks
