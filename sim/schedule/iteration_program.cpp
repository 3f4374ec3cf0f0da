#include "sim/schedule/iteration_program.hpp"

#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "sim/blocks/activation_offload.hpp"
#include "sim/blocks/attention_block.hpp"
#include "sim/blocks/dense_ffn_block.hpp"
#include "sim/blocks/expert_fetch.hpp"
#include "sim/blocks/gradient_sync.hpp"
#include "sim/blocks/moe_block.hpp"
#include "sim/blocks/optimizer_step.hpp"
#include "sim/blocks/recompute_block.hpp"
#include "sim/blocks/vocabulary_block.hpp"
#include "sim/blocks/weight_gradients.hpp"
#include "sim/core/error.hpp"
#include "sim/schedule/schedule.hpp"

namespace moesim::schedule {

using blocks::Frontier;
using engine::Phase;

namespace {

// One iteration being written: each work item's tasks on the current stage's GPUs.
class Writer {
 public:
  Writer(blocks::ProgramBuilder& pb, const blocks::Context& ctx, const parallel::PlanPtr& plan, int iteration)
      : plan_(*plan),
        layers_(ctx.model.layers),
        em_{pb, ctx, plan_, iteration, outcome_, 0, nullptr, {}},
        front_(ctx.training.microbatches, Frontier(ctx.topology.gpu_count(), engine::kNone)),
        attention_done_(layers_),
        experts_done_(layers_),
        end_(ctx.topology.gpu_count(), engine::kNone),
        sync_(ctx.topology.gpu_count()),
        layer_major_(plan_.schedule == parallel::ScheduleKind::LayerMajor),
        open_(ctx.training.microbatches) {
    outcome_.iteration = iteration;
    if (ctx.training.offload_modules != 0) em_.offload = &offload_;
    outcome_.plan = plan;
    outcome_.tokens = plan_.tokens;
    outcome_.expert_tokens.resize(layers_);
    outcome_.expert_routed.resize(layers_);
    const std::uint32_t gpus = ctx.topology.gpu_count();
    em_.stage_of.assign(gpus, 0);
    for (std::size_t s = 0; s < plan_.pipeline.stage_gpus.size(); ++s)
      for (const std::uint32_t g : plan_.pipeline.stage_gpus[s]) em_.stage_of[g] = static_cast<std::uint16_t>(s);
    if (pb.writes_some_only())
      for (const auto& stage : plan_.pipeline.stage_gpus) {
        auto& written = em_.written_stage_gpus.emplace_back();
        for (const std::uint32_t g : stage)
          if (pb.writes(g)) written.push_back(g);
      }
    em_.enter_stage(0);
    // Each GPU's last task of the previous iteration: what this one starts after.
    Frontier anchor(gpus);
    for (std::uint32_t g = 0; g < gpus; ++g) anchor[g] = pb.engine().stream_tail(g, pb.stream(parallel::StreamRole::Compute));
    blocks::fetch_at_iteration_start(em_, anchor, fetched_);
    blocks::gather_parameters(em_, anchor, gathered_, gathered_embedding_, gathered_head_);
  }

  void run(const WorkItem& item);
  // The pipeline: every stage's units, written in an order where each unit's input from another
  // stage has been written before it.
  void run_pipeline();
  parallel::IterationOutcome take() { return std::move(outcome_); }

