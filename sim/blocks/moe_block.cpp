#include "sim/blocks/moe_block.hpp"

#include <algorithm>
#include <functional>

#include "sim/blocks/activation_offload.hpp"
#include "sim/blocks/collective_step.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/tensor_parallel_block.hpp"
#include "sim/blocks/weight_gradients.hpp"

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
// of GPU g after after[g]; the traffic per group (or one shared by all), and its stages on the
// wire where a group has them (LayerRouting::dispatch_stages).
template <typename GpusOf>
void exchange(Emission& em, std::size_t groups, GpusOf gpus_of, network::CollectiveKind kind, network::Algorithm algorithm,
              const std::vector<network::TrafficPtr>& traffic, StreamRole role, const engine::Label& label,
              const Frontier& after, Frontier& out, const std::function<double(std::uint32_t)>& sm_share = {},
              const std::vector<std::vector<network::TrafficPtr>>& stages = {}) {
  std::vector<TaskId> members;
  for (std::size_t gi = 0; gi < groups; ++gi) {
    const std::vector<std::uint32_t>& gpus = gpus_of(gi);
    if (gpus.size() <= 1) continue;
    network::CollectiveOp op{kind, algorithm, em.pb.group(gpus), 0, traffic.size() == 1 ? traffic[0] : traffic[gi]};
    if (!stages.empty()) op.stages = stages.size() == 1 ? stages[0] : stages[gi];
    em.pb.collective(std::move(op), role, label, members, &after, sm_share);
    for (std::size_t r = 0; r < gpus.size(); ++r) out[gpus[r]] = members[r];
  }
}

// One all-to-all per dispatch group; `sms`: the SMs each member holds (a fused backend's kernel:
// the dispatch kernel for the exchange towards the experts, forward and backward alike, as the
// combine's backward is a dispatch of gradients; the combine kernel for the way back).
void all_to_all(Emission& em, const parallel::MoeLayerPlan& p, const std::vector<network::TrafficPtr>& traffic,
                const std::vector<std::vector<network::TrafficPtr>>& stages, StreamRole role, const engine::Label& label,
                const Frontier& after, Frontier& out, int sms = 0) {
  std::function<double(std::uint32_t)> share;
  if (sms > 0)
    share = [&em, sms](std::uint32_t g) {
      const int total = em.ctx.topology.gpu(g).sms;
      return total > 0 ? std::min(1.0, static_cast<double>(sms) / total) : 0.0;
    };
  exchange(em, p.dispatch.size(), [&](std::size_t i) -> const auto& { return p.dispatch[i].gpus; },
           network::CollectiveKind::AllToAll, p.all_to_all, traffic, role, label, after, out, share, stages);
}

