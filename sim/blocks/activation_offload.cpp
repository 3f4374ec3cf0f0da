#include "sim/blocks/activation_offload.hpp"

#include "sim/workload/memory.hpp"

namespace moesim::blocks {

void ActivationOffload::offload(Emission& em, OffloadSite site, int layer, int mb, int chunk, std::uint32_t gpu,
                                double bytes, engine::TaskId done) {
  if (bytes <= 0 || !workload::offloads_layer(em.ctx.model, em.ctx.training, layer)) return;
  const auto label = em.label(engine::Phase::Forward, engine::WorkKind::HostCopy, "offload_activations", layer, mb, chunk);
  const engine::TaskId copy = em.pb.host_copy(gpu, bytes, true, parallel::StreamRole::Offload, label, done);
  offloaded_[{mb, layer, static_cast<int>(site), chunk, gpu}] = {copy, bytes};
}

engine::TaskId ActivationOffload::reload(Emission& em, OffloadSite site, int layer, int mb, int chunk, std::uint32_t gpu,
                                         engine::TaskId now) {
  const auto it = offloaded_.find({mb, layer, static_cast<int>(site), chunk, gpu});
  if (it == offloaded_.end()) return now;
  const Offloaded off = it->second;
  offloaded_.erase(it);
  // The copy back starts once the backward of the site that came back before it is done, when that
  // was this layer's or the one above it on this GPU (the same model chunk); else (the chunk's
  // first) as the backward reaches it.
  engine::TaskId trigger = now;
  if (const auto last = last_backward_.find({mb, gpu});
      last != last_backward_.end() && (last->second.first == layer || last->second.first == layer + 1))
    trigger = last->second.second;
  const auto label = em.label(engine::Phase::Backward, engine::WorkKind::HostCopy, "reload_activations", layer, mb, chunk);
  const engine::TaskId copy = em.pb.host_copy(gpu, off.bytes, false, parallel::StreamRole::Reload, label, trigger);
  em.pb.depend(off.copy, copy);
  const auto wait = em.label(engine::Phase::Backward, engine::WorkKind::Wait, "activations_back", layer, mb, chunk);
  const engine::TaskId ready = em.pb.wait(gpu, 0, wait, now);
  em.pb.depend(copy, ready);
  reloaded_.insert({mb, gpu});
  return ready;
}

void ActivationOffload::backward_done(int layer, int mb, std::uint32_t gpu, engine::TaskId done) {
  if (reloaded_.erase({mb, gpu}) > 0) last_backward_[{mb, gpu}] = {layer, done};
}

namespace {
// What `site` offloads on each GPU that runs attention, per microbatch of layer `layer`.
double site_bytes(const Emission& em, OffloadSite site) {
  const workload::OffloadedBytes b = workload::offloaded_bytes(em.ctx.model, em.ctx.training, em.plan.tensor_parallel.size,
                                                               em.plan.tensor_parallel.sequence_parallel, 0);
  return em.rank_tokens() * (site == OffloadSite::Attention ? b.attention : b.mlp_norm);
}
}  // namespace

void offload_after_forward(Emission& em, OffloadSite site, int layer, int mb, const Frontier& f) {
  if (!em.offload) return;
  const double bytes = site_bytes(em, site);
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) em.offload->offload(em, site, layer, mb, 0, g, bytes, f[g]);
}

void reload_before_backward(Emission& em, OffloadSite site, int layer, int mb, Frontier& f) {
  if (!em.offload) return;
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = em.offload->reload(em, site, layer, mb, 0, g, f[g]);
}

void offloaded_backward_done(Emission& em, int layer, int mb, const Frontier& f) {
  if (!em.offload) return;
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) em.offload->backward_done(layer, mb, g, f[g]);
}

}  // namespace moesim::blocks