 private:
  void unit(int stage, const Unit& u);
  // A W: the weight gradients of the stage's oldest zero-bubble backward not yet run, then its
  // layers' gradient synchronisation where that backward was the chunk's last microbatch's.
  void weights(int stage);
  // Forward unit `f`, backward unit `b`, or (Megatron-Core's EP overlap, combined_1f1b) both of one
  // stage written together, layer by layer.
  void units(int stage, const Unit* f, const Unit* b);
  // A forward and a backward MoE layer interleaved as TransformerLayerSchedulePlan::run does.
  void overlapped_layers(int forward_layer, int forward_mb, int backward_layer, int backward_mb);
  // Before a layer's forward: its parameters' all-gather (first microbatch) and FSDP's gather.
  void forward_prelude(int layer, int mb, Frontier& f);
  // Before a layer's backward: FSDP's gather, its recomputation (a full one, unless a layer-major
  // MoE block recomputes locally; the modules before its MLP's backward) and an MTP module's head.
  void backward_prelude(int layer, int mb, const blocks::LayerRouting* routing, Frontier& f);
  // The routing of MoE layer l for microbatch mb, drawn and kept for its backward.
  const blocks::LayerRouting& draw_routing(int layer, int mb);
  void vocabulary(Phase phase, Segment segment, int mb, Frontier& f);
  void layer_forward(Phase phase, int layer, int mb, const blocks::LayerRouting* routing, Frontier& f);
  void send(int from_virtual, int to_virtual, int mb, bool forward);
  void wait_for(const Frontier& ready, Phase phase, int layer, int mb, Frontier& f);
  void fsdp_gather(Phase phase, int layer, int mb, Frontier& f);
  void sync_rest();
  // Layer-major schedules: the open MoE block of each microbatch, closed by its next work item.
  struct Open {
    blocks::MoeInFlight block;
    Frontier experts;  // forward: the block's expert tasks (the backward's go to experts_done_)
  };
  void open_block(Phase phase, int layer, int mb, const blocks::LayerRouting& rt, Frontier& f);
  void close_block(int mb, Frontier& f);
  void attention_backward(int layer, int mb, Frontier& f);