// Before a blocking dispatch the host reads the split sizes (nccl), receive counts (DeepEP) or
// permuted rows (HybridEP) back from the GPU (Megatron-Core's alltoall dispatcher: a
// device-to-host copy and a sync before the EP all-to-all, token_dispatcher.py): the launch thread
// stops at the read until it returns, and the sync time more (parallel.ep_host_sync where the
// scenario sets it, else the software's), so the GPU idles from the read to the next launch. The
// forward and its recomputation sync; the backward reuses the sizes (Megatron's saved split sizes,
// torchtitan's, the handle's cached metadata).
void host_sync(Emission& em, const MoeInFlight& x, Frontier& f) {
  const parallel::EpBackend& b = x.plan->backend;
  if (x.backward || !b.syncs_host() || !exchanges(*x.plan)) return;
  const Time sync = b.host_sync ? *b.host_sync : em.software().host.sync;
  if (sync <= 0 && !em.software().models_host()) return;
  const auto l = em.label(x.phase, WorkKind::OtherCompute, "host_sync", x.layer, x.microbatch);
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = em.pb.read(g, sync, l, f[g]);
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
TaskId after_chunks(Emission& em, std::uint32_t g, compute::Work work, const engine::Label& label,
                    const std::vector<Frontier>& chunks, const Frontier& join) {
  const TaskId previous = em.pb.engine().stream_tail(g, em.pb.stream(StreamRole::Compute));
  const TaskId t = em.pb.compute(g, work, label);
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

// The MoE block's kernel on GPUs that run attention that opens or closes a pass: the router
// (`gate`) or the un-permute and weighted sum, costed once per GPU kind.
auto edge_kernel(const Emission& em, const parallel::MoeLayerPlan& p, bool forward, bool gate) {
  return PerKind(em.ctx, [&m = em.ctx.model, &p, forward, gate,
                          router = em.software().router_kernels](const compute::ComputeModel& cm) {
    const bool fused = p.backend.fused();
    if (forward) return gate ? gate_time(cm, m, p.gate_tokens, fused, router) : combine_time(cm, m, p.combine_tokens, fused);
    return gate ? gate_backward_time(cm, m, p.gate_tokens, fused, router)
                : combine_backward_time(cm, m, p.combine_tokens, fused);
  });
}

const Pass& pass_of(const MoeInFlight& x) { return x.backward ? kBackward : kForward; }

// The streams of the block's two exchanges: the pass's, or with the plan's streams_by_direction
// the backward's first exchange (towards the experts) on the dispatch stream and its second on
// the combine stream, so each stream carries one direction (HeterMoE §4.1).
std::pair<StreamRole, StreamRole> exchange_streams(const MoeInFlight& x) {
  const Pass& pass = pass_of(x);
  if (x.backward && x.plan->streams_by_direction) return {StreamRole::Dispatch, StreamRole::Combine};
  return {pass.first_stream, pass.second_stream};
}

// Whether GPU g computes its experts of this block when the dispatch is written, or later
// (deferred: the plan's experts_after_attention, on a GPU that runs attention).
bool experts_now(const Emission& em, std::uint32_t g, bool deferring) {
  return em.runs_experts(g) && !(deferring && em.runs_attention(g));
}

// A compute task of `work` whose last part, `after_sync`, its launching thread issues only after it
// has synced with the GPU in the middle (layer_costs: the clamped quick-GeGLU under Megatron-Core's
// TEGroupedMLP): the part before, the read (the thread waits for it, then the software's sync
// time) and the part after. One task where nothing syncs or the software does not model its host.
engine::TaskId synced_compute(Emission& em, std::uint32_t g, compute::Work work, compute::Work after_sync,
                              const engine::Label& label, engine::TaskId after) {
  if ((after_sync.time == 0 && after_sync.kernels == 0) || !em.software().models_host())
    return em.pb.compute(g, work, label, after);
  const TaskId before = em.pb.compute(g, work - after_sync, label, after);
  const engine::Label read =
      em.label(label.phase, WorkKind::OtherCompute, "host_sync", label.layer, label.microbatch, label.chunk);
  return em.pb.compute(g, after_sync, label, em.pb.read(g, em.software().host.sync, read, before));
}

// Chunk c's expert compute on the GPUs `which` selects.
template <typename Which>
void chunk_experts(Emission& em, MoeInFlight& x, int c, Which which) {
  const bool forward = !x.backward;
  const parallel::MoeLayerPlan& p = *x.plan;
  Frontier& cur = x.chunks[c];
  const auto le = em.label(x.phase, WorkKind::Expert, "experts", x.layer, x.microbatch, c);
  const bool first = x.microbatch == 0 && c == 0 && x.phase != Phase::Recompute;
  for (const std::uint32_t g : em.active()) {
    // A GPU that also runs attention and holds no experts here (zebra's attention GPUs outside
    // Asym-EA's layers) launches nothing: no kernel waits on its compute stream for the dispatch.
    const ExpertChunk& work = x.routing->expert[g];
    if (!which(g) || (em.runs_attention(g) && work.experts.forward.time == 0)) continue;
    // The experts with the regroup of their copies around them (in one task: the kernels run back
    // to back on the compute stream; the regroup's backward costs its forward).
    const compute::Work ef = work.experts.forward, regroup = work.regroup;
    compute::Work t = (forward ? ef : work.experts.backward) + regroup;
    if (first) t.time += prologue(em, p, g);
    // Offloaded activations (expert_fc1, moe_act) come back before anything of the backward.
    if (x.backward && em.offload)
      cur[g] = em.offload->reload(em, OffloadSite::Experts, x.layer, x.microbatch, c, g, cur[g]);
    // Local recomputation: the expert's forward again from the copies it kept, just before its
    // backward (the copies' gradients arrive meanwhile).
    if (x.backward && x.recompute_locally)
      cur[g] = synced_compute(em, g, ef + regroup, work.experts.forward_after_sync,
                              em.label(Phase::Recompute, WorkKind::Expert, "experts", x.layer, x.microbatch, c), cur[g]);
    // Selective recomputation of the experts' activation (moe_act, recompute_block.hpp), or of
    // their whole forward (routed_experts): again over the chunk's copies, just before their
    // backward.
    if (x.backward && work.activation.time > 0) {
      const bool whole = em.ctx.training.recomputes(workload::RecomputeModule::RoutedExperts);
      cur[g] = synced_compute(em, g, work.activation, work.activation_after_sync,
                              em.label(Phase::Recompute, WorkKind::Expert, whole ? "routed_experts" : "expert_activation",
                                       x.layer, x.microbatch, c),
                              cur[g]);
    }
    // Delayed weight gradients: the data gradients (and the regroup) end the chunk's part before
    // the exchange back; the weight gradients follow on the compute stream beside it, and end the
    // experts' gradients. A zero-bubble backward leaves them to its W instead.
    const bool zero_bubble = x.backward && em.weight_gradients;
    const bool delay = x.backward && !zero_bubble && em.software().delay_wgrad;
    const compute::Work wgrad = delay || zero_bubble ? work.experts.wgrad : compute::Work{};
    // The forward's sync in its middle (ExpertsWork::forward_after_sync) splits it; the regroup
    // after the experts is issued before the sync (the same time, a little early).
    const TaskId e = zero_bubble ? backward_compute(em, g, t, wgrad, le, "experts_wgrad", cur[g])
                     : forward   ? synced_compute(em, g, t, work.experts.forward_after_sync, le, cur[g])
                                 : em.pb.compute(g, t - wgrad, le, cur[g]);
    if (x.fetched) em.pb.depend((*x.fetched)[g], e);
    cur[g] = (*x.experts_done)[g] = e;
    if (em.offload && x.phase == Phase::Forward)
      em.offload->offload(em, OffloadSite::Experts, x.layer, x.microbatch, c, g, work.offloaded_bytes, e);
    if (em.offload && x.backward) em.offload->backward_done(x.layer, x.microbatch, g, e);
    if (delay)
      (*x.experts_done)[g] =
          em.pb.compute(g, wgrad, em.label(x.phase, WorkKind::Expert, "experts_wgrad", x.layer, x.microbatch, c), e);
  }
}

// Chunk c after its expert compute: the ETP reduce-scatter, the plan's steps and the second
// exchange.
void chunk_return(Emission& em, MoeInFlight& x, int c) {
  const Pass& pass = pass_of(x);
  const parallel::MoeLayerPlan& p = *x.plan;
  const StreamRole second_stream = exchange_streams(x).second;
  Frontier& cur = x.chunks[c];
  if (p.expert_tensor_parallel)
    expert_tensor_parallel(em, p, *x.routing, false, second_stream,
                           em.label(x.phase, WorkKind::ReduceScatter, "etp_scatter", x.layer, x.microbatch, c), cur);
  run_steps(em, steps_at(p, pass.after_experts), x.phase, x.layer, x.microbatch, cur);
  if (exchanges(p)) {
    const auto lx = em.label(x.phase, WorkKind::AllToAll, pass.second_exchange, x.layer, x.microbatch, c);
    if (p.phased_gather) phased_all_to_all(em, p, second_stream, lx, x.phase, x.layer, x.microbatch, cur, x.join);
    else
      all_to_all(em, p, x.routing->combine, x.routing->combine_stages, second_stream, lx, cur, cur,
                 p.backend.combine_sms);
  }
  run_steps(em, steps_at(p, pass.after_exchange), x.phase, x.layer, x.microbatch, cur);
}

// The shared experts: one FFN of the rank's tokens, as wide as all of them (Megatron-Core's
// SharedExpertMLP), its columns split over tp, after `chain` on each GPU that runs attention (its
// tensor-parallel collectives on `stream`); under selective recomputation of shared_experts their
// forward runs again, collectives included, before their backward.
void shared_experts(Emission& em, const MoeInFlight& x, Frontier& chain, StreamRole stream) {
  const auto& m = em.ctx.model;
  const int layer = x.layer, mb = x.microbatch;
  const auto ls = em.label(x.phase, WorkKind::Expert, "shared_expert", layer, mb);
  const double shared_width = m.shared_experts * m.ffn_hidden / em.plan.tensor_parallel.size;
  const auto shared_ffn = [&](const compute::ComputeModel& cm) { return ffn_time(cm, m, em.rank_tokens(), shared_width); };
  if (x.backward && em.ctx.training.recomputes(workload::RecomputeModule::SharedExperts)) {
    auto again = PerKind(em.ctx, shared_ffn);
    const auto lr = em.label(Phase::Recompute, WorkKind::Expert, "shared_expert", layer, mb);
    tensor_parallel_enter(em, Phase::Recompute, layer, mb, chain, stream);
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) chain[g] = em.pb.compute(g, again(g), lr, chain[g]);
    tensor_parallel_exit(em, Phase::Recompute, layer, mb, chain, stream);
  }
  tensor_parallel_enter(em, x.phase, layer, mb, chain, stream);
  auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
    const compute::Work t = shared_ffn(cm);
    if (!x.backward || !em.weight_gradients) return std::pair{x.backward ? cm.backward(t) : t, compute::Work{}};
    return std::pair{cm.backward(t), ffn_wgrad_time(cm, m, em.rank_tokens(), shared_width)};
  });
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) {
      const auto [work, wgrad] = cost(g);
      chain[g] = backward_compute(em, g, work, wgrad, ls, "shared_expert_wgrad", chain[g]);
    }
  tensor_parallel_exit(em, x.phase, layer, mb, chain, stream);
}

}  // namespace

