#include "sim/blocks/attention_block.hpp"

#include "sim/blocks/collective_step.hpp"
#include "sim/blocks/layer_costs.hpp"
#include "sim/blocks/tensor_parallel_block.hpp"
#include "sim/blocks/weight_gradients.hpp"

namespace moesim::blocks {

namespace {
// The attention block over a context-parallel group: the projections of the rank's s/cp tokens,
// and the core in cp steps, step i waiting for the K/V chunk the ring brought in step i − 1 while
// the ring passes it on (the step's compute and the next transfer overlap, as Transformer Engine's
// AttnFuncWithCPAndKVP2P does). Each step is 1/cp of the rank's core: with the causal load
// balancing every step computes the same number of query-key blocks.
void context_parallel_attention(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  const auto& t = em.ctx.training;
  const auto& cpp = em.plan.context_parallel;
  const int tp = em.plan.tensor_parallel.size, cp = cpp.size;
  const bool backward = direction == engine::Phase::Backward;
  const double tokens = em.rank_tokens();
  const auto l_proj = em.label(direction, engine::WorkKind::Attention, "attention", layer, mb);
  // A projection's work and, backward, its weight gradients.
  const auto projection = [&](bool qkv) {
    return PerKind(em.ctx, [&, qkv](const compute::ComputeModel& cm) {
      const compute::Work fwd = qkv ? qkv_projection_time(cm, m, tokens, tp) : output_projection_time(cm, m, tokens, tp);
      if (!backward || !em.weight_gradients) return std::pair{backward ? cm.backward(fwd) : fwd, compute::Work{}};
      return std::pair{cm.backward(fwd), weight_gradients(cm, qkv ? qkv_gemms(cm, m, tokens, tp) : output_gemm(cm, m, tokens, tp))};
    });
  };
  auto first = projection(!backward), last = projection(backward);
  const auto run_projection = [&](auto& cost, std::uint32_t g) {
    const auto [work, wgrad] = cost(g);
    return backward_compute(em, g, work, wgrad, l_proj, "attention_wgrad", f[g]);
  };
  auto core = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
    const compute::Work whole =
        backward ? attention_core_backward_time(cm, m, t, tp, layer) : attention_core_time(cm, m, t, tp, layer);
    // Each step launches the core's kernels over its chunk.
    return whole.divided(static_cast<Time>(cp) * cp);
  });
  // Forward: QKV projection, core, output projection; backward the reverse.
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = run_projection(first, g);
  Frontier kv = f;  // where each GPU's K/V chunk of the current step is: its own first
  for (int i = 0; i < cp; ++i) {
    Frontier next = kv;
    if (i + 1 < cp) run_step(em, backward ? cpp.backward_ring : cpp.forward_ring, direction, layer, mb, kv, next);
    const auto l_core = em.label(direction, engine::WorkKind::Attention, "attention_core", layer, mb, i);
    for (const std::uint32_t g : em.active()) {
      if (!em.runs_attention(g)) continue;
      const engine::TaskId step = em.pb.compute(g, core(g), l_core, f[g]);
      if (kv[g] != f[g]) em.pb.depend(kv[g], step);
      f[g] = step;
    }
    kv = std::move(next);
  }
  for (const std::uint32_t g : em.active())
    if (em.runs_attention(g)) f[g] = run_projection(last, g);
}
}  // namespace

void attention(Emission& em, engine::Phase direction, int layer, int mb, Frontier& f) {
  const auto& m = em.ctx.model;
  if (!m.attention) return;
  const int tp = em.plan.tensor_parallel.size;
  const ProgramBuilder::InModule in(em.pb, software::Module::Attention);
  tensor_parallel_enter(em, direction, layer, mb, f);
  if (em.plan.context_parallel.size > 1) {
    context_parallel_attention(em, direction, layer, mb, f);
  } else {
    const auto label = em.label(direction, engine::WorkKind::Attention, "attention", layer, mb);
    auto cost = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
      return direction != engine::Phase::Backward ? attention_time(cm, m, em.ctx.training, tp, layer)
                                                  : attention_backward_time(cm, m, em.ctx.training, tp, layer);
    });
    auto wgrad = PerKind(em.ctx, [&](const compute::ComputeModel& cm) {
      // Costed only where a zero-bubble backward leaves them to its W (weight_gradients.hpp).
      return direction == engine::Phase::Backward && em.weight_gradients ? attention_wgrad_time(cm, m, em.ctx.training, tp)
                                                                         : compute::Work{};
    });
    for (const std::uint32_t g : em.active())
      if (em.runs_attention(g)) f[g] = backward_compute(em, g, cost(g), wgrad(g), label, "attention_wgrad", f[g]);
  }
  tensor_parallel_exit(em, direction, layer, mb, f);
}

}  // namespace moesim::blocks