  const parallel::IterationPlan& plan_;
  const int layers_;
  parallel::IterationOutcome outcome_;
  blocks::Emission em_;
  std::vector<Frontier> fetched_;
  std::vector<Frontier> gathered_;  // per layer: its parameters' all-gather (distributed optimizer)
  Frontier gathered_embedding_, gathered_head_;  // the vocabulary ends' (distributed optimizer)
  std::map<int, Frontier> prefetched_;  // FSDP: the next layer's all-gather, issued with the current layer
  std::vector<Frontier> front_;                            // per microbatch
  // (microbatch, layer), forward to backward; microbatches that repeat a layer's first routing share it.
  std::map<std::pair<int, int>, std::shared_ptr<const blocks::LayerRouting>> routing_;
  std::map<int, std::shared_ptr<const blocks::LayerRouting>> repeated_;  // per layer: its first routing, where microbatches repeat it
  std::vector<Frontier> attention_done_, experts_done_;
  Frontier end_;  // each GPU's frontier after its last backward
  blocks::GradientSync sync_;
  blocks::ActivationOffload offload_;  // the activations on the host (training.offload_modules)
  blocks::WeightGradientStore weight_gradients_;  // zero-bubble backwards' weight gradients, until their W
  const bool layer_major_;
  std::vector<std::unique_ptr<Open>> open_;  // per microbatch
};

// The embedding or the LM head, in models with a vocabulary. Its first forward waits for its
// parameters' all-gather under the distributed optimizer; under FSDP each microbatch's forward
// gathers them (torchtitan wraps them with the root module, which keeps them whole from its
// forward to its backward: no gather before the backward).
void Writer::vocabulary(Phase phase, Segment segment, int mb, Frontier& f) {
  if (!plan_.vocabulary) return;
  const bool embedding = segment == Segment::Embedding;
  if (phase == Phase::Forward) {
    const Frontier& gathered = embedding ? gathered_embedding_ : gathered_head_;
    const int layer = embedding ? 0 : layers_;
    if (mb == 0 && !gathered.empty()) wait_for(gathered, phase, layer, mb, f);
    if (plan_.gradients.fsdp) {
      Frontier ready;
      const auto& gp = plan_.gradients;
      blocks::gather_vocabulary_parameters(em_, embedding ? gp.embedding_params : gp.head_params, layer, phase, mb, f, ready);
      wait_for(ready, phase, layer, mb, f);
    }
  }
  if (embedding) blocks::embedding(em_, phase, mb, f);
  else blocks::lm_head(em_, phase, mb, f);
}

// A layer's forward, or its recomputation before its backward: attention, then the MoE block with
// the routing drawn at the forward (the layer's expert fetch first, when the plan fetches at the
// layer) or the dense FFN.
void Writer::layer_forward(Phase phase, int l, int mb, const blocks::LayerRouting* rt, Frontier& f) {
  const parallel::MoeLayerPlan* moe = plan_.moe[l].get();
  // A multi-token prediction module's input projection and second head around its layer (their
  // outputs are kept: a recomputation runs the layer alone).
  const bool mtp = phase == Phase::Forward && em_.ctx.model.is_mtp(l);
  if (mtp) blocks::mtp_input(em_, phase, l, mb, f);
  blocks::attention(em_, phase, l, mb, f);
  if (phase == Phase::Forward) blocks::offload_after_forward(em_, blocks::OffloadSite::Attention, l, mb, f);
  if (!moe) {
    blocks::dense_ffn(em_, phase, l, mb, f);
    if (phase == Phase::Forward) blocks::offload_after_forward(em_, blocks::OffloadSite::MlpNorm, l, mb, f);
  } else {
    if (phase == Phase::Forward && moe->fetch && !moe->fetch->at_iteration_start && mb == 0)
      blocks::fetch_layer(em_, *moe, l, f, fetched_[l]);
    if (layer_major_ && phase == Phase::Forward) open_block(phase, l, mb, *rt, f);
    else blocks::moe_forward(em_, *moe, l, mb, *rt, moe->fetch ? &fetched_[l] : nullptr, f, phase);
  }
  if (mtp) blocks::mtp_head(em_, phase, l, mb, f);
}

// Opens layer l's MoE block of microbatch mb (forward or backward) and leaves it open: its
// closing kernel is written with the microbatch's next work item.
void Writer::open_block(Phase phase, int l, int mb, const blocks::LayerRouting& rt, Frontier& f) {
  auto open = std::make_unique<Open>();
  const parallel::MoeLayerPlan& plan = *plan_.moe[l];
  const bool backward = phase == Phase::Backward;
  open->block = blocks::MoeInFlight::of(plan, rt, phase, l, mb, plan.fetch && !backward ? &fetched_[l] : nullptr,
                                        backward ? experts_done_[l] : open->experts);
  blocks::MoeInFlight& x = open->block;
  x.recompute_locally = backward && em_.ctx.training.recompute == workload::Recompute::Full;
  blocks::moe_open(em_, x, f, x.plan->experts_after_attention);
  open_[mb] = std::move(open);
}

// Closes microbatch mb's open block, if any: its closing kernel, and after a backward block the
// rest of its layer's backward (the attention's).
void Writer::close_block(int mb, Frontier& f) {
  std::unique_ptr<Open> open = std::move(open_[mb]);
  if (!open) return;
  blocks::MoeInFlight& x = open->block;
  // Local recomputation: the layer's attention forward again, before the router's.
  if (x.recompute_locally) blocks::attention(em_, Phase::Recompute, x.layer, mb, f);
  blocks::moe_close(em_, x, f);
  if (x.backward) {
    routing_.erase({mb, x.layer});
    attention_backward(x.layer, mb, f);
  }
}

// The attention's part of layer l's backward, after its FFN or MoE block's (and an MTP module's
// input projection after it).
void Writer::attention_backward(int l, int mb, Frontier& f) {
  blocks::reload_before_backward(em_, blocks::OffloadSite::Attention, l, mb, f);
  blocks::recompute_before_attention_backward(em_, l, mb, f);
  blocks::attention(em_, Phase::Backward, l, mb, f);
  blocks::offloaded_backward_done(em_, l, mb, f);
  if (em_.ctx.model.is_mtp(l)) blocks::mtp_input(em_, Phase::Backward, l, mb, f);
  // The layer's dense gradients (an MTP module's projection's among them) are ready.
  attention_done_[l] = f;
}

void Writer::run(const WorkItem& item) {
  const int l = item.layer, mb = item.microbatch;
  Frontier& f = front_[mb];
  const bool vocabulary_end = item.segment != Segment::Layer;
  const parallel::MoeLayerPlan* moe = vocabulary_end ? nullptr : plan_.moe[l].get();
  // A microbatch's next work closes the block it left open (layer-major schedules).
  if (item.work == Work::Forward || item.work == Work::Backward) close_block(mb, f);
  switch (item.work) {
    case Work::Forward: {
      if (vocabulary_end) {
        vocabulary(Phase::Forward, item.segment, mb, f);
        break;
      }
      forward_prelude(l, mb, f);
      layer_forward(Phase::Forward, l, mb, moe ? &draw_routing(l, mb) : nullptr, f);
      break;
    }
    case Work::Backward:
      if (vocabulary_end) {
        vocabulary(Phase::Backward, item.segment, mb, f);
      } else {
        const auto it = routing_.find({mb, l});
        const blocks::LayerRouting* rt = moe ? it->second.get() : nullptr;
        backward_prelude(l, mb, rt, f);
        if (moe && layer_major_) {
          open_block(Phase::Backward, l, mb, *it->second, f);
          break;
        }
        if (moe) {
          blocks::moe_backward(em_, *moe, l, mb, *it->second, f, experts_done_[l]);
          routing_.erase(it);
        } else {
          blocks::dense_ffn(em_, Phase::Backward, l, mb, f);
          blocks::offloaded_backward_done(em_, l, mb, f);
        }
        attention_backward(l, mb, f);
      }
      for (const std::uint32_t g : em_.active()) end_[g] = f[g];
      break;
    case Work::Deferred:
      if (open_[mb] && open_[mb]->block.layer == l) blocks::moe_return(em_, open_[mb]->block);
      break;
    case Work::SyncLayer:
      if (plan_.gradients.timing == parallel::GradientTiming::Overlap)
        sync_.layer(em_, l, attention_done_[l], experts_done_[l].empty() ? attention_done_[l] : experts_done_[l]);
      break;
    case Work::SyncRest: sync_rest(); break;
    case Work::Optimizer: blocks::optimizer_step(em_, end_, sync_.last()); break;
  }
}

void Writer::forward_prelude(int l, int mb, Frontier& f) {
  // The layer's first forward waits for its parameters' all-gather (distributed optimizer).
  if (mb == 0 && !gathered_[l].empty()) wait_for(gathered_[l], Phase::Forward, l, mb, f);
  fsdp_gather(Phase::Forward, l, mb, f);
}

void Writer::backward_prelude(int l, int mb, const blocks::LayerRouting* rt, Frontier& f) {
  const bool moe = plan_.moe[l] != nullptr;
  fsdp_gather(Phase::Backward, l, mb, f);  // for the recomputation too
  // A dense FFN's offloaded norm input comes back before its recomputation (an MoE layer's before
  // its router's backward).
  if (!moe) blocks::reload_before_backward(em_, blocks::OffloadSite::MlpNorm, l, mb, f);
  // A layer-major MoE block recomputes each side's part locally (moe_block.hpp).
  if (em_.ctx.training.recompute == workload::Recompute::Full && !(moe && layer_major_))
    layer_forward(Phase::Recompute, l, mb, rt, f);
  if (em_.ctx.model.is_mtp(l)) blocks::mtp_head(em_, Phase::Backward, l, mb, f);
  blocks::recompute_before_mlp_backward(em_, l, mb, moe, f);
}

// The routing is drawn at the layer's forward and kept for the backward (and a recomputation);
// where the scenario repeats it over microbatches, the layer's first routing is drawn once and its
// matrices shared. Expected routing is the same in every microbatch (route_layer draws nothing for
// it), so its first is shared too: one set of traffic matrices per layer and iteration, whose link
// demands the flow model keeps (FlowExecutor::phase_demand).
const blocks::LayerRouting& Writer::draw_routing(int l, int mb) {
  const parallel::MoeLayerPlan& moe = *plan_.moe[l];
  std::shared_ptr<const blocks::LayerRouting> drawn;
  if (em_.ctx.routing.config().repeat_microbatches || !em_.ctx.routing.sampled()) {
    auto [first, fresh] = repeated_.try_emplace(l);
    if (fresh)
      first->second = std::make_shared<const blocks::LayerRouting>(blocks::route_layer(em_.ctx, plan_, moe, em_.iteration, l, mb));
    drawn = first->second;
  } else {
    drawn = std::make_shared<const blocks::LayerRouting>(blocks::route_layer(em_.ctx, plan_, moe, em_.iteration, l, mb));
  }
  const blocks::LayerRouting& r = *(routing_[{mb, l}] = std::move(drawn));
  outcome_.routed_copies += r.routed_copies;
  outcome_.dropped_copies += r.dropped_copies;
  for (auto [into, from] : {std::pair{&outcome_.expert_tokens[l], &r.expert_tokens},
                            std::pair{&outcome_.expert_routed[l], &r.expert_routed}}) {
    into->resize(from->size(), 0.0);
    for (std::size_t e = 0; e < from->size(); ++e) (*into)[e] += (*from)[e];
  }
  return r;
}

// Each GPU's work waits for `ready` (a zero-length wait task on its compute stream).
void Writer::wait_for(const Frontier& ready, Phase phase, int l, int mb, Frontier& f) {
  const auto label = em_.label(phase, engine::WorkKind::Wait, "params_ready", l, mb);
  for (const std::uint32_t g : em_.active()) {
    const engine::TaskId wait = em_.pb.wait(g, 0, label, f[g]);
    if (ready[g] != f[g]) em_.pb.depend(ready[g], wait);
    f[g] = wait;
  }
}

// FSDP: the layer's parameters all-gathered (unless the layer before prefetched them) and the
// next layer's, in the direction of the pass and within the same model chunk, issued now, so
// that they travel while this layer computes (FSDP2's prefetch of one layer ahead).
void Writer::fsdp_gather(Phase phase, int l, int mb, Frontier& f) {
  if (!plan_.gradients.fsdp) return;
  const auto& p = plan_.pipeline;
  Frontier ready;
  if (const auto it = prefetched_.find(l); it != prefetched_.end()) {
    ready = std::move(it->second);
    prefetched_.erase(it);
  } else {
    blocks::gather_layer_parameters(em_, l, phase, mb, f, ready);
  }
  const int next = phase == Phase::Forward ? l + 1 : l - 1;
  if (next >= 0 && next < layers_ && p.virtual_stage_of_layer(next) == p.virtual_stage_of_layer(l))
    blocks::gather_layer_parameters(em_, next, phase, mb, f, prefetched_[next]);
  wait_for(ready, phase, l, mb, f);
}

// What is left after the backward: the layers' gradients (when not overlapped), each on its
// stage, then the embedding's and the LM head's (one bucket when one stage holds both).
void Writer::sync_rest() {
  const auto& p = plan_.pipeline;
  if (plan_.gradients.timing == parallel::GradientTiming::AfterBackward)
    for (int layer = layers_ - 1; layer >= 0; --layer) {
      em_.enter_stage(p.stage_of_layer(layer));
      sync_.layer(em_, layer, end_, end_);
    }
  const auto& gp = plan_.gradients;
  const int last = p.stage_of_virtual(p.virtual_stages() - 1);
  em_.enter_stage(0);
  sync_.vocabulary(em_, "embedding_grads", last == 0 ? gp.embedding_params + gp.head_params : gp.embedding_params, end_);
  if (last != 0) {
    em_.enter_stage(last);
    sync_.vocabulary(em_, "lm_head_grads", gp.head_params, end_);
  }
}

void Writer::send(int from, int to, int mb, bool forward) {
  const auto& p = plan_.pipeline;
  const int s = p.stage_of_virtual(from), r = p.stage_of_virtual(to);
  if (s == r) return;  // DualPipeV's tip: both chunks on the last stage, the activations stay
  const auto label = em_.label(forward ? Phase::Forward : Phase::Backward, engine::WorkKind::P2P,
                               forward ? "pipeline_activations" : "pipeline_gradients", p.first_layer[from], mb);
  Frontier& f = front_[mb];
  // A blocking send (PipelinePlan::blocking_sends) is on the stage's critical path.
  const bool blocking = p.blocking_sends();
  const auto sent = em_.label(forward ? Phase::Forward : Phase::Backward, engine::WorkKind::Wait, "pipeline_send_done",
                              p.first_layer[from], mb);
  // The receiver's stream: one per direction, and under DualPipeV one more per direction for the
  // V's second chunk (StreamRole::PipelineRecvReturn).
  using parallel::StreamRole;
  const bool second_arm = p.v_shape() && to >= p.stages;
  const StreamRole receive = forward ? (second_arm ? StreamRole::PipelineRecvReturn : StreamRole::PipelineRecv)
                                     : (second_arm ? StreamRole::PipelineRecvGradReturn : StreamRole::PipelineRecvGrad);
  for (const auto& group : p.groups->groups) {
    f[group[r]] = em_.pb.p2p(group[s], group[r], p.activation_bytes, StreamRole::PipelineSend, receive, label,
                             f[group[s]]);
    if (blocking) em_.pb.wait(group[s], 0, sent, f[group[r]]);
  }
}

void Writer::unit(int stage, const Unit& u) {
  if (u.weight) weights(stage);
  else units(stage, u.forward ? &u : nullptr, u.forward ? nullptr : &u);
}

void Writer::weights(int stage) {
  em_.enter_stage(stage);
  blocks::WeightGradientStore::Chunk w = weight_gradients_.pop(stage);
  for (const auto& e : w.entries) {
    const blocks::ProgramBuilder::InModule in(em_.pb, e.module);
    const engine::TaskId t = em_.pb.compute(e.gpu, e.work, e.label);
    end_[e.gpu] = t;
    const int l = e.label.layer;
    if (l >= layers_) continue;  // the LM head's (its gradients are reduced after the last backward)
    attention_done_[l][e.gpu] = t;
    if (!experts_done_[l].empty()) experts_done_[l][e.gpu] = t;
  }
  if (w.last_microbatch || plan_.gradients.fsdp)
    for (const int l : w.layers) run({Work::SyncLayer, Segment::Layer, l, w.microbatch});
}

void Writer::units(int stage, const Unit* fu, const Unit* bu) {
  const auto& p = plan_.pipeline;
  const int last = p.virtual_stages() - 1;
  const int vf = fu ? p.virtual_of(stage, fu->chunk) : -1, vb = bu ? p.virtual_of(stage, bu->chunk) : -1;
  const int fmb = fu ? fu->microbatch : -1, bmb = bu ? bu->microbatch : -1;
  em_.enter_stage(stage);
  // A zero-bubble backward leaves its weight gradients (the LM head's first), and so its layers'
  // synchronisation, to its W.
  const bool zero_bubble = bu && bu->zero_bubble && !fu;
  if (zero_bubble) em_.weight_gradients = &weight_gradients_;
  if (vf == 0) run({Work::Forward, Segment::Embedding, 0, fmb});
  if (bu && vb == last) run({Work::Backward, Segment::Head, layers_, bmb});
  // The forward's layers in order, the backward's in reverse; together, the first min of both in
  // pairs and the rest alone (Megatron-Core's TransformerModelChunkSchedulePlan.run).
  std::vector<int> forward, backward;
  if (fu)
    for (int l = p.first_layer[vf]; l < p.first_layer[vf + 1]; ++l) forward.push_back(l);
  if (bu)
    for (int l = p.first_layer[vb + 1] - 1; l >= p.first_layer[vb]; --l) backward.push_back(l);
  // Every schedule runs a chunk's microbatches in order: its last backward ends its gradients.
  // FSDP reduce-scatters every microbatch's gradients (sharded accumulation); the others reduce
  // once the last microbatch's are in.
  const bool last_microbatch = bmb + 1 == static_cast<int>(front_.size());
  const auto synced = [&](int l) {
    if (!zero_bubble && (last_microbatch || plan_.gradients.fsdp)) run({Work::SyncLayer, Segment::Layer, l, bmb});
  };
  const std::size_t pairs = std::min(forward.size(), backward.size());
  for (std::size_t i = 0; i < pairs; ++i) {
    overlapped_layers(forward[i], fmb, backward[i], bmb);
    synced(backward[i]);
  }
  for (std::size_t i = pairs; i < forward.size(); ++i) run({Work::Forward, Segment::Layer, forward[i], fmb});
  for (std::size_t i = pairs; i < backward.size(); ++i) {
    run({Work::Backward, Segment::Layer, backward[i], bmb});
    synced(backward[i]);
  }
  if (fu) {
    if (vf == last) run({Work::Forward, Segment::Head, layers_, fmb});
    else send(vf, vf + 1, fmb, true);
  }
  if (bu) {
    if (vb == 0) run({Work::Backward, Segment::Embedding, 0, bmb});
    else send(vb, vb - 1, bmb, false);
  }
  if (zero_bubble) {
    weight_gradients_.flush(stage, bmb, last_microbatch, std::move(backward));
    em_.weight_gradients = nullptr;
  }
}

// TransformerLayerSchedulePlan.run: with the backward layer b and the forward layer f,
//   communication: b's combine back | f's dispatch, b's dispatch back | f's combine
//   compute:       f's attention and router | b's experts, f's experts | b's router and attention
// (the un-permutes at the ends of the exchanges). The streams keep these orders and each piece
// waits for what it needs, so each exchange runs beside the other microbatch's compute and the
// SMs a fused backend's kernels hold slow that compute (engine.hpp). A dense layer or an MTP
// module on either side, or a plan that fetches experts, runs the two layers one after the other.
void Writer::overlapped_layers(int fl, int fmb, int bl, int bmb) {
  const parallel::MoeLayerPlan* fmoe = plan_.moe[fl].get();
  const parallel::MoeLayerPlan* bmoe = plan_.moe[bl].get();
  const auto& m = em_.ctx.model;
  if (!fmoe || !bmoe || fmoe->fetch || bmoe->fetch || m.is_mtp(fl) || m.is_mtp(bl)) {
    run({Work::Forward, Segment::Layer, fl, fmb});
    run({Work::Backward, Segment::Layer, bl, bmb});
    return;
  }
  Frontier& ff = front_[fmb];
  Frontier& bf = front_[bmb];
  forward_prelude(fl, fmb, ff);
  const blocks::LayerRouting& frt = draw_routing(fl, fmb);
  const auto brt = routing_.find({bmb, bl});
  backward_prelude(bl, bmb, brt->second.get(), bf);
  Frontier forward_experts;
  blocks::MoeInFlight b = blocks::MoeInFlight::of(*bmoe, *brt->second, Phase::Backward, bl, bmb, nullptr, experts_done_[bl]);
  blocks::MoeInFlight f = blocks::MoeInFlight::of(*fmoe, frt, Phase::Forward, fl, fmb, nullptr, forward_experts);
  blocks::moe_open(em_, b, bf, true);
  blocks::attention(em_, Phase::Forward, fl, fmb, ff);
  blocks::offload_after_forward(em_, blocks::OffloadSite::Attention, fl, fmb, ff);
  blocks::moe_open(em_, f, ff, true);
  blocks::moe_return(em_, b);
  blocks::moe_return(em_, f);
  blocks::moe_close(em_, b, bf);
  routing_.erase(brt);
  attention_backward(bl, bmb, bf);
  blocks::moe_close(em_, f, ff);
  for (const std::uint32_t g : em_.active()) end_[g] = bf[g];
}

void Writer::run_pipeline() {
  const auto& p = plan_.pipeline;
  const int microbatches = static_cast<int>(front_.size());
  std::vector<std::vector<Unit>> orders;
  for (int s = 0; s < p.stages; ++s)
    orders.push_back(stage_order(p.schedule, s, p.stages, p.chunks, microbatches, p.ep_overlap));
  // written[forward][virtual stage][microbatch]
  std::vector<std::vector<std::vector<char>>> written(
      2, std::vector<std::vector<char>>(p.virtual_stages(), std::vector<char>(microbatches, 0)));
  const int last = p.virtual_stages() - 1;
  const auto ready = [&](int stage, const Unit& u) {
    if (u.weight) return true;  // after its backward, in the stage's own order
    const int v = p.virtual_of(stage, u.chunk);
    if (u.forward) return v == 0 || written[1][v - 1][u.microbatch];
    return v == last || written[0][v + 1][u.microbatch];
  };
  std::vector<std::size_t> next(p.stages, 0);
  std::size_t total = 0;
  for (const auto& o : orders) total += o.size();
  for (std::size_t left = total; left > 0;) {
    bool progress = false;
    for (int s = 0; s < p.stages; ++s)
      while (next[s] < orders[s].size() && ready(s, orders[s][next[s]])) {
        const Unit& u = orders[s][next[s]++];
        // A forward paired with the backward after it (EP overlap, DualPipeV) is written with it
        // once both can be; otherwise (or until then) alone.
        const Unit* partner = u.with_next && next[s] < orders[s].size() ? &orders[s][next[s]] : nullptr;
        if (partner && !ready(s, *partner)) partner = nullptr;
        if (partner) {
          units(s, &u, partner);
          written[0][p.virtual_of(s, partner->chunk)][partner->microbatch] = 1;
          ++next[s];
          --left;
        } else {
          unit(s, u);
        }
        if (!u.weight) written[u.forward ? 1 : 0][p.virtual_of(s, u.chunk)][u.microbatch] = 1;
        progress = true;
        --left;
      }
    if (!progress) invariant_failed(fmt::format("the {} schedule of {} stages deadlocks", to_string(p.schedule), p.stages));
  }
  // Every zero-bubble backward's weight gradients have run (dualpipev.py asserts its queue empty).
  if (!weight_gradients_.empty()) invariant_failed("weight gradients queued by a zero-bubble backward were never run");
  run({Work::SyncRest, Segment::Layer, 0, microbatches - 1});
  em_.enter_stage(0);
  run({Work::Optimizer, Segment::Layer, 0, microbatches - 1});
}

}  // namespace

parallel::IterationOutcome write_iteration(blocks::ProgramBuilder& pb, const blocks::Context& ctx,
                                           const parallel::PlanPtr& plan, int iteration) {
  Writer w(pb, ctx, plan, iteration);
  if (plan->schedule == parallel::ScheduleKind::LayerMajor)
    for (const WorkItem& item : plan->order ? *plan->order : layer_major(ctx.model.layers, ctx.training.microbatches))
      w.run(item);
  else
    w.run_pipeline();
  return w.take();
}

}  // namespace moesim::schedule