void moe_open(Emission& em, MoeInFlight& x, Frontier& f, bool defer) {
  const parallel::MoeLayerPlan& p = *x.plan;
  const Pass& pass = pass_of(x);
  const auto& m = em.ctx.model;
  const std::uint32_t gpus = em.gpus();
  const bool forward = !x.backward;
  const int layer = x.layer, mb = x.microbatch;
  auto kernel = edge_kernel(em, p, forward, pass.first_is_gate);
  run_steps(em, steps_at(p, pass.before), x.phase, layer, mb, f);
  // Without the overlap, the shared experts run first, on the compute stream (MoELayer's
  // shared_experts_compute before its router; in moe_router's CUDA graph, as Megatron-Core's
  // --cuda-graph-scope says of them): nothing runs beside them.
  if (m.shared_experts > 0 && !em.software().shared_expert_overlap) {
    const ProgramBuilder::InModule in(em.pb, software::Module::Router);
    shared_experts(em, x, f, StreamRole::Count);
    x.shared = f;
  }
  const auto l_first = em.label(x.phase, pass.first_kind, pass.first_name, layer, mb);
  {
    // The router opens the forward (its own graph under moe_router); the un-permute's gradient
    // opens the backward, in the MoE block's.
    const ProgramBuilder::InModule in(em.pb, pass.first_is_gate ? software::Module::Router : software::Module::Experts);
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) f[g] = em.pb.compute(g, kernel(g), l_first, f[g]);
  }
  // The pre-MLP norm's input (mlp_norm) leaves after the router, where it is costed.
  if (x.phase == Phase::Forward) offload_after_forward(em, OffloadSite::MlpNorm, layer, mb, f);
  if (!x.backward) run_steps(em, steps_at(p, MoePoint::AfterGate), x.phase, layer, mb, f);
  host_sync(em, x, f);
  const ProgramBuilder::InModule in(em.pb, software::Module::Experts);
  // The shared experts beside the exchanges (Megatron-Core's moe_shared_expert_overlap), their
  // collectives on the side stream.
  if (m.shared_experts > 0 && em.software().shared_expert_overlap) {
    x.shared = f;
    shared_experts(em, x, x.shared, StreamRole::Side);
  }
  const Frontier before = f;
  x.experts_done->assign(gpus, engine::kNone);
  x.chunks.assign(p.chunks, Frontier(gpus, engine::kNone));
  x.join.assign(gpus, engine::kNone);
  x.deferred = defer;
  const auto first_stream = exchange_streams(x).first;
  for (int c = 0; c < p.chunks; ++c) {
    Frontier& cur = x.chunks[c];
    if (exchanges(p))
      all_to_all(em, p, x.routing->dispatch, x.routing->dispatch_stages, first_stream,
                 em.label(x.phase, WorkKind::AllToAll, pass.first_exchange, layer, mb, c), before, cur,
                 p.backend.dispatch_sms);
    // Under ETP the forward gathers the tokens and the backward their output gradients; after
    // the experts the partial outputs (or input gradients) are reduce-scattered back.
    if (p.expert_tensor_parallel)
      expert_tensor_parallel(em, p, *x.routing, true, first_stream,
                             em.label(x.phase, WorkKind::AllGather, "etp_gather", layer, mb, c), cur);
    chunk_experts(em, x, c, [&](std::uint32_t g) { return experts_now(em, g, defer); });
    if (!defer) chunk_return(em, x, c);
  }
}

void moe_return(Emission& em, MoeInFlight& x) {
  if (!x.deferred) return;
  const ProgramBuilder::InModule in(em.pb, software::Module::Experts);
  for (int c = 0; c < x.plan->chunks; ++c) {
    chunk_experts(em, x, c, [&](std::uint32_t g) { return em.runs_experts(g) && em.runs_attention(g); });
    chunk_return(em, x, c);
  }
  x.deferred = false;
}

void moe_close(Emission& em, MoeInFlight& x, Frontier& f) {
  moe_return(em, x);
  const parallel::MoeLayerPlan& p = *x.plan;
  const Pass& pass = pass_of(x);
  // The router's gradient closes the backward (its own graph under moe_router); the un-permute
  // closes the forward, in the MoE block's.
  const ProgramBuilder::InModule in(em.pb, pass.first_is_gate ? software::Module::Experts : software::Module::Router);
  auto kernel = edge_kernel(em, p, !x.backward, !pass.first_is_gate);
  const auto l_last = em.label(x.phase, pass.last_kind, pass.last_name, x.layer, x.microbatch);
  // Local recomputation: the router's forward again before its backward.
  if (x.backward && x.recompute_locally) {
    auto gate = edge_kernel(em, p, true, true);
    const auto lr = em.label(Phase::Recompute, WorkKind::Gate, "gate", x.layer, x.microbatch);
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) em.pb.compute(g, gate(g), lr, f[g]);
  }
  const bool shared_tp = em.ctx.model.shared_experts > 0 && em.plan.tensor_parallel.size > 1;
  for (const std::uint32_t g : em.active()) {
    // The pre-MLP norm's input comes back before the router's backward (on the compute stream
    // before it), once the backward has reached it (the last chunk) where no site came back before.
    if (x.backward && em.offload && em.runs_attention(g))
      em.offload->reload(em, OffloadSite::MlpNorm, x.layer, x.microbatch, 0, g, x.chunks.back()[g]);
    f[g] = em.runs_attention(g) ? after_chunks(em, g, kernel(g), l_last, x.chunks, x.join)
                                : x.chunks.back()[g];
    if (shared_tp && em.runs_attention(g)) em.pb.depend(x.shared[g], f[g]);
  }
  if (x.backward) offloaded_backward_done(em, x.layer, x.microbatch, f);
  run_steps(em, steps_at(p, pass.after), x.phase, x.layer, x.microbatch, f);
}

MoeInFlight MoeInFlight::of(const parallel::MoeLayerPlan& plan, const LayerRouting& routing, Phase phase, int layer,
                             int microbatch, const Frontier* fetched, Frontier& experts_done) {
  MoeInFlight x;
  x.plan = &plan;
  x.routing = &routing;
  x.phase = phase;
  x.backward = phase == Phase::Backward;
  x.layer = layer;
  x.microbatch = microbatch;
  x.fetched = fetched;
  x.experts_done = &experts_done;
  return x;
}

void moe_forward(Emission& em, const parallel::MoeLayerPlan& p, int layer, int mb, const LayerRouting& rt,
                 const Frontier* fetched, Frontier& f, Phase phase) {
  Frontier experts;
  MoeInFlight x = MoeInFlight::of(p, rt, phase, layer, mb, fetched, experts);
  moe_open(em, x, f, false);
  moe_close(em, x, f);
}

void moe_backward(Emission& em, const parallel::MoeLayerPlan& p, int layer, int mb, const LayerRouting& rt, Frontier& f,
                  Frontier& experts_done) {
  MoeInFlight x = MoeInFlight::of(p, rt, Phase::Backward, layer, mb, nullptr, experts_done);
  moe_open(em, x, f, false);
  moe_close(em, x, f);
}

}  // namespace moesim::blocks
